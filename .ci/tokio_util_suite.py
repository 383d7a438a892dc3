#!/usr/bin/env python3
"""Runs tokio-util's own DelayQueue test suite against lazy_deadline::DelayQueue.

The suite is tokio-util's `tests/time_delay_queue.rs` of the tokio-util version in
Cargo.lock, read from cargo's registry source (fetched first if needed) at run time
and never committed here. It is written, changed only as listed below, into a
throwaway crate under target/ that depends on this crate, and run there.

The changes, each asserted to apply exactly once:
  1. `use tokio_util::time::DelayQueue;` -> `use lazy_deadline::DelayQueue;` (the swap).
  2. `#![cfg(feature = "full")]` is dropped: it names tokio-util's own feature, which
     the throwaway crate does not have (its tokio has every feature the suite needs).
  3. In `reset_later_after_slot_starts`, the `assert!(queue.is_woken());` right after
     the *later* `reset_at` is dropped: the test's own comment explains it as an
     artifact of tokio-util's wheel (the entry moved into a wheel slot that has
     started, so the queue must wake to advance the wheel). A lazy queue must not
     wake there; the rest of that test (no wake before 120 ms, a wake at 120 ms, the
     entry out) still runs.

Usage: python3 .ci/tokio_util_suite.py [cargo test args...]"""
import os, sys
from peer_suite import locked_version, registry_file, replace_once as replace, run_in_throwaway_crate

version = locked_version("tokio-util")
text = registry_file("tokio-util", version, "tests/time_delay_queue.rs")


def replace_once(text, old, new, what):
    return replace(text, old, new, what, f"tokio-util {version}'s suite")


text = replace_once(text, "use tokio_util::time::DelayQueue;\n", "use lazy_deadline::DelayQueue;\n", "the use line")
text = replace_once(text, '#![cfg(feature = "full")]\n', "", "the feature gate")
start = text.index("async fn reset_later_after_slot_starts()")
end = text.index("\n}\n", start)
body = text[start:end]
body = replace_once(body, "    queue.reset_at(&foo, now + ms(120));\n    assert!(queue.is_woken());\n",
                    "    queue.reset_at(&foo, now + ms(120));\n",
                    "the wheel's wake in reset_later_after_slot_starts")
text = text[:start] + body + text[end:]

text = f"// tokio-util {version}'s tests/time_delay_queue.rs, changed by .ci/tokio_util_suite.py.\n" + text
print(f"tokio-util {version}: {text.count('#[tokio::test')} tests, run against lazy_deadline::DelayQueue", flush=True)
sys.exit(run_in_throwaway_crate("tokio-util-suite", {"time_delay_queue.rs": text}, sys.argv[1:]))

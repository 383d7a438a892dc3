#!/usr/bin/env python3
"""Runs tokio's own `tokio::time` test suites against lazy-deadline's drop-ins.

Each suite is a file of tokio's `tests/` of the tokio version in Cargo.lock, read from
cargo's registry source (fetched first if needed) at run time and never committed
here. It is written, changed only as listed in SUITES, into a throwaway crate under
target/ that depends on this crate, and run there. Every change is asserted to apply
exactly once, so a new tokio release that moves the text fails loudly instead of
testing tokio against itself.

The swap: the suite's `use tokio::time::{...}` line is replaced by ours for the types
under test, and a local `mod time` re-exports tokio's `time` module with our
functions in front (explicit re-exports shadow the glob), so `time::interval(...)`
reaches ours while `time::advance`, `time::pause` and the like stay tokio's.
time_timeout.rs names the timer only in its use line. Anything a suite spells out
in full (`tokio::time::sleep` in a dozen places of
time_sleep.rs, `tokio::time::interval` inside two tests of time_interval.rs) is listed
with its count and changed; guard `tokio::time::timeout`s and the clock controls
(`pause`, `advance`) stay tokio's on purpose.

Usage: python3 .ci/tokio_time_suites.py [cargo test args...]"""
import os, sys
from peer_suite import locked_version, registry_file, replace_once, run_in_throwaway_crate

tokio = locked_version("tokio")

GATE = '''#![cfg(any(
    feature = "full",
    all(
        target_os = "emscripten",
        feature = "rt",
        feature = "macros",
        feature = "test-util"
    )
))]
'''

# suite file -> list of (old, new, what[, times]); each old text must occur exactly
# once, or exactly `times` times where a fourth element says so.
SUITES = {
    "time_timeout.rs": [
        ('''#![cfg(any(
    feature = "full",
    all(
        target_os = "emscripten",
        feature = "rt",
        feature = "macros",
        feature = "test-util",
        feature = "io-util"
    )
))]
''', "", "the feature gate (it names tokio's own features)"),
        ("use tokio::time::{self, timeout, timeout_at, Instant};\n",
         "use lazy_deadline::{timeout, timeout_at};\n"
         "use tokio::time::{self, Instant};\n",
         "the use line"),
    ],
    "time_sleep.rs": [
        (GATE, "", "the feature gate (it names tokio's own features)"),
        ("use tokio::time::{self, Duration, Instant};\n",
         "use tokio::time::{Duration, Instant};\n"
         "mod time {\n"
         "    pub use lazy_deadline::{sleep, sleep_until, Sleep};\n"
         "    pub use tokio::time::*;\n"
         "}\n",
         "the use line"),
        # The suite also spells the timer out in full in a dozen places; every one is
        # ours (`tokio::time::pause`, `Instant` and the like stay tokio's).
        ("tokio::time::sleep(", "lazy_deadline::sleep(", "full-path sleeps", 12),
        ("tokio::time::sleep_until(", "lazy_deadline::sleep_until(", "full-path sleep_untils", 2),
        ("Pin<Box<tokio::time::Sleep>>", "Pin<Box<lazy_deadline::Sleep>>", "the boxed Sleep type", 2),
        ("    use tokio::time::Sleep;\n", "    use lazy_deadline::Sleep;\n", "the Sleep import in drop_from_waker_drop"),
    ],
    "time_interval.rs": [
        (GATE, "", "the feature gate (it names tokio's own features)"),
        ("use tokio::time::{self, Duration, Instant, Interval, MissedTickBehavior};\n",
         "use lazy_deadline::{Interval, MissedTickBehavior};\n"
         "use tokio::time::{Duration, Instant};\n"
         "mod time {\n"
         "    pub use lazy_deadline::{interval, interval_at, Interval};\n"
         "    pub use tokio::time::*;\n"
         "}\n",
         "the use line"),
        # Two tests build their interval with the full path; the guard timeouts
        # around them stay tokio's.
        ("        counter: 0,\n        timer: tokio::time::interval(tokio::time::Duration::from_millis(10)),\n        wake_on_pending: true,\n",
         "        counter: 0,\n        timer: lazy_deadline::interval(tokio::time::Duration::from_millis(10)),\n        wake_on_pending: true,\n",
         "the self-waking streamer's interval"),
        ("        counter: 0,\n        timer: tokio::time::interval(tokio::time::Duration::from_millis(10)),\n        wake_on_pending: false,\n",
         "        counter: 0,\n        timer: lazy_deadline::interval(tokio::time::Duration::from_millis(10)),\n        wake_on_pending: false,\n",
         "the non-waking streamer's interval"),
    ],
}


files = {}
for name, changes in SUITES.items():
    text = registry_file("tokio", tokio, f"tests/{name}")
    for old, new, what, *times in changes:
        text = replace_once(text, old, new, what, f"tokio {tokio}'s tests/{name}", *times)
    files[name] = f"// tokio {tokio}'s tests/{name}, changed by .ci/tokio_time_suites.py.\n" + text
    print(f"tokio {tokio} tests/{name}: {text.count('#[tokio::test')} tests, run against lazy-deadline",
          flush=True)
sys.exit(run_in_throwaway_crate("tokio-time-suites", files, sys.argv[1:]))

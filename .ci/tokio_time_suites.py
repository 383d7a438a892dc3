"""Runs tokio's own `tokio::time` test suites against lazy-deadline's drop-ins.

Each suite is a file of tokio's `tests/` of the tokio version in Cargo.lock, read from
cargo's registry source (fetched first if needed) at run time and never committed
here. It is written into a throwaway crate under target/ that depends on this crate,
and run there, with one change, the one a user makes: every `tokio::time` path
becomes `lazy_deadline::time` (the `use` line, the paths spelled out in full, the
guard timeouts too). `lazy_deadline::time` mirrors `tokio::time` item for item: ours
where we have a drop-in (`sleep`, `timeout`, `interval` and their types), tokio's
re-exported elsewhere (`Instant`, `Duration`, `pause`, `advance`, `error::Error`). A
suite where the replacement finds nothing fails the step, so a new tokio release
that moves the text fails loudly instead of testing tokio against itself.

Usage: python3 .ci/tokio_time_suites.py [cargo test args...]"""
import os, sys
from peer_suite import locked_version, registry_file, run_in_throwaway_crate

tokio = locked_version("tokio")

SUITES = ["time_timeout.rs", "time_sleep.rs", "time_interval.rs"]


files = {}
for name in SUITES:
    text = registry_file("tokio", tokio, f"tests/{name}")
    swapped = text.count("tokio::time")
    assert swapped > 0, f"tokio {tokio}'s tests/{name}: no `tokio::time` to swap"
    text = text.replace("tokio::time", "lazy_deadline::time")
    files[name] = f"// tokio {tokio}'s tests/{name}, `tokio::time` -> `lazy_deadline::time` by .ci/tokio_time_suites.py.\n" + text
    print(f"tokio {tokio} tests/{name}: {text.count('#[tokio::test')} tests, {swapped} `tokio::time` paths "
          f"swapped, run against lazy-deadline", flush=True)
sys.exit(run_in_throwaway_crate("tokio-time-suites", files, sys.argv[1:]))

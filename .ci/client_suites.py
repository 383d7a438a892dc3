#!/usr/bin/env python3
"""Runs published clients' own test suites with their tokio timers swapped to ours.

A client crate (tower, tower-http) is copied from cargo's registry source at run time
(never committed here) into target/client-suites/, every `tokio::time` path in its
sources becomes `lazy_deadline::time` (the one change a user makes; a crate where it
finds nothing fails the step, so a new release does not test tokio against itself),
its manifest gains a path dependency on this crate,
and its own tests run there, plus checks of our own (.ci/client_checks/): a suite that
passes with a broken timer proves little, and tower's rate limiter tests pass even
when `Sleep::reset` does nothing.

What stays tokio's: what `lazy_deadline::time` re-exports (`Instant`, `Duration`, the
clock controls `pause` and `advance`).

Usage: python3 .ci/client_suites.py [tower|tower-http ...] [--tokio] [-- cargo test args...]
(--tokio: leave their timers tokio's, to see the suites and our checks pass there.)"""
import os, shutil, subprocess, sys
from peer_suite import ROOT, locked_version, replace_once

# tower-http is not a dependency of ours: its version is pinned here.
TOWER_HTTP = "0.6.11"

# crate -> (version, features for `cargo test`, {file: [(old, new, what[, times])]},
#           our checks file, the features it needs)
CLIENTS = {
    "tower": (locked_version("tower"), ["--all-features"], {}, "tower_timers.rs", ["limit", "timeout", "util"]),
    # `full` but `fs`: the file-serving tests read files of tower-http's repository
    # (its README one level up, test-files/) that the published crate does not hold.
    "tower-http": (TOWER_HTTP, ["--features", ",".join([
        "add-extension", "auth", "catch-panic", "compression-full", "cors", "decompression-full",
        "follow-redirect", "limit", "map-request-body", "map-response-body", "metrics",
        "normalize-path", "on-early-drop", "propagate-header", "redirect", "request-id",
        "sensitive-headers", "set-header", "set-status", "timeout", "trace", "util",
        "validate-request"])], {
        # Our checks run on tokio's paused clock.
        "Cargo.toml": [
            ('[dev-dependencies.tokio]\nversion = "1"\nfeatures = ["full"]\n',
             '[dev-dependencies.tokio]\nversion = "1"\nfeatures = ["full", "test-util"]\n',
             "tokio's test-util for the paused clock"),
        ],
    }, "tower_http_timers.rs", ["timeout"]),
}


def swap_timers(dst, crate, version):
    """The one change a user makes: every `tokio::time` path in the crate's sources
    becomes `lazy_deadline::time` (ours where we have a drop-in, tokio's re-exported
    elsewhere). Fails if it finds nothing to swap. Returns {file: paths swapped}."""
    swapped = {}
    for root, dirs, names in os.walk(dst):
        dirs[:] = [d for d in dirs if d != "target"]
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            text = open(path).read()
            count = text.count("tokio::time")
            if count:
                open(path, "w").write(text.replace("tokio::time", "lazy_deadline::time"))
                swapped[os.path.relpath(path, dst)] = count
    assert swapped, f"{crate} {version}: no `tokio::time` to swap"
    return swapped


def source_dir(crate, version):
    """The crate's unpacked registry source (fetched through a throwaway manifest if
    cargo has not unpacked it yet)."""
    import glob
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    def find():
        hits = glob.glob(os.path.join(home, "registry", "src", "*", f"{crate}-{version}"))
        return hits[0] if hits else None
    found = find()
    if found is None:
        fetcher = os.path.join(ROOT, "target", "client-suites", f"fetch-{crate}")
        os.makedirs(os.path.join(fetcher, "src"), exist_ok=True)
        open(os.path.join(fetcher, "src", "lib.rs"), "w").write("")
        open(os.path.join(fetcher, "Cargo.toml"), "w").write(
            f'[package]\nname = "fetch-{crate}"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
            f'[workspace]\n\n[dependencies]\n{crate} = "={version}"\n')
        subprocess.run(["cargo", "fetch", "--quiet", "--manifest-path", os.path.join(fetcher, "Cargo.toml")], check=True)
        found = find()
    assert found, f"{crate} {version} is not in cargo's registry source"
    return found


def prepare(crate, swap=True):
    """The crate's copy under target/, its timers ours (or, `swap=False`, tokio's:
    the suite and our checks against tokio itself, to show they hold there)."""
    version, features, changes, checks, needs = CLIENTS[crate]
    if not swap:
        changes = {path: edits for path, edits in changes.items() if path == "Cargo.toml"}
    dst = os.path.join(ROOT, "target", "client-suites", f"{crate}-{version}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(source_dir(crate, version), dst)
    for path, edits in changes.items():
        full = os.path.join(dst, path)
        text = open(full).read()
        for old, new, what, *times in edits:
            text = replace_once(text, old, new, what, f"{crate} {version}'s {path}", *times)
        open(full, "w").write(text)
    swapped = swap_timers(dst, crate, version) if swap else {}
    os.makedirs(os.path.join(dst, "tests"), exist_ok=True)
    shutil.copy(os.path.join(ROOT, ".ci", "client_checks", checks), os.path.join(dst, "tests", "lazy_deadline_checks.rs"))
    manifest = os.path.join(dst, "Cargo.toml")
    text = open(manifest).read()
    required = ", ".join(f'"{f}"' for f in needs)
    text += (f'\n[dependencies.lazy-deadline]\npath = "{ROOT}"\nfeatures = ["test-util"]\n\n'
             f'[[test]]\nname = "lazy_deadline_checks"\npath = "tests/lazy_deadline_checks.rs"\n'
             f'required-features = [{required}]\n\n'
             '# Not part of the lazy-deadline workspace this directory sits in.\n[workspace]\n')
    open(manifest, "w").write(text)
    print(f"{crate} {version}: " + (f"`tokio::time` -> `lazy_deadline::time`, {sum(swapped.values())} paths in "
                                     f"{len(swapped)} files ({', '.join(sorted(swapped))})"
                                     if swap else "its own tokio timers"), flush=True)
    return dst, features


def main():
    args = sys.argv[1:]
    cargo_args = args[args.index("--") + 1:] if "--" in args else []
    names = args[:args.index("--")] if "--" in args else args
    swap = "--tokio" not in names
    crates = [a for a in names if a != "--tokio"] or list(CLIENTS)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", "client-suites-build"))
    status = 0
    for crate in crates:
        dst, features = prepare(crate, swap)
        r = subprocess.run(["cargo", "test", "--manifest-path", os.path.join(dst, "Cargo.toml")] + features + cargo_args, env=env)
        if r.returncode != 0:
            print(f"{crate}: its suite FAILED with lazy-deadline's timers", flush=True)
            status = r.returncode
    sys.exit(status)


if __name__ == "__main__":
    main()

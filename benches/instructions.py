#!/usr/bin/env python3
"""Instructions per operation of every drop-in shape (benches/instructions.rs), tokio's
timers beside ours, counted by callgrind: deterministic where this machine's timings
move 10-30%, so a change that wins one shape and loses another shows.

    python3 benches/instructions.py                  # the table; writes target/instructions.json
    python3 benches/instructions.py --check          # and fails on a row below its baseline
    python3 benches/instructions.py --update         # writes benches/instructions-baseline.json
    python3 benches/instructions.py --shapes a,b     # only these rows (with any of the above)
    python3 benches/instructions.py --determinism    # measures twice, prints how much rows move

Each (shape, side) runs under `valgrind --tool=callgrind` at two op counts, and
(Ir(N2) - Ir(N1)) / (N2 - N1) is its instructions per operation: the runtime's start
and exit, and each shape's one-time set-up, cancel out. A row's ratio is tokio's count
over ours (above 1: ours executes fewer). The self-check row runs tokio's timers on
both sides (`tokio2`, a separate instantiation of the same harness) and must read
1.00x.

Each row also counts ours through the deadline sets (`sets`: the same run with
`LAZY_DEADLINE_PREFER_SETS=1`), the code a multi-thread runtime's timers take, here
without the contention the sets exist for: not a comparison with tokio (tokio's
one driver lock costs it nothing on one thread) but a guard, so that a change that
makes tokio's-entry rows cheaper by making the sets' path dearer shows (sharing a
function between the two places moves the registers its frame saves onto both).

The ratchet (`--check`): a row whose ratio (or sets ratio) is more than 2% below its
baseline fails, as does a row missing from the run or from the baseline, or a
self-check outside 0.99-1.01. A row that improved raises its baseline with
`--update`, committed with the change. Needs valgrind and the Python standard library; installs nothing.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BASELINE = os.path.join(ROOT, "benches", "instructions-baseline.json")
OUT = os.path.join(ROOT, "target", "instructions.json")

# The two op counts, multiples of 64 (the 64-task rows split them among the tasks).
# A run is mostly valgrind's start: each takes 0.3-0.6 s here.
N1, N2 = 1280, 6400
# Each (shape, side, count) runs RUNS times and keeps the median count. Measured here:
# ASLR and std's random hash keys do not move the counts (`setarch -R` changed
# nothing, so it is not used; callgrind counts every thread, and a current-thread
# runtime has one). What moves them is the real clock: instants are real
# `std::time::Instant`s, under the paused clock too (it offsets the reading at the
# runtime's start), and `Instant + Duration` branches on its nanosecond carry, so the
# count of a run depends on the clock's sub-second digits: most runs move by a few
# instructions, some by 0.05%, rarely (1 run in 20) by up to 0.3% (callgrind's
# per-function counts of two such runs differ in `Instant`'s `add`/`add_assign` only).
# The median of three drops a rare run; the rest is well inside the ratchet's 2%.
RUNS = 3
# A run that takes longer than this (seconds) hung.
RUN_LIMIT = 120
# Jobs at a time: the machine's 2 cores.
JOBS = 2
# The ratchet: a row fails more than this far below its baseline ratio.
TOLERANCE = 0.02
# The self-check: tokio against tokio (`tokio2`) on this shape, within these bounds.
SELF_CHECK = "timeout_pending_once/64_tasks"
SELF_CHECK_BOUNDS = (0.99, 1.01)


def build():
    """Builds the suite (a no-op in CI, whose previous step built every bench with
    `--all-features`; the features add adapters and touch no timer's code) and
    returns the executable's path."""
    command = ["cargo", "bench", "--no-run", "--all-features", "--bench", "instructions",
               "--message-format=json"]
    proc = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"instructions: `{' '.join(command)}` failed")
    for line in proc.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if (message.get("reason") == "compiler-artifact" and message.get("executable")
                and message["target"]["name"] == "instructions"):
            return message["executable"]
    sys.exit("instructions: cargo built no `instructions` executable")


def list_shapes(exe):
    """[(name, what)] in the suite's order, from `instructions --list`."""
    out = subprocess.run([exe, "--list"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return [(name, what) for name, _paused, what in (line.split("\t", 2) for line in out.splitlines())]


def count(exe, shape, side, ops):
    """The instructions callgrind counts for one run of the program (every thread).
    Side `sets` is ours with the deadline sets preferred on every runtime."""
    env = dict(os.environ)
    env.pop("LAZY_DEADLINE_PREFER_SETS", None)
    if side == "sets":
        side, env["LAZY_DEADLINE_PREFER_SETS"] = "lazy", "1"
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", exe, shape, side, str(ops)]
    # How to run it again by hand, in the messages below.
    shown = " ".join((["LAZY_DEADLINE_PREFER_SETS=1"] if "LAZY_DEADLINE_PREFER_SETS" in env else []) + command)
    try:
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=RUN_LIMIT, env=env)
    except subprocess.TimeoutExpired:
        sys.exit(f"instructions: `{shown}` still ran after {RUN_LIMIT} s: it hung "
                 "(a lost wake under the paused clock parks the runtime for good)")
    found = re.search(r"(?:Collected :|I\s+refs:)\s*([\d,]+)", proc.stderr)
    if proc.returncode != 0 or not found:
        sys.exit(f"instructions: `{shown}` failed:\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def measure(exe, shapes):
    """{(shape, side): (Ir(N1), Ir(N2))} for every side of `shapes`, and tokio2 for the
    self-check's shape; every count the median of RUNS runs."""
    pairs = [(shape, side) for shape in shapes for side in ("tokio", "lazy", "sets")]
    pairs += [(SELF_CHECK, side) for side in ("tokio", "tokio2") if (SELF_CHECK, side) not in pairs]
    jobs = [(shape, side, ops) for shape, side in pairs for ops in (N1, N2) for _ in range(RUNS)]
    print(f"instructions: {len(jobs)} runs under callgrind, {JOBS} at a time", file=sys.stderr, flush=True)
    counts = {}
    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        futures = {pool.submit(count, exe, *job): job for job in jobs}
        for future in concurrent.futures.as_completed(futures):
            job = futures[future]
            counts.setdefault(job, []).append(future.result())
    median = {job: sorted(runs)[len(runs) // 2] for job, runs in counts.items()}
    return {pair: (median[pair + (N1,)], median[pair + (N2,)]) for pair in pairs}


def per_op(raw):
    return (raw[1] - raw[0]) / (N2 - N1)


def rows_of(counts, shapes):
    rows = []
    for shape, what in shapes:
        tokio, ours, sets = counts[(shape, "tokio")], counts[(shape, "lazy")], counts[(shape, "sets")]
        rows.append({"shape": shape, "what": what, "tokio": round(per_op(tokio), 1), "ours": round(per_op(ours), 1),
                     "ratio": round(per_op(tokio) / per_op(ours), 4),
                     "sets": round(per_op(sets), 1), "sets_ratio": round(per_op(tokio) / per_op(sets), 4),
                     "raw": {"tokio": list(tokio), "lazy": list(ours), "sets": list(sets)}})
    tokio, tokio2 = counts[(SELF_CHECK, "tokio")], counts[(SELF_CHECK, "tokio2")]
    check = {"shape": SELF_CHECK, "tokio": round(per_op(tokio), 1), "tokio2": round(per_op(tokio2), 1),
             "ratio": round(per_op(tokio) / per_op(tokio2), 4), "raw": {"tokio": list(tokio), "tokio2": list(tokio2)}}
    return rows, check


def sh(*args):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True).stdout.strip()


def meta():
    code = ["src", "benches", "examples", "Cargo.toml", "Cargo.lock"]
    dirty = sh("git", "status", "--porcelain", "--untracked-files=no", "--", *code)
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    tokio = re.search(r'name = "tokio"\nversion = "([^"]+)"', lock)
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": sh("git", "rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else ""),
            "tokio": tokio.group(1) if tokio else "unknown", "ops": [N1, N2], "runs": RUNS}


def load_baseline():
    try:
        return json.load(open(BASELINE))
    except FileNotFoundError:
        return None


def print_table(rows, check, baseline):
    base = {row["shape"]: row for row in (baseline or {}).get("rows", [])}

    def of_base(shape, key):
        ratio = base.get(shape, {}).get(key)
        return "-" if ratio is None else f"{ratio:.3f}x"

    header = ("shape", "tokio", "ours", "tokio/ours", "baseline", "sets", "tokio/sets", "baseline")
    lines = [(row["shape"], f"{row['tokio']:,.1f}", f"{row['ours']:,.1f}", f"{row['ratio']:.3f}x",
              of_base(row["shape"], "ratio"), f"{row['sets']:,.1f}", f"{row['sets_ratio']:.3f}x",
              of_base(row["shape"], "sets_ratio")) for row in rows]
    lines.append((f"self-check: tokio2 vs tokio, {check['shape']}", f"{check['tokio']:,.1f}",
                  f"{check['tokio2']:,.1f}", f"{check['ratio']:.3f}x", f"{SELF_CHECK_BOUNDS[0]:.2f}-{SELF_CHECK_BOUNDS[1]:.2f}x",
                  "", "", ""))
    widths = [max(len(line[i]) for line in [header] + lines) for i in range(len(header))]
    print(f"instructions per operation (callgrind, current-thread runtime; ({N2:,} - {N1:,} ops) differenced;")
    print("sets: ours through the deadline sets, the multi-thread code path, uncontended here: a guard, not a comparison)")
    for i, line in enumerate([header] + lines):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(line, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def check_against(rows, check, baseline, selected):
    """The ratchet's failures, named; also prints rows that improved past the tolerance."""
    if baseline is None:
        return [f"no baseline at {os.path.relpath(BASELINE, ROOT)}: write it with `--update` and commit it"]
    failures, improved = [], []
    base = {row["shape"]: row for row in baseline.get("rows", []) if selected is None or row["shape"] in selected}
    ran = {row["shape"]: row for row in rows}
    for shape in base:
        if shape not in ran:
            failures.append(f"{shape}: in the baseline, not in this run")
    for shape, row in ran.items():
        if shape not in base:
            failures.append(f"{shape}: in this run, not in the baseline (add it with `--update`)")
            continue
        for key, side, name in (("ratio", "ours", shape), ("sets_ratio", "sets", f"{shape} (sets)")):
            if key not in base[shape]:
                failures.append(f"{name}: no baseline ratio (add it with `--update`)")
                continue
            floor = base[shape][key] * (1 - TOLERANCE)
            if row[key] < floor:
                was = base[shape].get(side, float("nan"))
                failures.append(f"{name}: {row[key]:.3f}x, more than {TOLERANCE:.0%} below its baseline "
                                f"{base[shape][key]:.3f}x (tokio {row['tokio']:,.1f}, {side} {row[side]:,.1f} "
                                f"instructions per operation; baseline {side} {was:,.1f})")
            elif row[key] > base[shape][key] * (1 + TOLERANCE):
                improved.append(f"{name}: {base[shape][key]:.3f}x -> {row[key]:.3f}x")
    low, high = SELF_CHECK_BOUNDS
    if not low <= check["ratio"] <= high:
        failures.append(f"self-check: tokio2 vs tokio on {check['shape']} reads {check['ratio']:.4f}x, "
                        f"outside {low}-{high}: the harness does not measure both sides alike")
    if improved:
        print("\nimproved by more than the tolerance (raise the baseline with `--update` in the same commit):")
        for line in improved:
            print(f"  {line}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail on a row more than 2%% below its baseline")
    mode.add_argument("--update", action="store_true", help="write the baseline from this run")
    mode.add_argument("--determinism", action="store_true", help="measure twice; print how much rows move")
    parser.add_argument("--shapes", help="comma-separated rows to run (default: all)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("instructions: valgrind is not installed (apt-get install valgrind)")

    exe = build()
    shapes = list_shapes(exe)
    selected = None
    if args.shapes:
        selected = [s.strip() for s in args.shapes.split(",") if s.strip()]
        unknown = [s for s in selected if s not in dict(shapes)]
        if unknown:
            sys.exit(f"instructions: no shape {', '.join(unknown)}; the shapes: {', '.join(n for n, _ in shapes)}")
        shapes = [(name, what) for name, what in shapes if name in selected]

    names = [name for name, _ in shapes]
    rows, check = rows_of(measure(exe, names), shapes)
    if args.determinism:
        again, check_again = rows_of(measure(exe, names), shapes)
        print("determinism: the same rows measured twice (instructions per operation)")
        for first, second in zip(rows + [check], again + [check_again]):
            sides = ("tokio", "tokio2") if "tokio2" in first else ("tokio", "ours", "sets")
            moves = ", ".join(f"{side} {first[side]:,.1f} -> {second[side]:,.1f}" for side in sides)
            print(f"  {first['shape']}: {moves}; ratio {first['ratio']:.4f}x -> {second['ratio']:.4f}x")
    baseline = load_baseline()
    result = dict(meta(), rows=rows, self_check=check)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print_table(rows, check, baseline)

    if args.update:
        if selected is not None and baseline is not None:
            # A subset replaces its own rows and keeps the others.
            fresh = {row["shape"]: row for row in rows}
            kept = [fresh.pop(row["shape"], row) for row in baseline.get("rows", [])]
            result["rows"] = kept + list(fresh.values())
        with open(BASELINE, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        print(f"\ninstructions: wrote {os.path.relpath(BASELINE, ROOT)}; commit it with the change")
    elif args.check:
        failures = check_against(rows, check, baseline, selected)
        if failures:
            print("\ninstructions --check FAILED:")
            for failure in failures:
                print(f"  {failure}")
            sys.exit(1)
        print(f"\ninstructions --check: every row (and its sets row) within {TOLERANCE:.0%} of its baseline or above it")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures everything BENCHMARKS.md and the README show, in one run, and renders them.

    python3 benches/report/report.py            # measure (about 12 minutes here), then render
    python3 benches/report/report.py --render   # render again from docs/bench-results.json
    python3 benches/report/report.py --collect  # gather target/ again after a finished run

The measuring step runs, one after the other, with LAZY_DEADLINE_RECORD pointing at
one record file:

  - every criterion suite (`cargo bench`), whose medians come from target/criterion;
  - tokio's per-worker timer suite (`alt_timer`, tokio_unstable, its own target dir);
  - `compare` (full run), `accuracy` and `quinn_bulk`, whose figures the programs
    record themselves (benches/common/record.rs), never parsed from their text;
  - `benches/instructions.py`, the instruction counts under callgrind, which writes
    target/instructions.json (stored under the key `instructions`).

It writes docs/bench-results.json (the figures, with the date, machine, load,
toolchain, peer versions and commit they were measured on), then renders
BENCHMARKS.md, the README's headline block and the SVG plots under docs/ from that
file alone, so every figure in them comes from the latest run. Only the Python
standard library is needed.
"""
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESULTS = os.path.join(ROOT, "docs", "bench-results.json")
WORK = os.path.join(ROOT, "target", "report")
RECORDS = os.path.join(WORK, "records.tsv")

# The runs, in order. Each is (label, extra environment, command).
UNSTABLE = {"RUSTFLAGS": "--cfg tokio_unstable", "CARGO_TARGET_DIR": "target/unstable"}
RUNS = [
    ("criterion suites", {}, ["cargo", "bench", "--features", "tower"]),
    ("tokio's per-worker timer", UNSTABLE, ["cargo", "bench", "--bench", "alt_timer"]),
    ("compare", {}, ["cargo", "run", "--release", "--example", "compare"]),
    ("accuracy", {}, ["cargo", "run", "--release", "--example", "accuracy"]),
    ("requests under load", {}, ["cargo", "run", "--release", "--example", "requests", "--", "--duration", "30"]),
    ("quinn", {}, ["cargo", "run", "--release", "--features", "quinn", "--example", "quinn_bulk"]),
    ("http timeout layer", {}, ["cargo", "run", "--release", "--features", "tower", "--example", "http_timeout", "--", "--duration", "30"]),
    ("instructions per operation", {}, ["python3", "benches/instructions.py"]),
]
CRITERION_DIRS = ["target/criterion", "target/unstable/criterion"]
# What `benches/instructions.py` writes: the callgrind table, kept whole.
INSTRUCTIONS = os.path.join(ROOT, "target", "instructions.json")
# The peers whose versions the header names, read from Cargo.lock.
PEERS = ["tokio", "tokio-util", "pingora-timeout", "delay_map", "quinn", "hyper", "tower", "criterion"]


def sh(*args):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True).stdout.strip()


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return []


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(open("/proc/meminfo").readline().split()[1])
        memory = f"{kib / (1 << 20):.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
    }


def locked_versions():
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    found = {}
    for name, version in re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock):
        if name in PEERS:
            found.setdefault(name, version)
    return found


def criterion_medians():
    out = {}
    for base in CRITERION_DIRS:
        pattern = os.path.join(ROOT, base, "**", "new", "estimates.json")
        for path in glob.glob(pattern, recursive=True):
            bench = json.load(open(path.replace("estimates.json", "benchmark.json")))
            median = json.load(open(path))["median"]
            ci = median["confidence_interval"]
            out[bench["full_id"]] = {
                "median_ns": median["point_estimate"],
                "low_ns": ci["lower_bound"],
                "high_ns": ci["upper_bound"],
                "elements": (bench.get("throughput") or {}).get("Elements"),
            }
    return dict(sorted(out.items()))


def records():
    values, compare, quinn = {}, [], []
    for line in open(RECORDS):
        fields = line.rstrip("\n").split("\t")
        kind, rest = fields[0], fields[1:]
        if kind == "value":
            values[rest[0]] = float(rest[1])
        elif kind == "compare_row":
            section, workload, peer, peer_ns, ours, ours_ns = rest
            compare.append({"section": section, "workload": workload, "peer": peer,
                            "peer_ns": float(peer_ns), "ours": ours, "ours_ns": float(ours_ns)})
        elif kind == "quinn_row":
            flavour, workload, runtime, rate, cpu, resets, arms = rest
            quinn.append({"flavour": flavour, "workload": workload, "runtime": runtime,
                          "rate": float(rate), "cpu": float(cpu), "resets": int(resets),
                          "arms": int(arms)})
    return dict(sorted(values.items())), compare, quinn


def measured_commit():
    """The commit the measured code is at; says so when that code has local changes
    (the docs this script writes are not measured code and do not count)."""
    code = ["src", "benches", "examples", "Cargo.toml", "Cargo.lock"]
    dirty = sh("git", "status", "--porcelain", "--untracked-files=no", "--", *code)
    return sh("git", "rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


def measure():
    os.makedirs(WORK, exist_ok=True)
    commit = measured_commit()
    for base in CRITERION_DIRS:
        subprocess.run(["rm", "-rf", os.path.join(ROOT, base)], check=True)
    if os.path.exists(INSTRUCTIONS):
        os.remove(INSTRUCTIONS)
    open(RECORDS, "w").close()
    started = time.time()
    load = {"start": loadavg()}
    runs = []
    for label, extra, command in RUNS:
        env = dict(os.environ, LAZY_DEADLINE_RECORD=RECORDS, **extra)
        print(f"\n== {label}: {' '.join(command)}", flush=True)
        t = time.time()
        log = open(os.path.join(WORK, label.replace(" ", "_").replace("'", "") + ".log"), "w")
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        if proc.wait() != 0:
            sys.exit(f"report: `{' '.join(command)}` failed; nothing was written")
        runs.append({"label": label, "command": " ".join(command),
                     "env": " ".join(f"{k}={v!r}" for k, v in extra.items()),
                     "seconds": round(time.time() - t)})
    load["end"] = loadavg()
    run = {"commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "loadavg": load, "minutes": round((time.time() - started) / 60, 1), "runs": runs}
    json.dump(run, open(os.path.join(WORK, "run.json"), "w"))
    collect(run)


def collect(run):
    """Gathers what the runs left in target/ into docs/bench-results.json."""
    values, compare, quinn = records()
    results = {
        "meta": dict(run, **{
            "commit": run.get("commit") or measured_commit(),
            "machine": machine(),
            "rustc": sh("rustc", "--version"),
            "versions": locked_versions(),
        }),
        "criterion": criterion_medians(),
        "values": values,
        "compare": compare,
        "quinn": quinn,
    }
    if os.path.exists(INSTRUCTIONS):
        results["instructions"] = json.load(open(INSTRUCTIONS))
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"\nreport: wrote {os.path.relpath(RESULTS, ROOT)}")


def main():
    if "--collect" in sys.argv[1:]:
        # Gathers an interrupted or hand-run measurement again (its runs unrecorded).
        collect(json.load(open(os.path.join(WORK, "run.json"))))
    elif "--render" not in sys.argv[1:]:
        measure()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import render

    render.main(ROOT, json.load(open(RESULTS)))


if __name__ == "__main__":
    main()

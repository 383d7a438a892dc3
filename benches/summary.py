#!/usr/bin/env python3
"""Prints the criterion results under target/criterion as a Markdown table (median
and its 95% interval; throughput where the group set one). Usage, after
`cargo bench`:  python3 benches/summary.py [GROUP-PREFIX ...]"""
import glob, json, os, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "criterion")
prefixes = sys.argv[1:]

def fmt(ns):
    return f"{ns / 1e6:.2f} ms" if ns > 1e5 else f"{ns:.1f} ns"

print("| benchmark | median | 95% interval | throughput |")
print("|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(root, "**", "new", "estimates.json"), recursive=True)):
    bench = json.load(open(path.replace("estimates.json", "benchmark.json")))
    name = bench["full_id"]
    if prefixes and not any(name.startswith(p) for p in prefixes):
        continue
    median = json.load(open(path))["median"]
    ci = median["confidence_interval"]
    throughput = bench.get("throughput") or {}
    rate = ""
    if "Elements" in throughput:
        rate = f"{throughput['Elements'] / median['point_estimate'] * 1e3:.2f} M/s"
    print(f"| `{name}` | {fmt(median['point_estimate'])} | {fmt(ci['lower_bound'])} – {fmt(ci['upper_bound'])} | {rate} |")

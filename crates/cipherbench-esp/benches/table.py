#!/usr/bin/env python3
"""Turns the criterion results of benches/esp.rs into the Markdown tables of
docs/BENCHMARKS-esp.md.

Usage: table.py TARGET_DIR/criterion VARIANT:BASELINE[,BASELINE...] ...
e.g.   table.py target/criterion accel:accel-1,accel-2 noaesni:noaesni-1,noaesni-2

For each variant, the samples of all its baselines (rounds) are pooled; a figure is
inner-packet Gbit/s (decimal, 1e9 bit/s) at the median time per operation, with the
interquartile range of the per-sample times as its spread. "ESP overhead" is
median(seal) / median(raw-encrypt) - 1 (open against raw-decrypt). Reads only
criterion's JSON; measures nothing.
"""
import json
import os
import statistics
import sys

ORDER = ["null", "aes256-sha256", "aes128-gcm", "aes256-gcm", "chacha20-poly1305"]
SIZES = [64, 576, 1400, 8192]


def per_iteration_ns(root, group, function, baseline):
    path = os.path.join(root, group.replace("/", "_"), function, baseline, "sample.json")
    if not os.path.exists(path):
        return []
    sample = json.load(open(path))
    return [t / i for t, i in zip(sample["times"], sample["iters"])]


def quantile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def gbps(size, ns):
    return size * 8 / ns


def cell(size, times):
    if not times:
        return "-", None
    med = statistics.median(times)
    # Faster time = higher rate, so the quartiles swap.
    lo, hi = gbps(size, quantile(times, 0.75)), gbps(size, quantile(times, 0.25))
    return f"{gbps(size, med):.2f} ({lo:.2f}-{hi:.2f})", med


def main():
    root = sys.argv[1]
    for spec in sys.argv[2:]:
        variant, baselines = spec.split(":")
        baselines = baselines.split(",")
        print(f"\n#### {variant} ({', '.join(baselines)})\n")
        print("| transform | bytes | raw encrypt | seal | seal overhead | raw decrypt | open | open overhead |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for t in ORDER:
            for size in SIZES:
                group = f"{t}/{size}"
                row = [t, str(size)]
                meds = {}
                for f in ["raw-encrypt", "seal", "raw-decrypt", "open"]:
                    times = [x for b in baselines for x in per_iteration_ns(root, group, f, b)]
                    text, meds[f] = cell(size, times)
                    row.append(text)
                    if f in ("seal", "open"):
                        raw = meds["raw-encrypt" if f == "seal" else "raw-decrypt"]
                        row.append(f"{(meds[f] / raw - 1) * 100:+.1f} %" if raw and meds[f] else "-")
                print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

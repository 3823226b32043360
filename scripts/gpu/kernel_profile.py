"""Where one decode step's GPU time goes, kernel by kernel: reads the CSV that Nsight Compute wrote for a
`GpuHarness --profile-decode MODEL:BATCH:CONTEXT` run (each kernel of the decode graphs profiled as its own node,
one metric: its duration) and prints, for the last decode step of the run (the kernels from the last embedding
gather on), each kernel's count, total and share, then the sum. Set beside the step's time measured without
the profiler, the difference is what the step spends outside kernel bodies: launch gaps, less what programmatic
launch overlaps.

Usage: python3 kernel_profile.py OUT.csv [STEP_MS [GATHERS]]   (profile-decode.sh runs Nsight Compute with the flags
this needs and then this script; STEP_MS, a step's time measured without the profiler, adds the time outside kernels;
GATHERS, default 1, is how many embedding gathers a step begins with: 2 for Whisper, token and position)
With MSTAR_PROFILE_STEP=first it prints the run's first step instead: the prefill of a --profile-decode case whose
context fits one step's token budget (MODEL:1:2048 is one 2048-token prompt)."""
import csv
import os
import re
import sys
from collections import OrderedDict

STEP_START = "embedding_gather"


def kernels(path):
    """(name, nanoseconds) of every profiled kernel, in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    out = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1.0)
        out.append((row["Kernel Name"], value * scale))
    return out


def short(name):
    """A kernel's name without its parameter list; cuBLAS's long template names cut to their stem."""
    name = re.sub(r"\(.*", "", name).strip()
    if len(name) > 60:
        name = name[:57] + "..."
    return name


def main():
    rows = kernels(sys.argv[1])
    step_ms = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else None
    gathers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    starts = [i for i, (n, _) in enumerate(rows) if n.startswith(STEP_START)]
    if len(starts) < gathers:
        sys.exit("fewer than " + str(gathers) + " " + STEP_START + " kernels in the profile")
    if os.environ.get("MSTAR_PROFILE_STEP") == "first":
        step = rows[starts[0]:starts[gathers]] if len(starts) > gathers else rows[starts[0]:]
    else:
        step = rows[starts[-gathers]:]
    by_name = OrderedDict()
    for name, ns in step:
        count, total = by_name.get(short(name), (0, 0.0))
        by_name[short(name)] = (count + 1, total + ns)
    total_us = sum(ns for _, ns in step) / 1e3
    print("| kernel | launches | total us | mean us | share of kernel time |")
    print("|---|---|---|---|---|")
    for name, (count, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {count} | {ns / 1e3:.1f} | {ns / 1e3 / count:.2f} | {100 * ns / 1e3 / total_us:.1f}% |")
    print(f"\n{len(step)} kernels, {total_us / 1e3:.3f} ms of kernel time in the step", end="")
    if step_ms is not None:
        print(f"; the step takes {step_ms:.3f} ms without the profiler: {step_ms - total_us / 1e3:.3f} ms outside "
              "kernel bodies")
    else:
        print()


if __name__ == "__main__":
    main()

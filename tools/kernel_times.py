#!/usr/bin/env python3
"""Each kernel's GPU time from Nsight Compute's CSV (ncu --csv --metrics gpu__time_duration.sum),
as tools/profile-kernels.sh writes it: per kernel, in the order of its first launch, the mean
time of a launch, the launches and its share of all kernel time.

    tools/kernel_times.py NCU.csv
"""

import argparse
import csv
import sys

# Older Nsight Compute writes "nsecond", newer (CUDA 13's) "ns"; both scale the unit to the value.
TO_US = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
         "ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


def short_name(name):
    """'counting_rank_kernel' from 'void cudanms::detail::(anonymous
    namespace)::counting_rank_kernel(const cudanms::detail::FrameArgs *)', templates dropped."""
    name = name.replace("(anonymous namespace)", "")
    plain, depth = [], 0
    for c in name:
        depth += c == "<"
        if depth == 0:
            plain.append(c)
        depth -= c == ">" and depth > 0
    name = "".join(plain).split("(")[0].strip()
    name = name.split("::")[-1]
    return name.split(" ")[-1]


def kernel_times(lines):
    """[(kernel, launches, mean us)] in the order of first launch, from the CSV's lines (ncu's
    own ==PROF== lines before the header are skipped)."""
    rows = list(csv.reader(line for line in lines if not line.startswith("==")))
    header = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if header is None:
        raise ValueError("no 'Kernel Name' column: not ncu --csv output")
    h = rows[header]
    name_at, unit_at, value_at = (h.index("Kernel Name"), h.index("Metric Unit"),
                                  h.index("Metric Value"))
    totals, other_units = {}, set()
    for r in rows[header + 1:]:
        if len(r) <= value_at:
            continue
        if r[unit_at] not in TO_US:
            other_units.add(r[unit_at])
            continue
        try:
            us = float(r[value_at].replace(",", "")) * TO_US[r[unit_at]]
        except ValueError:  # "n/a" where ncu could not measure
            continue
        launches, total = totals.get(short_name(r[name_at]), (0, 0.0))
        totals[short_name(r[name_at])] = (launches + 1, total + us)
    if not totals:
        raise ValueError("no kernel time in a unit of time" +
                         (f" (units: {', '.join(sorted(other_units))})" if other_units else ""))
    return [(k, n, total / n) for k, (n, total) in totals.items()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    args = parser.parse_args(argv)
    with open(args.csv) as f:
        try:
            times = kernel_times(f.read().splitlines())
        except ValueError as e:
            print(f"kernel_times.py: {args.csv}: {e}", file=sys.stderr)
            return 1
    all_us = sum(n * mean for _, n, mean in times)
    print(f"{'mean us':>10} {'launches':>9} {'share':>7}  kernel")
    for kernel, n, mean in times:
        print(f"{mean:10.2f} {n:9d} {100 * n * mean / all_us if all_us else 0:6.1f}%  {kernel}")
    print(f"{sum(mean for _, _, mean in times):10.2f} {'':9} {'':7}  sum of the means "
          "(a call's GPU time where each kernel runs once a call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

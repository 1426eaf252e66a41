#!/usr/bin/env python3
"""tools/kernel_times.py on Nsight Compute CSV written out here, as ncu --csv prints it after the
bench's own table: kernel names shortened, units converted, launches counted and averaged."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "tools", "kernel_times.py")

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(i, name, unit, value):
    return (f'"{i}","42","cudanms-tool","127.0.0.1","{name}","1","13","(256, 1, 1)",'
            f'"(40, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum",'
            f'"{unit}","{value}"')


CSV = "\n".join([
    "cudanms bench 1af6b04, 2026-11-24; seed 7",
    "      N  config             backend    p50 us    p99 us    GPU us   kept  agrees  target",
    "==PROF== Connected to process 42 (build/tools/cudanms-tool)",
    '==PROF== Profiling "classify_kernel" - 0: 0%....50%....100% - 1 pass',
    HEADER,
    row(0, "void cudanms::detail::(anonymous namespace)::classify_kernel"
           "(const cudanms::detail::FrameArgs *)", "usecond", "3.50"),
    row(1, "void cub::CUB_300001_SM_900_NS::DeviceRadixSortOnesweepKernel<cub::Policy<(bool)0>, "
           "unsigned int>(unsigned int *, int)", "nsecond", "2,500"),
    row(2, "void cudanms::detail::(anonymous namespace)::classify_kernel"
           "(const cudanms::detail::FrameArgs *)", "us", "4.50"),
    row(3, "spatial_pairs_kernel", "ms", "1.0"),
    row(4, "spatial_pairs_kernel", "usecond", "n/a-not-a-unit-row"),
])

EXPECTED = [("classify_kernel", 2, 4.0), ("DeviceRadixSortOnesweepKernel", 1, 2.5),
            ("spatial_pairs_kernel", 1, 1000.0)]


def main():
    failures = []
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import kernel_times  # noqa: E402

    try:
        got = kernel_times.kernel_times(CSV.splitlines())
    except ValueError as e:
        got = str(e)
    if got != EXPECTED:
        failures.append(f"kernel_times: {got} != {EXPECTED}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernels.csv")
        with open(path, "w") as f:
            f.write(CSV.replace(row(4, "spatial_pairs_kernel", "usecond", "n/a-not-a-unit-row"),
                                "") + "\n")
        done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        if done.returncode != 0 or "classify_kernel" not in done.stdout:
            failures.append(f"the script: {done.returncode} {done.stdout} {done.stderr}")
        lines = [line for line in done.stdout.splitlines() if line.endswith("classify_kernel")]
        if not lines or lines[0].split()[:3] != ["4.00", "2", "0.8%"]:
            failures.append(f"classify_kernel's line: {lines}")
        # A unit it does not know is an error naming it, not an empty table.
        with open(path, "w") as f:
            f.write("\n".join([HEADER, row(0, "classify_kernel", "furlong", "3")]) + "\n")
        done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        if done.returncode != 1 or "furlong" not in done.stderr:
            failures.append(f"an unknown unit: {done.returncode} {done.stdout} {done.stderr}")
        with open(path, "w") as f:
            f.write("not,a,profile\n")
        done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        if done.returncode != 1 or "Kernel Name" not in done.stderr:
            failures.append(f"a CSV without kernels: {done.returncode} {done.stderr}")
    for failure in failures:
        print("FAILED:", failure)
    print("kernel_times.py:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

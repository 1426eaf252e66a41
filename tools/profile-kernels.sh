#!/usr/bin/env bash
# On a CUDA host with Nsight Compute (ncu), after the build: the GPU time of each kernel of the
# CUDA backend on the bench rows you name, what to read before and after changing a kernel.
# Runs `cudanms-tool bench` on the CUDA backend alone under ncu, every other row turned off, and
# prints each kernel's mean time per launch (tools/kernel_times.py). ncu replays each kernel
# alone at base clocks with cold caches: times run ~1.5x the bench's, compare them with each other.
#   tools/profile-kernels.sh [build-dir] -- BENCH-ROW-OPTIONS
#   e.g. tools/profile-kernels.sh build-cuda -- --sizes 10000
#        tools/profile-kernels.sh build-cuda -- --batches 64 --batch-sizes 1000
# NCU_ARGS adds ncu options (e.g. "--section SpeedOfLight"); the CSV stays in BUILD/kernels.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-cuda
if [ $# -gt 0 ] && [ "$1" != -- ]; then build=$1; shift; fi
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [build-dir] -- BENCH-ROW-OPTIONS (e.g. --sizes 10000)" >&2; exit 2; }
command -v ncu >/dev/null || { echo "error: no ncu (Nsight Compute) on PATH" >&2; exit 2; }
none=(--sizes "" --class-sizes "" --diou-sizes "" --variant-sizes "" --face-sizes "" --group-sizes "" --batches ""
  --batch-sizes "" --streams "")
csv="$build/kernels.csv"
# shellcheck disable=SC2086  # NCU_ARGS is a list of options
ncu --graph-profiling node --metrics gpu__time_duration.sum --csv ${NCU_ARGS:-} \
  "$build/tools/cudanms-tool" bench --backends cuda --repeat 3 --sets 1 --max-seconds 1 \
  "${none[@]}" "$@" >"$csv"
python3 tools/kernel_times.py "$csv"

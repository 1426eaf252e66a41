#!/usr/bin/env bash
# The benchmark, on a CUDA host after the build: cudanms-tool bench with its data sets dumped, so
# that torchvision (tools/bench_torchvision.py) times the same candidates; the cascade detector
# against OpenCV's (cudanms-cascade-bench, OUT-DIR/cascade.md); then the merged NMS table
# docs/benchmark.md and the plot docs/benchmark.png (tools/bench_plot.py), copied into OUT-DIR
# with the JSON of the runs. Prints the merged table last.
#   tools/run-benchmark.sh [build-dir] [out-dir]    (defaults: build-cuda, ${OUT:-out}/benchmark)
# BENCH_ARGS adds options to cudanms-tool bench, e.g. BENCH_ARGS="--seed 42 --max-seconds 2".
# Exit status 1 when the bench found a backend failing or disagreeing with the CPU backend.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build-cuda}
out=${2:-${OUT:-out}/benchmark}
data="$build/bench-data"  # tens of MB of csv: kept out of OUT-DIR
mkdir -p "$out" docs
rm -rf "$data" "$out/bench.json" "$out/torchvision.json"

rc=0
echo "== cudanms-tool bench"
# shellcheck disable=SC2086  # BENCH_ARGS is a list of options
"$build/tools/cudanms-tool" bench --dump "$data" --json "$out/bench.json" ${BENCH_ARGS:-} |
  tee "$out/bench.txt" || rc=1
[ -s "$out/bench.json" ] || { echo "error: the bench wrote no $out/bench.json" >&2; exit 1; }

echo "== torchvision on the same data (full table: $out/torchvision.txt)"
if python3 tools/bench_torchvision.py "$out/bench.json" --json "$out/torchvision.json" \
  >"$out/torchvision.txt"; then
  grep -E 'differ|order' "$out/torchvision.txt" || echo "torchvision: every kept set agreed with cudanms"
else
  echo "warning: bench_torchvision.py failed (exit $?), see above: no torchvision rows" >&2
fi

echo "== the cascade detector against OpenCV (cudanms-cascade-bench; $out/cascade.md)"
if [ -x "$build/tools/cudanms-cascade-bench" ]; then
  "$build/tools/cudanms-cascade-bench" --data "${CUDANMS_OPENCV_DATA:-/usr/share/opencv4}" \
    --json "$out/cascade.json" >"$out/cascade.md" || rc=1
  cat "$out/cascade.md"
else
  echo "no cudanms-cascade-bench in $build (it needs OpenCV 4): no cascade rows"
fi

echo "== docs/benchmark.md, docs/benchmark.png"
python3 tools/bench_plot.py "$out/bench.json" "$out/torchvision.json" \
  --png docs/benchmark.png --md docs/benchmark.md || rc=1
cp docs/benchmark.md "$out/" && { [ ! -f docs/benchmark.png ] || cp docs/benchmark.png "$out/"; }
exit $rc

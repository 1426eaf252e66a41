#!/usr/bin/env bash
# The benchmark, on a CUDA host after the build: cudanms-tool bench with its data sets dumped, so
# that torchvision (tools/bench_torchvision.py) times the same candidates; the cascade detector
# against OpenCV's (cudanms-cascade-bench, OUT-DIR/cascade.md); many streams through
# cudacascade ! cudanms on one GPU (pipelines/streams, OUT-DIR/streams.md); BlazeFace streams through
# dnndetect against OpenCV DNN's blazeface on every core (OUT-DIR/dnn-streams.md); then the merged NMS table
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
"$build/tools/cudanms-tool" bench --dense --dump "$data" --json "$out/bench.json" ${BENCH_ARGS:-} |
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

echo "== many streams on one GPU (pipelines/streams; $out/streams.md)"
# STREAMS_MEDIA: a 1080p video (default: the GPU-host recipe's H.264 Megamind, else vtest.avi
# scaled up); STREAMS: the stream counts; STREAMS_FRAMES: frames per stream.
media=${STREAMS_MEDIA:-}
for m in .device/debs/media/megamind_1080p.h264 /usr/share/doc/opencv-doc/examples/data/vtest.avi; do
  [ -z "$media" ] && [ -f "$m" ] && media=$m
done
if [ -x "$build/pipelines/cudanms-streams" ] && [ -n "$media" ]; then
  {
    echo "| streams | total frames/s | per stream frames/s | chain p50 / p99 (us) | cudacascade p50 / p99 (us) | cudanms p50 / p99 (us) | NMS GPU work p50 / p99 (us) | NMS share of the chain | GPU memory (MiB) |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  } >"$out/streams.md"
  # One row of streams.md from a run's JSON ($1), its first cell labelled with $2 after the count.
  streams_row() {
    python3 - "$1" "${2:-}" >>"$out/streams.md" <<'PY' || rc=1
import json, sys
s = json.load(open(sys.argv[1]))
print(f"| {s['streams']}{sys.argv[2]} | {s['total_fps']:.0f} | {s['min_stream_fps']:.0f}..{s['max_stream_fps']:.0f} "
      f"| {s['chain_p50_us']:.0f} / {s['chain_p99_us']:.0f} "
      f"| {s['detector_p50_us']:.0f} / {s['detector_p99_us']:.0f} | {s['nms_p50_us']:.0f} / "
      f"{s['nms_p99_us']:.0f} | {s['nms_gpu_p50_us']:.0f} / {s['nms_gpu_p99_us']:.0f} "
      f"| {s['nms_share_percent']:.2f}% | {s['gpu_memory_mib']:.0f} |")
PY
  }
  counts=${STREAMS:-1 4 16 32}
  for n in $counts; do
    CUDANMS_BUILD="$build" pipelines/streams --preload "$media" --streams "$n" \
      --frames "${STREAMS_FRAMES:-600}" --progress 0 --json "$out/streams-$n.json" || rc=1
    streams_row "$out/streams-$n.json"
  done
  # The most streams again with the candidates copied to the host (--host-candidates), each
  # cudanms with its own context, then all sharing one (--batch-streams).
  n=${counts##* }
  for batch in "" --batch-streams; do
    json="$out/streams-$n-host${batch:+-batch}.json"
    # shellcheck disable=SC2086  # $batch: an option, or nothing
    CUDANMS_BUILD="$build" pipelines/streams --preload "$media" --streams "$n" \
      --frames "${STREAMS_FRAMES:-600}" --progress 0 --host-candidates $batch --json "$json" ||
      rc=1
    streams_row "$json" ", host candidates${batch:+, batch-streams}"
  done
  echo "media: $media" >>"$out/streams.md"
  cat "$out/streams.md"
else
  echo "no cudanms-streams in $build or no 1080p media: no streams rows"
fi

echo "== BlazeFace streams: dnndetect against OpenCV DNN on the CPU ($out/dnn-streams.md)"
# DNN_STREAMS streams (default 32) of the same media: dnndetect batching them all (frames in GPU
# memory where there is a GPU), then the OpenCV DNN element, one network a stream, on every core.
if [ -f "$build/gst-plugin/libgstcudanmsdnn.so" ] && [ -n "$media" ]; then
  n=${DNN_STREAMS:-32}
  gpu_frames=""
  nvidia-smi -L >/dev/null 2>&1 && gpu_frames=--preload-gpu
  {
    echo "| chain | streams | total frames/s | per stream frames/s | chain p50 / p99 (us) | detector p50 (us) | cudanms p50 (us) |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
  } >"$out/dnn-streams.md"
  dnn_streams() {  # label, json, streams' options...
    local label=$1 json=$2
    shift 2
    CUDANMS_BUILD="$build" pipelines/streams --preload "$media" --streams "$n" \
      --frames "${STREAMS_FRAMES:-600}" --progress 0 --json "$json" "$@" || { rc=1; return; }
    python3 - "$json" "$label" >>"$out/dnn-streams.md" <<'PY' || rc=1
import json, sys
s = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {s['streams']} | {s['total_fps']:.0f} | {s['min_stream_fps']:.0f}..{s['max_stream_fps']:.0f} "
      f"| {s['chain_p50_us']:.0f} / {s['chain_p99_us']:.0f} | {s['detector_p50_us']:.0f} | {s['nms_p50_us']:.0f} |")
PY
  }
  # shellcheck disable=SC2086  # $gpu_frames: an option, or nothing
  dnn_streams "dnndetect (LibTorch${gpu_frames:+, frames in GPU memory}), batch $n" \
    "$out/dnn-streams-dnndetect.json" $gpu_frames \
    --detector "dnndetect batch-size=$n batch-timeout=20000" \
    --nms "cudanms method=weighted iou-threshold=0.3"
  dnn_streams "videoconvert ! blazeface (OpenCV DNN, CPU)" "$out/dnn-streams-opencv.json" \
    --detector "videoconvert ! blazeface" --nms "cudanms method=weighted iou-threshold=0.3 backend=cpu"
  cat "$out/dnn-streams.md"
else
  echo "no dnn plugin in $build or no 1080p media: no BlazeFace stream rows"
fi

echo "== docs/benchmark.md, docs/benchmark.png"
python3 tools/bench_plot.py "$out/bench.json" "$out/torchvision.json" \
  --png docs/benchmark.png --md docs/benchmark.md || rc=1
cp docs/benchmark.md "$out/" && { [ ! -f docs/benchmark.png ] || cp docs/benchmark.png "$out/"; }
exit $rc

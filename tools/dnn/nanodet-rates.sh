#!/usr/bin/env bash
# NanoDet-g's numbers a site plans on, in one run on a CUDA host after the build, at dnndetect's
# default precision=tf32 (PyTorch's default too, so the Python peer's) then fp16, into
# OUT-DIR/nanodet.md:
# - the chain: STREAMS (default 32) streams of vtest.avi's people scaled to 1080p, in GPU memory
#   (pipelines/streams --preload-gpu), each through dnndetect model=nanodet (batched across the
#   streams, a batch of STREAMS) ! cudanms iou-threshold=0.6 ! boxtrack ! boxcount: frames/s in all;
#   then the same with a queue between dnndetect and cudanms (--detector-queue 2), so that the
#   next batch fills while the last one runs;
# - the network alone at the same batch: cudanms-dnn-bench's forward, synchronised, on the same
#   frames (its table also times each stage, and checks the GPU's kept boxes against the CPU's);
# - the Python peer: the same TorchScript driven as NanoDet's demo drives it, frames and
#   pre-processing on the GPU, get_bboxes and multiclass_nms image by image
#   (tools/dnn/nanodet_bench_torch.py).
#   tools/dnn/nanodet-rates.sh [build-dir] [out-dir]   (defaults build-cuda, ${OUT:-out}/benchmark)
# NANODET_VIDEO names another video; STREAMS_FRAMES the frames per stream (default 1500); RUNS the
# benches' timed runs (default 100).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${1:-build-cuda}
out=${2:-${OUT:-out}/benchmark}
mkdir -p "$out"
model=${XDG_CACHE_HOME:-$HOME/.cache}/cudanms/human-models-3.0.4/nanodet.torchscript.pt
video=${NANODET_VIDEO:-${CUDANMS_OPENCV_SAMPLES:-/usr/share/doc/opencv-doc/examples/data}/vtest.avi}
streams=${STREAMS:-32}
[ -f "$model" ] || { echo "error: no $model (tools/fetch-nanodet.sh, tools/nanodet-to-torchscript.py)" >&2; exit 1; }
[ -f "$video" ] || { echo "error: no $video" >&2; exit 1; }

# The same video's frames as raw 1080p BGR for the two benches that take frames in memory.
raw="$build/nanodet-frames.bgr"
python3 - "$video" "$raw" "$streams" <<'PY' || { echo "error: cannot write $raw (needs Python OpenCV)" >&2; exit 1; }
import sys, cv2
capture, frames = cv2.VideoCapture(sys.argv[1]), []
with open(sys.argv[2], "wb") as out:
    for i in range(int(sys.argv[3])):
        ok, frame = capture.read()
        if not ok:
            break
        out.write(cv2.resize(frame, (1920, 1080), interpolation=cv2.INTER_LINEAR).tobytes())
PY

rc=0
for precision in tf32 fp16; do
  half=()
  [ "$precision" = fp16 ] && half=(--fp16)
  for queue in 0 2; do
    echo "== NanoDet-g $precision: $streams streams through the chain (--detector-queue $queue)"
    CUDANMS_BUILD="$build" pipelines/streams --preload "$video" --streams "$streams" --preload-gpu \
      --track --frames "${STREAMS_FRAMES:-1500}" --progress 0 --detector-queue "$queue" \
      --json "$out/nanodet-streams-$precision-queue$queue.json" \
      --detector "dnndetect model=nanodet score-threshold=0.35 batch-size=$streams precision=$precision" \
      --nms "cudanms iou-threshold=0.6 max-detections=100" || rc=1
  done
  echo "== the network alone and stage by stage (cudanms-dnn-bench)"
  "$build/tools/dnn/cudanms-dnn-bench" --model "$model" --decoder nanodet --precision "$precision" --frames "$raw" \
    --batches "$streams" --runs "${RUNS:-100}" --json "$out/nanodet-bench-$precision.json" | tee "$out/nanodet-bench-$precision.md" || rc=1
  echo "== the Python peer"
  python3 tools/dnn/nanodet_bench_torch.py "$model" "${half[@]}" --frames "$raw" --batches "$streams" \
    --runs "${RUNS:-100}" --json "$out/nanodet-python-$precision.json" | tee "$out/nanodet-python-$precision.md" || rc=1
done

python3 - "$out" "$streams" >"$out/nanodet.md" <<'PY' || rc=1
import json, sys
out, batch = sys.argv[1], int(sys.argv[2])
print(f"| precision | chain, {batch} streams (frames/s) | the same, a queue after the detector "
      f"| network alone, batch {batch} (frames/s) | Python peer (frames/s) | chain / network "
      "| chain / Python | GPU |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for p in ("tf32", "fp16"):
    s = json.load(open(f"{out}/nanodet-streams-{p}-queue0.json"))
    q = json.load(open(f"{out}/nanodet-streams-{p}-queue2.json"))
    b = json.load(open(f"{out}/nanodet-bench-{p}.json"))
    y = json.load(open(f"{out}/nanodet-python-{p}.json"))
    row = next(r for r in b["rows"] if r["frames_in"] == "GPU memory")
    network = 1000 * batch / row["network_ms"]
    python = 1000 * batch / y["rows"][0]["chain_p50_ms"]
    best = max(s["total_fps"], q["total_fps"])
    print(f"| {p} | {s['total_fps']:.0f} | {q['total_fps']:.0f} | {network:.0f} | {python:.0f} | "
          f"{best / network:.0%} | {best / python:.1f}x | {b['gpu']} |")
PY
cat "$out/nanodet.md"
exit $rc

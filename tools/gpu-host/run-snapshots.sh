#!/usr/bin/env bash
# On a CUDA host: what the operator page's pictures (gst-libs/pipeline/snapshot.h) cost, and
# that they work on frames in GPU memory.
#  1. The streams bench, STREAMS (default 32) 1080p streams preloaded into GPU memory (FRAMES
#     frames each, default 3000), the cascade with boxtrack ! boxcount: without the branch, with
#     it idle (no picture asked for: the service while no page is open) and with a picture a
#     stream a second, ROUNDS times each (default 3), in turn:
#     $OUT/streams-{plain,idle,snapshots}-N.json.
#  2. The camera service with two NVDEC cameras (frames kept in GPU memory through the chain):
#     both must stream and /snapshot/cam1 must be a JPEG ($OUT/cam1.jpg, $OUT/cameras.json).
#   tools/gpu-host/run-snapshots.sh [STREAMS] [ROUNDS]
# Builds as run-service-soak.sh does (its packages and build folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
streams=${1:-32}
rounds=${2:-3}
debs=${CUDANMS_DEBS:-.device/debs-service}
# shellcheck source=service-env.sh
source tools/gpu-host/service-env.sh
clip=$debs/media/megamind_1080p.h264
for round in $(seq "$rounds"); do
  for kind in plain idle snapshots; do
    extra=()
    [ "$kind" = idle ] && extra=(--snapshots 1 --snapshots-idle)
    [ "$kind" = snapshots ] && extra=(--snapshots 1)
    echo "== round $round, $kind"
    pipelines/streams --preload "$clip" --preload-gpu --streams "$streams" --frames "${FRAMES:-3000}" --track \
      "${extra[@]}" --json "$out/streams-$kind-$round.json" | grep -E "^streams|^snapshots"
  done
done

# The service: two cameras decoded by NVDEC, the cascade on their GPU memory, a picture each.
work=$(mktemp -d)
pipelines/rtsp-server --port 0 --address 127.0.0.1 --loop --cameras 2 --mount /cam "$clip" \
  >"$work/rtsp.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q rtsp:// "$work/rtsp.log" && break; sleep 0.1; done
port=$(grep -oE 'rtsp://127.0.0.1:[0-9]+' "$work/rtsp.log" | head -1 | cut -d: -f3)
data=${CUDANMS_OPENCV_DATA:-/usr/share/opencv4}
cat >"$work/site.conf" <<CONF
[service]
metrics-address = 127.0.0.1:0
detector = cudacascade model=$data/haarcascades/haarcascade_frontalface_default.xml min-size=50x50 max-size=200x200 scale-factor=1.25
lines = middle:0.5,0,0.5,1
normalized = true
[camera.cam1]
source = rtspsrc location=rtsp://127.0.0.1:$port/cam1 protocols=tcp ! rtph264depay ! h264parse ! nvh264dec
[camera.cam2]
source = rtspsrc location=rtsp://127.0.0.1:$port/cam2 protocols=tcp ! rtph264depay ! h264parse ! nvh264dec
CONF
pipelines/service --config "$work/site.conf" >"$work/service.log" 2>&1 &
service=$!
sleep 15
url=$(grep -oE 'metrics at http://127.0.0.1:[0-9]+' "$work/service.log" | head -1 | cut -d' ' -f3)
# Pictures are made while asked for: the first ask starts them, the next gets one.
curl -s -o /dev/null "$url/snapshot/cam1" || true
sleep 2
curl -s "$url/api/cameras" -o "$out/cameras.json" || true
curl -s "$url/snapshot/cam1" -o "$out/cam1.jpg" -w "snapshot: %{http_code} %{content_type} %{size_download} bytes\n" || true
python3 - "$out/cameras.json" <<'PY' || true
import json, sys
for name, c in json.load(open(sys.argv[1]))["cameras"].items():
    print(name, c["state"], "gpu", c["gpu"], f'{c["frames_per_second"]:.1f} frames/s',
          "picture", c["snapshot"], c["last_error"])
PY
grep -E "caps|GPU memory|decoding|error|not-negotiated" "$work/service.log" | head -5 || true
kill "$service" "$server" 2>/dev/null || true
wait 2>/dev/null || true

#!/usr/bin/env bash
# Soak test (not in CI): a live 30 fps pipeline through cvdetect ! cudanms ! boxoverlay for N
# minutes, sampling the process's resident memory every 10 s; prints the samples, the start and
# end RSS and the RSS slope after the first minute (least squares, KiB/min). A leak of a few hundred bytes a frame shows as tens of MiB an hour.
#   tools/soak.sh [MINUTES] [BACKEND]      (defaults 10, auto; the build from $CUDANMS_BUILD)
# The frame: the first of OpenCV's vtest.avi (opencv-doc), frozen into a live 30 fps stream,
# so every frame has pedestrians: ~40 HOG windows in, a few boxes kept.
set -euo pipefail
cd "$(dirname "$0")/.."
source pipelines/common.sh
minutes=${1:-10}
backend=${2:-auto}
need_build
work=$(mktemp -d)
pid=""
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

gst-launch-1.0 -q filesrc location="$OPENCV_DATA/vtest.avi" ! decodebin ! videoconvert ! \
  pngenc snapshot=true ! filesink location="$work/frame.png"

gst-launch-1.0 -q filesrc location="$work/frame.png" ! pngdec ! imagefreeze is-live=true ! \
  videoconvert ! video/x-raw,format=BGRx,framerate=30/1 ! $(detect_chain people "$backend" 0.3) ! \
  boxoverlay draw-candidates=true ! fakesink sync=true &
pid=$!
echo "soak: pid $pid, $minutes min, backend $backend, sampling RSS every 10 s"
samples=()
for ((t = 0; t <= minutes * 60; t += 10)); do
  [ $t -eq 0 ] || sleep 10
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || { echo "soak: the pipeline died" >&2; exit 1; }
  samples+=("$t $rss")
  echo "t=${t}s rss=${rss} KiB"
done
printf '%s\n' "${samples[@]}" | awk -v minutes="$minutes" '
  $1 == 60 { first = $2 } { last = $2 }
  $1 >= 60 { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
  END {
    slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60 : 0
    printf "soak: %d min, RSS at 1 min %d KiB, at the end %d KiB, slope after the first minute %.1f KiB/min\n",
           minutes, first, last, slope
  }'

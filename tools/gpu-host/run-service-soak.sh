#!/usr/bin/env bash
# On a CUDA host (the device tool's H100): the camera service's GPU figures. Builds the service,
# both plugins and the RTSP helper for this GPU, then runs tools/chaos-soak.py: CAMERAS cameras
# (default 16) of the 1080p H.264 clip sent in a loop from the host's loopback, each decoded on
# NVDEC (nvh264dec) and searched for faces by cudacascade on the GPU, cudanms after it; every
# 60 s, 4 of them killed for 20 s (the others' frame rate compared before and during).
# FAULTS=gpu, on a host of several GPUs: the service places the cameras over every GPU, each
# given by its URL (uridecodebin picks its GPU's NVDEC), and every 60 s all the cameras of one
# GPU are killed for 20 s, the other GPUs' cameras compared (the goal: within 5 %).
#   tools/gpu-host/run-service-soak.sh [MINUTES] [CAMERAS]      (default 5 and 16)
# Without GStreamer or meson here it uses the packages of tools/gpu-host/fetch-debs.sh --service
# (CUDANMS_DEBS, default .device/debs-service). Writes $OUT/service-soak.json (OUT default out).
# BUILD_ONLY=1 stops after the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:-5}
cameras=${2:-16}
debs=${CUDANMS_DEBS:-.device/debs-service}
if ! pkg-config --exists gstreamer-1.0 2>/dev/null || ! command -v meson >/dev/null; then
  set +u
  # shellcheck source=env.sh
  source tools/gpu-host/env.sh "$debs" >/dev/null
  set -u
fi
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | head -1)
echo "GPU: $gpu"
build=${CUDANMS_SOAK_BUILD:-build-service}  # a build of the service's, tests or not
# Every plugin the service loads (it refuses to start without its overlay and OpenCV ones); no
# LibTorch: the service's cameras here run the cascade, and a Debian LibTorch unpacked from the
# tests' packages would not build against this host's headers.
[ -f "$build/build.ninja" ] ||
  meson setup "$build" -Dcuda=enabled -Dtests=disabled -Dtorch=disabled >/dev/null
ninja -C "$build"
export CUDANMS_BUILD=$PWD/$build
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
out=${OUT:-out}
mkdir -p "$out"
data=${CUDANMS_OPENCV_DATA:-/usr/share/opencv4}
faults=${FAULTS:-burst}
# One GPU: the camera's own decoder named; several: each camera's URL, decoded on its GPU.
source="rtspsrc location=URL protocols=tcp latency=200 ! rtph264depay ! h264parse ! nvh264dec"
[ "$faults" = gpu ] && source=""
python3 tools/chaos-soak.py --minutes "$minutes" --cameras "$cameras" --faults "$faults" --burst 4 \
  --down 20 --burst-every 60 --loop --file "$debs/media/megamind_1080p.h264" \
  --source "${SOURCE-$source}" \
  --detector "cudacascade model=$data/haarcascades/haarcascade_frontalface_default.xml min-size=50x50 max-size=200x200 scale-factor=1.25" \
  --json "$out/service-soak.json" --work "$out/service-soak"

#!/usr/bin/env bash
# On the GPU host (16 cores, where CI has 2): docs/fleet.md's site of HOSTS hosts and CAMERAS
# cameras (tools/fleet-scale.py: a three-member etcd, the hosts' agents simulated in a process
# for each 10 hosts). Builds the service without CUDA or tests from the packages of
# tools/gpu-host/fetch-debs.sh --scale (etcd among them), carried as CUDANMS_DEBS.
#   tools/gpu-host/run-fleet-scale.sh [HOSTS] [CAMERAS]      (default 100 and 3000)
# Writes $OUT/fleet-scale.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
debs=${CUDANMS_DEBS:-.device/scale}
set +u
# shellcheck source=env.sh
source tools/gpu-host/env.sh "$debs" >/dev/null
set -u
build=${CUDANMS_SCALE_BUILD:-build-scale}
[ -f "$build/build.ninja" ] ||
  meson setup "$build" -Dcuda=disabled -Dtests=disabled -Dtorch=disabled >/dev/null
# The service and the plugins pipelines/service checks for: the rest is not run.
ninja -C "$build" service/cudanms-service gst-plugin/libgstcudanms.so \
  gst-plugin/libgstcudanmsopencv.so gst-plugin/libgstcudanmscascade.so \
  gst-plugin/libgstcudanmsoverlay.so gst-plugin/libgstcudanmspublish.so \
  gst-plugin/libgstcudanmstrack.so >/dev/null
export CUDANMS_BUILD=$PWD/$build
out=${OUT:-out}
mkdir -p "$out"
nproc
python3 tools/fleet-scale.py --hosts "${1:-100}" --cameras "${2:-3000}" \
  --detector "cudacascade model=$CUDANMS_OPENCV_DATA/haarcascades/haarcascade_frontalface_default.xml" \
  --json "$out/fleet-scale.json"

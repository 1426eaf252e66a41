#!/usr/bin/env bash
# On a CUDA host of two GPUs (the device tool's 2x H200): a fleet of two hosts, one a GPU, each
# its own supervisor and worker (pipelines/service with fleet = ..., gpus = 0 and gpus = 1),
# sharing CAMERAS cameras (default 16) of the 1080p H.264 clip from the host's loopback through
# an etcd of their own (the etcd-server package fetch-debs.sh --service downloads). Each camera
# decodes on its host's GPU's NVDEC and runs cudacascade ! cudanms there. A host is killed
# (SIGKILL to its supervisor and worker) every EVERY seconds (default 50): its cameras must
# decode on the other GPU within the lease's TTL + the back-off + 2 s (tools/fleet-soak.py's
# figures), the other host's cameras keep their rate.
#   tools/gpu-host/run-fleet.sh [MINUTES] [CAMERAS]      (default 2.5 and 16)
# Builds as run-service-soak.sh does (its packages and build folder). Writes $OUT/fleet.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:-2.5}
cameras=${2:-16}
debs=${CUDANMS_DEBS:-.device/debs-service}
# shellcheck source=service-env.sh
source tools/gpu-host/service-env.sh
data=${CUDANMS_OPENCV_DATA:-/usr/share/opencv4}
python3 tools/fleet-soak.py --minutes "$minutes" --every "${EVERY:-50}" --cameras "$cameras" \
  --hosts 2 --host-gpus 0,1 --faults kill --file "$debs/media/megamind_1080p.h264" \
  --detector "cudacascade model=$data/haarcascades/haarcascade_frontalface_default.xml min-size=50x50 max-size=200x200 scale-factor=1.25" \
  --json "$out/fleet.json"

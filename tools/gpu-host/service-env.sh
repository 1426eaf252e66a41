# Sourced by the GPU host's service runs (run-fleet.sh, run-snapshots.sh) with $debs set: the
# service built as run-service-soak.sh builds it, the environment pointed at those packages,
# CUDANMS_BUILD exported, $out made, and the GPUs named.
BUILD_ONLY=1 tools/gpu-host/run-service-soak.sh >/dev/null
set +u
# shellcheck source=env.sh
source tools/gpu-host/env.sh "$debs" >/dev/null
set -u
export CUDANMS_BUILD=$PWD/${CUDANMS_SOAK_BUILD:-build-service}
out=${OUT:-out}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader

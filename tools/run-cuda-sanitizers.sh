#!/usr/bin/env bash
# On a CUDA host, after the build: compute-sanitizer's four tools (memcheck, racecheck, synccheck,
# initcheck) on every test binary with CUDA tests, running those tests. Prints each tool's
# summary line per binary and exits 1 on any error, or when a run did not finish.
#   tools/run-cuda-sanitizers.sh [build-dir] [log-dir]   (defaults build-cuda, BUILD/sanitizers)
# TOOLS="memcheck racecheck" picks tools; racecheck is the slow one (minutes): it runs the tests
# at CUDANMS_TEST_SCALE=small (tests/support/test_scale.h), fewer and smaller cases through the
# same kernels, which the other tools run at full scale.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build-cuda}
logs=${2:-$build/sanitizers}
mkdir -p "$logs"
export CUDANMS_TOOL="$PWD/$build/tools/cudanms-tool"  # what test_cudanms_tool runs

# binary | gtest filter: the CUDA tests of each binary.
targets=(
  # The large frames: the same kernels as the others (the dense, tied and adversarial frames run
  # the spatial pairs and the whole-GPU settle), too slow under racecheck (Soft-NMS at 30k).
  "tests/kernels/test_cuda_nms|*-*LargeSlidingWindowFrames*:*LargeFramesInSpatialOrder*"
  "tests/tools/test_cudanms_tool|*.Cuda*"
  # Rule 5's counts and compaction, and grouping: all pairs and the sweep past 8 192 ranks.
  "tests/kernels/test_min_neighbors|*Cuda*"
  "tests/gst-plugin/test_cudanms|CudaNmsElement.CudaPath*"
  # Every cascade kernel (tilted integrals included) runs in these; the real-frames test is the
  # same kernels on 30 more frames, too slow under racecheck.
  "tests/kernels/test_cuda_cascade|CudaCascade.Every*:CudaCascade.Odd*:CudaCascade.More*:CudaCascade.AMissing*:CudaCascade.DeviceCandidatesOf*"
  # Device candidates: the pool, the event ordering, NMS in place (the large frames: the same
  # kernels, too slow under racecheck); then cudacascade ! cudanms through GStreamer.
  "tests/kernels/test_device_candidates|CudaDeviceCandidates.*-*Large*:*Past*"
  "tests/gst-plugin/test_cudacascade|CudaCascadeElement.FramesInCudaMemory*"
  # The DNN library's kernels: the input tensor of each pixel format, the heads' decoding.
  "tests/kernels/test_dnn|CudaDnn.*"
)
# ONLY=test_cuda_cascade keeps the targets whose binary name contains it.
if [ -n "${ONLY:-}" ]; then
  kept=()
  for target in "${targets[@]}"; do [[ ${target%%|*} == *"$ONLY"* ]] && kept+=("$target"); done
  targets=("${kept[@]}")
fi
rc=0
for tool in ${TOOLS:-memcheck racecheck synccheck initcheck}; do
  for target in "${targets[@]}"; do
    binary=${target%%|*} filter=${target#*|}
    log="$logs/$tool-$(basename "$binary").log"
    start=$(date +%s)
    # --target-processes all: test_cudanms_tool runs the tool in child processes.
    scale=full
    [ "$tool" = racecheck ] && scale=small
    CUDANMS_TEST_SCALE=$scale compute-sanitizer --tool "$tool" --target-processes all \
      --error-exitcode 99 "$build/$binary" --gtest_filter="$filter" >"$log" 2>&1
    status=$?
    summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$log" | tail -1)
    ran=$(grep -oE '^\[  PASSED  \] [0-9]+ tests?' "$log" | tail -1)
    echo "$tool $(basename "$binary"): ${summary:-no summary} | ${ran:-gtest did not pass} | $(($(date +%s) - start)) s"
    if [ $status -ne 0 ] || [ -z "$ran" ] || ! echo "$summary" | grep -qE ' 0 errors|\(0 errors'; then
      echo "error: $tool on $binary (exit $status), see $log" >&2
      rc=1
    fi
  done
done
exit $rc

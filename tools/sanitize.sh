#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, CPU backend), then
# each libFuzzer target for FUZZ_SECONDS (default 60), side by side, from its seed corpus in
# tests/fuzz/corpus.
# A sanitizer report fails its test; a fuzzer crash fails this script, its input saved as
# BUILD/fuzz-artifacts/TARGET-crash-* (replay: BUILD/tests/fuzz/TARGET FILE).
#   tools/sanitize.sh [build-dir]      (default build-asan; run.sh test runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
seconds=${FUZZ_SECONDS:-60}

if [ ! -f "$build/build.ninja" ]; then
  # -Dfuzzing=enabled: the fuzz targets, and libFuzzer's coverage in the code they reach
  # (meson.build's fuzz_coverage).
  # -Dtorch=disabled: LibTorch is not instrumented, and compiling its headers twice more would
  # double CI's time; dnndetect's own code is the library's (kernels/dnn.cpp), tested here.
  # -O0 with line tables (file:line in every report): instrumented code compiles in less than
  # half the time of -O2 -g; the arithmetic's libraries run at -O1 (meson.build).
  # lld: it links an instrumented test program in 0.3 s where ld.bfd takes 2.3 (68 of them).
  # A unity build (run.sh's build()): the instrumented build in 3.0 instead of 3.5 minutes.
  CC=clang CXX=clang++ meson setup "$build" -Dcuda=disabled -Dtorch=disabled -Dfuzzing=enabled \
    -Dunity=on \
    -Doptimization=0 -Ddebug=false -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-gline-tables-only -Dcpp_args=-gline-tables-only \
    -Dc_link_args=-fuse-ld=lld -Dcpp_link_args=-fuse-ld=lld
fi
# The fuzz targets; meson test builds the programs of the tests it runs (not the pipelines', which
# run only in the plain build).
targets=()
for target in candidate_file meta_intake; do  # meta_intake: where GStreamer is
  grep -q "^build tests/fuzz/fuzz_$target:" "$build/build.ninja" && targets+=("$target")
done
[ ${#targets[@]} -eq 0 ] || ninja -C "$build" "${targets[@]/#/tests/fuzz/fuzz_}"

# Leak reports would be GLib's and GStreamer's one-time allocations; a test that asks for more
# memory than exists must get an error, not a sanitizer abort.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:abort_on_error=1
# The slowest random-case tests visit every 97th case (CUDANMS_TEST_SCALE=small,
# tests/support/test_scale.h) and the cascade's tests every 60th frame of the videos: the
# instrumented code is several times slower.
export CUDANMS_VIDEO_STRIDE=60 CUDANMS_TEST_SCALE=small
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
rc=0
# The pipelines and docs suites run gst-launch-style child processes that cannot load
# instrumented plugins; the web suite is a browser's (the service behind it is here already). The
# comparisons with OpenCV (suite opencv) run in the plain build, at full scale (run.sh): here
# their code runs instrumented through the cascade's, the grouping's and the elements' own tests
# (here they took 2 of the 9 minutes on CI's two cores).
meson test -C "$build" --no-suite pipelines --no-suite docs --no-suite web --no-suite opencv \
  --print-errorlogs --timeout-multiplier 3 || rc=1

mkdir -p "$build/fuzz-artifacts"
# One fuzzer a core, side by side.
fuzz() {
  local target=$1 fuzzer="$build/tests/fuzz/fuzz_$1" work="$build/fuzz-corpus/$1"
  mkdir -p "$work"
  # -timeout: a unit running 30 s is a hang, and fails like a crash.
  "$fuzzer" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$target-" "$work" "tests/fuzz/corpus/$target" \
    >"$build/fuzz-$target.log" 2>&1
}
pids=()
for target in "${targets[@]}"; do
  echo "fuzz_$target: ${seconds} s from tests/fuzz/corpus/$target"
  fuzz "$target" &
  pids+=($!)
done
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if ! wait "${pids[$i]}"; then
    tail -40 "$build/fuzz-$target.log"
    echo "error: fuzz_$target crashed; reproducer in $build/fuzz-artifacts/" >&2
    rc=1
  else
    echo "fuzz_$target: $(grep -E "stat::number_of_executed_units|cov:" "$build/fuzz-$target.log" | tail -2 | tr '\n' ' ')"
  fi
done
exit $rc

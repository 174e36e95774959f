#!/usr/bin/env bash
# Fetches Swift's functional test suite (test/functional, plus test/__init__.py and
# test/sample.conf it needs) from the Debian source package of the installed swift version,
# into DEST (default /var/cache/apus/swift-functional/<version>). Nothing of Swift is committed:
# a deb-src entry is derived from the machine's own Debian sources, once.
#   tests/functional/fetch_suite.sh [DEST]   prints the directory holding test/
set -euo pipefail
version=$(dpkg-query -W -f='${Version}' swift)
dest="${1:-/var/cache/apus/swift-functional/$version}"
if [ -f "$dest/test/functional/__init__.py" ]; then
  echo "$dest"
  exit 0
fi
src_list=/etc/apt/sources.list.d/apus-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$src_list"
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >/etc/apt/sources.list.d/apus-deb-src.list
  fi
  apt-get update -qq >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The suite is in the upstream tarball; Debian's patches leave test/functional alone. (The
# .dsc of a security update may be missing from a mirror while its tarballs are there.)
(cd "$work" && apt-get source --download-only -qq "swift=$version" >&2 || true)
orig=$(ls "$work"/swift_*.orig.tar.* 2>/dev/null | head -n 1)
[ -n "$orig" ] || { echo "cannot download the swift $version source package" >&2; exit 1; }
mkdir -p "$work/src" "$dest"
tar -xf "$orig" -C "$work/src" --strip-components=1
cp -r "$work/src/test" "$dest/"
echo "$dest"

#!/usr/bin/env bash
# Installs the AWS SDK for JavaScript v3 that tests/s3/sdk_js/package-lock.json pins, with the
# machine's Node.js and npm (scripts/install-deps), from the npm registry, into DEST (default
# /var/cache/apus/sdk-js/<hash of the lock file>), once. Nothing of the SDK is committed.
#   tests/s3/fetch_sdk_js.sh [DEST]   prints the directory holding node_modules/
set -euo pipefail
here=$(cd "$(dirname "$0")/sdk_js" && pwd)
hash=$(sha256sum "$here/package-lock.json" | cut -c1-16)
dest="${1:-/var/cache/apus/sdk-js/$hash}"
if [ -f "$dest/node_modules/@aws-sdk/client-s3/package.json" ]; then
  echo "$dest"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing (scripts/install-deps installs it)" >&2; exit 1; }
work=$(mktemp -d "$(dirname "$dest")/.sdk-js.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$dest")"; mktemp -d "$(dirname "$dest")/.sdk-js.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$work/"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error >&2)
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "$dest"

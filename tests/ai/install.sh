#!/bin/sh
# Install the pinned SDKs and peers of tests/ai/package.json (package-lock
# included) into DIR/node_modules with `npm ci`, once: a DIR whose lock
# matches is left as it is. Exit 0 when DIR is ready, 1 when npm or the
# registry is not there (the caller then skips, and says why).
#   sh tests/ai/install.sh DIR
set -eu
dir=$1
src=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null 2>&1 || { echo "npm not installed" >&2; exit 1; }
mkdir -p "$dir"
if [ -d "$dir/node_modules/openai" ] && cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dir/"
(cd "$dir" && timeout 600 npm ci --no-audit --no-fund --loglevel=error) >"$dir/npm.log" 2>&1 || {
  tail -5 "$dir/npm.log" >&2; rm -rf "$dir/node_modules"; exit 1; }


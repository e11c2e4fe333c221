#!/bin/sh
# Install, with apt-get, the Debian packages stagger needs to build and test,
# but only those that are missing: a machine that has them all is not touched
# (no apt-get update, no root needed).
#   scripts/deps.sh            build + test dependencies (libjs-chart.js: the
#                              live page's and the HTML report's charts, built
#                              into the binary; prometheus: promtool for the
#                              metric checks; chromium + chromium-driver: the
#                              tests that look at the pages)
#   scripts/deps.sh fuzz       also clang and the libFuzzer runtime
#   scripts/deps.sh bench      also wrk, nginx, h2o, perf and the peers of `make bench`
set -eu

PKGS="build-essential cmake ninja-build pkg-config git
      libcmocka-dev libcurl4-openssl-dev libsqlite3-dev libmicrohttpd-dev
      libhiredis-dev libssl-dev libjansson-dev redis-server curl python3 openssl
      zsh fish python3-prometheus-client python3-requests util-linux nghttp2-server libnghttp2-dev
      libjs-chart.js prometheus chromium chromium-driver"
for extra in "$@"; do
  case "$extra" in
    fuzz)  PKGS="$PKGS clang libclang-rt-14-dev" ;;
    bench) PKGS="$PKGS wrk nginx-light h2o linux-perf valgrind" ;;
    *) echo "deps.sh: unknown group '$extra'" >&2; exit 2 ;;
  esac
done

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing

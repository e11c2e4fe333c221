#!/bin/sh
# `make demo`: replay retry storms in virtual time with `stagger sim` and
# write their charts. Usage: sh scripts/demo.sh BUILD_DIR (the release build;
# the binary is BUILD_DIR/src/cli/stagger). Charts and tables go to
# ./demo-out/; nothing sleeps, so the whole demo takes a few seconds.
set -eu

BUILD=${1:-build/release}
STAGGER=$BUILD/src/cli/stagger
OUT=demo-out

if [ ! -x "$STAGGER" ]; then
    echo "demo: $STAGGER not found; build first (make build)" >&2
    exit 1
fi
if ! "$STAGGER" sim --help >/dev/null 2>&1; then
    echo "demo: this stagger has no 'sim' subcommand (jansson missing at build time?)" >&2
    exit 1
fi
mkdir -p "$OUT"

run() {
    name=$1
    shift
    echo "== stagger sim $name $*"
    "$STAGGER" sim "$name" "$@" --svg "$OUT/$name.svg" --csv "$OUT/$name.csv" \
        | tee "$OUT/$name.txt"
    echo
}

# 20 clients refused 4 times: fixed and exponential stay in lockstep,
# jitter spreads them (20 trials: means and spread).
run herd --trials 20
# 2000 jobs against 100/s: a fixed 1 s sleep vs jitter vs a client bucket vs
# the adaptive rate, with 50 and 30 workers.
run storm --trials 5
# 100 clients told Retry-After: 5: exact, with spread, and as a cap.
run quota --trials 5
# The AWS 2015 blog model, 10..150 clients, 100 trials per point.
run contention

echo "charts (open in a browser):"
for f in herd storm quota contention; do
    echo "  $(pwd)/$OUT/$f.svg"
done
echo "tables and CSV: $(pwd)/$OUT/*.txt, $(pwd)/$OUT/*.csv"

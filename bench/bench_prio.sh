#!/bin/sh
# Classes and tenants across processes through one Redis key (issue #32),
# beside first come, first served (today's shared limiter) in the same run.
#
#   bench/bench_prio.sh [BUILD_DIR] [SECONDS]
#
# BUILD_DIR (default build/release) must hold bench/bench_prio (built by
# `cmake --build BUILD_DIR --target bench_prio`). Starts redis-server on a
# free loopback port (persistence off) and runs bench_prio four times
# (bench/prio_bench.c says what each does): an interactive process at 20%
# of a 50/s key beside two batch processes keeping 30 requests reserved,
# and three tenants 1:1:2 on a 100/s key, each first with every process
# calling the plain acquire (fcfs) and then by class and tenant (class).
# Prints the machine-readable lines and a table. Asserts nothing about
# speed: exit status 0 unless something failed to run. About 40 s.
set -eu

BUILD=${1:-build/release}
SECS=${2:-8}
BIN=$BUILD/bench/bench_prio
if [ ! -x "$BIN" ]; then
  echo "bench_prio: $BIN missing; build it: cmake --build $BUILD --target bench_prio" >&2
  exit 2
fi
for tool in redis-server redis-cli python3; do
  command -v $tool >/dev/null || { echo "bench_prio: $tool not found (scripts/deps.sh)" >&2; exit 2; }
done

. "$(dirname "$0")/redis_lib.sh"
redis_bench_start bench_prio # PORT, PID, OUT

for s in inter tenants; do
  for m in fcfs class; do
    timeout 120 "$BIN" "redis://127.0.0.1:$PORT" "$m" "$s" "$SECS" >>"$OUT"
  done
done
cat "$OUT"
# "prio_inter_fcfs: k=v ..." -> a table
python3 - "$OUT" <<'PY'
import sys
v = {}
for line in open(sys.argv[1]):
    head, _, rest = line.partition(":")
    v[head] = dict(w.split("=", 1) for w in rest.split())
def g(k, f):
    return v.get(k, {}).get(f, "-")
print("interactive beside a saturating batch, one 50/s key (burst 5), through Redis")
print("%-38s %12s %12s" % ("", "fcfs", "by class"))
for f, label in (("p50_ms", "interactive admission wait p50 (ms)"),
                 ("p99_ms", "interactive admission wait p99 (ms)"),
                 ("max_ms", "interactive admission wait max (ms)"),
                 ("batch_pct", "batch: % of what interactive left"),
                 ("excess", "bound: worst excess (sends, <= 0)")):
    print("%-38s %12s %12s" % (label, g("prio_inter_fcfs", f), g("prio_inter_class", f)))
print("three batch tenants 1:1:2, one 100/s key (burst 5), through Redis")
print("%-38s %12s %12s" % ("", "fcfs", "by tenant"))
for f, label in (("a_pct", "tenant a (w 1): % of admissions"),
                 ("b_pct", "tenant b (w 1): % of admissions"),
                 ("c_pct", "tenant c (w 2): % of admissions"),
                 ("used_pct", "key used (%)"),
                 ("excess", "bound: worst excess (sends, <= 0)")):
    print("%-38s %12s %12s" % (label, g("prio_tenants_fcfs", f), g("prio_tenants_class", f)))
PY

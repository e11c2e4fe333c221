#!/usr/bin/env bash
# Issue #32 in one process: classes and tenants through stagger proxy with
# one limit (--rate 20 --burst 1, one emission interval I = 50 ms), the
# engine's own record (--log: each attempt_start with its class, tenant
# and admission_wait_ms) read after the run.
#  1. An interactive client (4 requests/s, 20% of the rate) beside 24
#     batch clients saturating the rate: each interactive request waits
#     for admission at most the token already reserved ahead (<= I/2, the
#     fixed rate's horizon) plus the next one (I): 1.5 I, checked against
#     2 I (the issue's bound; the rest is the loop's timer latency); the batch keeps
#     >= 90% of the rest; the bound burst + rate * t holds.
#  2. Three tenants weighted 1:1:2 (8 clients each) share it 25/25/50%
#     within 5 points; while c sends nothing (after its 8 requests still
#     queued, 8 / (50% * 20/s) = 0.8 s) a and b split it 50/50; c
#     comes back, its first request waits at most 2 I like any other, and
#     the shares are 25/25/50% again.
# The bounds are the protocol's (docs/priorities.md); the windows start
# after every group is sending, so the clients' start-up is outside them.
. "$(dirname "$0")/lib.sh"
scratch prio
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
CLIENTS="$(dirname "$0")/prio_clients.py"

serve_start up
UP=$URL

# analyse LOG WHAT ARGS: the checks below, on the proxy's log
analyse() {
  $PY - "$@" <<'PYEOF'
import json, sys
log, what = sys.argv[1], sys.argv[2]
ev = [json.loads(l) for l in open(log) if l.startswith("{")]
st = [e for e in ev if e.get("event") == "attempt_start"]
t0 = st[0]["t_us"] / 1e6 if st else 0
rate, burst, I = 20.0, 1, 0.05
def t(e): return e["t_us"] / 1e6 - t0
# the bound: every prefix of the sends within burst + rate * t
for k, e in enumerate(st):
    if k + 1 > burst + rate * t(e) + 1e-6:
        print("FAIL bound: %d sends by %.3f s" % (k + 1, t(e))); sys.exit(1)
def share(lo, hi, key):
    n = {}
    for e in st:
        if lo <= t(e) < hi:
            n[key(e)] = n.get(key(e), 0) + 1
    return n
if what == "classes":
    inter = [e for e in st if e.get("class") == "interactive"]
    w = sorted(e["admission_wait_ms"] for e in inter)
    print("interactive: %d admitted, waits ms max %.1f p50 %.1f" % (len(w), w[-1], w[len(w)//2]))
    ok = len(w) >= 15 and w[-1] <= 2 * I * 1000 + 1
    n = share(1.5, st and t(st[-1]) or 0, lambda e: e.get("class"))
    span = t(st[-1]) - 1.5
    rest = rate * span - n.get("interactive", 0)
    print("window %.1f s: %s; batch %.1f%% of the rest" % (span, n, 100 * n.get("batch", 0) / rest))
    ok = ok and n.get("batch", 0) >= 0.9 * rest - 1
    sys.exit(0 if ok else 1)
if what == "tenants":
    lo, hi, want = float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
    n = share(lo, hi, lambda e: e.get("tenant"))
    tot = sum(n.values())
    got = {k: 100.0 * v / tot for k, v in n.items()}
    print("%.1f-%.1f s: %d sends, %s" % (lo, hi, tot, {k: round(v, 1) for k, v in got.items()}))
    ok = tot >= 0.9 * rate * (hi - lo) and set(n) == set(want)
    ok = ok and all(abs(got[k] - 100.0 * w) <= 5 for k, w in want.items())
    sys.exit(0 if ok else 1)
if what == "comeback":
    back = float(sys.argv[3])
    c = [e for e in st if e.get("tenant") == "c" and t(e) >= back]
    print("c back: first admitted at %.3f s after waiting %.1f ms" % (t(c[0]), c[0]["admission_wait_ms"]))
    sys.exit(0 if c[0]["admission_wait_ms"] <= 2 * I * 1000 + 1 else 1)
PYEOF
}

# ---- 1. interactive beside a saturating batch ---------------------------------
proxy_start cls --upstream "$UP" -j 40 --rate 20 --burst 1 --log "$T/cls.log"
$PY "$CLIENTS" "$PX" 7 "bat:24:Stagger-Priority=batch" \
  "int:1:Stagger-Priority=interactive:0.25:1" > "$T/cls.clients"
proxy_stop
check "every request answered 200" sh -c "! awk '\$4 != 200' '$T/cls.clients' | grep -q ."
check "interactive admitted within 2 emission intervals, batch >= 90% of the rest, bound held" \
  analyse "$T/cls.log" classes

# ---- 2. three tenants 1:1:2, one stops and comes back --------------------------
proxy_start ten --upstream "$UP" -j 40 --rate 20 --burst 1 --log "$T/ten.log"
$PY "$CLIENTS" "$PX" 12.5 "a:8:Stagger-Tenant=a" "b:8:Stagger-Tenant=b" \
  "c:8:Stagger-Tenant=c|w=2::0:5" "c:8:Stagger-Tenant=c|w=2::7.5" > "$T/ten.clients"
proxy_stop
check "tenants 1:1:2 under contention: 25/25/50% within 5 points" \
  analyse "$T/ten.log" tenants 1 5 '{"a": 0.25, "b": 0.25, "c": 0.5}'
check "c sends nothing: a and b share its part, 50/50 within 5 points" \
  analyse "$T/ten.log" tenants 6.2 7.5 '{"a": 0.5, "b": 0.5}'
check "c comes back: its first request admitted within 2 emission intervals" \
  analyse "$T/ten.log" comeback 7.5
check "c back: 25/25/50% again within 5 points" \
  analyse "$T/ten.log" tenants 8 12.5 '{"a": 0.25, "b": 0.25, "c": 0.5}'
finish

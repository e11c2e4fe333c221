#!/usr/bin/env bash
# stagger proxy: what an AI request reserved comes back when the answer
# says it was not (all) spent. Against ai_tpm_upstream.py with a bucket of
# 2200 tokens that refills slowly (2200 per 300 s: 100 tokens take 14 s),
# each request estimated at 1000 tokens (2000 prompt characters / 4 + 500
# max_tokens), sent one after another with Stagger-Deadline: 10s:
#  - refusal: the second arrival is answered 529 overloaded_error with no
#    rate-limit field (not counted). Its reservation must come back: the
#    retry then fits in the 1200 tokens the first answer left and is sent
#    at once; kept spent, only 200 would be left and the retry would wait
#    for 800 tokens of refill, far past its deadline;
#  - usage: the upstream counts a request by its usage (520 tokens) and
#    tells no count after the first answer; the second request's
#    reservation is settled at the usage its body reports, so the third
#    fits (1680 - 1000 + 480 = 1160); kept at the estimate, 680 would be
#    left and the third would wait far past its deadline;
#  - never sent: the upstream is stopped after the first answer; the
#    second call's attempt fails to connect (the proxy logs it), so its
#    reservation comes back, and its retry, once the upstream is back on
#    the same port, fits in the 1200 tokens the first answer left; kept
#    spent, it would wait far past its deadline.
# The margins are a refill of tens of seconds against a 10 s deadline.
# On 127.0.0.1 only.
. "$(dirname "$0")/lib.sh"
scratch pxrf
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

$PY -c 'import json,sys; print(json.dumps({"model": "m", "max_tokens": 500,
  "messages": [{"role": "user", "content": "u" * 2000}]}))' > "$T/body.json"

# upstream NAME ARGS...: start it; sets UPPID and UP.
upstream() {
  _n=$1; shift
  : > "$T/$_n.log"
  : > "$T/$_n.up"
  $PY "$HERE/ai_tpm_upstream.py" --limit 2200 --window 300 --log "$T/$_n.log" "$@" \
    > "$T/$_n.up" 2> "$T/$_n.uperr" &
  UPPID=$!
  _p=$(listen_port "$T/$_n.up" $UPPID)
  [ -n "$_p" ] || { echo "upstream did not start: $(cat "$T/$_n.uperr")" >&2; exit 1; }
  UP="http://127.0.0.1:$_p"
}

call() {
  curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $1" -H 'Stagger-Deadline: 10s' -H 'Stagger-Retries: 100' \
    --data-binary "@$T/body.json" "$PX/v1/chat/completions"
}

# ---- a refusal gives its reservation back ----------------------------------------------
upstream ref --overload 2
proxy_start ref --upstream "$UP"
c1=$(call a1)
c2=$(call a2)
check "refusal: the first call passes (got $c1)" [ "$c1" = 200 ]
check "refusal: the call answered 529 is retried at once and passes (got $c2)" [ "$c2" = 200 ]
check "refusal: the upstream saw the 529 and then the retry" \
  sh -c "grep -q ' overloaded ' '$T/ref.log' && [ \$(grep -c ' ok ' '$T/ref.log') = 2 ]"
proxy_stop
kill "$UPPID"; wait "$UPPID" 2>/dev/null || true

# ---- an answer without a count settles at its usage ------------------------------------
upstream use --quiet-after 1 --charge usage
proxy_start use --upstream "$UP"
u1=$(call b1)
u2=$(call b2)
u3=$(call b3)
check "usage: three calls pass ($u1 $u2 $u3)" [ "$u1$u2$u3" = 200200200 ]
check "usage: none refused by the upstream" sh -c "! grep -q refused '$T/use.log'"
proxy_stop
kill "$UPPID"; wait "$UPPID" 2>/dev/null || true
# ---- a send that never reached the upstream gives its reservation back ------------
upstream conn
CONNPORT=${UP##*:}
proxy_start conn --upstream "$UP" --log "$T/conn.plog"
n1=$(call d1)
kill "$UPPID"; wait "$UPPID" 2>/dev/null || true
call d2 > "$T/d2.code" &
CALLPID=$!
wait_grep "$T/conn.plog" '"error":"connect_refused"'
upstream conn2 --port "$CONNPORT"
wait "$CALLPID" || true
check "never sent: the first call passes (got $n1)" [ "$n1" = 200 ]
check "never sent: the call whose attempt could not connect passes once the upstream is back (got $(cat "$T/d2.code"))" \
  [ "$(cat "$T/d2.code")" = 200 ]
proxy_stop
kill "$UPPID"; wait "$UPPID" 2>/dev/null || true
finish

#!/usr/bin/env bash
# stagger proxy against request smuggling (issue #30): the corpus in
# smuggling_corpus.py (CL.TE, TE.CL, TE.TE obfuscations, obs-fold, bytes
# outside the token set in names, NUL, bare CR, Host and Content-Length
# rules, bad methods; each with its source) is sent with raw sockets
# (smuggling_run.py) to a proxy in front of raw_upstream.py, a lenient
# upstream that logs every byte it receives. Per vector: the status, the
# connection closed, nothing forwarded, one "proxy" line in --log with the
# reason. Then the issue's reproduction (an attack, then a victim with
# Authorization: Bearer VICTIM-TOKEN: the victim gets its own answer and
# the upstream never runs a smuggled request), hop-by-hop fields dropped
# both ways (every Connection field), answer heads too large for the
# client side answered 502 upstream-head-too-large, TRACE refused, and
# /__stagger/* answering GET and HEAD only (405 with Allow otherwise),
# those early answers logged.
. "$(dirname "$0")/lib.sh"
scratch pxsmuggle
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
D=$(dirname "$0")

$PY "$D/raw_upstream.py" "$T/raw.log" "$T/req.log" > "$T/up.out" 2> "$T/up.err" &
UPPID=$!
UPPORT=$(listen_port "$T/up.out" "$UPPID")
[ -n "$UPPORT" ] || { echo "raw_upstream did not start: $(cat "$T/up.err")" >&2; exit 1; }

# -j 1: one upstream connection, so a request left over in it would be the
# next client's (the issue's reproduction needs that reuse).
proxy_start px --upstream "http://127.0.0.1:$UPPORT" --rate 0 -j 1 --retries 0 --log "$T/px.log"

out=$($PY "$D/smuggling_run.py" "$PXPORT" "$T/raw.log" "$T/req.log" "$T/px.log" 2>&1) && rc=0 || rc=$?
echo "$out"
check "the smuggling corpus and the victim reproduction pass (smuggling_run.py exit $rc)" [ "$rc" = 0 ]

# TRACE echoes the request back, Authorization included: refused, not forwarded.
code=$(curl -s -o /dev/null -w '%{http_code}' -X TRACE -H 'Authorization: Bearer TRACE-TOKEN' "$PX/trace-me")
check "TRACE: 405 (got $code)" [ "$code" = 405 ]
check "TRACE: not forwarded" sh -c "! grep -q 'trace-me' '$T/raw.log'"

# The admin endpoints: GET and HEAD; anything else 405 with Allow.
code=$(curl -s -o /dev/null -w '%{http_code}' "$PX/__stagger/health")
check "GET /__stagger/health: 200 (got $code)" [ "$code" = 200 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -I "$PX/__stagger/metrics")
check "HEAD /__stagger/metrics: 200 (got $code)" [ "$code" = 200 ]
for m in POST DELETE PUT; do
  code=$(curl -s -D "$T/adm.h" -o /dev/null -w '%{http_code}' -X "$m" "$PX/__stagger/health")
  check "$m /__stagger/health: 405 (got $code)" [ "$code" = 405 ]
  check "$m /__stagger/health: Allow: GET, HEAD" grep -qi '^Allow: GET, HEAD' "$T/adm.h"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$PX/__stagger/nothing")
check "GET /__stagger/nothing: 404 (got $code)" [ "$code" = 404 ]

# Early answers are logged: TRACE, the admin answers, the 405s and the 404.
wait_grep "$T/px.log" '"status":404,"attempts":0,"reason":"no-route"' || true
check "TRACE logged" grep -q '"method":"TRACE".*"status":405.*"reason":"trace-refused"' "$T/px.log"
check "admin answers logged (200 twice)" \
  [ "$(grep -c '"status":200,"attempts":0,"reason":"admin"' "$T/px.log")" = 2 ]
check "admin 405s logged (three)" \
  [ "$(grep -c '"status":405,"attempts":0,"reason":"method-not-allowed"' "$T/px.log")" = 3 ]
check "admin 404 logged" grep -q '"status":404,"attempts":0,"reason":"no-route"' "$T/px.log"
check "no header value in the log" sh -c "! grep -q -e TRACE-TOKEN -e VICTIM-TOKEN '$T/px.log'"

proxy_stop
kill "$UPPID" 2>/dev/null || true
stop_jobs
finish

#!/usr/bin/env bash
# stagger proxy, a host's cold start behind a long stream (issue #31): the
# first call to a host goes alone until its answer, and that answer is its
# head, not the end of its body. The upstream (stream_quota_upstream.py)
# allows 3 requests per 4 s window and tells it in RateLimit-* fields; its
# first answer is an SSE stream that runs until two other requests have
# reached it (a 20 s hang guard otherwise). While the stream runs, four
# requests go through the proxy:
#  - some reach the upstream before the stream ends (before the fix they
#    waited for the end of the stream, which waited for them: the guard);
#  - they are paced by the quota the stream's head told (2 left until the
#    window turns): the upstream refuses none, where four let loose at once
#    get two refusals;
#  - every program gets its 200, the stream arrives whole.
# Assertions are on the order of the upstream's log and its counts.
. "$(dirname "$0")/lib.sh"
scratch pxcold
. "$(dirname "$0")/proxy_lib.sh"

py_upstream stream_quota_upstream.py --log "$T/up.log" --limit 3 --window 4 --until 2
proxy_start a --upstream "$UP" --rate 0 --log "$T/a.log"

curl -s -N -o "$T/stream" -X POST -H 'Content-Type: application/json' --data '{}' \
  "$PX/stream" &
SPID=$!
wait_grep "$T/stream" '^data: {"i": 0}' # its head went through the proxy

for i in 1 2 3 4; do
  curl -s -o "$T/q$i" -w '%{http_code}' "$PX/quick?i=$i" > "$T/code$i" &
  QPIDS="${QPIDS:-} $!"
done
for p in $QPIDS; do wait "$p"; done
wait "$SPID"

first_quick=$(grep -n ' /quick ' "$T/up.log" | head -1 | cut -d: -f1)
stream_end=$(grep -n ' /stream end' "$T/up.log" | head -1 | cut -d: -f1)
during=no
if [ -n "$first_quick" ] && [ -n "$stream_end" ] && [ "$first_quick" -lt "$stream_end" ]; then
  during=yes
fi
check "a request reached the host while its first answer streamed (log: $(tr '\n' '|' < "$T/up.log"))" \
  [ "$during" = yes ]
check "paced by the head's quota: the upstream refused none (got $(grep -c refused "$T/up.log"))" \
  [ "$(grep -c refused "$T/up.log")" = 0 ]
check "every request reached it once (got $(grep -c ' /quick ok' "$T/up.log"))" \
  [ "$(grep -c ' /quick ok' "$T/up.log")" = 4 ]
for i in 1 2 3 4; do
  check "request $i: 200 (got $(cat "$T/code$i"))" [ "$(cat "$T/code$i")" = 200 ]
done
check "the stream arrived whole" grep -q '^data: \[DONE\]' "$T/stream"
proxy_stop
finish

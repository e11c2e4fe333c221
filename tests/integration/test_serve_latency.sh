# stagger serve --latency D: every answer takes at least D after its request
# arrived, for many requests at once (the connections are parked, no thread
# sleeps). Only the lower bound is asserted: it is the option's promise; how
# much later a busy machine answers is not.
. "$(dirname "$0")/lib.sh"
scratch latency
serve_start lat --latency 150ms --threads 2 --log "$T/lat.log"
for i in $(seq 20); do
  curl -s -o /dev/null -w "%{http_code} %{time_total}\n" "$URL/x/$i" >"$T/c$i.out" &
done
wait_all() { for _ in $(seq 600); do [ "$(cat "$T"/c*.out 2>/dev/null | wc -l)" -ge 20 ] && return; sleep 0.05; done; }
wait_all
check "20 requests at once, all answered 200" [ "$(grep -c '^200 ' "$T"/c*.out | awk -F: '{s+=$2} END {print s}')" = 20 ]
check "none faster than --latency" awk '$2 < 0.150 { bad = 1 } END { exit bad }' "$T"/c*.out
serve_stop "$SRV_PID" || true
check "each logged once" [ "$(grep -c '"/x/' "$T/lat.log")" = 20 ]
expect_exit "a bad --latency is a usage error" 2 "$STAGGER" serve --latency soon
finish

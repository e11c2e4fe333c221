# Issue #15, quotas: `stagger batch` keeps to the quota a server announces
# (stagger serve --rate 10 --burst 5 --ratelimit-headers: every answer says
# its bucket's remaining tokens and the time until it is full, and what the
# bucket does not hold gets a 429). With no client-side rate (--rate 0), the
# batch's only pacing is the announced quota, so the server must refuse
# none (the protocol's bound: never more than the announced remaining
# before the reset, the requests in flight counted). A JSONL job's "cost"
# is kept in the database (as its Stagger-Cost header), never sent, and a
# cost over the announced limit is never sent at all.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_quota
db_q() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$1" "$2"; }

serve_start limited --rate 10 --burst 5 --ratelimit-headers --log "$T/limited.log"
P=$PORT

# ---- the announced quota alone paces the batch ----------------------------------------
for i in $(seq 1 25); do echo "http://127.0.0.1:$P/q/$i"; done >"$T/urls.txt"
expect_exit "25 jobs against the announced quota" 0 "$S" batch -q --rate 0 -j 4 \
  --db "$T/q.db" "$T/urls.txt"
check "all 25 done" [ "$(db_q "$T/q.db" "SELECT count(*) FROM jobs WHERE state = 'done'")" = 25 ]
check "each on its first attempt" [ "$(db_q "$T/q.db" "SELECT sum(attempts) FROM jobs")" = 25 ]
serve_stop "$SRV_PID" # its log is complete once it has stopped
check "the server refused none (no 429 in its log)" [ "$(grep -c '"status":429' "$T/limited.log" || true)" = 0 ]
check "the server answered 25" [ "$(grep -c '"status":200' "$T/limited.log")" = 25 ]

# ---- cost: stored, never sent; over the limit, never sent at all -------------------------
serve_start costs --rate 10 --burst 5 --ratelimit-headers --log "$T/costs.log"
P=$PORT
cat >"$T/cost.jsonl" <<EOF
{"id": "echo", "url": "http://127.0.0.1:$P/echo", "cost": {"tokens": 1200}}
{"id": "big", "url": "http://127.0.0.1:$P/too-big", "cost": {"requests": 11}}
EOF
expect_exit "a job over the announced limit fails (exit 1)" 1 "$S" batch -q --rate 0 -j 1 \
  --db "$T/c.db" --out "$T/bodies" "$T/cost.jsonl"
check "the cost is kept with the job" \
  [ "$(db_q "$T/c.db" "SELECT headers FROM jobs WHERE key = 'echo'")" = '["Stagger-Cost: tokens=1200"]' ]
check "the echo job is done" [ "$(db_q "$T/c.db" "SELECT state FROM jobs WHERE key = 'echo'")" = done ]
check "the server never saw Stagger-Cost" sh -c "! grep -qi 'stagger-cost' '$T'/bodies/*"
check "the costly job failed, never sent" \
  [ "$(db_q "$T/c.db" "SELECT state || ' ' || attempts FROM jobs WHERE key = 'big'")" = "failed 0" ]
check "it says why" sh -c "'$S' batch export --db '$T/c.db' | grep -q 'over a quota the server announced'"
# --no-quotas: the same job goes (the server does not know costs).
expect_exit "--no-quotas sends it" 0 "$S" batch -q --rate 0 --no-quotas --db "$T/n.db" "$T/cost.jsonl"
serve_stop "$SRV_PID"
check "the server saw /too-big once: from the --no-quotas run" \
  [ "$(grep -c '"path":"/too-big"' "$T/costs.log")" = 1 ]

# ---- provider personas (serve --dialect): no refusal, no early retry --------------------
# Each persona answers in its provider's fields; quotas are resized small so
# that 20 jobs pass them several times over. Shopify's used/size has no
# reset: a spent bucket must not be probed at every round trip (it was, with
# a 429 each time, before a spent quota without reset waited).
early() { python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))["early_retries"]["total"])' "$1/__stats"; }
persona() { # persona NAME JOBS ARGS...: JOBS span at least three windows
  pn=$1 nj=$2; shift 2
  serve_start "p_$pn" --dialect "$pn" "$@" --log "$T/p_$pn.log"
  for i in $(seq 1 "$nj"); do echo "$URL/v1/items/$i"; done >"$T/p_$pn.txt"
  expect_exit "$pn: $nj jobs" 0 "$S" batch -q --rate 0 -j 4 --db "$T/p_$pn.db" "$T/p_$pn.txt"
  check "$pn: all done on the first attempt" \
    [ "$(db_q "$T/p_$pn.db" "SELECT count(*) || ' ' || sum(attempts) FROM jobs WHERE state = 'done'")" = "$nj $nj" ]
  check "$pn: no early retry" [ "$(early "$URL")" = 0 ]
  serve_stop "$SRV_PID"
  check "$pn: the server refused none" [ "$(grep -vc '"status":200' "$T/p_$pn.log" || true)" = 0 ]
}
persona shopify 14 --quota calls=6/2s
persona anthropic 14 --quota requests=6/2s
persona ietf 20 --quota short=5/1s --quota long=12/4s
persona discord 20 --quota bucket=5/1s
persona github 14 --quota core=6/2s

finish

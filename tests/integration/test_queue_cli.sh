# `stagger batch --queue` from the command line, one behaviour at a time:
#  - a Retry-After that one worker received is honoured by a worker that
#    joins later (the "not before" kept in Redis per host);
#  - a non-idempotent job in flight in a killed worker ends in review and is
#    never sent again;
#  - --drain finishes the claimed jobs and leaves nothing pending;
#  - --follow stays for jobs loaded later;
#  - refusals: secrets in the input, another input under the same name, no
#    such queue, Redis unreachable (exit 6, no password in messages);
#  - --dry-run reads the input and loads nothing;
#  - a worker's run has a database run's --metrics and --log - (stdout).
# Starts its own redis-server and stagger serve on 127.0.0.1.
#
# Bounds come from the protocol (the hint: no request before t + Retry-After)
# and orderings from lines in logs or keys in Redis, never from a sleep.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch qcli
. "$(dirname "$0")/queue_lib.sh"
RPORT=$(free_port)
start_redis
R="redis://127.0.0.1:$RPORT"

# ---- a late joiner honours another worker's Retry-After --------------------------
# One client (X-Client-Id) whose first request gets 429 + Retry-After: 3.
serve_start ra --fail-first 1 --fail-retry-after 3 --log "$T/ra.log"
for i in $(seq 10); do echo "$URL/ra/$i"; done >"$T/ra.txt"
"$S" batch --queue "$R/ra" --worker a -j 1 --rate 0 -H "X-Client-Id: one" --progress none -q \
  "$T/ra.txt" >/dev/null 2>"$T/ra_a.err" &
PA=$!
wait_grep "$T/ra.log" '"status":429'
rc=0
"$S" batch --queue "$R/ra" --worker b -j 5 --rate 0 -H "X-Client-Id: one" --progress none -q \
  >/dev/null 2>"$T/ra_b.err" || rc=$?
check "the late worker ends with every job done ($rc: $(cat "$T/ra_b.err"))" [ "$rc" = 0 ]
wait "$PA" || true
serve_stop "$SRV_PID" || true
check "no request before the 429's time + Retry-After (any worker)" python3 - "$T/ra.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = [r for r in rows if r["status"] == 429]
t = first[0]["t_us"]
early = [r for r in rows if r is not first[0] and r["t_us"] < t + 3_000_000]
print(f"  {len(rows)} requests; one 429 at {t / 1e6:.2f} s; {len(early)} within its Retry-After")
sys.exit(0 if len(first) == 1 and not early and len(rows) == 11 else 1)
PY

# ---- non-idempotent, in flight in a killed worker: review -------------------------
serve_start hang --hang-every 1 --log "$T/hang.log"
printf '{"id":"pay1","method":"POST","url":"%s/pay/1","body":"x"}\n' "$URL" >"$T/pay.jsonl"
"$S" batch --queue "$R/pay" --worker dead -j 1 --rate 0 --progress none -q "$T/pay.jsonl" \
  >/dev/null 2>"$T/pay_dead.err" &
PD=$!
for _ in $(seq 600); do
  [ "$(redis-cli -p "$RPORT" HLEN 'stagger:q:{pay}:sent')" = 1 ] && break
  sleep 0.05
done
check "the sent-mark is in Redis before the POST leaves" \
  [ "$(redis-cli -p "$RPORT" HGET 'stagger:q:{pay}:sent' 1)" = dead ]
wait_grep "$T/hang.log" '/pay/1' || true
kill -9 "$PD"; wait "$PD" 2>/dev/null || true
rc=0
"$S" batch --queue "$R/pay" --worker b -j 1 --rate 0 --claim-idle 500ms --progress none -q \
  >/dev/null 2>"$T/pay_b.err" || rc=$?
check "the next worker ends with exit 3 (review): $rc $(cat "$T/pay_b.err")" [ "$rc" = 3 ]
"$S" batch export --queue "$R/pay" >"$T/pay.out"
jcheck "the POST is in review, as maybe sent by the dead worker" "$(cat "$T/pay.out")" \
  'j["state"] == "review" and j["reason"] == "maybe_sent" and "dead" in j["error"]'
serve_stop "$SRV_PID" || true
check "the POST reached the server once, never resent" [ "$(grep -c '/pay/1' "$T/hang.log")" = 1 ]

# ---- --drain: finish the claimed jobs, leave nothing pending ----------------------------
serve_start drain --rate 20 --log "$T/drain.log"
for i in $(seq 100); do echo "$URL/d/$i"; done >"$T/d.txt"
"$S" batch --queue "$R/drain" --worker dr -j 5 --rate 20 --burst 2 --drain --progress none \
  "$T/d.txt" >/dev/null 2>"$T/dr.err" &
PR=$!
wait_lines "$T/drain.log" 20
kill -TERM "$PR"
rc=0; wait "$PR" || rc=$?
check "a drained worker leaves with exit 3 (jobs left in the queue): $rc" [ "$rc" = 3 ]
check "it said it drains" grep -q "draining" "$T/dr.err"
# What it had claimed ahead is given back: still in its name, but idle past
# any --claim-idle (20 s by default), so the next worker takes it at once.
check "nothing of it left but jobs given back" sh -c "redis-cli -p $RPORT XPENDING 'stagger:q:{drain}:jobs' workers - + 1000 dr | awk 'NR % 4 == 3 && \$1 < 20000 { bad = 1 } END { exit bad }'"
rc=0
"$S" batch --queue "$R/drain" --worker next -j 10 --rate 20 --progress none -q >/dev/null \
  2>"$T/next.err" || rc=$?
check "another worker finishes at once (no claim-idle wait): $rc" [ "$rc" = 0 ]
jcheck "all 100 done" "$("$S" batch report --queue "$R/drain" --json)" 'j["states"]["done"] == 100'
serve_stop "$SRV_PID" || true

# ---- --follow: stay for jobs loaded later; a frozen worker's job is taken over -----
# The loader l sends at most one job a second (a limiter key of its own) and
# is frozen (SIGSTOP) once it has loaded: the follower f, waiting on the
# empty queue, does the rest and takes l's claimed job after --claim-idle.
# Thawed, l finds its job done by f (nothing recorded twice) and exits 0.
serve_start follow --log "$T/follow.log"
"$S" batch --queue "$R/follow" --worker f -j 5 --rate 0 --follow --claim-idle 1s \
  --progress none -q >/dev/null 2>"$T/f.err" &
PF=$!
for i in $(seq 50); do echo "$URL/f/$i"; done >"$T/f.txt"
"$S" batch --queue "$R/follow" --worker l -j 1 --limiter "$R/lkey" --rate 1 --burst 1 \
  --progress none --log "$T/l.jsonl" "$T/f.txt" >/dev/null 2>"$T/l.err" &
PL=$!
wait_grep "$T/l.err" "jobs loaded into queue"
kill -STOP "$PL"
for _ in $(seq 1200); do
  [ "$(redis-cli -p "$RPORT" HGET 'stagger:q:{follow}:counts' done)" = 50 ] && break
  sleep 0.05
done
kill -CONT "$PL"
rc=0; wait "$PL" || rc=$?
check "the thawed loader ends with exit 0: $rc" [ "$rc" = 0 ]
check "the follower is still there" kill -0 "$PF"
jcheck "the follower did the jobs loaded after it started, each once" \
  "$("$S" batch report --queue "$R/follow" --json)" \
  'j["states"]["done"] == 50 and sum(w["done"] for w in j["workers"]) == 50 and [w for w in j["workers"] if w["name"] == "f"][0]["done"] >= 45'
kill -TERM "$PF"
rc=0; wait "$PF" || rc=$?
check "SIGTERM ends the follower with 143: $rc" [ "$rc" = 143 ]
serve_stop "$SRV_PID" || true
# f sends each job at most once, so the server answers at most 50 plus what
# l sent: one job a second until its freeze (two when a busy machine is slow
# to stop it), each answered twice at most if f took it over.
lsent=$(grep -c '"event":"attempt_start"' "$T/l.jsonl" || true)
check "the server answered 50 jobs, and again only jobs l sent ($lsent)" \
  [ "$(grep -c '"/f/' "$T/follow.log")" -le $((50 + lsent)) ]

# ---- a worker's run is a database run's (batch_run_with): --metrics, --log - -------
serve_start met --log "$T/met.log"
for i in 1 2 3 4 5; do echo "$URL/m/$i"; done >"$T/m.txt"
rc=0
(cd "$T" && "$S" batch --queue "$R/met" --worker m -j 2 --rate 0 --progress none \
  --metrics "$T/m.prom" --log - "$T/m.txt" >"$T/m.out" 2>"$T/m.err") || rc=$?
check "a worker with --metrics and --log - ends 0: $rc $(cat "$T/m.err")" [ "$rc" = 0 ]
check "  its metrics file counts the queue's jobs by state" \
  grep -q '^stagger_batch_jobs{state="done"} 5$' "$T/m.prom"
check "  and its attempts" grep -q '^stagger_attempts_total' "$T/m.prom"
check "  --log -: the events on stdout, before the report" \
  sh -c 'grep -q "\"event\":\"attempt_start\"" "$1" && grep -q "^queue .*: 5 jobs" "$1"' _ "$T/m.out"
check "  and no file named -" [ ! -e "$T/-" ]

# ---- --out DIR: bodies on the worker, their path in the queue ---------------------
serve_start out --log "$T/out.log"
for i in 1 2 3; do echo "$URL/o/$i"; done >"$T/o.txt"
rc=0
"$S" batch --queue "$R/out" --worker o -j 2 --rate 0 --out "$T/bodies" --progress none -q \
  "$T/o.txt" >/dev/null 2>"$T/o.err" || rc=$?
check "a run with --out ends 0: $rc $(cat "$T/o.err")" [ "$rc" = 0 ]
"$S" batch export --queue "$R/out" >"$T/o.jsonl"
check "each body is a file on the worker, its path recorded" python3 - "$T/o.jsonl" "$T/bodies" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
d = os.path.realpath(sys.argv[2])
ok = all(r["file"] and os.path.dirname(r["file"]) == d and os.path.getsize(r["file"]) > 0
         and "body" not in r for r in rows)
sys.exit(0 if len(rows) == 3 and ok else 1)
PY
"$S" batch export --queue "$R/out" --format json >"$T/o.json"
check "export --format json: one JSON array of the same rows, duration_ms and attempts in each" \
  python3 - "$T/o.json" "$T/o.jsonl" <<'PY'
import json, sys
arr = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
ok = isinstance(arr, list) and arr == lines and all("duration_ms" in r and "attempts" in r for r in arr)
sys.exit(0 if ok else 1)
PY
serve_stop "$SRV_PID" || true

# ---- refusals ------------------------------------------------------------------------------
echo "http://127.0.0.1:9/x?api_key=hunter2" >"$T/secret.txt"
expect_exit "a URL with a secret is refused" 5 "$S" batch --queue "$R/sec" "$T/secret.txt"
check "the message says why, without the secret" \
  sh -c "grep -q 'carries a secret' /tmp/stg_err.$$ && ! grep -q hunter2 /tmp/stg_err.$$"
printf '{"id":"a","url":"http://127.0.0.1:9/a","headers":{"Authorization":"Bearer tok123"}}\n' \
  >"$T/secret.jsonl"
expect_exit "a secret header is refused" 5 "$S" batch --queue "$R/sec" "$T/secret.jsonl"
check "nothing of them reached Redis" [ "$(redis-cli -p "$RPORT" EXISTS 'stagger:q:{sec}:jobs' 'stagger:q:{sec}:meta')" = 0 ]
check "no key of that queue at all" [ -z "$(redis-cli -p "$RPORT" --scan --pattern 'stagger:q:{sec}*')" ]
seq 1 25 >"$T/nums.txt"
expect_exit "a file of numbers, no --url: exit 5, as for a database" 5 \
  "$S" batch --queue "$R/nums" "$T/nums.txt"
check "  the same hint as a database's load (did you forget --url TEMPLATE?)" \
  grep -q "look like keys, not URLs: did you forget --url TEMPLATE?" /tmp/stg_err.$$
check "  and no screenful of 'no URL' lines ($(grep -c "no URL" /tmp/stg_err.$$))" \
  [ "$(grep -c "no URL" /tmp/stg_err.$$)" -le 3 ]
check "  and nothing loaded" [ -z "$(redis-cli -p "$RPORT" --scan --pattern 'stagger:q:{nums}*')" ]
echo "http://127.0.0.1:9/other" >"$T/other.txt"
expect_exit "another input under the same name is refused (exit 4)" 4 \
  "$S" batch --queue "$R/drain" "$T/other.txt"
check "the message says another job set" grep -q "another job set" /tmp/stg_err.$$
expect_exit "a worker of a queue that holds nothing: exit 2" 2 "$S" batch --queue "$R/none"
check "a worker that only looked left no key behind" [ -z "$(redis-cli -p "$RPORT" --scan --pattern 'stagger:q:{none}*')" ]
expect_exit "report on no queue: exit 2" 2 "$S" batch report --queue "$R/none"
expect_exit "report --queue --html: a usage error, not silently left out" 2 \
  "$S" batch report --queue "$R/drain" --html "$T/q.html"
check "  and no file written" [ ! -e "$T/q.html" ]
expect_exit "report --queue --bad-lines: a usage error too" 2 \
  "$S" batch report --queue "$R/drain" --bad-lines
DEAD=$(free_port)
expect_exit "Redis unreachable at start: exit 6" 6 \
  "$S" batch --queue "redis://:pw-hunter3@127.0.0.1:$DEAD/q" "$T/d.txt"
check "the password is in no message" sh -c "! grep -q pw-hunter3 /tmp/stg_err.$$"
expect_exit "--dry-run with --queue reads the input alone: exit 0" 0 \
  "$S" batch --queue "$R/dry" --dry-run "$T/d.txt"
check "it says what it would run" grep -q "dry run: .* nothing sent" /tmp/stg_out.$$
check "and loads nothing into Redis" [ -z "$(redis-cli -p "$RPORT" --scan --pattern 'stagger:q:{dry}*')" ]
expect_exit "--queue without a NAME is a usage error" 2 "$S" batch --queue "$R"
expect_exit "--queue with --db is a usage error" 2 "$S" batch --queue "$R/q" --db "$T/x.db"
expect_exit "--follow without --queue is a usage error" 2 "$S" batch --follow "$T/d.txt"
expect_exit "--retry-review with --queue is a usage error" 2 "$S" batch --queue "$R/q" --retry-review
finish

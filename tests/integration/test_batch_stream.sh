# The streamed input (src/store/import.c): a run keeps of its input only the
# secret parts of the jobs that need them, matched by id. A run killed with
# every job in flight is resumed from a reformatted copy of its input
# (comments and blank lines moved, a repeated id added: the same job set),
# from a file and from stdin; each job's request carries its secret URL or
# header and its non-secret headers. An input refused for itself (no jobs)
# leaves no database behind.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_stream
PIDS=""
start_server() { serve_start "$@"; PIDS="${PIDS:-} $SRV_PID"; }
. "$(dirname "$0")/batch_lib.sh"

# ---- no jobs: exit 5, no database left ------------------------------------------
printf '# nothing here\n\n' >"$T/empty.txt"
expect_exit "an input without jobs: exit 5" 5 "$S" batch -q --db "$T/empty.db" "$T/empty.txt"
check "says so" grep -q "empty.txt: no jobs in the input" /tmp/stg_err.$$
check "no database left" test ! -e "$T/empty.db"

# ---- every job in flight, kill -9, resume from a reformatted input ---------------
start_server hang --hang-prob 1
H=$PORT
HANG_PID=$SRV_PID
cat >"$T/a.jsonl" <<JSONL
{"id": "u", "url": "http://127.0.0.1:$H/echo?api_key=PLANTED_URL", "headers": {"X-Trace": "trace-u"}}
{"id": "plain", "url": "http://127.0.0.1:$H/echo", "headers": {"X-Trace": "trace-plain"}}
{"id": "hd", "url": "http://127.0.0.1:$H/echo", "headers": {"Authorization": "Bearer PLANTED_HDR", "X-Trace": "trace-hd"}}
JSONL
# The same job set: moved comments, blank lines, a repeated id (skipped).
cat >"$T/b.jsonl" <<JSONL
# resumed
{"id": "u", "url": "http://127.0.0.1:$H/echo?api_key=PLANTED_URL", "headers": {"X-Trace": "trace-u"}}

{"id": "u", "url": "http://127.0.0.1:$H/other"}
{"id": "plain", "url": "http://127.0.0.1:$H/echo", "headers": {"X-Trace": "trace-plain"}}
# and
{"id": "hd", "url": "http://127.0.0.1:$H/echo", "headers": {"Authorization": "Bearer PLANTED_HDR", "X-Trace": "trace-hd"}}
JSONL

run_killed() { # DB: a run with every job in flight, killed
  set +e
  "$S" batch -q --db "$1" "$T/a.jsonl" &
  pid=$!
  wait_db "$1" "SELECT count(*) = 3 FROM jobs WHERE state = 'inflight'" || true
  kill -9 "$pid"
  { wait "$pid"; } 2>/dev/null
  set -e
}
run_killed "$T/f.db"
run_killed "$T/s.db"
check "nothing ran" wait_db "$T/f.db" "SELECT count(*) = 3 FROM jobs WHERE state = 'inflight'"
kill "$HANG_PID"; wait "$HANG_PID" 2>/dev/null || true
SRV_PORT=$H start_server norm

expect_exit "resume from the reformatted file" 0 "$S" batch -q --db "$T/f.db" --out "$T/f" "$T/b.jsonl"
check "the repeat is reported" grep -q "b.jsonl:4: repeated id (first on line 2); skipped" /tmp/stg_err.$$
expect_exit "resume from stdin" 0 sh -c "'$S' batch -q --db '$T/s.db' --out '$T/s' - <'$T/b.jsonl'"
for d in f s; do
  check "$d: u carried its secret query" grep -q "PLANTED_URL" "$T/$d/u"
  check "$d: u carried its header" grep -q "trace-u" "$T/$d/u"
  check "$d: hd carried its secret header" grep -q "Bearer PLANTED_HDR" "$T/$d/hd"
  check "$d: hd carried its other header" grep -q "trace-hd" "$T/$d/hd"
  check "$d: plain as stored" grep -q "trace-plain" "$T/$d/plain"
  check "$d: hd sent no secret query" sh -c "! grep -q PLANTED_URL '$T/$d/hd'"
done
check "the database holds no secret" sh -c "! grep -a -q PLANTED '$T/f.db' '$T/s.db'"
finish

# Redaction: secrets planted in a URL query, URL userinfo, JSONL headers, a
# URL template and -H never reach the database (main file, -wal, -shm), the
# reports, the exports, the event log or the run's output; they are still
# sent (the /echo answers show them), also after a kill -9 and a resume,
# which takes them from the input again.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_sec
PIDS=""
mkdir "$T/in" "$T/out" "$T/state"

# start_server NAME [ARGS...]: sets PORT and SRV_PID (serve_lib.sh).
start_server() { serve_start "$@"; PIDS="${PIDS:-} $SRV_PID"; }
. "$(dirname "$0")/batch_lib.sh"
# no_secret NAME FILE...: none of the files holds "PLANTED".
no_secret() {
  name=$1; shift
  TESTS_RUN=$((TESTS_RUN + 1))
  if grep -l -a PLANTED "$@" 2>/dev/null; then fail "$name: a planted secret is in the file(s) above"; fi
}

start_server main
M=$PORT
cat >"$T/in/s.jsonl" <<JSONL
{"id": "h", "url": "http://127.0.0.1:$M/h", "headers": {"Authorization": "Bearer PLANTED_JSONL_AUTH", "Accept": "application/json"}}
{"id": "q", "url": "http://127.0.0.1:$M/q?id=7&api_key=PLANTED_QUERY"}
{"id": "u", "url": "http://alice:PLANTED_USERINFO@127.0.0.1:$M/u"}
{"id": "c", "url": "http://127.0.0.1:$M/c", "headers": ["Cookie: session=PLANTED_COOKIE", "X-Api-Key: PLANTED_APIKEY"]}
{"id": "e", "url": "http://127.0.0.1:$M/echo?token=PLANTED_ECHO_QUERY", "headers": {"X-Auth-Token": "PLANTED_ECHO_HEADER"}}
{"id": "f", "url": "http://127.0.0.1:$M/status/404?secret=PLANTED_FAILED"}
JSONL
expect_exit "jsonl with secrets: exit 1 (one 404)" 1 "$S" batch --db "$T/state/s.db" --out "$T/out" \
  -H "Authorization: Bearer PLANTED_CLI" --log "$T/state/events.log" --progress lines "$T/in/s.jsonl"
cp /tmp/stg_out.$$ "$T/state/run.out"
cp /tmp/stg_err.$$ "$T/state/run.err"
check "secrets were sent: -H" grep -q "Bearer PLANTED_CLI" "$T/out/e"
check "secrets were sent: JSONL header" grep -q "PLANTED_ECHO_HEADER" "$T/out/e"
check "secrets were sent: query" grep -q "PLANTED_ECHO_QUERY" "$T/out/e"
jcheck "all ran" "$("$S" batch report --db "$T/state/s.db" --json)" 'j["states"]["done"] == 5 and j["states"]["failed"] == 1 and j["needs_input"] == 6'

seq -f 'K%g' 1 5 >"$T/in/keys.txt"
expect_exit "template with a secret query" 0 "$S" batch -q --db "$T/state/t.db" \
  --url "http://127.0.0.1:$M/t/{}?api_key=PLANTED_TEMPLATE" -H "X-Api-Key: PLANTED_CLI2" "$T/in/keys.txt"

for db in s t; do
  "$S" batch report --db "$T/state/$db.db" >"$T/state/$db.report.txt"
  "$S" batch report --db "$T/state/$db.db" --json --bad-lines >"$T/state/$db.report.json"
  "$S" batch export --db "$T/state/$db.db" --bodies >"$T/state/$db.export.jsonl"
  "$S" batch export --db "$T/state/$db.db" --bodies --format csv >"$T/state/$db.export.csv"
done
check "exports show the URL as given, the secret value REDACTED" grep -q '"url":"http://127.0.0.1:'"$M"'/q?id=7&api_key=REDACTED"' "$T/state/s.export.jsonl"
no_secret "database, reports, exports, event log, output" "$T"/state/*

# ---- kill -9 mid-run: the -wal file, then a resume from the input ---------------
start_server hang --hang-prob 1
H=$PORT
HANG_PID=$SRV_PID
cat >"$T/in/h.jsonl" <<JSONL
{"id": "e", "url": "http://127.0.0.1:$H/echo?token=PLANTED_H_QUERY", "headers": {"Authorization": "Bearer PLANTED_H_AUTH"}}
{"id": "p", "url": "http://127.0.0.1:$H/p?sig=PLANTED_H_SIG"}
JSONL
set +e
"$S" batch -q --db "$T/state/h.db" --out "$T/out2" "$T/in/h.jsonl" &
pid=$!
wait_db "$T/state/h.db" "SELECT count(*) = 2 FROM jobs WHERE state = 'inflight'" || true
sleep 0.2
kill -9 "$pid"
{ wait "$pid"; } 2>/dev/null
set -e
check "a -wal file was left" test -s "$T/state/h.db-wal"
no_secret "database and -wal after kill -9" "$T/state/h.db" "$T/state/h.db-wal" "$T/state/h.db-shm"
expect_exit "resume without the input: refused (exit 2)" 2 "$S" batch -q --db "$T/state/h.db"
check "says why" grep -q "carry secrets that are not kept in the database; give their input file again" /tmp/stg_err.$$
kill "$HANG_PID"; wait "$HANG_PID" 2>/dev/null || true
SRV_PORT=$H start_server norm
expect_exit "resume with the input" 0 "$S" batch -q --db "$T/state/h.db" --out "$T/out2" "$T/in/h.jsonl"
check "resumed request carried the secret header again" grep -q "Bearer PLANTED_H_AUTH" "$T/out2/e"
check "and the secret query" grep -q "PLANTED_H_QUERY" "$T/out2/e"
"$S" batch export --db "$T/state/h.db" --bodies >"$T/state/h.export.jsonl"
no_secret "after the resume" "$T"/state/*

finish

#!/usr/bin/env bash
# stagger batch, issue #37 (the first hour): what a new user meets.
#  1. A host that keeps failing (a closed port): one early stderr line says
#     what, where and what stagger does (breaker open, next try); the report
#     counts every job (never-tried ones as 0 attempts) and says why the
#     jobs are not done.
#  2. A CSV batch does what it shows: -H values filled per row (an
#     Idempotency-Key per row is not "reused"), --json-body sends JSON,
#     --idempotency-key auto|TEMPLATE, --dry-run prints the body redacted.
#  4. Query values, one rule (secret names hidden, the rest shown) in the
#     --log, export and --dry-run.
#  5. An input that grew by a line says "the input changed (5 → 6 jobs)".
#  3. A file of numbers without --url: "looks like keys: did you forget
#     --url TEMPLATE?", and no hint that points at a database never written.
# Counts and words only: the short --breaker-open/--deadline just keep it
# short.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch bux


# ---- 1. a closed port --------------------------------------------------------------
DEAD=$(free_port)
seq 1 50 >"$T/k50.txt"
expect_exit "closed port: exit 3 (jobs deferred)" 3 "$S" batch --url "http://127.0.0.1:$DEAD/{}" \
  --db "$T/dead.db" --breaker-open 1s --deadline 3s --progress lines "$T/k50.txt"
cp /tmp/stg_err.$$ "$T/dead.err"; cp /tmp/stg_out.$$ "$T/dead.out"
n=$(grep -c "keeps failing" "$T/dead.err" || true)
check "closed port: one line says so (got $n)" [ "$n" = 1 ]
line=$(grep "keeps failing" "$T/dead.err" || true)
check "  it names the host, the error and the breaker ('$line')" sh -c \
  'case "$1" in *"127.0.0.1:'"$DEAD"' keeps failing (connection refused"*"circuit breaker is open, next try in"*) exit 0;; *) exit 1;; esac' _ "$line"
first=$(grep -n "keeps failing" "$T/dead.err" | cut -d: -f1 || true)
lastp=$(grep -n "ended (done" "$T/dead.err" | tail -n1 | cut -d: -f1)
check "  before the last progress line ($first < $lastp)" [ "${first:-99999}" -lt "${lastp:-0}" ]
jcheck "report: every job in attempts_histogram, the never tried as 0" \
  "$("$S" batch report --json --db "$T/dead.db")" \
  'sum(j["attempts_histogram"].values()) == 50 and j["attempts_histogram"].get("0", 0) > 0'
check "report: attempts per job starts at 0" grep -q "^attempts per job:  0: [0-9]" "$T/dead.out"
check "report: why not done names the error" grep -q "^not done, why: .*connect_refused" "$T/dead.out"

# ---- 2. CSV: per-row headers, a JSON body, idempotency keys, --dry-run ----------------
printf 'id,name,token\n1,Ann,s3cr3t\n2,"Bo ""B""",t2\n3,Cy,t3\n' >"$T/items.csv"
serve_start echo
mkdir -p "$T/out"
expect_exit "CSV with -H {id}, --json-body: exit 0" 0 "$S" batch -q --db "$T/csv.db" --out "$T/out" \
  --url "http://127.0.0.1:$PORT/echo?row={id}" --json-body '{"name": "{name}", "n": {id}}' \
  -H 'X-Row: r{id}' -H 'X-Fixed: same' "$T/items.csv"
check "the server saw each row's own header, JSON and its body" python3 -c '
import json, sys
d = sys.argv[1]
want = {"1": "Ann", "2": "Bo \"B\"", "3": "Cy"}
for k, name in want.items():
    e = json.load(open(d + "/" + k))
    h = {a.lower(): b for a, b in e["headers"].items()}
    assert h["x-row"] == "r" + k, h
    assert h["x-fixed"] == "same", h
    assert h["content-type"] == "application/json", h
    b = json.loads(e["body"])
    assert b == {"name": name, "n": int(k)}, b
' "$T/out"

# a secret per row (-H 'Authorization: Bearer {token}'): sent, never stored
mkdir -p "$T/out2"
expect_exit "-H 'Authorization: Bearer {token}': exit 0" 0 "$S" batch -q --db "$T/sec.db" \
  --out "$T/out2" --url "http://127.0.0.1:$PORT/echo?row={id}" -H 'Authorization: Bearer {token}' \
  "$T/items.csv"
check "  each row's token sent" python3 -c '
import json, sys
e = json.load(open(sys.argv[1] + "/2"))
assert {k.lower(): v for k, v in e["headers"].items()}["authorization"] == "Bearer t2", e' "$T/out2"
check "  no token in the database" sh -c '! grep -q "s3cr3t\|Bearer t2" "$1"' _ "$T/sec.db"

# an Idempotency-Key per row: serve refuses a key reused with another body (422)
serve_start idem
expect_exit "-H 'Idempotency-Key: order-{id}': every row done (exit 0)" 0 "$S" batch -q \
  --db "$T/idem.db" --url "http://127.0.0.1:$PORT/orders/{id}" -d 'name={name}' \
  -H 'Idempotency-Key: order-{id}' "$T/items.csv"
jcheck "  3 done, none failed" "$("$S" batch report --json --db "$T/idem.db")" \
  'j["states"]["done"] == 3 and j["states"]["failed"] == 0'
expect_exit "--idempotency-key 'o-{id}': every row done" 0 "$S" batch -q \
  --db "$T/idem2.db" --url "http://127.0.0.1:$PORT/orders2/{id}" -d 'name={name}' \
  --idempotency-key 'o-{id}' "$T/items.csv"
expect_exit "--idempotency-key auto on keys: exit 0" 0 "$S" batch -q -X POST \
  --db "$T/idem3.db" --url "http://127.0.0.1:$PORT/k/{}" --idempotency-key auto "$T/k50.txt"
check "  auto keys are distinct and kept in the database" python3 -c '
import sqlite3, sys
ks = [r[0] for r in sqlite3.connect(sys.argv[1]).execute("select idempotency_key from jobs")]
assert len(ks) == 50 and len(set(ks)) == 50 and all(k.startswith("stg-") for k in ks), ks[:3]
' "$T/idem3.db"
expect_exit "--idempotency-key with a column that does not exist: usage" 2 "$S" batch \
  --dry-run --url "http://x.invalid/{id}" -d 'a' --idempotency-key 'o-{idd}' "$T/items.csv"
check "  says which" grep -q "idempotency-key names {idd}" /tmp/stg_err.$$

expect_exit "--dry-run: exit 0" 0 "$S" batch --dry-run --url "http://127.0.0.1:9/i/{id}" \
  --json-body '{"name": "{name}", "api_token": "{token}"}' -H 'X-Row: r{id}' \
  -H 'Authorization: Bearer sk-live' --idempotency-key 'o-{id}' "$T/items.csv"
cp /tmp/stg_out.$$ "$T/dry.out"
check "  the body shown, the secret member hidden" grep -qF 'body: {"name":"Ann","api_token":"REDACTED"}' "$T/dry.out"
check "  the row's header and key shown" sh -c 'grep -q "X-Row: r2" "$1" && grep -q "Idempotency-Key: o-3" "$1"' _ "$T/dry.out"
check "  no secret printed" sh -c '! grep -q "s3cr3t\|sk-live" "$1"' _ "$T/dry.out"
expect_exit "-d with a JSON-looking body: a note" 0 "$S" batch --dry-run \
  --url "http://127.0.0.1:9/i/{id}" -d '{"name": "{name}"}' "$T/items.csv"
check "  the note names --json-body" grep -q "form-encoded.*--json-body" /tmp/stg_err.$$
check "  the -d body printed as is" grep -qF 'body: {"name": "Ann"}' /tmp/stg_out.$$

# ---- 3. keys without --url -------------------------------------------------------------
seq 1 25 >"$T/nums.txt"
expect_exit "a file of numbers, no --url: exit 5" 5 "$S" batch --db "$T/nums.db" "$T/nums.txt"
cp /tmp/stg_err.$$ "$T/nums.err"
check "  'did you forget --url TEMPLATE?'" grep -q "look like keys, not URLs: did you forget --url TEMPLATE?" "$T/nums.err"
n=$(grep -c "no URL" "$T/nums.err" || true)
check "  not 20 'no URL' lines ($n)" [ "$n" -le 3 ]
check "  no database, and no hint that reads one" sh -c '! [ -e "$1" ] && ! grep -q "batch report" "$2"' _ "$T/nums.db" "$T/nums.err"
# with jobs among the bad lines the database is written: the hint names it
( seq 1 25; echo "http://127.0.0.1:$PORT/x" ) >"$T/mixed.txt"
expect_exit "keys and a URL: exit 0" 0 "$S" batch -q --db "$T/mixed.db" "$T/mixed.txt"
check "  the hint names the database that holds the bad lines" grep -q "batch report --db $T/mixed.db --bad-lines" /tmp/stg_err.$$

# ---- 4. query values: one rule ---------------------------------------------------------
echo "http://127.0.0.1:$PORT/q?page=2&limit=50&api_key=QSECRET" >"$T/q.txt"
expect_exit "a URL with a secret query value: exit 0" 0 "$S" batch -q --db "$T/q.db" \
  --log "$T/q.jsonl" "$T/q.txt"
check "--log: page and limit shown, api_key hidden" \
  grep -q '"url":"http://127.0.0.1:'"$PORT"'/q?page=2&limit=50&api_key=REDACTED"' "$T/q.jsonl"
"$S" batch export --db "$T/q.db" >"$T/q.export"
check "export: the same" grep -q '/q?page=2&limit=50&api_key=REDACTED"' "$T/q.export"
"$S" batch --dry-run "$T/q.txt" >"$T/q.dry" 2>&1
check "--dry-run: the same" grep -q '/q?page=2&limit=50&api_key=REDACTED ' "$T/q.dry"
check "no secret anywhere" sh -c '! grep -q QSECRET "$1" "$2" "$3"' _ "$T/q.jsonl" "$T/q.export" "$T/q.dry"

# ---- 5. the input changed ------------------------------------------------------------
for i in 1 2 3 4 5; do echo "http://127.0.0.1:$PORT/c/$i"; done >"$T/c.txt"
expect_exit "5 jobs: exit 0" 0 "$S" batch -q --db "$T/c.db" "$T/c.txt"
echo "http://127.0.0.1:$PORT/c/6" >>"$T/c.txt"
expect_exit "one line appended: the database is refused (exit 4)" 4 "$S" batch -q --db "$T/c.db" "$T/c.txt"
check "  'the input changed ... (5 → 6 jobs'" grep -q "the input changed since this database was made from it (5 → 6 jobs" /tmp/stg_err.$$
printf 'http://127.0.0.1:%s/d/1\n' "$PORT" >"$T/d.txt"
expect_exit "another file: exit 4" 4 "$S" batch -q --db "$T/c.db" "$T/d.txt"
check "  'belongs to another job set'" grep -q "belongs to another job set (5 jobs from" /tmp/stg_err.$$

finish

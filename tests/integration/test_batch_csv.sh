# `stagger batch` with CSV and TSV input against `stagger serve`'s /echo:
# quoted fields, embedded commas, quotes and newlines reach the server as
# the values they are (percent-decoded in the query, as is in the body);
# --dry-run sends nothing and writes nothing; report's new sections; and the
# exports loaded by Python's json and csv modules: JSON one array, per-job
# duration and attempts, the URL as given minus userinfo and secret values.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_csv
SRV_PIDS=""

serve_start main --log "$T/main.log"
M=$PORT
python3 - "$T/items.csv" <<'EOF'
import csv, sys
rows = [["id", "page", "name", "key"],
        ["a1", "1", "plain", "k1"],
        ["a2", "2", "with, comma", "k2"],
        ["a3", "3", 'quote "q" and\nnewline', "k3"],
        ["a4", "4", "é ünïcode / slash", "k4"]]
with open(sys.argv[1], "w", newline="") as f:
    csv.writer(f).writerows(rows)
    f.write('a5,5,bad"quote,k5\r\n')   # a stray quote: a bad line (line 7)
    f.write("a6,6\r\n")                 # two fields: a bad line (line 8)
EOF
TPL="http://u:pw@127.0.0.1:$M/echo?page={page}&name={name}&api_key={key}"
BODY='{"id": "{id}", "name": "{name}"}'

# ---- --dry-run: the requests it would send, nothing sent or written ---------
expect_exit "dry run: exit 0" 0 "$S" batch --dry-run --url "$TPL" -d "$BODY" \
  -H "Authorization: Bearer S3CRET" "$T/items.csv"
cp /tmp/stg_out.$$ "$T/dry.out"; cp /tmp/stg_err.$$ "$T/dry.err"
check "dry run: the first request, POST with the query filled" \
  grep -qF "POST http://127.0.0.1:$M/echo?page=1&name=plain&api_key=REDACTED  (id a1, line 2)" "$T/dry.out"
check "dry run: values percent-encoded" grep -qF "name=with%2C%20comma" "$T/dry.out"
check "dry run: the header redacted" grep -qF "Authorization: REDACTED" "$T/dry.out"
check "dry run: no secret anywhere" sh -c '! grep -q "S3CRET\|pw@\|k1\|k2" "$1" "$2"' _ "$T/dry.out" "$T/dry.err"
check "dry run: the count" grep -qF "dry run: 4 jobs, 2 bad lines" "$T/dry.out"
check "dry run: bad lines named" grep -qF "items.csv:7: bad CSV" "$T/dry.err"
check "dry run: nothing sent" test ! -s "$T/main.log"
check "dry run: no database" test ! -e "$T/items.csv.stagger.db"
expect_exit "a placeholder naming no column: exit 2" 2 "$S" batch --dry-run \
  --url "http://127.0.0.1:$M/echo?p={pgae}" "$T/items.csv"
check "says which and lists the columns" grep -qF "{pgae}, which is not a column of the header (id, page, name, key)" /tmp/stg_err.$$
expect_exit "CSV without --url: exit 2" 2 "$S" batch "$T/items.csv"
# a bad line before the header: the header is read later, and still checked
printf 'a"b\nid,x\n1,2\n' >"$T/late.csv"
expect_exit "a late header that the template does not fit: exit 2" 2 "$S" batch -q \
  --url "http://127.0.0.1:$M/{nope}" "$T/late.csv"
check "late header: says which" grep -qF "{nope}, which is not a column of the header (id, x)" /tmp/stg_err.$$
check "late header: no database left" test ! -e "$T/late.csv.stagger.db"

# ---- the run: values reach the server as they are ----------------------------
expect_exit "csv run: exit 0" 0 "$S" batch -q --url "$TPL" -d "$BODY" "$T/items.csv"
check "default db per input" test -f "$T/items.csv.stagger.db"
"$S" batch export "$T/items.csv" --bodies --format json -o "$T/x.json"
check "export json: one array, loaded by json" python3 - "$T/x.json" "$M" <<'EOF'
import json, sys, urllib.parse
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and len(rows) == 4, rows
by = {r["id"]: r for r in rows}
want = {"a1": "plain", "a2": "with, comma", "a3": 'quote "q" and\nnewline', "a4": "é ünïcode / slash"}
for k, name in want.items():
    r = by[k]
    echo = json.loads(r["body"])
    assert echo["method"] == "POST", echo
    assert echo["query"]["name"] == name, (echo["query"], name)
    assert echo["query"]["api_key"] == "k" + k[1], echo["query"]
    # the body template takes each value as is (no JSON escaping: -d is text)
    assert echo["body"] == '{"id": "%s", "name": "%s"}' % (k, name), echo["body"]
    assert r["attempts"] == 1 and isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0, r
    # the URL as given: no userinfo, the secret value REDACTED, the rest kept
    u = urllib.parse.urlsplit(r["url"])
    q = urllib.parse.parse_qs(u.query)
    assert u.netloc == "127.0.0.1:" + sys.argv[2] and "pw" not in r["url"], r["url"]
    assert q["api_key"] == ["REDACTED"] and q["name"] == [name] and q["page"] == [k[1]], q
EOF
"$S" batch export --db "$T/items.csv.stagger.db" --format csv -o "$T/x.csv"
check "export csv: loaded by csv, the same rows" python3 - "$T/x.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 4 and [r["id"] for r in rows] == ["a1", "a2", "a3", "a4"], rows
for r in rows:
    assert r["state"] == "done" and r["attempts"] == "1" and int(r["duration_ms"]) >= 0, r
    assert "REDACTED" in r["url"] and "pw@" not in r["url"], r["url"]
assert "with%2C%20comma" in rows[1]["url"], rows[1]["url"]
EOF
"$S" batch export "$T/items.csv" >"$T/x.jsonl"
check "export jsonl: still a line per job" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4 and all("duration_ms" in r for r in rows)' "$T/x.jsonl"
check "no secret in the database" sh -c '! grep -a -q "pw@\|api_key=k" "$1"' _ "$T/items.csv.stagger.db"

# ---- report: percentiles, status codes, attempts, waiting ---------------------
j=$("$S" batch report --json "$T/items.csv")
jcheck "report json: new sections" "$j" \
  'j["attempts_histogram"] == {"1": 4} and j["status_codes"] == {"200": 4} and j["duration_ms"]["jobs"] == 4 and j["duration_ms"]["p50"] <= j["duration_ms"]["p90"] <= j["duration_ms"]["p99"] <= j["duration_ms"]["max"] and j["waiting"]["retry_ms"] == 0'
"$S" batch report "$T/items.csv" >"$T/rep.txt"
check "report text: job duration percentiles" grep -q "job duration (last run, waits included): p50 " "$T/rep.txt"
check "report text: last status" grep -q "last status:  200: 4" "$T/rep.txt"
check "report text: time lost waiting" grep -q "time lost waiting" "$T/rep.txt"

# ---- TSV: tabs, no quoting; waits recorded with a limit ------------------------
printf 'id\tv\nt1\t"as is"\nt2\tx,y\n' >"$T/t.tsv"
expect_exit "tsv run: exit 0" 0 "$S" batch -q --rate 1 --url "http://127.0.0.1:$M/echo?v={v}" "$T/t.tsv"
"$S" batch export "$T/t.tsv" --bodies --format json -o "$T/t.json"
check "tsv: quotes and commas are data" python3 -c '
import json, sys
by = {r["id"]: json.loads(r["body"]) for r in json.load(open(sys.argv[1]))}
assert by["t1"]["query"]["v"] == "\"as is\"" and by["t2"]["query"]["v"] == "x,y", by' "$T/t.json"
# two jobs at --rate 1 (burst 1): the second waited for the bucket, about 1 s
j=$("$S" batch report --json "$T/t.tsv")
jcheck "tsv: the limiter wait is counted" "$j" 'j["waiting"]["limiter_ms"] >= 500'

serve_stop "$SRV_PID" || true
finish

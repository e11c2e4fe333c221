#!/usr/bin/env bash
# stagger batch, issue #31: a POST job without an idempotency key that
# meets a 429 or a 529 overloaded_error is retried (a refusal: the server
# did no work) and ends done; with --no-retry-refusals it is not, and is
# deferred; the per-attempt times are batch flags too (--first-byte-timeout
# ends a job whose server never answers, as a timeout). Counts and states
# only; the 1 s first-byte time just keeps the test short.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch btr
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

py_upstream test_llm_upstream.py
count() { curl -s "$UP/count?key=$1"; }
# pyexport NAME DB PYTHON_EXPR: by = {id: row} of the JSONL export.
pyexport() {
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! "$S" batch export --db "$2" | python3 -c '
import json, sys
by = {r["id"]: r for r in (json.loads(l) for l in sys.stdin if l.strip())}
sys.exit(0 if eval(sys.argv[1]) else 1)' "$3"; then
    fail "$1: $3 ($("$S" batch export --db "$2" | tr '\n' ' '))"
  fi
}

cat > "$T/on.jsonl" <<EOF
{"id": "r429", "method": "POST", "url": "$UP/refuse?key=a&code=429&n=1&retry_after=0", "body": {"model": "m"}}
{"id": "r529", "method": "POST", "url": "$UP/refuse?key=b&code=529&n=2", "body": {"model": "m"}}
EOF
expect_exit "refusals retried for POST: exit 0" 0 "$S" batch -q --rate 0 --base 20ms \
  --throttle-base 50ms --db "$T/on.db" "$T/on.jsonl"
pyexport "both done" "$T/on.db" 'by["r429"]["state"] == "done" and by["r529"]["state"] == "done"'
check "  the 429 one sent twice (got $(count a))" [ "$(count a)" = 2 ]
check "  the 529 one three times (got $(count b))" [ "$(count b)" = 3 ]

cat > "$T/off.jsonl" <<EOF
{"id": "r429", "method": "POST", "url": "$UP/refuse?key=c&code=429&n=1&retry_after=0", "body": {"model": "m"}}
EOF
expect_exit "--no-retry-refusals: deferred, exit 3" 3 "$S" batch -q --rate 0 --base 20ms \
  --no-retry-refusals --db "$T/off.db" "$T/off.jsonl"
pyexport "  deferred with the 429" "$T/off.db" \
  'by["r429"]["state"] == "deferred" and by["r429"]["status"] == 429 and by["r429"]["reason"] == "method_not_idempotent"'
check "  sent once (got $(count c))" [ "$(count c)" = 1 ]

echo "$UP/hang?key=h" > "$T/hang.txt"
expect_exit "--first-byte-timeout 1s: a server that never answers, exit 3" 3 "$S" batch -q \
  --rate 0 --retries 0 --first-byte-timeout 1s --db "$T/hang.db" "$T/hang.txt"
pyexport "  deferred as a timeout" "$T/hang.db" \
  'all(r["state"] == "deferred" and "first-byte timeout" in r["error"] for r in by.values())'
check "  one attempt (got $(count h))" [ "$(count h)" = 1 ]
finish

# `stagger plan`: schedules, decisions, JSON keys and usage errors.
. "$(dirname "$0")/lib.sh"
S=$STAGGER

# Schedule, table form: one row per retry (default 6 attempts = 5 retries).
out=$($S plan)
# Two tables: transient faults, then throttles.
check "table has 5 retry rows per class" [ "$(echo "$out" | grep -cE '^[1-5] ')" = 10 ]
check "table names the policy" sh -c "echo '$out' | grep -q 'full backoff, base 50 ms (transient) / 1000 ms (throttle)'"

# Schedule, JSON: bounds of full jitter, x2, from 50 ms after a transient
# fault and from 1 s after a throttle.
j=$($S plan --json --samples 2000)
jcheck "5 retries" "$j" 'len(j["retries"]) == 5 and len(j["throttle_retries"]) == 5'
jcheck "full jitter bounds" "$j" 'all(r["wait_min_ms"] >= 0 and r["wait_max_ms"] <= 50 * 2 ** (r["retry"] - 1) for r in j["retries"])'
jcheck "median near half the window" "$j" 'all(abs(r["wait_median_ms"] - 25 * 2 ** (r["retry"] - 1)) < 0.1 * 25 * 2 ** (r["retry"] - 1) for r in j["retries"])'
jcheck "throttle: full jitter from 1 s" "$j" 'all(r["wait_max_ms"] <= 1000 * 2 ** (r["retry"] - 1) for r in j["throttle_retries"]) and abs(j["throttle_retries"][0]["wait_median_ms"] - 500) < 50'
jcheck "policy shows both bases" "$j" 'j["policy"]["base_ms"] == 50 and j["policy"]["throttle_base_ms"] == 1000'
jcheck "cumulative grows" "$j" 'all(a["cum_median_ms"] < b["cum_median_ms"] for a, b in zip(j["retries"], j["retries"][1:]))'
jcheck "policy echoed" "$j" 'j["policy"]["backoff"] == "full" and j["policy"]["max_attempts"] == 6 and j["policy"]["retry_on"] == "408,429,500,502-504,529"'
j=$($S plan --base 200ms --throttle-base 2s --cap 4s --backoff exponential --json)
jcheck "--base and --throttle-base" "$j" '[r["wait_max_ms"] for r in j["retries"]][:3] == [200, 400, 800] and [r["wait_max_ms"] for r in j["throttle_retries"]][:3] == [2000, 4000, 4000]'

j=$($S plan --preset bounded --json)
jcheck "bounded: 2 retries" "$j" 'len(j["retries"]) == 2'
jcheck "bounded: +0..20%" "$j" '1000 <= j["retries"][0]["wait_min_ms"] and j["retries"][0]["wait_max_ms"] <= 1200 and 2000 <= j["retries"][1]["wait_min_ms"] and j["retries"][1]["wait_max_ms"] <= 2400'
j=$($S plan --backoff fixed --base 200ms --retries 3 --json)
jcheck "fixed: every wait 200 ms" "$j" 'all(r["wait_min_ms"] == 200 == r["wait_max_ms"] for r in j["retries"]) and len(j["retries"]) == 3'
j=$($S plan --backoff exponential --base 1s --cap 4s --retries 5 --json)
jcheck "exponential capped" "$j" '[r["wait_max_ms"] for r in j["retries"]] == [1000, 2000, 4000, 4000, 4000]'
# Flag order does not matter: --preset is applied first.
a=$($S plan --retries 1 --preset batch --json)
jcheck "preset first" "$a" 'len(j["retries"]) == 1 and j["policy"]["backoff"] == "pct"'
# The deadline cuts schedules short.
j=$($S plan --backoff exponential --base 1s --retries 10 --deadline 10s --json)
jcheck "deadline cuts" "$j" 'max(r["cum_max_ms"] for r in j["retries"]) <= 10000 and len(j["retries"]) < 10'

# Decisions.
j=$($S plan --respond 429 -H 'Retry-After: 5' --json --seed 7)
jcheck "honor range" "$j" 'j["decision"] == "retry" and j["wait_min_ms"] == 5000 and j["wait_max_ms"] == 6000 and 5000 <= j["wait_ms"] <= 6000 and j["server_wait_ms"] == 5000'
jcheck "json keys" "$j" 'all(k in j for k in ("decision","reason","wait_min_ms","wait_max_ms","wait_ms","server_wait_ms","attempt","status","method","retry_after_mode","hints"))'
j2=$($S plan --respond 429 -H 'Retry-After: 5' --json --seed 7)
check "same seed, same wait" [ "$j" = "$j2" ]
j3=$($S plan --respond 429 -H 'Retry-After: 5' --json --seed 8)
check "other seed, other wait" [ "$j" != "$j3" ]
out=$($S plan --respond 429 -H 'Retry-After: 5')
check "honor text" sh -c "echo '$out' | grep -q 'retry in 5000..6000 ms (status 429, server asks 5000 ms, honor mode)'"

for d in 'Sun, 06 Nov 1994 08:49:47 GMT' 'Sunday, 06-Nov-94 08:49:47 GMT' 'Sun Nov  6 08:49:47 1994'; do
  j=$($S plan --respond 503 -H "Retry-After: $d" --now 784111777 --json)
  jcheck "date form '$d'" "$j" 'j["server_wait_ms"] == 10000 and j["wait_ms"] >= 10000'
done
j=$($S plan --respond 503 -H 'Retry-After: Sun, 06 Nov 1994 08:49:30 GMT' --now 784111777 --json)
jcheck "past date is 0" "$j" 'j["server_wait_ms"] == 0 and j["decision"] == "retry"'
j=$($S plan --respond 503 -H 'Retry-After: soon' --json)
jcheck "garbage is no hint" "$j" 'j["server_wait_ms"] is None and j["decision"] == "retry" and j["wait_max_ms"] <= 500'
$S plan --respond 503 -H 'Retry-After: soon' >/dev/null 2>/tmp/plan_err.$$
check "garbage noted on stderr" grep -q "ignored" /tmp/plan_err.$$
rm -f /tmp/plan_err.$$

for st in 400 401 403 404; do
  j=$($S plan --respond $st --json)
  jcheck "$st never retried" "$j" 'j["decision"] == "give_up" and j["reason"] == "status_not_retryable" and j["wait_ms"] == 0'
done
check "404 text" sh -c "$S plan --respond 404 | grep -qx 'give up: status 404 not retryable'"
j=$($S plan --respond 200 --json)
jcheck "200 success" "$j" 'j["decision"] == "success"'
j=$($S plan --respond 503 -X POST --json)
jcheck "POST without key" "$j" 'j["reason"] == "method_not_idempotent"'
j=$($S plan --respond 503 -X POST --idempotency-key --json)
jcheck "POST with key" "$j" 'j["decision"] == "retry"'
j=$($S plan --respond refused -X POST --json)
jcheck "POST never sent" "$j" 'j["decision"] == "retry" and j["error"] == "connect_refused"'
# A refusal is retried for POST without a key, unless --no-retry-refusals.
for st in 429 529; do
  j=$($S plan --respond $st -X POST --json)
  jcheck "POST refused $st: retried" "$j" 'j["decision"] == "retry" and j["refusal"] and j["retry_refusals_any_method"]'
  j=$($S plan --respond $st -X POST --no-retry-refusals --json)
  jcheck "POST refused $st, --no-retry-refusals" "$j" 'j["reason"] == "method_not_idempotent" and j["refusal"] and not j["retry_refusals_any_method"]'
done
j=$($S plan --respond 403 -H 'Retry-After: 1' -X PATCH --json)
jcheck "PATCH refused by a rate-limit 403: retried" "$j" 'j["decision"] == "retry" and j["refusal"]'
j=$($S plan --respond 503 -H 'Retry-After: 1' -X POST --json)
jcheck "a 503 with a hint is no refusal" "$j" 'j["reason"] == "method_not_idempotent" and not j["refusal"]'
check "the text says why a POST is retried" sh -c "$S plan --respond 429 -X POST | grep -q 'a refusal: the server did no work'"
check "and not for a GET" sh -c "! $S plan --respond 429 | grep -q 'a refusal'"
check "the schedule's policy line shows the rule" sh -c "$S plan --samples 10 | grep -q '^refusals (429, 529, a rate-limit 403): retried for any method'"
check "  and its change" sh -c "$S plan --samples 10 --no-retry-refusals | grep -q '^refusals.*retried by method'"
j=$($S plan --samples 10 --json)
jcheck "schedule JSON shows the rule" "$j" 'j["policy"]["retry_refusals_any_method"] is True'
j=$($S plan --respond 429 -H 'Retry-After: 40' --json)
jcheck "too long" "$j" 'j["reason"] == "server_wait_too_long" and j["server_wait_ms"] == 40000'
j=$($S plan --respond 429 -H 'Retry-After: 40' --max-server-wait 1m --json)
jcheck "longer window" "$j" 'j["decision"] == "retry" and j["wait_ms"] >= 40000'
j=$($S plan --respond 429 -H 'Retry-After: 5' --retry-after exact --json)
jcheck "exact" "$j" 'j["wait_ms"] == 5000 == j["wait_min_ms"] == j["wait_max_ms"]'
j=$($S plan --respond 429 -H 'Retry-After: 5' --retry-after cap --json)
jcheck "cap retries early" "$j" 'j["wait_ms"] <= 1000'
j=$($S plan --respond 429 -H 'X-RateLimit-Remaining: 0' -H 'X-RateLimit-Reset: 3' --retry-after exact --json)
jcheck "reset as hint" "$j" 'j["wait_ms"] == 3000 and j["hints"]["remaining"] == 0'
j=$($S plan --respond 503 --attempt 6 --json)
jcheck "attempts exhausted" "$j" 'j["reason"] == "attempts_exhausted"'
j=$($S plan --respond timeout --deadline 10s --elapsed 9800ms --attempt 5 --json)
jcheck "deadline clamps" "$j" 'j["decision"] == "retry" and j["wait_max_ms"] <= 200'
j=$($S plan --respond 503 --deadline 10s --elapsed 10s --json)
jcheck "deadline passed" "$j" 'j["reason"] == "deadline"'

# Server hints II (#15): every quota understood, in text and JSON.
oai="-H x-ratelimit-limit-requests:5000 -H x-ratelimit-remaining-requests:0 -H x-ratelimit-reset-requests:1s -H x-ratelimit-limit-tokens:160000 -H x-ratelimit-remaining-tokens:100 -H x-ratelimit-reset-tokens:6m0s"
# shellcheck disable=SC2086
j=$($S plan --respond 429 $oai --json)
jcheck "openai: two quotas" "$j" 'len(j["hints"]["quotas"]) == 2 and {q["unit"] for q in j["hints"]["quotas"]} == {"requests", "tokens"}'
jcheck "openai: each with its own reset" "$j" '[(q["unit"], q["limit"], q["remaining"], q["reset_ms"], q["dialect"], q["key"]) for q in j["hints"]["quotas"]] == [("requests", 5000, 0, 1000, "openai", ""), ("tokens", 160000, 100, 360000, "openai", "")]'
jcheck "openai: the spent quota's reset is the wait" "$j" 'j["server_wait_ms"] == 1000 and j["decision"] == "retry" and j["wait_ms"] >= 1000'
# shellcheck disable=SC2086
out=$($S plan --respond 429 $oai)
check "openai: text lists the quotas" sh -c "echo '$out' | grep -q 'host (tokens, openai): 100 of 160000 left, reset in 360.00 s'"
j=$($S plan --respond 403 -H 'x-ratelimit-limit: 5000' -H 'x-ratelimit-remaining: 0' -H 'x-ratelimit-reset: 20' -H 'x-ratelimit-resource: core' --json)
jcheck "github: keyed by resource" "$j" 'j["hints"]["quotas"] == [{"key": "core", "unit": "requests", "limit": 5000, "remaining": 0, "reset_ms": 20000, "window_ms": None, "dialect": "github", "global": False}]'
jcheck "github: a spent 403 is a rate limit" "$j" 'j["decision"] == "retry" and j["wait_ms"] >= 20000'
j=$($S plan --respond 403 -H 'x-ratelimit-remaining: 4999' -H 'x-ratelimit-resource: core' --json)
jcheck "github: a plain 403 stays auth" "$j" 'j["reason"] == "status_not_retryable"'
j=$($S plan --respond 429 -H 'RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400' -H 'RateLimit: "daily";r=0;t=20' --max-server-wait 1m --json)
jcheck "ietf: named policies" "$j" '[(q["key"], q["limit"], q["window_ms"], q["remaining"]) for q in j["hints"]["quotas"]] == [("burst", 100, 60000, None), ("daily", 1000, 86400000, 0)] and j["server_wait_ms"] == 20000'
j=$($S plan --respond 429 -H 'X-RateLimit-Global: true' -H 'Retry-After: 3' -H 'X-RateLimit-Bucket: abcd1234' --json)
jcheck "discord: global" "$j" 'j["hints"]["global"] is True and "discord" in j["hints"]["dialects"]'
j=$($S plan --respond 529 --json)
jcheck "529 retried" "$j" 'j["decision"] == "retry"'
j=$($S plan --respond 429 -H 'x-should-retry: false' --json)
jcheck "verdict false stops" "$j" 'j["reason"] == "server_verdict" and j["hints"]["verdict"] == "stop"'
j=$($S plan --respond 400 -H 'Stripe-Should-Retry: true' --json)
jcheck "verdict true retries" "$j" 'j["decision"] == "retry" and j["hints"]["verdict"] == "retry"'
j=$($S plan --respond 429 -H 'Retry-After: 2147483648' --max-server-wait 1000000h --deadline 0s --json)
jcheck "oversized gives up whatever the limits" "$j" 'j["reason"] == "server_wait_too_long" and j["hints"]["oversized"] is True'
$S plan --respond 429 -H 'Retry-After: 2147483648' >/tmp/plan_out.$$ 2>/tmp/plan_err.$$
check "oversized: noted" grep -q "too large: read as the longest wait" /tmp/plan_err.$$
check "oversized: text" grep -q "longer than can be said" /tmp/plan_out.$$
rm -f /tmp/plan_out.$$ /tmp/plan_err.$$
j=$($S plan --respond 503 -H 'Retry-After: 1.5' --retry-after exact --json)
jcheck "decimal Retry-After rounds up" "$j" 'j["wait_ms"] == 2000'
j=$($S plan --respond 503 -H 'Retry-After: Sun, 06 Nov 1994 10:49:47 +0200' --now 784111777 --retry-after exact --json)
jcheck "a zone is applied" "$j" 'j["wait_ms"] == 10000'
j=$($S plan --respond 503 -H 'Retry-After: Sun, 06 Nov 1994 08:49:47 GMT+0100' --now 784111777 --json)
jcheck "an ambiguous date is no hint" "$j" 'j["server_wait_ms"] is None and j["wait_max_ms"] <= 500'

# Usage errors: exit 2, one line.
for args in "--base xyz" "--base -5ms" "--backoff foo" "--retries -1" "--respond 999" \
            "--deadline 5parsecs" "--frobnicate" "-X get --respond 503" "--seed" \
            "--retry-after maybe" "--retry-on 42" "--cap 1ms --base 2s" "--mult 0.5" \
            "--preset nope" "-H NoColon --respond 503" "extra"; do
  expect_exit "usage: $args" 2 $S plan $args
  check "one line: $args" [ "$(wc -l < /tmp/stg_err.$$)" = 1 ]
done
# The parser generated from the option table: the forms every command takes.
same() { # same NAME ARGS_A -- ARGS_B: both give the same output
  name=$1; shift
  a=""; while [ "$1" != -- ]; do a="$a $1"; shift; done; shift
  # shellcheck disable=SC2086
  check "$name" [ "$($S plan $a)" = "$($S plan "$@")" ]
}
same "--preset applies first wherever it is" --retries 2 --preset bounded --json -- \
  --preset bounded --retries 2 --json
check "--preset first: the later --retries is kept" \
  sh -c "$S plan --retries 4 --preset bounded --json | grep -q '\"max_attempts\":5'"
same "--name=value is --name value" --seed=7 --base=250ms --json -- --seed 7 --base 250ms --json
same "-XVALUE is -X VALUE" --respond 503 -XPOST --json -- --respond 503 -X POST --json
same "-X is --request" --respond 503 -X POST --json -- --respond 503 --request POST --json
check "-H is --header" [ "$($S plan --respond 429 -H 'Retry-After: 3' --json)" = \
  "$($S plan --respond 429 --header 'Retry-After: 3' --json)" ]
check "-HVALUE is -H VALUE" [ "$($S plan --respond 429 '-HRetry-After: 3' --json)" = \
  "$($S plan --respond 429 -H 'Retry-After: 3' --json)" ]
expect_exit "-- ends the options" 2 $S plan -- --json
check "-- ends the options: --json is an argument" grep -q "unexpected argument '--json'" /tmp/stg_err.$$
expect_exit "a flag takes no value" 2 $S plan --json=yes
check "a flag takes no value: says so" grep -q 'takes no value' /tmp/stg_err.$$
expect_exit "missing value" 2 $S plan --samples
check "missing value: says so" grep -q 'needs a value' /tmp/stg_err.$$
expect_exit "-h" 0 $S plan -h
check "-h and --help are the same text" [ "$($S plan -h)" = "$($S plan --help)" ]
check "help is generated from the table" [ "$($S plan --help)" = "$($S help plan)" ]
check "--help lists every option of the table" sh -c "
  $S help --options plan | cut -f1 | while read -r n; do
    $S plan --help | grep -q -- \"--\$n\" || { echo \"missing --\$n\" >&2; exit 1; }
  done"
expect_exit "help" 0 $S plan --help
check "help documents JSON keys" grep -q "wait_min_ms" /tmp/stg_out.$$
expect_exit "top-level help" 0 $S --help
expect_exit "version" 0 $S --version
expect_exit "unknown command" 2 $S frobnicate
finish

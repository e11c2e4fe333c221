# HTTP/2 requests the server never processed (RFC 9113 §8.7), against a
# real HTTP/2 server on 127.0.0.1 (stg_h2srv: libnghttp2 over TLS, h2 by
# ALPN) that refuses streams (RST_STREAM REFUSED_STREAM) or ends a
# connection with GOAWAY on demand, started here and stopped by PID.
# - a refused keyless POST is sent again at once and done once, even with
#   --retries 0 (the resend is outside the attempt count), through the
#   client's limiter again (--rate);
# - a server that refuses every stream gets 1 + 3 sends, no more (the cap);
# - a GOAWAY after every 10th stream of a connection, mid-batch: every job
#   is processed exactly once, and the sends the log shows are what the
#   server processed plus the never-processed ones it logged.
# The bounds are counts from the protocol, and one lower bound from the
# client's token bucket.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
[ -n "$H2SRV" ] && [ -x "$H2SRV" ] ||
  skip "stg_h2srv not built (libnghttp2-dev or libssl-dev missing): skipped"
command -v openssl >/dev/null || skip "openssl not installed: skipped"
T=$(mktemp -d /tmp/stg_h2n.XXXXXX)
cleanup() {
  in_script || return 0
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/k.pem" -out "$T/c.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null

# h2 NAME ARGS...: stg_h2srv as a job of this shell, logging to $T/NAME.log;
# sets H2PORT and H2PID.
h2() {
  _n=$1; shift
  : >"$T/$_n.out"
  : >"$T/$_n.log"
  "$H2SRV" --cert "$T/c.pem" --key "$T/k.pem" --log "$T/$_n.log" "$@" >"$T/$_n.out" 2>&1 &
  H2PID=$!
  H2PORT=""
  for _ in $(seq 600); do # a hang guard, not a timing bound
    H2PORT=$(sed -n '1s|^listening on https://127.0.0.1:\([0-9]*\)$|\1|p' "$T/$_n.out")
    [ -n "$H2PORT" ] && return 0
    kill -0 "$H2PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "stg_h2srv $_n did not start: $(cat "$T/$_n.out")" >&2
  exit 1
}
h2_stop() { kill "$H2PID" 2>/dev/null || true; wait "$H2PID" 2>/dev/null || true; }

# count LOG: "attempts never_processed successes"
count() {
  python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
a = [e for e in ev if e["event"] == "attempt_end"]
print(len(a), sum(bool(e.get("never_processed")) for e in a),
      sum(e["event"] == "success" for e in ev))
PY
}

# 1. One refused stream: a keyless POST sent again and done once.
h2 refuse --refuse 1
(echo id; echo 1) >"$T/one.csv"
expect_exit "refused: the POST is done" 0 "$S" batch -q --http2 --retries 0 -X POST -d x \
  --url "https://127.0.0.1:$H2PORT/p{id}" --cacert "$T/c.pem" --db "$T/r.db" \
  --log "$T/r.jsonl" "$T/one.csv"
h2_stop
read -r att np ok <<<"$(count "$T/r.jsonl")"
check "refused: two sends ($att)" [ "$att" = 2 ]
check "refused: the first never processed ($np)" [ "$np" = 1 ]
check "refused: one success ($ok)" [ "$ok" = 1 ]
check "refused: the server refused once" [ "$(grep -c '^REFUSE /p1$' "$T/refuse.log")" = 1 ]
check "refused: processed exactly once" [ "$(grep -c '^ANSWER /p1$' "$T/refuse.log")" = 1 ]
check "refused: the job is done" \
  [ "$(sqlite3 "$T/r.db" "select state from jobs where id = 1")" = done ]

# The resend passes the limiter again: with --rate 5 --burst 1 the second
# send starts at least 200ms (one token) after the first (a lower bound
# from the bucket: a busy machine only makes it later).
h2 rate --refuse 1
expect_exit "rate: the POST is done" 0 "$S" batch -q --http2 --rate 5 --burst 1 -X POST -d x \
  --url "https://127.0.0.1:$H2PORT/p{id}" --cacert "$T/c.pem" --db "$T/rt.db" \
  --log "$T/rt.jsonl" "$T/one.csv"
h2_stop
gap=$(python3 - "$T/rt.jsonl" <<'PY'
import json, sys
t = [json.loads(l)["t_us"] for l in open(sys.argv[1]) if '"attempt_start"' in l]
print(t[1] - t[0] if len(t) == 2 else -1)
PY
)
check "rate: the resend waited for a token (${gap}us >= 200ms)" [ "$gap" -ge 199000 ]

# The blocking call (fetch) resends it too.
h2 fetch --refuse 1
out=$("$S" fetch -q --cacert "$T/c.pem" -d x "https://127.0.0.1:$H2PORT/f" 2>&1)
check "fetch: refused POST answered ($out)" [ "$out" = "ok /f" ]
h2_stop
check "fetch: processed exactly once" [ "$(grep -c '^ANSWER /f$' "$T/fetch.log")" = 1 ]

# 2. A server that refuses every stream: 1 send + 3 resends, then the
# RESET it looks like, which a keyless POST does not retry: review (3).
h2 cap --refuse-path /p1
expect_exit "cap: the POST goes to review" 3 "$S" batch -q --http2 -X POST -d x \
  --url "https://127.0.0.1:$H2PORT/p{id}" --cacert "$T/c.pem" --db "$T/c.db" \
  --log "$T/c.jsonl" "$T/one.csv"
h2_stop
read -r att np ok <<<"$(count "$T/c.jsonl")"
check "cap: 4 sends ($att)" [ "$att" = 4 ]
check "cap: the server saw 4 ($(grep -c '^REFUSE' "$T/cap.log"))" \
  [ "$(grep -c '^REFUSE /p1$' "$T/cap.log")" = 4 ]
check "cap: nothing processed" [ "$(grep -c '^ANSWER' "$T/cap.log")" = 0 ]
check "cap: no success ($ok)" [ "$ok" = 0 ]
check "cap: the job is in review" \
  [ "$(sqlite3 "$T/c.db" "select state from jobs where id = 1")" = review ]

# 3. GOAWAY mid-batch (after every 10th stream of a connection), 20 in
# flight: the streams above the last-stream-id are resent, every job is
# processed exactly once, sends = processed + never processed.
N=60
(echo id; seq $N) >"$T/ids.csv"
h2 goaway --goaway-after 10
expect_exit "goaway: every job done" 0 "$S" batch -q --http2 -j 20 -X POST -d x \
  --url "https://127.0.0.1:$H2PORT/g{id}" --cacert "$T/c.pem" --db "$T/g.db" \
  --log "$T/g.jsonl" "$T/ids.csv"
h2_stop
read -r att np ok <<<"$(count "$T/g.jsonl")"
answered=$(grep -c '^ANSWER /g' "$T/goaway.log")
once=$(grep '^ANSWER /g' "$T/goaway.log" | sort -u | wc -l)
check "goaway: $N successes ($ok)" [ "$ok" = $N ]
check "goaway: each job processed once ($answered answers, $once distinct)" \
  [ "$answered" = $N -a "$once" = $N ]
check "goaway: sends = processed + never processed ($att = $answered + $np)" \
  [ "$att" = $((answered + np)) ]
check "goaway: streams were cut ($np never processed)" [ "$np" -ge 1 ]
check "goaway: no retry scheduled (no wait: a resend is not a retry, costs no budget)" \
  [ "$(grep -c '"event":"wait"' "$T/g.jsonl")" = 0 ]
check "goaway: no job left undone" \
  [ "$(sqlite3 "$T/g.db" "select count(*) from jobs where state != 'done'")" = 0 ]
finish

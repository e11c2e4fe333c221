#!/usr/bin/env bash
# stagger batch, issue #37 (the first hour): what a new user meets.
#  1. A host that keeps failing (a closed port): one early stderr line says
#     what, where and what stagger does (breaker open, next try); the report
#     counts every job (never-tried ones as 0 attempts) and says why the
#     jobs are not done.
# Counts and words only: the short --breaker-open/--deadline just keep it
# short.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch bux

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

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

finish

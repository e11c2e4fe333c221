# Helpers for the shell integration tests. Source it; it sets -eu.
set -eu
: "${STAGGER:?set STAGGER to the stagger binary}"
TESTS_RUN=0
TESTS_FAILED=0

# The one fail of every shell test (serve_test_lib.sh's too): it reports and
# counts, and the test goes on; finish (or serve_test_lib.sh's EXIT trap)
# exits 1 when any check failed. A fail in a subshell (a pipeline's while,
# a $(...)) counts too: each is also a line of STG_FAILS, which the verdict
# reads, so no failure is lost with the subshell's variables.
STG_FAILS=/tmp/stg_fails.$$
: >"$STG_FAILS"
fail() {
  echo "FAIL: $*" >&2
  TESTS_FAILED=$((TESTS_FAILED + 1))
  echo "$*" >>"$STG_FAILS"
}
# ok [WHAT]: a check passed (counted; WHAT, when given, is printed).
ok() {
  TESTS_RUN=$((TESTS_RUN + 1))
  [ $# = 0 ] || echo "ok - $* [${SECONDS}s]"
}
# failures: how many checks failed, in this shell and its subshells.
failures() { wc -l <"$STG_FAILS" 2>/dev/null | tr -d ' ' || echo "$TESTS_FAILED"; }
# skip WHY: the whole test cannot run here. Exit 77 is ctest's
# SKIP_RETURN_CODE (tests/CMakeLists.txt), so the runner reports the test
# skipped, never passed.
skip() { echo "$*"; exit 77; }

# check NAME COND...: run the condition, count it.
check() {
  name=$1; shift
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! "$@"; then fail "$name"; fi
}

# JSON assertion: jcheck NAME JSON PYTHON_EXPR (j is the parsed object).
jcheck() {
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$2" "$3"; then
    fail "$1: $3 is false for $2"
  fi
}

# Expect exit status N: expect_exit NAME N CMD...
expect_exit() {
  name=$1; want=$2; shift 2
  TESTS_RUN=$((TESTS_RUN + 1))
  set +e; "$@" >/tmp/stg_out.$$ 2>/tmp/stg_err.$$; got=$?; set -e
  if [ "$got" != "$want" ]; then
    fail "$name: exit $got, want $want; stderr: $(cat /tmp/stg_err.$$)"
  fi
}

finish() {
  _nf=$(failures)
  rm -f /tmp/stg_out.$$ /tmp/stg_err.$$ "$STG_FAILS"
  echo "$((TESTS_RUN - TESTS_FAILED)) passed, $_nf failed"
  [ "$_nf" = 0 ]
}

# free_port: a TCP port of 127.0.0.1 that nothing listens on now (the
# kernel's pick; for a server the test starts next, or a closed port).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# listen_port FILE PID: the port of the "listening on http://127.0.0.1:PORT"
# line a server (stagger serve, stg_hostile) prints first into FILE, or ""
# if PID exits first. Waits at most 30 s: a hang guard, not a timing bound
# (the loop ends at the line), so a busy machine cannot fail it.
listen_port() {
  for _ in $(seq 600); do
    _lp=$(sed -n '1s|^listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$1" 2>/dev/null)
    [ -n "$_lp" ] && { echo "$_lp"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  sed -n '1s|^listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$1" 2>/dev/null
}

# py_upstream SCRIPT ARGS...: start tests/integration/SCRIPT, a python3
# upstream that prints "listening on http://127.0.0.1:PORT" first, as a job
# of this shell (scratch's cleanup stops it), its output in $T/up.out and
# $T/up.err; sets UPPORT and UP. Debian's python3 when there is one.
py_upstream() {
  _py=/usr/bin/python3
  [ -x "$_py" ] || _py=python3
  _ups=$1; shift
  : > "$T/up.out"
  "$_py" "$(dirname "$0")/$_ups" "$@" > "$T/up.out" 2>"$T/up.err" &
  UPPORT=$(listen_port "$T/up.out" $!)
  [ -n "$UPPORT" ] || { echo "upstream $_ups did not start: $(cat "$T/up.err")" >&2; exit 1; }
  UP="http://127.0.0.1:$UPPORT"
}

# wait_grep FILE PATTERN: until FILE holds PATTERN (a 60 s hang guard, not
# a timing bound: the loop ends at the line).
wait_grep() {
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: '$2' never appeared in $1" >&2; return 1
}

# in_script: true in the script's own shell. bash runs the EXIT trap in a
# forked child too when a signal reaches it before its exec, and a cleanup
# run there would remove the script's files and stop its servers under it.
in_script() { [ "$BASHPID" = "$$" ]; }

# stop_jobs: SIGTERM every background job of this shell still running and
# reap them all. Only live jobs (jobs -rp): a pid bash reaped long ago may
# already be someone else's.
# STOP_SIGNAL=KILL for tests whose jobs need no graceful stop (workers that
# would otherwise drain first).
stop_jobs() {
  for _sj in $(jobs -rp); do kill -"${STOP_SIGNAL:-TERM}" "$_sj" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

# scratch NAME: the test's scratch folder $T (/tmp/stg_NAME.XXXXXX, kept
# when KEEP is set), serve_lib.sh with SERVE_DIR=$T, and an EXIT trap that,
# in the script's own shell only (in_script), stops every job this shell
# started (servers included: serve_start runs them as jobs) and removes $T.
scratch() {
  T=$(mktemp -d "/tmp/stg_$1.XXXXXX")
  SERVE_DIR=$T
  . "$(dirname "$0")/serve_lib.sh"
  trap scratch_cleanup EXIT
}
scratch_cleanup() {
  in_script || return 0
  stop_jobs
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}

# hostile NAME MODE ARGS...: start stg_hostile ($HOSTILE) in MODE as a job
# of this shell (stop_jobs stops it), logging to $T/NAME.log; sets HPORT.
# Ends the test if it does not start.
hostile() {
  _hn=$1; shift
  : > "$T/$_hn.out"
  "$HOSTILE" --mode "$@" --log "$T/$_hn.log" > "$T/$_hn.out" &
  _hp=$!
  HPORT=$(listen_port "$T/$_hn.out" "$_hp")
  [ -n "$HPORT" ] || { echo "stg_hostile $_hn did not start" >&2; exit 1; }
}

# Helpers for the shell integration tests. Source it; it sets -eu.
set -eu
: "${STAGGER:?set STAGGER to the stagger binary}"
TESTS_RUN=0
TESTS_FAILED=0

fail() { echo "FAIL: $*" >&2; TESTS_FAILED=$((TESTS_FAILED + 1)); }
ok() { TESTS_RUN=$((TESTS_RUN + 1)); }

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
  rm -f /tmp/stg_out.$$ /tmp/stg_err.$$
  echo "$((TESTS_RUN - TESTS_FAILED)) passed, $TESTS_FAILED failed"
  [ "$TESTS_FAILED" = 0 ]
}

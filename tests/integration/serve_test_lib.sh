# The common start of the stagger serve integration tests: strict shell,
# lib.sh (its fail and ok: a failed check is counted and the test goes on;
# the EXIT trap exits 1 when any failed), the python to use, a scratch
# folder and its cleanup, and serve_lib.sh. Source it first.
. "$(dirname "$0")/lib.sh"
set -euo pipefail
# The stdlib-only helpers run on the system python when there is one (a
# version-manager shim can cost most of a second per start).
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
: "${STAGGER:?set STAGGER to the stagger binary}"

TMP=$(mktemp -d)
SRV_PID=""
cleanup() {
    # In the script only: bash runs the EXIT trap in a forked child that
    # is signalled before its exec too, and $TMP must outlive it.
    [ "$BASHPID" = "$$" ] || return 0
    if [ -n "$SRV_PID" ] && kill -0 "$SRV_PID" 2>/dev/null; then
        kill -TERM "$SRV_PID" 2>/dev/null || true
        wait "$SRV_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    # The verdict: any failed check fails the test, whatever the last
    # command's status (the scripts need not end with finish).
    _nf=$(failures)
    rm -f /tmp/stg_out.$$ /tmp/stg_err.$$ "$STG_FAILS"
    [ "$_nf" = 0 ] || { echo "$_nf checks failed" >&2; exit 1; }
}
trap cleanup EXIT
SERVE_DIR=$TMP
. "$(dirname "$0")/serve_lib.sh"

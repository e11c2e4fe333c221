# Start and stop `stagger serve` in the integration tests, one way for all.
# Source it; it needs STAGGER (the binary) and SERVE_DIR (a scratch folder
# for the server's output). Only 127.0.0.1 is used.

# serve_start NAME [ARGS...]: start `stagger serve --port ${SRV_PORT:-0} ARGS`
# in the background (set SRV_PORT to restart a server on the same port) and
# wait for its first stdout line, which must be
# "listening on http://127.0.0.1:PORT" (https:// when ARGS have --tls-cert).
# Sets SRV_PID, PORT and URL (with the line's scheme), and adds
# the pid to SRV_PIDS (for a cleanup trap). Ends the test if it does not start.
#
# NAME.out is removed before the server starts: the shell truncates it only
# in the forked child, so a NAME used twice would otherwise let the wait
# below read the previous server's line (its dead port) before the new
# process exists, and a SIGTERM sent "after listening" would reach a process
# still starting up (exit 143), or the shell child before its exec, which
# runs the script's EXIT trap.
serve_start() {
    _sv_name=$1
    shift
    rm -f "$SERVE_DIR/$_sv_name.out" "$SERVE_DIR/$_sv_name.err"
    "$STAGGER" serve --port "${SRV_PORT:-0}" "$@" >"$SERVE_DIR/$_sv_name.out" 2>"$SERVE_DIR/$_sv_name.err" &
    SRV_PID=$!
    SRV_PIDS="${SRV_PIDS:-} $SRV_PID"
    # (a hang guard of 30 s, not a timing bound: the loop ends at the line)
    for _ in $(seq 600); do
        [ -s "$SERVE_DIR/$_sv_name.out" ] && break
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.05
    done
    _sv_line=$(head -n1 "$SERVE_DIR/$_sv_name.out" 2>/dev/null || true)
    case "$_sv_line" in
    "listening on http://127.0.0.1:"[0-9]* | "listening on https://127.0.0.1:"[0-9]*) ;;
    *)
        echo "FAIL: server $_sv_name did not start (first line '$_sv_line'):" \
            "$(cat "$SERVE_DIR/$_sv_name.err")" >&2
        exit 1
        ;;
    esac
    PORT=${_sv_line##*:}
    URL=${_sv_line#listening on } # https:// with --tls-cert
}

# serve_stop PID [SIG]: send SIG (default TERM) and wait (a hang guard of
# 30 s, not a timing bound). Returns the server's exit status, or 124 if it
# was still running (it is then killed). Drops PID from SRV_PIDS.
#
# Only a running job of this shell is signalled (jobs -rp): once bash has
# reaped a process its pid may be reused at once (pid_max is 32768 here),
# and `kill -0 PID` would then find, and SIGKILL, someone else's process.
serve_stop() {
    _sv_pid=$1
    _sv_rc=0
    SRV_PIDS=" ${SRV_PIDS:-} "
    SRV_PIDS=${SRV_PIDS// $_sv_pid / }
    if serve_running "$_sv_pid"; then
        kill -"${2:-TERM}" "$_sv_pid" 2>/dev/null || true
        for _ in $(seq 600); do
            serve_running "$_sv_pid" || break
            sleep 0.05
        done
        if serve_running "$_sv_pid"; then
            kill -KILL "$_sv_pid" 2>/dev/null || true
            wait "$_sv_pid" 2>/dev/null || true
            return 124
        fi
    fi
    wait "$_sv_pid" 2>/dev/null || _sv_rc=$?
    return "$_sv_rc"
}

# serve_running PID: PID is a job of this shell that bash has not reaped.
serve_running() {
    for _sv_j in $(jobs -rp); do
        [ "$_sv_j" = "$1" ] && return 0
    done
    return 1
}

# The curl-style command-line cases of tests/cli/ (tests/cli/run.py says
# the format): each names a command, the request the test server must have
# seen and the output, one case per flag of `stagger fetch` and per
# cross-command convention (-V, aliases, durations, "-" as stdout, unknown
# options). Each case starts its own `stagger serve` on 127.0.0.1 and stops
# it by PID.
. "$(dirname "$0")/lib.sh"
if ! "$STAGGER" fetch --help >/dev/null 2>&1 || ! "$STAGGER" serve --help >/dev/null 2>&1; then
  skip "stagger fetch or serve not built: skipped"
fi
exec python3 "$STG_SOURCE_DIR/tests/cli/run.py" --stagger "$STAGGER" "$STG_SOURCE_DIR"/tests/cli/*.case

# `stagger fetch -o FILE` streams the body into a temp file beside FILE
# (libstagger-curl's body sink) and renames it into place at the end,
# against stg_hostile on loopback (pattern-body, reset-mid-body: byte i of
# a body is i % 251):
#  - the file is the body, byte for byte, and no temp file is left;
#  - a reset mid-body and a retry: the file is the second attempt's body;
#  - a full disk (ulimit -f) is a local failure (exit 1) with neither FILE
#    nor a temp file left;
#  - peak memory (GNU time's maximum RSS) for a 60 MB body is less than
#    for a 6 MB one plus 6 MB: keeping the body would cost 54 MB more.
# Only loopback traffic; every server is stopped on exit.
. "$(dirname "$0")/lib.sh"
: "${HOSTILE:?set HOSTILE to the stg_hostile binary}"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1; then
  skip "stagger fetch not built (no libcurl): skipped"
fi
T=$(mktemp -d /tmp/stg_fetchO.XXXXXX)
cleanup() {
  in_script || return 0
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT

# pattern N FILE: the expected body of N bytes.
pattern() {
  python3 -c 'import sys; n=int(sys.argv[1]); b=bytes(range(251)); sys.stdout.buffer.write((b*(n//251+1))[:n])' "$1" > "$2"
}
no_temp() { [ -z "$(ls "$T/d" | grep -v '^body$' || true)" ]; }
mkdir "$T/d"
FAST="--base 1ms --cap 5ms"

hostile p pattern-body --size 3000000; PP=$HPORT
pattern 3000000 "$T/want3"
expect_exit "fetch -o" 0 "$S" fetch -s $FAST -o "$T/d/body" "http://127.0.0.1:$PP/x"
check "-o: the body, byte for byte" cmp -s "$T/want3" "$T/d/body"
check "-o: no temp file left" no_temp

# -o to something that is not a regular file (a FIFO here; /dev/null in
# other tests) is written in place, never replaced by a renamed file.
mkfifo "$T/fifo"
cat "$T/fifo" > "$T/from_fifo" &
CATP=$!
expect_exit "fetch -o FIFO" 0 "$S" fetch -s $FAST -o "$T/fifo" "http://127.0.0.1:$PP/x"
wait "$CATP" || true
check "-o FIFO: still a FIFO" [ -p "$T/fifo" ]
check "-o FIFO: the body went through it" cmp -s "$T/want3" "$T/from_fifo"
check "-o FIFO: no temp file beside it" [ -z "$(ls "$T" | grep '^fifo\.' || true)" ]

rm -f "$T/d/body"
hostile r reset-mid-body --size 2000000; PR=$HPORT
pattern 2000000 "$T/want2"
expect_exit "fetch -o after a reset" 0 "$S" fetch -s $FAST -o "$T/d/body" "http://127.0.0.1:$PR/x"
check "reset: two requests" [ "$(grep -c '^REQ ' "$T/r.log")" = 2 ]
check "reset: the second attempt's body" cmp -s "$T/want2" "$T/d/body"
check "reset: no temp file left" no_temp

rm -f "$T/d/body"
set +e
( trap '' XFSZ; ulimit -f 1024; exec "$S" fetch -s $FAST -o "$T/d/body" "http://127.0.0.1:$PP/x" ) \
  2>"$T/full.err"
got=$?
set -e
check "disk full: exit 1 (got $got: $(cat "$T/full.err"))" [ "$got" = 1 ]
check "disk full: no file" [ ! -e "$T/d/body" ]
check "disk full: no temp file" no_temp

# Peak memory does not grow with the body.
if /usr/bin/time -f %M true >/dev/null 2>&1; then
  hostile s pattern-body --size 6000000; PS=$HPORT
  hostile b pattern-body --size 60000000; PB=$HPORT
  /usr/bin/time -o "$T/rss_s" -f %M "$S" fetch -s -o "$T/d/body" "http://127.0.0.1:$PS/x"
  /usr/bin/time -o "$T/rss_b" -f %M "$S" fetch -s -o "$T/d/body" "http://127.0.0.1:$PB/x"
  check "60 MB body written" [ "$(stat -c %s "$T/d/body")" = 60000000 ]
  rs=$(tail -1 "$T/rss_s"); rb=$(tail -1 "$T/rss_b")
  echo "maxrss: ${rs} KiB for 6 MB, ${rb} KiB for 60 MB"
  check "memory flat: $rb KiB < $rs KiB + 6 MB" [ "$rb" -lt $((rs + 6000000 / 1024)) ]
else
  echo "no GNU time: memory check skipped"
fi
finish

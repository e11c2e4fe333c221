# `batch --out` never writes through a link (issue #30): a symbolic link
# planted at out/.KEY.tmp (the temp file a body is written to before its
# rename) made the batch overwrite the link's target. Now the temp file is
# created O_EXCL|O_NOFOLLOW relative to the directory opened once: the run
# stops with a message naming the file in the way (exit 4), the target
# keeps its bytes and the job runs again next time; a stale temp file of a
# killed run (a regular file of ours) is replaced; --out itself a symbolic
# link is refused before anything is sent. Both body paths are covered: a
# 2xx body streamed as it arrives, a 404's body written from memory.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_out_links

serve_start main --log "$T/main.log"
M=$PORT
mkdir "$T/out"
cat >"$T/in.jsonl" <<EOF
{"id": "k1", "url": "http://127.0.0.1:$M/k1"}
{"id": "k2", "url": "http://127.0.0.1:$M/status/404"}
{"id": "k3", "url": "http://127.0.0.1:$M/k3"}
EOF
printf 'precious' >"$T/victim"
ln -s "$T/victim" "$T/out/.k1.tmp"
ln -s "$T/victim" "$T/out/.k2.tmp"
head -c 100000 /dev/zero >"$T/out/.k3.tmp"   # a killed run's leftover, ours

expect_exit "a link in the way stops the run: exit 4" 4 "$S" batch -q --db "$T/b.db" \
  --out "$T/out" --concurrency 1 "$T/in.jsonl"
cp /tmp/stg_err.$$ "$T/run1.err"
check "the link's target is untouched" [ "$(cat "$T/victim")" = precious ]
check "the message names the file in the way" grep -q "$T/out/.k1.tmp is in the way" "$T/run1.err"
check "the link is left for the user to see" test -L "$T/out/.k1.tmp"
check "no body written through it" test ! -e "$T/out/k1"
jcheck "k1 not done (runs again)" "$("$S" batch report --db "$T/b.db" --json)" \
  'j["states"]["done"] < 3 and j["states"]["pending"] >= 1'

rm "$T/out/.k1.tmp"
expect_exit "again: the 404's body meets the second link" 4 "$S" batch -q --db "$T/b.db" \
  --out "$T/out" --concurrency 1 "$T/in.jsonl"
check "the 404's message names its file" grep -q "$T/out/.k2.tmp is in the way" /tmp/stg_err.$$
check "the target still untouched" [ "$(cat "$T/victim")" = precious ]
check "k1 now written" test -s "$T/out/k1"

rm "$T/out/.k2.tmp"
expect_exit "links gone: the batch finishes (one 404)" 1 "$S" batch -q --db "$T/b.db" \
  --out "$T/out" --concurrency 1 "$T/in.jsonl"
jcheck "two done, one failed" "$("$S" batch report --db "$T/b.db" --json)" \
  'j["states"]["done"] == 2 and j["states"]["failed"] == 1'
check "the stale temp file was replaced, not appended to" sh -c '[ "$(wc -c <"$1")" -lt 100000 ]' _ "$T/out/k3"
check "the 404's body written" test -s "$T/out/k2"
check "no temp file left" [ -z "$(ls -A "$T/out" | grep '^\.')" ]
check "the target never changed" [ "$(cat "$T/victim")" = precious ]

# ---- --out itself a symbolic link -------------------------------------------
# A server of its own, whose log is read only after it stopped: serve's log
# is buffered and flushed on a timer, so truncating the first server's log
# would race with lines of the runs above still to be written.
serve_stop "$SRV_PID"
serve_start links --log "$T/links.log"
L=$PORT
sed "s/:$M\//:$L\//" "$T/in.jsonl" >"$T/in2.jsonl"
mkdir "$T/real"
ln -s "$T/real" "$T/linked"
expect_exit "--out a symbolic link: exit 4" 4 "$S" batch -q --db "$T/l.db" --out "$T/linked" "$T/in2.jsonl"
check "says why" grep -q "is a symbolic link" /tmp/stg_err.$$
serve_stop "$SRV_PID"
check "the server's log exists" test -e "$T/links.log"
check "nothing sent" test ! -s "$T/links.log"
check "nothing written" [ -z "$(ls -A "$T/real")" ]

finish

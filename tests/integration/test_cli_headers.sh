# fetch and batch take exactly the same -H header lines (one validation
# function, cli_header_ok): for each line below both accept it or both
# refuse it with exit 2, and the refusals echo no value. Nothing is sent:
# fetch goes to a closed loopback port, batch reads an empty input.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1 || ! "$S" batch --help >/dev/null 2>&1; then
  skip "fetch or batch not built: skipped"
fi
T=$(mktemp -d /tmp/stg_hdr.XXXXXX)
trap 'in_script && rm -rf "$T"' EXIT
: > "$T/empty"

# verdict CMD... : "ok" unless the command exits 2 (usage).
verdict() {
  set +e; "$@" > /dev/null 2> "$T/err"; rc=$?; set -e
  if [ "$rc" = 2 ]; then echo usage; else echo ok; fi
}

n=0
while IFS= read -r h; do
  n=$((n + 1))
  f=$(verdict "$S" fetch -s --retries 0 -H "$h" http://127.0.0.1:1/x)
  cp "$T/err" "$T/ferr"
  b=$(verdict "$S" batch -q --db "$T/b$n.db" -H "$h" "$T/empty")
  check "'$h': fetch $f, batch $b" [ "$f" = "$b" ]
  if [ "$f" = usage ]; then
    check "'$h': fetch echoes no value" sh -c "! grep -q SECRET '$T/ferr'"
    check "'$h': batch echoes no value" sh -c "! grep -q SECRET '$T/err'"
  fi
done <<'EOF'
X-Ok: SECRET1
X-Remove:
X-Empty;
Bad Name: SECRET2
: SECRET3
X-Semi;SECRET4
NoColonSECRET5
X(paren): SECRET6
Authorization: Bearer SECRET7
EOF

# @FILE is the same for both too: a good file, a missing one, a bad line.
printf 'X-A: SECRETA\r\n\nX-B;\n' > "$T/good.hdr"
printf 'X-A: SECRETA\nBad Name: SECRETB\n' > "$T/bad.hdr"
for arg in "@$T/good.hdr" "@$T/missing.hdr" "@$T/bad.hdr"; do
  f=$(verdict "$S" fetch -s --retries 0 -H "$arg" http://127.0.0.1:1/x)
  cp "$T/err" "$T/ferr"
  b=$(verdict "$S" batch -q --db "$T/f.db" -H "$arg" "$T/empty")
  check "-H '$arg': fetch $f, batch $b" [ "$f" = "$b" ]
  check "-H '$arg': no value echoed" sh -c "! grep -q SECRET '$T/ferr' '$T/err'"
done
check "-H @good: accepted" [ "$(verdict "$S" batch -q --db "$T/g.db" -H "@$T/good.hdr" "$T/empty")" = ok ]
check "-H @bad: refused" [ "$(verdict "$S" batch -q --db "$T/g.db" -H "@$T/bad.hdr" "$T/empty")" = usage ]

# batch really sends headers from a file and from the environment, and keeps
# them out of its database.
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"
serve_start srv --threads 2
SRV=$SRV_PID
echo "http://127.0.0.1:$PORT/echo" > "$T/urls"
set +e
BATCH_TOKEN='Bearer SECRETENVBATCH' "$S" batch -q --db "$T/run.db" --out "$T/out" \
  -H "@$T/good.hdr" --secret-header-env Authorization=BATCH_TOKEN "$T/urls" 2> "$T/run.err"
rc=$?
set -e
kill "$SRV"; wait "$SRV" 2>/dev/null || true
check "batch with -H @FILE and --secret-header-env: exit 0 (got $rc; $(cat "$T/run.err"))" [ "$rc" = 0 ]
check "batch: header from the file sent" sh -c "cat '$T'/out/* | grep -q SECRETA"
check "batch: header from the environment sent" sh -c "cat '$T'/out/* | grep -q SECRETENVBATCH"
check "batch: neither is in the database" sh -c "! grep -a -q 'SECRETA\|SECRETENVBATCH' '$T'/run.db*"
expect_exit "batch --secret-header-env, unset: usage" 2 env -u NOPE_UNSET "$S" batch -q \
  --db "$T/u.db" --secret-header-env X-T=NOPE_UNSET "$T/urls"

# The verdicts the shared function gives (so the loop above cannot pass by
# both commands accepting everything).
expect_exit "batch refuses a name with a space" 2 "$S" batch -q --db "$T/x.db" \
  -H 'Bad Name: v' "$T/empty"
check "batch accepts 'Name;' (send empty), as fetch" \
  [ "$(verdict "$S" batch -q --db "$T/y.db" -H 'X-Empty;' "$T/empty")" = ok ]
check "fetch refuses a name with a space" \
  [ "$(verdict "$S" fetch -s --retries 0 -H 'Bad Name: v' http://127.0.0.1:1/x)" = usage ]

finish

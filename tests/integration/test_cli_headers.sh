# fetch and batch take exactly the same -H header lines (one validation
# function, cli_header_ok): for each line below both accept it or both
# refuse it with exit 2, and the refusals echo no value. Nothing is sent:
# fetch goes to a closed loopback port, batch reads an empty input.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1 || ! "$S" batch --help >/dev/null 2>&1; then
  echo "fetch or batch not built: skipped"
  exit 0
fi
T=$(mktemp -d /tmp/stg_hdr.XXXXXX)
trap 'rm -rf "$T"' EXIT
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

# The verdicts the shared function gives (so the loop above cannot pass by
# both commands accepting everything).
expect_exit "batch refuses a name with a space" 2 "$S" batch -q --db "$T/x.db" \
  -H 'Bad Name: v' "$T/empty"
check "batch accepts 'Name;' (send empty), as fetch" \
  [ "$(verdict "$S" batch -q --db "$T/y.db" -H 'X-Empty;' "$T/empty")" = ok ]
check "fetch refuses a name with a space" \
  [ "$(verdict "$S" fetch -s --retries 0 -H 'Bad Name: v' http://127.0.0.1:1/x)" = usage ]

finish

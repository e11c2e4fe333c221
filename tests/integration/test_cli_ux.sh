#!/usr/bin/env bash
# The CLI's words, issue #37 (what a new user met in the first hour): every
# command has -V and a "did you mean" for a slip in its name; every command
# of `stagger help --commands` is in stagger(1)'s COMMANDS and SEE ALSO,
# and every man page in README's list; batch and proxy take --rate as fetch
# does (80/m); serve's help names /metrics; no page uses a groff string
# escape (\*W is dropped by groff: it is the string register W).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
DOCS=$STG_SOURCE_DIR/docs

for c in $("$S" help --commands); do
  case $c in *" "*) continue ;; esac
  expect_exit "$c -V: exit 0" 0 "$S" "$c" -V
  check "  $c -V prints the version" grep -q '^stagger [0-9]' /tmp/stg_out.$$
  check "stagger(1) COMMANDS has $c" python3 -c '
import re, sys
t = open(sys.argv[1]).read()
cmds = t.split(".SH COMMANDS")[1].split(".SH ")[0]
sys.exit(0 if re.search(r"^\.B " + sys.argv[2] + r"$", cmds, re.M) else 1)' "$DOCS/stagger.1" "$c"
  if [ "$c" != help ]; then
    check "stagger(1) SEE ALSO names stagger-$c(1)" grep -q "stagger\\\\-$c (1)" "$DOCS/stagger.1"
  fi
done
for page in "$DOCS"/*.1 "$DOCS"/*.3; do
  b=$(basename "$page")
  [ "$b" = stagger.1 ] && continue
  check "README's man-page list has $b" grep -q "\`$b\`" "$STG_SOURCE_DIR/README.md"
  n=$(grep -c '\\\*' "$page" || true)
  check "$b: no groff string escape (\\*) ($n)" [ "$n" = 0 ]
done

expect_exit "stagger bach: usage" 2 "$S" bach
check "  did you mean 'batch'" grep -q "did you mean 'batch'" /tmp/stg_err.$$
expect_exit "stagger fecth: usage" 2 "$S" fecth
check "  did you mean 'fetch'" grep -q "did you mean 'fetch'" /tmp/stg_err.$$
expect_exit "stagger nothingnear: usage" 2 "$S" nothingnear
check "  no guess" sh -c "! grep -q 'did you mean' /tmp/stg_err.$$"

T=$(mktemp -d /tmp/stg_cliux.XXXXXX)
trap 'in_script && rm -rf "$T"' EXIT
echo "http://127.0.0.1:9/a" >"$T/u.txt"
expect_exit "batch --rate 80/m: accepted" 0 "$S" batch --rate 80/m --dry-run "$T/u.txt"
expect_exit "batch --rate 80/x: usage" 2 "$S" batch --rate 80/x --dry-run "$T/u.txt"
check "  says the forms" grep -q "600/m" /tmp/stg_err.$$
# A positive duration: one parser, its example the option's default.
expect_exit "batch --busy-timeout 0: usage" 2 "$S" batch --busy-timeout 0 --dry-run "$T/u.txt"
check "  gives its default as the example" grep -q "positive duration such as 5s" /tmp/stg_err.$$
expect_exit "batch --breaker-open 0: usage" 2 "$S" batch --breaker-open 0 --dry-run "$T/u.txt"
check "  gives its default as the example" grep -q "positive duration such as 30s" /tmp/stg_err.$$
if "$S" help --commands | grep -qx proxy; then
  expect_exit "proxy --rate 80/m --help: parsed" 0 "$S" proxy --rate 80/m --help
  expect_exit "proxy --client-timeout 0: usage" 2 "$S" proxy --client-timeout 0
  check "  no default: 30s as the example" grep -q "positive duration such as 30s" /tmp/stg_err.$$
fi
if "$S" help --commands | grep -qx serve; then
  check "serve --help names /metrics" sh -c "'$S' serve --help | grep -q /metrics"
fi
finish

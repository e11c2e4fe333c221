# The option tables and the man pages agree: for every subcommand, each
# option of its table (`stagger help --options CMD`, generated from the same
# table as the parser and --help) is listed in the OPTIONS section of
# docs/stagger-CMD.1 with the same short name and the same value name, and
# the page lists no option the table lacks (curl's tests/test1139.pl); an
# option the table says is described on another page (cli_opt.man, e.g. the
# policy options of sim and batch) has an entry that names that page.
# `batch report` and `batch export` are checked against the REPORT and
# EXPORT sections of stagger-batch(1). The exit statuses of
# `stagger help --exit-codes` are those of stagger(1), and no page documents
# a status outside that table. Also: every table parses its own options
# (each long option is known to its command's parser), every default
# the table holds (--help's "(default X)") is the one the man entry gives,
# and is the value the command's built config holds when the option is not
# given (`stagger help --defaults`, below).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
DOCS=$STG_SOURCE_DIR/docs
T=$(mktemp -d /tmp/stg_opts.XXXXXX)
trap 'in_script && rm -rf "$T"' EXIT

# man_options PAGE SECTION: "name<TAB>letter<TAB>arg<TAB>text" per option
# tagged in SECTION (.SH) of PAGE, sorted; text is the entry's paragraph and
# the introduction of its subsection (.SS), as plain text. A tag that is not
# an option is an error.
man_options() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
page, section = sys.argv[1], sys.argv[2]
lines = open(page, encoding="utf-8").read().split("\n")
inside, tags, intro, cur = False, [], "", None
for i, line in enumerate(lines):
    if line.startswith(".SH "):
        inside = line[4:].strip().strip('"') == section
        cur = None
        continue
    if not inside:
        continue
    if line.startswith(".SS"):
        intro, cur = line[3:], None
    elif line.strip() == ".TP" and i + 1 < len(lines):
        cur = [lines[i + 1], ""]
        tags.append(cur)
    elif cur is not None and line is not cur[0]:
        if lines[i - 1].strip() != ".TP":
            cur[1] += " " + line
    else:
        intro += " " + line
    if cur is not None and not cur[1]:
        cur.append(intro)

def args(rest):
    out, cur, quoted, any_ = [], "", False, False
    for ch in rest:
        if ch == '"':
            quoted = not quoted
            any_ = True
        elif ch == " " and not quoted:
            if cur or any_:
                out.append(cur)
            cur, any_ = "", False
        else:
            cur += ch
    if cur or any_:
        out.append(cur)
    return out

def plain(tag):
    m = re.match(r"^\.(B|I|BR|BI|IR|IB|RB|RI)\s+(.*)$", tag)
    if not m:
        text = tag
    else:
        parts = args(m.group(2))
        text = (" " if m.group(1) in ("B", "I") else "").join(parts)
    text = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", text)
    text = text.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\").replace("\\&", "")
    return text.strip()

def prose(t):
    t = re.sub(r"^\.[A-Z]+ ?", "", t, flags=re.M)
    t = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", t).replace("\\-", "-").replace('"', "")
    return re.sub(r"\s+", "", t)

rows, bad = [], []
for entry in tags:
    tag, para = entry[0], entry[1]
    ctx = prose(para + " " + (entry[2] if len(entry) > 2 else ""))
    text = plain(tag)
    items = re.split(r",\s+(?=-)", text)
    letter = None
    for item in items:
        m = re.match(r"^--([a-z0-9][a-z0-9.-]*)(?:[ =](.*))?$", item)
        s = re.match(r"^-([A-Za-z])(?:\s+(.*))?$", item)
        if m:
            rows.append((m.group(1), letter or "-", (m.group(2) or "-").strip(), ctx))
            letter = None
        elif s and not s.group(2):
            letter = s.group(1)
        elif s:
            rows.append(("-", s.group(1), s.group(2).strip(), ctx))
        else:
            bad.append(text)
    if letter:
        rows.append(("-", letter, "-", ctx))
for b in bad:
    print("NOT-AN-OPTION\t" + b)
for r in sorted(set(rows)):
    print("\t".join(r))
EOF
}

for cmd in plan serve sim fetch batch proxy "batch report" "batch export"; do
  if ! "$S" help --options "$cmd" > "$T/table.raw" 2>/dev/null; then
    echo "$cmd not built: skipped"
    continue
  fi
  cut -f1-3 "$T/table.raw" | sort -u > "$T/table"
  case $cmd in
    "batch report") page=$DOCS/stagger-batch.1 section=REPORT ;;
    "batch export") page=$DOCS/stagger-batch.1 section=EXPORT ;;
    *) page=$DOCS/stagger-$cmd.1 section=OPTIONS ;;
  esac
  man_options "$page" "$section" > "$T/man.full"
  cut -f1-3 "$T/man.full" | sort -u > "$T/man"
  check "$cmd: the table has options" [ -s "$T/table" ]
  # An option whose man text lives on another page: its entry (or its
  # subsection's introduction) names that page.
  while IFS=$(printf '\t') read -r name letter arg ref def _rest; do
    [ "$ref" = - ] && continue
    ctx=$(awk -F '\t' -v n="$name" '$1 == n { print $4 }' "$T/man.full")
    case $ctx in
      *"$ref"*) ok ;;
      *) fail "$cmd --$name: its entry in $(basename "$page") does not refer to $ref" ;;
    esac
  done < "$T/table.raw"
  # Defaults (issue #37): the table holds each option's default once (the
  # fifth field: what --help prints and the code starts from); the man
  # entry of an option described on this page says the same default.
  while IFS=$(printf '\t') read -r name letter arg ref def _rest; do
    [ "$ref" != - ] || [ "$def" = - ] || [ "$name" = - ] && continue
    # compared without blanks, colons and case ("Default: 5s" says "default 5s")
    want=$(printf 'default%s' "$def" | tr -d ' \t:' | tr 'A-Z' 'a-z')
    ctx=$(awk -F '\t' -v n="$name" '$1 == n { print $4 }' "$T/man.full" | tr -d '\\:' | tr 'A-Z' 'a-z')
    case $ctx in
      *"$want"*) ok ;;
      *) fail "$cmd --$name: --help says (default $def); its entry in $(basename "$page") does not" ;;
    esac
  done < "$T/table.raw"
  if ! diff "$T/table" "$T/man" > "$T/diff"; then
    fail "$cmd: the table (<) and $(basename "$page") $section (>) disagree:
$(cat "$T/diff")"
  fi
  # Each option of the table is one its parser knows ("unknown option"
  # would mean the table and the parser were two lists). The parser reads
  # in order, so a flag followed by --help is parsed and then the help is
  # printed: `serve --client-by-addr` alone would start a server that runs
  # until the timeout. An option with a value is given none (its error is
  # "needs a value", not "unknown"), never --help as its value.
  while IFS=$(printf '\t') read -r name letter arg ref _rest; do
    [ "$name" = - ] && continue
    set +e
    # shellcheck disable=SC2086
    probe=$cmd
    [ "$cmd" = sim ] && probe="sim herd" # sim's first argument is the scenario
    after=
    [ "$arg" = - ] && after=--help
    # Without LeakSanitizer's exit scan (half of each of these ~400 starts
    # under ASan): these probes only parse; the commands' exits are run with
    # leak checks by their own tests (test_cli_cases and the rest).
    # shellcheck disable=SC2086
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
      timeout 20 "$S" $probe "--$name" $after > /dev/null 2> "$T/err" < /dev/null
    set -e
    check "$cmd --$name is parsed" sh -c "! grep -q 'unknown \(option\|scenario\)' '$T/err'"
  done < "$T/table"
done

# ---- defaults: the table's is the one the command runs with (issue #37) ----------
# `stagger help --defaults CMD [ARG...]` runs the command up to where its
# config is built and prints, per option, the table's default and the value
# that config holds ("NAME\tTABLE\tACTUAL\tVERDICT", opt.h): every row must
# be "ok", and every option whose default --help shows has a row, so a
# default the code sets by itself (a literal beside the table) is caught.
# The ARGs are what the command needs to get that far, never a defaulted
# option. Options whose default is a description, not a value, are listed
# here with why.
described() { # CMD NAME: true when the default is a description
  case "$1 $2" in
    *" burst") return 0 ;;              # max(1, ceil(R)): computed from --rate
    "serve threads") return 0 ;;        # the CPUs, at most 16
    "fetch request") return 0 ;;        # GET, or POST with data
    "fetch user-agent") return 0 ;;     # stagger/VERSION
    "batch worker") return 0 ;;         # HOST:PID
    "batch method") return 0 ;;         # GET for URL and key inputs; JSONL lines carry theirs
    "batch report db" | "batch export db") return 0 ;; # beside the input
    "batch export output") return 0 ;;  # standard output
  esac
  return 1
}
defaults_args() {
  case $1 in
    proxy) echo "--upstream http://127.0.0.1:9" ;;
    fetch) echo "http://127.0.0.1:9" ;;
    sim) echo herd ;; # its scenario (the others below)
    batch) echo "-" ;; # stdin as the input: never read before the rows
    *) echo "" ;;
  esac
}
for cmd in plan serve sim fetch batch proxy "batch report" "batch export"; do
  "$S" help --options "$cmd" > "$T/table.raw" 2>/dev/null || continue
  # shellcheck disable=SC2046,SC2086
  if ! "$S" help --defaults $cmd $(defaults_args "$cmd") > "$T/defaults" 2> "$T/err"; then
    fail "help --defaults $cmd failed: $(cat "$T/err")"
    continue
  fi
  bad=$(awk -F '\t' '$4 != "ok"' "$T/defaults")
  check "$cmd: each default the table gives is the one the command runs with${bad:+:
$bad}" [ -z "$bad" ]
  while IFS=$(printf '\t') read -r name letter arg ref def _rest; do
    [ "$def" = - ] || [ "$name" = - ] && continue
    described "$cmd" "$name" && continue
    check "$cmd --$name: help --defaults compares its default ($def)" \
      awk -F '\t' -v n="$name" '$1 == n { f = 1 } END { exit !f }' "$T/defaults"
  done < "$T/table.raw"
done
# sim: each scenario sets its own defaults (sim_opts_default, which the
# table's def_fn reads); every scenario runs with its own.
if "$S" help --options sim > /dev/null 2>&1; then
  for sc in quota storm load contention slow-server fleet; do
    bad=$("$S" help --defaults sim "$sc" | awk -F '\t' '$4 != "ok"')
    check "sim $sc: it runs with its scenario's defaults${bad:+:
$bad}" [ -z "$bad" ]
  done
fi
expect_exit "help --defaults nosuch" 2 "$S" help --defaults nosuch

# A table entry that the man page lacks is caught: drop one option from a
# copy of fetch's page and the comparison must fail.
if "$S" help --options fetch > /dev/null 2>&1; then
  python3 - "$DOCS/stagger-fetch.1" "$T/cut.1" <<'EOF'
import sys
src = open(sys.argv[1]).read().split("\n")
out, skip = [], False
for i, l in enumerate(src):
    if l == ".TP" and i + 1 < len(src) and "\\-\\-metrics" in src[i + 1]:
        skip = True
        continue
    if skip and (l.startswith(".TP") or l.startswith(".S")):
        skip = False
    if not skip:
        out.append(l)
open(sys.argv[2], "w").write("\n".join(out))
EOF
  "$S" help --options fetch | cut -f1-3 | sort -u > "$T/table"
  man_options "$T/cut.1" OPTIONS | cut -f1-3 | sort -u > "$T/man"
  check "the check sees a missing option" sh -c "! diff -q '$T/table' '$T/man' > /dev/null"
fi

# ---- exit statuses: one table, stagger(1) documents it ---------------------------
"$S" help --exit-codes | cut -f1 | sort -n > "$T/codes"
man_codes() {
  python3 - "$1" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
inside, out = False, set()
for i, l in enumerate(lines):
    if l.startswith(".SH "):
        inside = "EXIT STATUS" in l
        continue
    if inside and l.strip() == ".TP" and i + 1 < len(lines):
        out.update(int(n) for n in re.findall(r"\d+", lines[i + 1]))
print("\n".join(str(n) for n in sorted(out)))
EOF
}
man_codes "$DOCS/stagger.1" > "$T/man_codes"
if ! diff "$T/codes" "$T/man_codes" > "$T/diff"; then
  fail "exit statuses: the table (<) and stagger.1 (>) disagree:
$(cat "$T/diff")"
fi
check "exit table has 0, 2 and 130" sh -c "grep -qx 0 '$T/codes' && grep -qx 2 '$T/codes' && grep -qx 130 '$T/codes'"
for page in "$DOCS"/stagger-*.1; do
  man_codes "$page" > "$T/page_codes"
  extra=$(grep -v '^$' "$T/page_codes" | grep -vxF -f "$T/codes" | tr '\n' ' ' || true)
  check "$(basename "$page"): documents only statuses of the table (extra: $extra)" [ -z "$extra" ]
done
expect_exit "help --exit-codes" 0 "$S" help --exit-codes
expect_exit "help --options without a command" 2 "$S" help --options
expect_exit "help --options nosuch" 2 "$S" help --options nosuch

finish

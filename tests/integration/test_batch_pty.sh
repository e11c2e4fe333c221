# `stagger batch`'s progress bar in a real pseudo-terminal (util-linux
# `script`), at 40, 80 and 120 columns and across a resize (SIGWINCH from
# the pty's size change): no redrawn line longer than the width minus one,
# the fields each width promises on every redraw, each at the same column
# (issue #37: fields came and went), the ETA from the rate the limiter
# allows, the last line the true final state with the report's jobs/s.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_pty
SRV_PIDS=""
command -v script >/dev/null || skip "no script(1): skipped"

serve_start main
M=$PORT
for i in $(seq 1 30); do echo "http://127.0.0.1:$M/track/p$i"; done >"$T/urls.txt"

# in_pty COLS OUT CMD: run CMD (a shell string) with stderr on a pty of COLS
# columns; stdout (the report) goes to OUT.report, the terminal's bytes to OUT.
# (timeout: a hang guard, far above the bucket's few seconds.)
in_pty() {
  _t0=$(date +%s)
  timeout 120 script -qfec "stty cols $1 rows 24; $3 >'$2.report'" /dev/null >"$2" 2>&1 </dev/null ||
    echo "in_pty $1 $2: exit $? after $(( $(date +%s) - _t0 )) s" >&2
}

# segments FILE: the progress bar's redraws, one a line: the text after
# each carriage return that starts a redraw (the terminal's own CR LF is a
# newline), without the erase-to-end escape.
segments() {
  python3 -c '
import sys
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
raw = raw.replace("\x1b[K", "").replace("\r\n", "\n")
for line in raw.split("\n"):
    for seg in line.split("\r")[1:]:
        if seg:
            print(seg)' "$1"
}

# widest FILE: the longest redraw.
widest() { segments "$1" | awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }'; }

# fields FILE LABEL...: every redraw has each LABEL, at the same column as
# the first redraw, and every redraw is as long as the first.
fields() {
  _f=$1; shift
  segments "$_f" | python3 -c '
import sys
labels = sys.argv[1:]
segs = [l.rstrip("\n") for l in sys.stdin if l.strip()]
if len(segs) < 2:
    sys.exit("fewer than 2 redraws")
first = segs[0]
want = {l: (first.replace("finished", "ETA     ").find(l)) for l in labels}
for l, c in want.items():
    if c < 0:
        sys.exit("no %r in %r" % (l, first))
for seg in segs:
    norm = seg.replace("finished  ", "ETA       ")
    for l, c in want.items():
        if norm.find(l) != c:
            sys.exit("%r moved from column %d: %r" % (l, c, seg))
    if len(seg) != len(first):
        sys.exit("length %d, first %d: %r" % (len(seg), len(first), seg))
' "$@"
}

# end_rate FILE: the last redraw's jobs/s; report_rate FILE: the report's.
end_rate() { segments "$1" | tail -n1 | sed -n 's/.* \([0-9.]*\) jobs\/s.*/\1/p'; }
report_rate() { sed -n 's/^effective rate: \([0-9.]*\) jobs\/s answered.*/\1/p' "$1"; }

# --- 40 columns: the whole run fits, the last line is the final state -----
# 30 jobs at --rate 10 (burst 10): at least 2 s by the bucket, several redraws.
in_pty 40 "$T/p40" "$S batch --rate 10 --db '$T/p40.db' '$T/urls.txt'"
check "40 cols: the bar was drawn" test "$(segments "$T/p40" | wc -l)" -ge 3
w=$(widest "$T/p40")
check "40 cols: no line longer than 39 (got $w)" test "$w" -le 39
last=$(segments "$T/p40" | tail -n1)
check "40 cols: the last line is the final state ('$last')" \
  sh -c 'case "$1" in *"30/30"*finished*) exit 0;; *) exit 1;; esac' _ "$last"
check "40 cols: report on stdout" grep -q "done" "$T/p40.report"
check "40 cols: count, ETA and rate on every redraw, in place" fields "$T/p40" "/30" "ETA" "jobs/s"
check "40 cols: the end figure is the report's ($(end_rate "$T/p40") vs $(report_rate "$T/p40.report"))" \
  test -n "$(end_rate "$T/p40")" -a "$(end_rate "$T/p40")" = "$(report_rate "$T/p40.report")"

# --- 80 columns: done, failed, the 429 share and deferred stay all run -----
in_pty 80 "$T/p80" "$S batch --rate 10 --db '$T/p80.db' '$T/urls.txt'"
w=$(widest "$T/p80")
check "80 cols: no line longer than 79 (got $w)" test "$w" -le 79
check "80 cols: the fields on every redraw, in place" \
  fields "$T/p80" "/30" "ETA" "jobs/s" "done" "failed" "429" "deferred"
check "80 cols: the end figure is the report's ($(end_rate "$T/p80") vs $(report_rate "$T/p80.report"))" \
  test -n "$(end_rate "$T/p80")" -a "$(end_rate "$T/p80")" = "$(report_rate "$T/p80.report")"

# --- 120 columns: the full line, ETA from --rate ---------------------------
in_pty 120 "$T/p120" "$S batch --rate 10 --db '$T/p120.db' '$T/urls.txt'"
w=$(widest "$T/p120")
check "120 cols: no line longer than 119 (got $w)" test "$w" -le 119
check "120 cols: wider lines than at 80 (got $w)" test "$w" -gt 80
last=$(segments "$T/p120" | tail -n1)
check "120 cols: final line has every count ('$last')" \
  sh -c 'case "$1" in "["*"] 30/30  finished "*" jobs/s  done 30  failed  0  429  0.0%  deferred  0  review  0"|*"review  0  conc "*) exit 0;; *) exit 1;; esac' _ "$last"
check "120 cols: the bar and every field on every redraw, in place" \
  fields "$T/p120" "[" "/30" "ETA" "jobs/s" "done" "failed" "429" "deferred" "review"
check "120 cols: the end figure is the report's ($(end_rate "$T/p120") vs $(report_rate "$T/p120.report"))" \
  test -n "$(end_rate "$T/p120")" -a "$(end_rate "$T/p120")" = "$(report_rate "$T/p120.report")"
# Each job left needs at least one attempt, and the bucket lets 10 a second
# through: no redraw promises the rest sooner than left / 10 s.
segments "$T/p120" >"$T/p120.seg"
check "120 cols: ETA never below left / rate" python3 -c '
import math, re, sys
seen = 0
for seg in open(sys.argv[1]):
    m = re.search(r"(\d+)/(\d+) .*ETA (?:(\d+)m)?(\d+)s", seg)
    if not m:
        continue
    ended, total = int(m.group(1)), int(m.group(2))
    eta = int(m.group(3) or 0) * 60 + int(m.group(4))
    seen += 1
    if eta < math.ceil((total - ended) / 10.0):
        print("ETA", eta, "s for", total - ended, "left at 10/s", file=sys.stderr)
        sys.exit(1)
sys.exit(0 if seen else 1)' "$T/p120.seg"

# --- a resize from 120 to 40 columns mid-run: the bar follows ---------------
# 30 jobs at --rate 5 (burst 5) take at least 5 s by the bucket; the size
# changes after 1 s (a background job's stdin is /dev/null, hence
# </dev/tty), so lines are drawn at both widths.
in_pty 120 "$T/pr" "(sleep 1; stty cols 40 </dev/tty) & $S batch --rate 5 --db '$T/pr.db' '$T/urls.txt'"
widths=$(segments "$T/pr" | awk '{ printf "%d ", length($0) }')
check "resize: drawn wide first ($widths)" sh -c 'set -- $1; test "$1" -gt 40' _ "$widths"
check "resize: narrow at the end ($widths)" sh -c 'for w in $1; do l=$w; done; test "$l" -le 39' _ "$widths"

# --- two hosts: --rate is per host, so the run may go twice as fast -------------
# The first redraw comes before a rate is measured (that takes a second): its
# ETA is what is left over 2 x 5/s, not over 5/s.
serve_start second
M2=$PORT
for i in $(seq 1 20); do echo "http://127.0.0.1:$M/h/$i"; echo "http://127.0.0.1:$M2/h/$i"; done >"$T/two.txt"
in_pty 120 "$T/p2" "$S batch --rate 5 --db '$T/p2.db' '$T/two.txt'"
segments "$T/p2" >"$T/p2.seg"
first=$(grep -m1 'ETA' "$T/p2.seg" || true)
check "two hosts: the first ETA counts both buckets ('$first')" python3 -c '
import math, re, sys
m = re.search(r"(\d+)/(\d+) .*ETA (?:(\d+)m)?(\d+)s", sys.argv[1])
ended, total = int(m.group(1)), int(m.group(2))
eta = int(m.group(3) or 0) * 60 + int(m.group(4))
sys.exit(0 if eta <= math.ceil((total - ended) / 10.0) else 1)' "$first"

serve_stop "$SRV_PID" || true
finish

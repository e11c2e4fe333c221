# #14 Medium 4: a damaged batch database is refused, never read as a
# finished or smaller batch. Random bytes over a finished database, a
# deleted job row and a truncated file: `batch` (resuming), `batch report`
# and `batch export` all exit 4 with a message saying what is wrong, and
# none of them prints a count as if nothing happened.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_damaged

serve_start main
N=1500
for i in $(seq 1 $N); do echo "http://127.0.0.1:$PORT/j/$i"; done >"$T/in.txt"
expect_exit "the batch runs to the end" 0 "$S" batch -q --db "$T/good.db" --rate 0 --concurrency 16 "$T/in.txt"
jcheck "all done" "$("$S" batch report --db "$T/good.db" --json)" "j['states']['done'] == $N"
check "no -wal left: the file is whole" [ ! -s "$T/good.db-wal" ]

# damaged NAME: every command refuses the copy with exit 4 and says why
damaged() {
  dn=$1 dw=$2
  expect_exit "$dn: batch (resume) exits 4" 4 "$S" batch --db "$T/$dn.db" --progress none
  check "$dn: batch says '$dw'" grep -q "$dw" /tmp/stg_err.$$
  check "$dn: batch prints no ended count" sh -c "! grep -q 'ended\|jobs imported\|resuming' /tmp/stg_err.$$ /tmp/stg_out.$$"
  expect_exit "$dn: batch with the input exits 4" 4 "$S" batch -q --db "$T/$dn.db" "$T/in.txt"
  expect_exit "$dn: report exits 4" 4 "$S" batch report --db "$T/$dn.db"
  check "$dn: report says '$dw'" grep -q "$dw" /tmp/stg_err.$$
  check "$dn: report prints no counts" [ ! -s /tmp/stg_out.$$ ]
  expect_exit "$dn: export exits 4" 4 "$S" batch export --db "$T/$dn.db"
}

# random bytes over a few pages in the middle of the finished database
cp "$T/good.db" "$T/rand.db"
python3 - "$T/rand.db" <<'PY'
import os, random, sys
p = sys.argv[1]
size = os.path.getsize(p)
rng = random.Random(1)
with open(p, "r+b") as f:
    f.seek((size // 2) // 4096 * 4096)
    f.write(bytes(rng.randrange(256) for _ in range(3 * 4096)))
PY
damaged rand "damaged"

# a deleted job row: must not resume as "1499/1499 done"
cp "$T/good.db" "$T/del.db"
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM jobs WHERE id = 700"); c.commit()' "$T/del.db"
damaged del "holds $((N - 1)) job rows, its job set has $N"

# a truncated file
cp "$T/good.db" "$T/trunc.db"
truncate -s $(( $(stat -c %s "$T/good.db") / 2 )) "$T/trunc.db"
damaged trunc "damaged"

# the original is still fine
expect_exit "the intact database resumes (nothing to do)" 0 "$S" batch -q --db "$T/good.db"

finish

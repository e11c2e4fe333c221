# `stagger batch` and its database: another job set (explicit and default
# --db), files that are not ours, a locked database, two runners on one
# database, a read-only database. Each is a clear error (exit 4) and leaves
# the database as it was.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_db
chmod 755 "$T"
PIDS=""

# start_server NAME [ARGS...]: sets PORT and SRV_PID (serve_lib.sh).
start_server() { serve_start "$@"; PIDS="${PIDS:-} $SRV_PID"; }
. "$(dirname "$0")/batch_lib.sh"
states() { "$S" batch report --db "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["states"])'; }

start_server main
M=$PORT
for i in $(seq 1 10); do echo "http://127.0.0.1:$M/a/$i"; done >"$T/a.txt"
for i in $(seq 1 10); do echo "http://127.0.0.1:$M/b/$i"; done >"$T/b.txt"

# ---- another job set -----------------------------------------------------------
expect_exit "first job set" 0 "$S" batch -q --db "$T/x.db" "$T/a.txt"
before=$(states "$T/x.db")
sum_before=$(cat "$T/x.db" | md5sum)
expect_exit "another job set: exit 4" 4 "$S" batch -q --db "$T/x.db" "$T/b.txt"
check "says so" grep -q "belongs to another job set (10 jobs from $T/a.txt" /tmp/stg_err.$$
check "says what to do" grep -q "use another --db" /tmp/stg_err.$$
check "database unchanged" [ "$(states "$T/x.db")" = "$before" ]
check "file unchanged" [ "$(cat "$T/x.db" | md5sum)" = "$sum_before" ]
# the default database is per input (INPUT.stagger.db): two inputs in one
# directory each get their own, and report/export find it from the input
mkdir "$T/d"
cp "$T/a.txt" "$T/b.txt" "$T/d/"
expect_exit "default db: first input" 0 "$S" batch -q "$T/d/a.txt"
expect_exit "default db: a second input in the same directory runs too" 0 "$S" batch -q "$T/d/b.txt"
check "default db: one per input" test -f "$T/d/a.txt.stagger.db" -a -f "$T/d/b.txt.stagger.db" -a ! -e "$T/d/stagger-batch.db"
jcheck "default db: report INPUT reads INPUT's database" "$("$S" batch report --json "$T/d/b.txt")" "j['input'] == '$T/d/b.txt' and j['db'] == '$T/d/b.txt.stagger.db'"
expect_exit "report: INPUT and --db together is a usage error" 2 "$S" batch report --db "$T/x.db" "$T/d/a.txt"

# ---- files that are not ours ---------------------------------------------------------
printf 'just some text, not a database at all; long enough to have a header....\n%.0s' 1 2 3 4 5 6 7 8 >"$T/text.db"
expect_exit "not a database: exit 4" 4 "$S" batch -q --db "$T/text.db" "$T/a.txt"
check "says not a database" grep -q "not an SQLite database" /tmp/stg_err.$$
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("CREATE TABLE t(x)"); c.commit()' "$T/other.db"
expect_exit "another program's database: exit 4" 4 "$S" batch -q --db "$T/other.db" "$T/a.txt"
check "says not ours" grep -q "not a stagger batch database" /tmp/stg_err.$$
check "left alone" python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); sys.exit(0 if [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ["t"] else 1)' "$T/other.db"

# ---- a database locked by another process ---------------------------------------------
for i in $(seq 1 10); do echo "http://127.0.0.1:$M/l/$i"; done >"$T/l.txt"
cp "$T/l.txt" "$T/l2.txt"
echo "http://127.0.0.1:$M/status/503?retry_after=120" >>"$T/l.txt"
expect_exit "a db with a deferred job" 3 "$S" batch -q --db "$T/l.db" "$T/l.txt"
python3 -c '
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(20)' "$T/l.db" >"$T/locker.out" &
LOCKER=$!
PIDS="$PIDS $LOCKER"
for _ in $(seq 1 100); do grep -q locked "$T/locker.out" 2>/dev/null && break; sleep 0.05; done
expect_exit "locked: exit 4 after --busy-timeout" 4 "$S" batch -q --db "$T/l.db" --busy-timeout 500ms --retry-deferred "$T/l.txt"
check "says locked" grep -q "locked by another process" /tmp/stg_err.$$
kill "$LOCKER"; wait "$LOCKER" 2>/dev/null || true
jcheck "nothing lost while locked" "$("$S" batch report --db "$T/l.db" --json)" 'j["states"]["deferred"] == 1 and j["states"]["done"] == 10'

# ---- two runners on one database ----------------------------------------------------------
start_server slow --rate 10 --burst 1
for i in $(seq 1 40); do echo "http://127.0.0.1:$PORT/s/$i"; done >"$T/s.txt"
"$S" batch -q --db "$T/s.db" --rate 10 --burst 1 "$T/s.txt" >/dev/null 2>&1 &
RUNNER=$!
wait_db "$T/s.db" "SELECT count(*) >= 3 FROM jobs WHERE state = 'done'" || true
expect_exit "second runner: exit 4" 4 "$S" batch -q --db "$T/s.db" --busy-timeout 300ms "$T/s.txt"
check "says in use" grep -q "in use by another .stagger batch. run" /tmp/stg_err.$$
check "report works meanwhile" sh -c "'$S' batch report --db '$T/s.db' >/dev/null"
kill -INT "$RUNNER"
set +e; wait "$RUNNER"; rc=$?; set -e
check "first runner interrupted cleanly (130, got $rc)" [ "$rc" = 130 ]
jcheck "nothing in flight" "$("$S" batch report --db "$T/s.db" --json)" 'j["states"]["inflight"] == 0 and j["jobs"] == 40'

# ---- a read-only database ----------------------------------------------------------------
# Root writes read-only files, so as root the run is made as nobody.
mkdir "$T/ro"
cp "$T/l.txt" "$T/ro/l.txt"
expect_exit "ro: a db with a deferred job" 3 "$S" batch -q --db "$T/ro/ro.db" "$T/ro/l.txt"
chmod 444 "$T/ro/ro.db"
chmod 755 "$T/ro"
AS=""
if [ "$(id -u)" = 0 ]; then AS="setpriv --reuid=nobody --regid=nogroup --clear-groups"; fi
sum_before=$(md5sum <"$T/ro/ro.db")
expect_exit "read-only: exit 4" 4 $AS "$S" batch -q --db "$T/ro/ro.db" --retry-deferred "$T/ro/l.txt"
check "says read-only" grep -q "read-only" /tmp/stg_err.$$
check "read-only file unchanged" [ "$(md5sum <"$T/ro/ro.db")" = "$sum_before" ]
jcheck "read-only: report still works" "$($AS "$S" batch report --db "$T/ro/ro.db" --json)" 'j["states"]["deferred"] == 1 and j["states"]["done"] == 10'
chmod 644 "$T/ro/ro.db"
expect_exit "writable again: runs" 3 "$S" batch -q --db "$T/ro/ro.db" --retry-deferred "$T/ro/l.txt"

finish

# A full disk under the database and under --out: the run stops with a clear
# error (exit 4), the database stays consistent (every job in exactly one
# state), and once there is space the same command finishes every job.
# Needs a small tmpfs: skipped when this user cannot mount one.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_batch_full.XXXXXX)
SRV_PID=""
MOUNTS=""
cleanup() {
  in_script || return 0
  [ -n "$SRV_PID" ] && { kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; }
  for m in $MOUNTS; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT

mkdir "$T/db" "$T/out"
if ! mount -t tmpfs -o size=400k tmpfs "$T/db" 2>/dev/null; then
  skip "skipped: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"
fi
MOUNTS="$T/db"
mount -t tmpfs -o size=64k tmpfs "$T/out"
MOUNTS="$MOUNTS $T/out"

"$S" serve --port 0 --log "$T/srv.log" >"$T/srv.out" 2>"$T/srv.err" &
SRV_PID=$!
PORT=$(listen_port "$T/srv.out" "$SRV_PID")
[ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }

# 12 POSTs of 20 KB with idempotency keys; /echo answers with the body, so
# every answer stored is about 20 KB.
python3 - "$PORT" >"$T/big.jsonl" <<'EOF'
import json, sys
for i in range(1, 13):
    print(json.dumps({"id": "f%02d" % i, "method": "POST", "url": "http://127.0.0.1:%s/echo" % sys.argv[1],
                      "idempotency_key": "key-%d" % i, "body": ("%02d" % i) * 10000}))
EOF

# ---- the database's disk fills up -----------------------------------------------
expect_exit "disk full under the database: exit 4" 4 "$S" batch -q --db "$T/db/full.db" --concurrency 2 "$T/big.jsonl"
check "says the disk is full" grep -q "full" /tmp/stg_err.$$
check "says nothing is lost" grep -q "nothing is lost" /tmp/stg_err.$$
if [ -f "$T/db/full.db" ]; then
  j=$("$S" batch report --db "$T/db/full.db" --json 2>/dev/null || echo '{"jobs": 0, "states": {}}')
  jcheck "consistent after the failure" "$j" 'j["jobs"] in (0, 12) and sum(j["states"].values()) == j["jobs"] and j["states"].get("done", 0) < 12'
fi
mount -o remount,size=8m "$T/db"
expect_exit "space again: the same command finishes" 0 "$S" batch -q --db "$T/db/full.db" --concurrency 2 "$T/big.jsonl"
jcheck "all 12 done once" "$("$S" batch report --db "$T/db/full.db" --json)" 'j["jobs"] == 12 and j["states"]["done"] == 12'

# ---- the --out directory's disk fills up --------------------------------------------
expect_exit "disk full under --out: exit 4" 4 "$S" batch -q --db "$T/o.db" --out "$T/out" --concurrency 2 "$T/big.jsonl"
check "names the file" grep -q "cannot write a response body: $T/out/f" /tmp/stg_err.$$
jcheck "the unwritten job is not done" "$("$S" batch report --db "$T/o.db" --json)" 'j["jobs"] == 12 and j["states"]["done"] < 12 and sum(j["states"].values()) == 12'
mount -o remount,size=8m "$T/out"
expect_exit "space again: finishes" 0 "$S" batch -q --db "$T/o.db" --out "$T/out" --concurrency 2 "$T/big.jsonl"
check "every body written" [ "$(ls "$T/out" | wc -l)" = 12 ]
check "no temp files left" [ -z "$(ls -A "$T/out" | grep '^\.')" ]

kill "$SRV_PID"; wait "$SRV_PID" 2>/dev/null || true; SRV_PID=""
TESTS_RUN=$((TESTS_RUN + 1))
python3 - "$T/srv.log" <<'EOF' || fail "each key answered, few twice"
import json, sys
from collections import Counter
c = Counter(json.loads(l)["key"] for l in open(sys.argv[1]))
# two databases, each job at least once; re-sends only for jobs in flight at a failure
ok = all(c["key-%d" % i] >= 2 for i in range(1, 13)) and sum(c.values()) <= 24 + 2 * 2
print(dict(c)) if not ok else None
sys.exit(0 if ok else 1)
EOF

finish

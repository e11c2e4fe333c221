# Helpers shared by the stagger batch integration tests. Source it.

# wait_db DB SQL: poll (at most ~10 s) until the query's first column is true.
wait_db() {
  for _ in $(seq 1 200); do
    if [ -f "$1" ] && python3 -c '
import sqlite3, sys
try:
    c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=0.2)
    r = c.execute(sys.argv[2]).fetchone()
    sys.exit(0 if r and r[0] else 1)
except Exception:
    sys.exit(1)' "$1" "$2"; then return 0; fi
    sleep 0.05
  done
  return 1
}

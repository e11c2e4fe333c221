# Helpers shared by the stagger proxy scripts (test_proxy*.sh). Source it
# after lib.sh and after setting T (the test's temporary directory):
#   proxy_start NAME ARGS...  start `stagger proxy --listen 127.0.0.1:0 ARGS`
#                             as a job of this shell (stop_jobs stops it),
#                             its output in $T/NAME.out and $T/NAME.err;
#                             sets PXPID, PXPORT and PX (its base URL);
#   proxy_stop                SIGTERM it: it must drain and exit 0;
#   wait_for CMD...           until CMD succeeds.
# Every wait ends at the event it waits for; the 30 s are a hang guard, not
# a timing bound (listen_port's, lib.sh), so a busy machine cannot fail one.
: "${T:?set T before sourcing proxy_lib.sh}"

proxy_start() {
  _pn=$1; shift
  : > "$T/$_pn.out"
  "$STAGGER" proxy --listen 127.0.0.1:0 "$@" > "$T/$_pn.out" 2> "$T/$_pn.err" &
  PXPID=$!
  PXPORT=$(listen_port "$T/$_pn.out" "$PXPID")
  [ -n "$PXPORT" ] || { echo "proxy $_pn did not start: $(cat "$T/$_pn.err")" >&2; exit 1; }
  PX="http://127.0.0.1:$PXPORT"
}

proxy_stop() {
  kill -TERM "$PXPID"
  _rc=0
  wait "$PXPID" || _rc=$?
  check "proxy exits 0 after SIGTERM (got $_rc)" [ "$_rc" = 0 ]
}

wait_for() {
  for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done
  return 1
}

# bound NAME [LIMIT] (the tests against ai_tpm_upstream.py: its log
# $T/NAME.log; LIMIT and WINDOW from the test, $PY its python): every prefix of the upstream's admitted arrivals is within
# limit + rate * t (the bucket starts full).
bound() {
  $PY - "$T/$1.log" "${2:-$LIMIT}" $WINDOW <<'EOF'
import sys
limit, window = float(sys.argv[2]), float(sys.argv[3])
rate = limit / window
arr = [(float(t), int(c)) for t, k, c in (l.split() for l in open(sys.argv[1]) if l[0].isdigit())
       if k == "ok"]
first = arr[0][0] if arr else 0
spent = 0
for t, c in arr:
    spent += c
    if spent > limit + rate * (t - first) + 1:
        print("over: %d tokens by %.3f s, bound %.0f" % (spent, t - first, limit + rate * (t - first)))
        sys.exit(1)
EOF
}

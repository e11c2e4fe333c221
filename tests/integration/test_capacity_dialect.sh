# `stagger serve --capacity N --dialect NAME` together, on 127.0.0.1: a
# queued request keeps its persona's fields, decided at admission (the
# rate-limit headers count each request once, in arrival order), and
# waits its turn like any other: with capacity 1 and a 300ms service time
# three requests sent at once are answered one after the other: at least
# 3 x 300ms pass from the first send to the last answer (a lower bound
# from the model; a busy machine only makes it later). A persona's
# refusal is not queued.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_capd.XXXXXX)
cleanup() {
  in_script || return 0
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"

serve_start capd --capacity 1 --service-time 300ms --dialect github --quota core=3/1h
t0=$(date +%s.%N)
CP=""
for i in 1 2 3; do
  curl -s -D "$T/h$i" -o /dev/null -w '%{http_code} %{time_total}\n' "$URL/x$i" >"$T/r$i" &
  CP="$CP $!"
done
for p in $CP; do wait "$p" || true; done
t1=$(date +%s.%N)
for i in 1 2 3; do
  check "capd: request $i answered 200 ($(cat "$T/r$i"))" grep -q '^200 ' "$T/r$i"
  check "capd: request $i has the persona's fields" grep -qi '^x-ratelimit-remaining: ' "$T/h$i"
done
used=$(cat "$T"/h? | tr -d '\r' | sed -n 's/^x-ratelimit-used: //Ip' | sort -n | tr '\n' ' ')
check "capd: each counted once ($used)" [ "$used" = "1 2 3 " ]
# The three services (300ms each, one at a time) all fall between t0 and t1.
check "capd: queued one after the other (all three in $t0..$t1, >= 0.9s)" \
  python3 -c "import sys; sys.exit(0 if $t1 - $t0 >= 0.9 else 1)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/x4")
check "capd: the persona's refusal past its quota ($code)" [ "$code" = 403 -o "$code" = 429 ]
st=$(curl -s "$URL/__stats")
jcheck "capd: three admitted" "$st" "j['admitted'] == 3"
serve_stop "$SRV_PID"
finish

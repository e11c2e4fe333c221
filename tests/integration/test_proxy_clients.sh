#!/usr/bin/env bash
# stagger proxy with clients nobody here wrote, unchanged, pointed at it by
# their base URL: Python requests and urllib.request, Node's built-in fetch,
# curl, and the openai npm package (baseURL), all against `stagger serve`
# on 127.0.0.1. Each sees final answers. Four naive client processes
# (retry after a fixed 1 s sleep on a 429) through one proxy: no client
# sees a 429 (the proxy paced them), every send the proxy made fits its
# bucket, burst + rate * t, on the engine's own clock (its log's t_us), and
# the server, whose bucket is the proxy's plus a margin, refused none.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch pxc
. "$(dirname "$0")/proxy_lib.sh"
# requests from Debian's python3-requests (scripts/deps.sh); urllib in any.
PY=python3


RATE=5
BURST=5
serve_start up --rate $RATE --burst $((BURST + 5)) --ratelimit-headers
proxy_start c --upstream "$URL" --route "/v1/chat/completions=$URL/echo" \
  --rate $RATE --burst $BURST --log "$T/proxy.log"

# ---- each client, unchanged, sees final answers -----------------------------------
if $PY -c 'import requests' 2>/dev/null; then
  out=$($PY - "$PX" <<'EOF'
import requests, sys
base = sys.argv[1]
s = requests.Session()
codes = [s.get(base + "/echo", params={"i": i}).status_code for i in range(12)]
r = s.post(base + "/echo", json={"hello": "world"}, headers={"Authorization": "Bearer sk-x"})
j = r.json()
print(codes.count(200), r.status_code, j["method"], j["headers"]["Authorization"], j["body"])
EOF
)
  check "python requests: 12 GETs and a POST, all 200 ($out)" \
    [ "$out" = '12 200 POST Bearer sk-x {"hello": "world"}' ]
else
  echo "python requests not installed: skipped"
fi
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=python3
out=$($SYSPY - "$PX" <<'EOF'
import sys, urllib.request
base = sys.argv[1]
codes = [urllib.request.urlopen(base + "/echo?i=%d" % i, timeout=60).status for i in range(12)]
print(codes.count(200))
EOF
)
check "python urllib.request: 12 GETs, all 200 ($out)" [ "$out" = 12 ]
out=$(node - "$PX" <<'EOF'
const base = process.argv[2];
(async () => {
  let ok = 0;
  for (let i = 0; i < 12; i++) {
    const r = await fetch(`${base}/echo?i=${i}`);
    await r.text();
    if (r.status === 200) ok++;
  }
  const r = await fetch(`${base}/echo`, {method: "POST", body: "node body"});
  const j = await r.json();
  console.log(ok, r.status, j.method, j.body);
})().catch(e => { console.log("error", e.message); });
EOF
)
check "node fetch: 12 GETs and a POST, all 200 ($out)" [ "$out" = "12 200 POST node body" ]
codes=$(for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' "$PX/echo?i=$i"; done)
check "curl: 12 GETs, all 200 ($codes)" [ "$codes" = "$(printf '200 %.0s' $(seq 12))" ]

# ---- the openai npm package, baseURL at the proxy ------------------------------------
NPM_DIR=$STG_BUILD_DIR/npm-openai
if [ ! -d "$NPM_DIR/node_modules/openai" ]; then
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && timeout 300 npm install --no-audit --no-fund --silent openai@4 > "$T/npm.log" 2>&1) || true
fi
if [ -d "$NPM_DIR/node_modules/openai" ]; then
  out=$(cd "$NPM_DIR" && node - "$PX/v1" <<'EOF'
const OpenAI = require("openai");
const client = new OpenAI({baseURL: process.argv[2], apiKey: "sk-test-not-logged", maxRetries: 0});
(async () => {
  const seen = [];
  for (let i = 0; i < 8; i++) {   // faster than the server allows: the proxy paces
    const r = await client.chat.completions.create({model: "gpt-test", messages: [{role: "user", content: "hi " + i}]});
    seen.push(r.method + " " + r.path + " " + (r.headers.authorization || r.headers.Authorization) + " " + JSON.parse(r.body).model);
  }
  console.log(new Set(seen).size, seen[0], seen.length);
})().catch(e => console.log("error", e.status, e.message));
EOF
)
  check "openai SDK via baseURL: 8 completions, no 429 ($out)" \
    [ "$out" = "1 POST /echo Bearer sk-test-not-logged gpt-test 8" ]
  check "the SDK's API key is not in the proxy's log" sh -c "! grep -q sk-test-not-logged '$T/proxy.log'"
else
  echo "openai npm package could not be installed (no registry?): SDK check skipped"
  tail -3 "$T/npm.log" 2>/dev/null || true
fi

# ---- four naive clients through one proxy --------------------------------------------
cat > "$T/naive.py" <<'EOF'
import sys, time, urllib.error, urllib.request
base, jobs, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ok = seen429 = 0
for i in range(jobs):
    while True:
        try:
            urllib.request.urlopen("%s/job/%s/%d" % (base, me, i), timeout=120).read()
            ok += 1
            break
        except urllib.error.HTTPError as e:
            if e.code != 429:
                raise
            seen429 += 1
            time.sleep(1)       # the naive retry
print(ok, seen429)
EOF
start_line=$(wc -l < "$T/proxy.log")
for c in 1 2 3 4; do
  $SYSPY "$T/naive.py" "$PX" 10 "c$c" > "$T/naive.$c" 2>&1 &
  NAIVE="${NAIVE:-} $!"
done
for p in $NAIVE; do wait "$p" || true; done
for c in 1 2 3 4; do
  check "naive client $c: 10 done, no 429 seen ($(cat "$T/naive.$c"))" [ "$(cat "$T/naive.$c")" = "10 0" ]
done
tail -n +"$((start_line + 1))" "$T/proxy.log" > "$T/naive.log"
res=$($SYSPY - "$T/naive.log" "$RATE" "$BURST" <<'EOF'
import json, sys
rate, burst = float(sys.argv[2]), int(sys.argv[3])
t = sorted(json.loads(l)["t_us"] for l in open(sys.argv[1])
           if '"event":"attempt_start"' in l and "/job/" in l)
worst = 0.0
for i in range(len(t)):
    for j in range(i, len(t)):
        # sends in [t_i, t_j] against what the bucket allows
        worst = max(worst, (j - i + 1) - (burst + rate * (t[j] - t[i]) / 1e6))
print(len(t), "ok" if worst <= 1e-6 else "over by %.3f" % worst)
EOF
)
check "the proxy's 40 sends fit burst + rate*t ($res)" [ "$res" = "40 ok" ]
st=$(curl -s "$URL/__stats")
jcheck "the server refused none of them" "$st" 'j["limited"] == 0'
proxy_stop
serve_stop "$SRV_PID" || true
finish

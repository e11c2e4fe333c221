# Batch input may not set framing (issue #30, "one batch job can poison
# another's result"): a JSONL job whose headers say "Content-Length: 1" and
# whose body holds a second request made an HTTP/1.1 server read that
# request from the connection; the next job, sent on the same connection
# with the batch's Authorization, got the smuggled request's answer and was
# recorded done while its own request was never answered.
#
# The upstream is a raw HTTP/1.1 keep-alive server (Python, loopback) that
# frames requests by their Content-Length as any server does and logs every
# byte it reads. Checked: that job is a bad line with its reason, nothing
# of it reaches the server, the next job is sent and recorded with its own
# answer; -H, -H @FILE and --secret-header-env with such a field are usage
# errors; a job that still carries one in the database (written by an older
# stagger) fails unsent.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_smuggle

# The upstream: answers each request it parses with "answer to METHOD PATH
# auth=AUTHORIZATION", in order, keeping the connection open; raw.log gets
# every byte read, requests.log one line per request parsed.
cat >"$T/upstream.py" <<'EOF'
import socket, sys, threading
raw_log, req_log = open(sys.argv[1], "ab", 0), open(sys.argv[2], "a", 1)
lock = threading.Lock()
def serve(c):
    buf = b""
    while True:
        data = c.recv(65536)
        if not data:
            return
        with lock:
            raw_log.write(data)
        buf += data
        while b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            fields = {}
            for l in lines[1:]:
                k, _, v = l.partition(":")
                fields.setdefault(k.strip().lower(), v.strip())
            n = int(fields.get("content-length", "0") or 0)
            if len(rest) < n:
                break
            buf = rest[n:]
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            with lock:
                req_log.write("%s %s auth=%s\n" % (method, path, fields.get("authorization", "-")))
            body = ("answer to %s %s auth=%s" % (method, path, fields.get("authorization", "-"))).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(16)
print("listening on http://127.0.0.1:%d" % s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
python3 "$T/upstream.py" "$T/raw.log" "$T/requests.log" >"$T/upstream.out" 2>&1 &
U=$(listen_port "$T/upstream.out" $!)
[ -n "$U" ] || { echo "the upstream did not start: $(cat "$T/upstream.out")"; exit 1; }

# The first job's body: one byte of body, then the head of a second request
# left open on a header line, so that the next request on the connection
# (the second job's) completes it: its request line becomes that header's
# value and its Authorization the smuggled request's (the classic vector;
# no timing involved).
python3 - "$T/in.jsonl" "$U" <<'EOF'
import json, sys
path, port = sys.argv[1], sys.argv[2]
smuggled = "x" + "GET /admin/delete-everything HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Swallow: "
with open(path, "w") as f:
    f.write(json.dumps({"id": "first", "method": "POST", "url": "http://127.0.0.1:%s/first" % port,
                        "headers": {"Content-Length": "1"}, "body": smuggled}) + "\n")
    f.write(json.dumps({"id": "second", "url": "http://127.0.0.1:%s/second" % port}) + "\n")
EOF
mkdir "$T/out"
expect_exit "the batch runs the good job: exit 0" 0 "$S" batch -q --db "$T/b.db" --out "$T/out" \
  --concurrency 1 -H "Authorization: Bearer BATCH-TOKEN" "$T/in.jsonl"
cp /tmp/stg_err.$$ "$T/run.err"
check "the smuggling job is a bad line with its reason" \
  grep -q "in.jsonl:1: bad header: Content-Length frames the message" "$T/run.err"
check "report lists it" sh -c "'$S' batch report --db '$T/b.db' --bad-lines | grep -q 'in.jsonl:1: bad header: Content-Length'"
jcheck "one done, one bad line" "$("$S" batch report --db "$T/b.db" --json)" \
  'j["states"]["done"] == 1 and j["bad_lines"] == 1 and j["jobs"] == 1'
check "nothing smuggled reached the server" sh -c '! grep -qa "admin" "$1"' _ "$T/raw.log" "$T/requests.log"
check "nothing of the bad job was sent" sh -c '! grep -qa "/first" "$1"' _ "$T/raw.log"
check "the second job was sent with the batch's Authorization" \
  grep -qx "GET /second auth=Bearer BATCH-TOKEN" "$T/requests.log"
check "the second job is recorded with its own answer" \
  grep -qx "answer to GET /second auth=Bearer BATCH-TOKEN" "$T/out/second"

# ---- the command line: a usage error (exit 2), nothing read or sent ----------
: >"$T/raw.log"
echo "http://127.0.0.1:$U/cli" >"$T/urls.txt"
for h in "Content-Length: 1" "transfer-encoding: chunked" "Connection: close" "Host: admin" \
         "Proxy-Authorization: Basic eA==" "Upgrade:" "TE;" "Transfer-Encoding : chunked"; do
  expect_exit "-H '$h': usage error" 2 "$S" batch -q --db "$T/h.db" -H "$h" "$T/urls.txt"
  check "-H '$h': a clear message" grep -q "bad header" /tmp/stg_err.$$
done
check "-H Content-Length: the reason" sh -c "'$S' batch -q --db '$T/h.db' -H 'Content-Length: 1' '$T/urls.txt' 2>&1 | grep -q 'Content-Length frames the message'"
printf 'X-Ok: 1\nConnection: keep-alive\n' >"$T/hdrs.txt"
expect_exit "-H @FILE with Connection: usage error" 2 "$S" batch -q --db "$T/h.db" -H @"$T/hdrs.txt" "$T/urls.txt"
check "-H @FILE: the file's line named" grep -q "hdrs.txt (line 2): Connection is connection-level" /tmp/stg_err.$$
expect_exit "--secret-header-env Transfer-Encoding: usage error" 2 env SMUG=chunked \
  "$S" batch -q --db "$T/h.db" --secret-header-env Transfer-Encoding=SMUG "$T/urls.txt"
check "--secret-header-env: no value echoed" sh -c '! grep -q chunked "$1"' _ /tmp/stg_err.$$
check "no database written" test ! -e "$T/h.db"
check "nothing sent" test ! -s "$T/raw.log"

# ---- a job stored with such a header (an older stagger's database) --------------
echo "{\"id\": \"old\", \"url\": \"http://127.0.0.1:$U/old\", \"headers\": {\"X-A\": \"1\"}}" >"$T/old.jsonl"
expect_exit "the job runs once" 0 "$S" batch -q --db "$T/old.db" "$T/old.jsonl"
check "sent then" grep -qa "/old" "$T/raw.log"
: >"$T/raw.log"
python3 - "$T/old.db" <<'EOF2'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = c.execute("""UPDATE jobs SET headers = '["X-A: 1", "Transfer-Encoding: chunked"]',
                 state = 'pending' WHERE key = 'old'""").rowcount
c.commit()
sys.exit(0 if n == 1 else 1)
EOF2
expect_exit "the stored job fails: exit 1" 1 "$S" batch -q --db "$T/old.db" "$T/old.jsonl"
jcheck "failed as an invalid request, with the reason" \
  "$("$S" batch export --db "$T/old.db" | head -1)" \
  'j["state"] == "failed" and j["reason"] == "invalid_request" and "Transfer-Encoding frames the message" in j["error"]'
check "never sent" sh -c '! grep -qa "/old" "$1"' _ "$T/raw.log"

finish

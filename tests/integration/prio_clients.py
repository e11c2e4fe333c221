"""Closed-loop HTTP clients for the priority tests (test_proxy_priority.sh).

prio_clients.py BASE SECONDS GROUP...
GROUP: NAME:THREADS:HEADERS[:PAUSE[:START[:STOP]]]
  NAME     tag of the group's requests (path /NAME/N)
  THREADS  clients of the group, each sending one request at a time
  HEADERS  ';'-less header list "Stagger-Priority=batch,Stagger-Tenant=a|w=2"
           (a '|' stands for ';' in a value)
  PAUSE    seconds between a client's answer and its next request (0)
  START, STOP  seconds from the start during which the group sends
Prints one line per answered request: NAME SENT_S DONE_S STATUS.
Keep-alive connections (http.client), one per thread; stops at SECONDS.
"""
import http.client
import sys
import threading
import time
import urllib.parse

base, seconds, groups = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
u = urllib.parse.urlsplit(base)
t0 = time.monotonic()
lock = threading.Lock()
out = []


def client(name, headers, pause, start, stop):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    n = 0
    while True:
        now = time.monotonic() - t0
        if now < start:
            time.sleep(start - now)
            continue
        if now >= min(stop, seconds):
            break
        n += 1
        sent = time.monotonic() - t0
        try:
            conn.request("GET", "/%s/%d" % (name, n), headers=headers)
            r = conn.getresponse()
            r.read()
            status = r.status
        except Exception:
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            status = 0
        done = time.monotonic() - t0
        with lock:
            out.append("%s %.4f %.4f %d" % (name, sent, done, status))
        if pause:
            time.sleep(pause)
    conn.close()


threads = []
for g in groups:
    f = g.split(":")
    name, n, hdrs = f[0], int(f[1]), f[2]
    pause = float(f[3]) if len(f) > 3 and f[3] else 0
    start = float(f[4]) if len(f) > 4 and f[4] else 0
    stop = float(f[5]) if len(f) > 5 and f[5] else seconds
    headers = {}
    for h in hdrs.split(","):
        if h:
            k, v = h.split("=", 1)
            headers[k] = v.replace("|", ";")
    for _ in range(n):
        t = threading.Thread(target=client, args=(name, headers, pause, start, stop))
        t.start()
        threads.append(t)
for t in threads:
    t.join()
print("\n".join(out))

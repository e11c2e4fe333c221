#!/usr/bin/python3
"""The naive client of the batch incident, for `make bench`, bench/bench_batch.sh
and `make demo`.

Usage: naive.py BASE_URL KEYS_FILE [WORKERS]

WORKERS threads (default 50) take keys from a queue; each GETs BASE_URL + KEY
(X-Client-Id: KEY) and, on 429, any 5xx or a connection error, sleeps a fixed
1 s and tries again, until it gets another answer. No backoff, no jitter, no
Retry-After, no cap on tries: the outer timeout of the benchmark bounds it.
Standard library only. Prints one line: ok=N failed=N.
"""
import http.client
import queue
import sys
import threading
import time
import urllib.parse


def main():
    if len(sys.argv) < 3:
        print("usage: naive.py BASE_URL KEYS_FILE [WORKERS]", file=sys.stderr)
        return 2
    base = urllib.parse.urlsplit(sys.argv[1])
    prefix = base.path
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    q = queue.Queue()
    with open(sys.argv[2]) as f:
        for line in f:
            if line.strip():
                q.put(line.strip())
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def worker():
        conn = None
        while True:
            try:
                key = q.get_nowait()
            except queue.Empty:
                break
            while True:
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
                    conn.request("GET", prefix + key, headers={"X-Client-Id": key})
                    r = conn.getresponse()
                    r.read()
                    status = r.status
                except (OSError, http.client.HTTPException):
                    if conn is not None:
                        conn.close()
                    conn = None
                    status = 0
                if status == 429 or status == 0 or status >= 500:
                    time.sleep(1.0)
                    continue
                with lock:
                    counts["ok" if status == 200 else "failed"] += 1
                break
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok=%d failed=%d" % (counts["ok"], counts["failed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

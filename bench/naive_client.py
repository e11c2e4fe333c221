"""The incident's client (background notes, section 2): 50 workers, a fixed
1 s sleep on 429, no jitter, no limit. Used by bench/bench_batch.sh and
make demo for contrast. Usage: naive_client.py PORT KEYS_FILE [WORKERS];
prints the number of keys answered 200. Talks to 127.0.0.1 only."""
import http.client
import queue
import sys
import threading
import time

port, keys = int(sys.argv[1]), [l.strip() for l in open(sys.argv[2]) if l.strip()]
workers = int(sys.argv[3]) if len(sys.argv) > 3 else 50
q = queue.Queue()
for k in keys:
    q.put(k)
done = [0]
lock = threading.Lock()


def worker():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while True:
        try:
            k = q.get_nowait()
        except queue.Empty:
            return
        for _ in range(100):
            try:
                c.request("GET", "/track/" + k)
                r = c.getresponse()
                r.read()
            except (OSError, http.client.HTTPException):
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                time.sleep(1)
                continue
            if r.status == 429:
                time.sleep(1)
                continue
            if r.status == 200:
                with lock:
                    done[0] += 1
            break


ts = [threading.Thread(target=worker) for _ in range(workers)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(done[0])

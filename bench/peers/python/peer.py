#!/usr/bin/python3
"""Peer client for `make bench`: Python requests + urllib3 Retry, as people use them.

Usage: peer.py BASE_URL KEYS_FILE [CONCURRENCY]

GETs BASE_URL + KEY for every key (one per line) from a thread pool of
CONCURRENCY (default 30). Each thread has its own requests.Session with an
HTTPAdapter(max_retries=Retry(total=6, backoff_factor=0.5,
status_forcelist=429/500/502/503/504, respect_retry_after_header=True)).
Each request carries X-Client-Id: KEY. Prints one line: ok=N failed=N.
"""
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def main():
    if len(sys.argv) < 3:
        print("usage: peer.py BASE_URL KEYS_FILE [CONCURRENCY]", file=sys.stderr)
        return 2
    base = sys.argv[1]
    conc = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    with open(sys.argv[2]) as f:
        keys = [line.strip() for line in f if line.strip()]

    local = threading.local()

    def session():
        s = getattr(local, "s", None)
        if s is None:
            retry = Retry(total=6, backoff_factor=0.5,
                          status_forcelist=(429, 500, 502, 503, 504),
                          allowed_methods=frozenset(["GET", "HEAD"]),
                          respect_retry_after_header=True,
                          raise_on_status=False)
            s = requests.Session()
            s.mount("http://", HTTPAdapter(max_retries=retry, pool_maxsize=1))
            local.s = s
        return s

    def job(key):
        try:
            r = session().get(base + key, headers={"X-Client-Id": key}, timeout=(5, 10))
            return r.status_code == 200
        except requests.RequestException:
            return False

    with ThreadPoolExecutor(max_workers=conc) as pool:
        results = list(pool.map(job, keys))
    ok = sum(results)
    print("ok=%d failed=%d" % (ok, len(results) - ok))
    return 0


if __name__ == "__main__":
    sys.exit(main())

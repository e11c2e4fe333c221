#!/usr/bin/env python3
"""An OpenAI-like upstream that meters tokens per minute, for test_proxy_ai_cost.sh.

POST .../chat/completions, .../embeddings, /v1/messages: each request is
counted at its arrival, as OpenAI documents, from its body: the prompt's
characters / 4 (rounded up) plus max_tokens (--rule sum), or the larger of
the two (--rule max). A bucket of --limit tokens refills --limit per
--window seconds; a request over what it holds is refused (429) and not
counted. Every answer carries x-ratelimit-limit-tokens,
x-ratelimit-remaining-tokens and x-ratelimit-reset-tokens (a Go duration
until the bucket is full), and the requests quota the same way; a 429 also
retry-after-ms. A 200 carries usage. --overload N,M answers those arrivals
(counted from 1) 529 overloaded_error with no rate-limit field, not
counted; --quiet-after K leaves the rate-limit fields out of every answer
after the K-th arrival (usage still in the body); --charge usage counts a
request at its arrival by its usage (prompt + the completion it gets)
instead of prompt + max_tokens; --start L starts the bucket at L tokens;
--no-retry-after leaves retry-after-ms out of a 429. --dialect anthropic
meters as Anthropic does instead: an input-tokens bucket (the prompt's
characters / 4) and an output-tokens bucket (--out-limit, max_tokens),
each counted at arrival, both told in anthropic-ratelimit-{input,output}-
tokens-{limit,remaining,reset} (reset: RFC 3339, when full, whole seconds
rounded up), a 429 with retry-after in seconds; a request is logged as
its input plus output; --quiet-after K leaves their fields out after the
K-th arrival too; --chars-per-token C counts its input as the prompt's
characters / C (default 4) and tells that in its usage; a request with
"stream": true is answered as Anthropic streams (message_start with the
input_tokens, --stream-deltas text deltas of about 100 bytes each,
message_delta with the output_tokens, message_stop).
--port P listens there (default: a free port).
Each arrival is one line in --log:
"<seconds since start> ok <charge>" or "<seconds> refused <charge>", and
"stagger-header" when a Stagger-* field reached it (it must not).
Prints "listening on http://127.0.0.1:PORT" first. Loopback only.
"""
import argparse
import datetime
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--limit", type=float, default=3000)
ap.add_argument("--window", type=float, default=3.0)
ap.add_argument("--rule", choices=["sum", "max"], default="sum")
ap.add_argument("--latency", type=float, default=0.05)
ap.add_argument("--log", required=True)
ap.add_argument("--overload", default="")
ap.add_argument("--quiet-after", type=int, default=0)
ap.add_argument("--charge", choices=["arrival", "usage"], default="arrival")
ap.add_argument("--start", type=float, default=-1)
ap.add_argument("--no-retry-after", action="store_true")
ap.add_argument("--dialect", choices=["openai", "anthropic"], default="openai")
ap.add_argument("--out-limit", type=float, default=-1)
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--chars-per-token", type=float, default=4)
ap.add_argument("--stream-deltas", type=int, default=120)
args = ap.parse_args()

RATE = args.limit / args.window
OUT_LIMIT = args.out_limit if args.out_limit > 0 else args.limit
OUT_RATE = OUT_LIMIT / args.window
lock = threading.Lock()
state = {"olevel": OUT_LIMIT, "level": args.limit if args.start < 0 else args.start, "at": time.monotonic(), "req": 10000.0, "n": 0}
OVERLOAD = {int(x) for x in args.overload.split(",") if x}
T0 = time.monotonic()
logf = open(args.log, "a", buffering=1)


def go_duration(s):
    """s as OpenAI writes a reset ("6m0s", "1.234s", "17ms"), rounded up to
    the millisecond: the bucket is full no sooner than it says."""
    if s <= 0:
        return "0s"
    ms = math.ceil(s * 1000)
    if ms < 1000:
        return "%dms" % ms
    m = ms // 60000
    return ("%dm" % m if m else "") + "%d.%03ds" % ((ms % 60000) // 1000, ms % 1000)


def texts(v):
    """Characters of every text string in v (what the prompt holds)."""
    if isinstance(v, str):
        return len(v)
    if isinstance(v, list):
        return sum(texts(x) for x in v)
    if isinstance(v, dict):
        return sum(texts(x) for k, x in v.items() if k not in ("type", "role"))
    return 0


def completion_of(body):
    return min(body.get("max_tokens") or 16, 20)


def charge_of(body):
    prompt = texts(body.get("messages", [])) + texts(body.get("input", "")) + texts(
        body.get("system", ""))
    inp = math.ceil(prompt / 4)
    if args.charge == "usage":
        return inp, inp + completion_of(body)
    out = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return inp, (max(inp, out) if args.rule == "max" else inp + out)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def quota_headers(self, level):
        if args.quiet_after and state["n"] > args.quiet_after:
            return
        self.send_header("x-ratelimit-limit-tokens", str(int(args.limit)))
        self.send_header("x-ratelimit-remaining-tokens", str(int(level)))
        self.send_header("x-ratelimit-reset-tokens", go_duration((args.limit - int(level)) / RATE))
        self.send_header("x-ratelimit-limit-requests", "10000")
        self.send_header("x-ratelimit-remaining-requests", str(int(state["req"])))
        self.send_header("x-ratelimit-reset-requests", "6ms")

    def anthropic_headers(self, level, olevel):
        if args.quiet_after and state["n"] > args.quiet_after:
            return
        def reset(missing, rate):
            at = time.time() + math.ceil(missing / rate)
            return datetime.datetime.fromtimestamp(math.ceil(at), datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        for unit, lim, lev, rate in (("input-tokens", args.limit, level, RATE),
                                     ("output-tokens", OUT_LIMIT, olevel, OUT_RATE)):
            self.send_header("anthropic-ratelimit-%s-limit" % unit, str(int(lim)))
            self.send_header("anthropic-ratelimit-%s-remaining" % unit, str(int(lev)))
            self.send_header("anthropic-ratelimit-%s-reset" % unit, reset(lim - int(lev), rate))

    def anthropic(self, body):
        inp = math.ceil((texts(body.get("messages", [])) + texts(body.get("system", ""))) /
                        args.chars_per_token)
        out = body.get("max_tokens") or 0
        with lock:
            state["n"] += 1
            now = time.monotonic()
            dt = now - state["at"]
            state["level"] = min(args.limit, state["level"] + RATE * dt)
            state["olevel"] = min(OUT_LIMIT, state["olevel"] + OUT_RATE * dt)
            state["at"] = now
            ok = inp <= state["level"] and out <= state["olevel"]
            if ok:
                state["level"] -= inp
                state["olevel"] -= out
            level, olevel = math.floor(state["level"]), math.floor(state["olevel"])
            wait = max((inp - state["level"]) / RATE, (out - state["olevel"]) / OUT_RATE, 0.001)
            logf.write("%.6f %s %d\n" % (now - T0, "ok" if ok else "refused", inp + out))
        if ok and body.get("stream"):
            time.sleep(args.latency)
            return self.anthropic_stream(level, olevel, inp, completion_of(body))
        if ok:
            time.sleep(args.latency)
            data = json.dumps({"id": "msg", "type": "message", "role": "assistant",
                               "content": [{"type": "text", "text": "ok"}],
                               "usage": {"input_tokens": inp,
                                         "output_tokens": completion_of(body)}}).encode()
            self.send_response(200)
        else:
            data = json.dumps({"type": "error", "error": {
                "type": "rate_limit_error", "message": "rate limit"}}).encode()
            self.send_response(429)
            self.send_header("retry-after", str(math.ceil(wait)))
        self.anthropic_headers(level, olevel)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def anthropic_stream(self, level, olevel, inp, out):
        self.send_response(200)
        self.anthropic_headers(level, olevel)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(name, obj):
            data = b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(obj).encode())
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        event("message_start", {"type": "message_start", "message": {
            "id": "msg", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": inp, "output_tokens": 1}}})
        for _ in range(args.stream_deltas):
            event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": " tok"}})
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                "usage": {"output_tokens": out}})
        event("message_stop", {"type": "message_stop"})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        if any(k.lower().startswith("stagger-") for k in self.headers.keys()):
            logf.write("stagger-header\n")
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        if args.dialect == "anthropic":
            return self.anthropic(body)
        inp, charge = charge_of(body)
        with lock:
            state["n"] += 1
            if state["n"] in OVERLOAD:
                logf.write("%.6f overloaded %d\n" % (time.monotonic() - T0, charge))
                data = json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                              "message": "Overloaded"}}).encode()
                self.send_response(529)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            now = time.monotonic()
            state["level"] = min(args.limit, state["level"] + RATE * (now - state["at"]))
            state["at"] = now
            ok = charge <= state["level"]
            if ok:
                state["level"] -= charge
                state["req"] = max(0, state["req"] - 1)
            level = math.floor(state["level"])
            wait = (charge - state["level"]) / RATE
            logf.write("%.6f %s %d\n" % (now - T0, "ok" if ok else "refused", charge))
        if not ok:
            out = json.dumps({"error": {"type": "tokens", "code": "rate_limit_exceeded",
                                        "message": "Rate limit reached on tokens per min"}})
            self.send_response(429)
            self.quota_headers(level)
            if not args.no_retry_after:
                self.send_header("retry-after-ms", str(max(1, math.ceil(wait * 1000))))
        else:
            time.sleep(args.latency)
            done = completion_of(body)
            out = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": inp, "completion_tokens": done,
                          "total_tokens": inp + done}})
            self.send_response(200)
            self.quota_headers(level)
        data = out.encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


srv = ThreadingHTTPServer(("127.0.0.1", args.port), H)
srv.daemon_threads = True
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()

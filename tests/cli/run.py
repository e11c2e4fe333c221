#!/usr/bin/env python3
"""Run the curl-style command-line cases of tests/cli/*.case.

Each case, in the manner of curl's tests/data/testNNN, says three things:
the command, what the server must have received, and what the command must
have printed. The runner starts a fresh `stagger serve` on 127.0.0.1 for
each case (port 0, request log on), runs the command in a scratch directory,
stops the server by its PID, then checks.

Case file: one "key: value" a line ('#' lines are comments); keys repeat.
  name:        what the case shows
  server:      extra `stagger serve` arguments, or "none" (no server)
  given-file:  NAME CONTENT   a file in the scratch directory (\\n, \\t escapes)
  env:         NAME=VALUE     set for the command (also "NAME=" to unset)
  stdin:       CONTENT        standard input (\\n escapes); default empty
  command:     stagger's arguments, shell-quoted (shlex); required
  exit:        the exit status (default 0)
  requests:    the number of requests the server logged (0: nothing sent)
  request:     a Python expression over r (the last logged request: method,
               path, status, client, key) and R (all of them, in order)
  stdout, stderr: the exact output (\\n escapes)
  stdout-has / stdout-lacks / stderr-has / stderr-lacks: a substring
  stdout-re / stderr-re: a regular expression (re.search, multiline)
  stdout-json: a Python expression over j, standard output as JSON (the
               /echo route answers with the request it received: method,
               path, query, headers, body)
  file:        NAME EXPR      EXPR over t, the file's text (None: no file)
  file-json:   NAME EXPR      EXPR over j, the file parsed as JSON
  curl:        ARGS           run curl(1) ARGS too (after the command, against the
               same server): curl_out is its standard output, and
               same_request(out, curl_out) compares two /echo answers
               (method, path, query, body, headers but User-Agent; the
               multipart boundary normalised): "behaves as curl's does"
  check:       EXPR           over out, err, files (name -> text) and the above
Placeholders in every value: %URL (http://127.0.0.1:PORT), %HOSTPORT, %DIR.

Only loopback traffic: the command must name %URL (or no server). A
"hang guard" timeout ends a case that never finishes; it is not a bound.
"""
import base64  # noqa: F401  (for the expressions)
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HANG_GUARD = 120  # seconds: only so that a broken case cannot hang ctest


def unescape(s):
    return s.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")


def same_request(a, b):
    """Two /echo answers describe the same request (User-Agent aside)."""
    a, b = json.loads(a), json.loads(b)
    for j in (a, b):
        j["headers"].pop("User-Agent", None)
        ct = j["headers"].get("Content-Type", "")
        m = re.search(r"boundary=(\S+)", ct)
        if m:
            bnd = m.group(1)
            j["headers"]["Content-Type"] = ct.replace(bnd, "B")
            j["body"] = j.get("body", "").replace(bnd, "B")
            j["headers"].pop("Content-Length", None)
    if a != b:
        print(f"    stagger: {a}\n    curl:    {b}")
    return a == b


def parse_case(path):
    case = {"_path": path, "_items": []}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, val = line.partition(":")
            if not sep:
                raise SystemExit(f"{path}:{n}: expected 'key: value'")
            case["_items"].append((key.strip(), val.strip(), n))
    return case


def start_server(stagger, args, log, tmp):
    out = open(os.path.join(tmp, "serve.out"), "w+")
    proc = subprocess.Popen([stagger, "serve", "--bind", "127.0.0.1", "--port", "0",
                             "--threads", "2", "--log", log] + args,
                            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30  # hang guard: the loop ends at the line
    while time.monotonic() < deadline:
        out.seek(0)
        first = out.readline()
        m = re.match(r"^listening on http://127\.0\.0\.1:(\d+)$", first.strip())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    out.seek(0)
    raise RuntimeError("stagger serve did not start: " + out.read())


def stop_server(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def run_case(stagger, case):
    items = case["_items"]
    first = {}
    for k, v, _ in items:
        first.setdefault(k, v)
    tmp = tempfile.mkdtemp(prefix="stg_cli.")
    log = os.path.join(tmp, "server.jsonl")
    proc, port = None, 0
    failures = []
    try:
        server = first.get("server", "")
        if server != "none":
            proc, port = start_server(stagger, shlex.split(server), log, tmp)
        work = os.path.join(tmp, "work")
        os.mkdir(work)

        def subst(s):
            return (s.replace("%URL", f"http://127.0.0.1:{port}")
                    .replace("%HOSTPORT", f"127.0.0.1:{port}").replace("%DIR", work))

        env = dict(os.environ)
        for k in ("http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                  "no_proxy", "NO_PROXY", "NO_COLOR"):
            env.pop(k, None)  # the cases say what they need
        stdin = b""
        for k, v, _ in items:
            v = subst(v)
            if k == "given-file":
                name, _, content = v.partition(" ")
                with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                    f.write(unescape(content))
            elif k == "env":
                name, _, value = v.partition("=")
                env[name] = value
            elif k == "stdin":
                stdin = unescape(v).encode()
        if "command" not in first:
            raise SystemExit(f"{case['_path']}: no command")
        argv = [stagger] + shlex.split(subst(first["command"]))
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=work, env=env, input=stdin, capture_output=True,
                           timeout=HANG_GUARD)
        took = time.monotonic() - t0
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        curl_out = None
        if "curl" in first and proc:
            if not shutil.which("curl"):
                return ["curl(1) is not installed: the comparison cannot run"]
            c = subprocess.run(["curl", "-q", "-s"] + shlex.split(subst(first["curl"])), cwd=work,
                               env=env, input=stdin, capture_output=True, timeout=HANG_GUARD)
            curl_out = c.stdout.decode("utf-8", "replace")
        if proc:
            stop_server(proc)
            proc = None
        R = []
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                R = [json.loads(line) for line in f if line.strip()]
        r = R[-1] if R else None
        files = {}
        for name in os.listdir(work):
            fp = os.path.join(work, name)
            if os.path.isfile(fp):
                with open(fp, encoding="utf-8", errors="replace", newline="") as f:
                    files[name] = f.read()
        scope = {"out": out, "err": err, "R": R, "r": r, "files": files, "took": took,
                 "curl_out": curl_out, "same_request": same_request,
                 "json": json, "re": re, "base64": base64, "port": port,
                 "mode": lambda n: os.stat(os.path.join(work, n)).st_mode & 0o777}

        def expect(ok, what, line):
            if not ok:
                failures.append(f"line {line}: {what}")

        want_exit = int(first.get("exit", "0"))
        expect(p.returncode == want_exit, f"exit {p.returncode}, want {want_exit}", 0)
        for k, v, line in items:
            v = subst(v)
            try:
                if k == "requests":
                    expect(len(R) == int(v), f"{len(R)} requests logged, want {v}: {R}", line)
                elif k == "request":
                    expect(r is not None and eval(v, scope), f"request: {v} is false for {R}",
                           line)
                elif k in ("stdout", "stderr"):
                    text = out if k == "stdout" else err
                    expect(text == unescape(v), f"{k} {text!r}, want {unescape(v)!r}", line)
                elif k in ("stdout-has", "stderr-has", "stdout-lacks", "stderr-lacks"):
                    text = out if k.startswith("stdout") else err
                    has = unescape(v) in text
                    expect(has == k.endswith("has"), f"{k} {v!r}: {text!r}", line)
                elif k in ("stdout-re", "stderr-re"):
                    text = out if k == "stdout-re" else err
                    expect(re.search(v, text, re.M), f"{k} {v!r}: {text!r}", line)
                elif k == "stdout-json":
                    scope["j"] = json.loads(out)
                    expect(eval(v, scope), f"stdout-json: {v} is false for {out!r}", line)
                elif k in ("file", "file-json"):
                    name, _, expr = v.partition(" ")
                    t = files.get(name)
                    scope["t"] = t
                    if k == "file-json":
                        scope["j"] = json.loads(t) if t is not None else None
                    expect(eval(expr, scope), f"{k} {name}: {expr} is false for {t!r}", line)
                elif k == "check":
                    expect(eval(v, scope), f"check: {v} is false (out {out!r}, err {err!r})",
                           line)
            except Exception as e:  # a broken expectation is a failure, not a crash
                failures.append(f"line {line}: {k}: {type(e).__name__}: {e}")
        if failures:
            failures.append(f"command: {shlex.join(argv)}\nstdout: {out!r}\nstderr: {err!r}")
    finally:
        if proc:
            stop_server(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return failures


def main():
    args = sys.argv[1:]
    stagger = os.environ.get("STAGGER")
    if len(args) >= 2 and args[0] == "--stagger":
        stagger, args = args[1], args[2:]
    if not stagger or not args:
        raise SystemExit("usage: run.py [--stagger PATH] CASE...")
    stagger = os.path.abspath(stagger)
    failed = 0
    for path in args:
        case = parse_case(path)
        name = next((v for k, v, _ in case["_items"] if k == "name"), path)
        fails = run_case(stagger, case)
        label = os.path.basename(path)
        if fails:
            failed += 1
            print(f"FAIL {label}: {name}")
            for f in fails:
                print("  " + f.replace("\n", "\n  "))
        else:
            print(f"ok   {label}: {name}")
    print(f"{len(args) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

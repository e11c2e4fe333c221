# The proxy benches' shared parts (sourced by bench_proxy.sh and
# bench_profile.sh, after they set ROOT, T and PY): a process's port from its
# "listening on" line, the stop of processes by PID, a free loopback port,
# a process's CPU so far, and the two peers stagger proxy is measured
# against, each a reverse proxy to an upstream on 127.0.0.1, one worker,
# keep-alive to the upstream. Only loopback is ever listened on.
. "$ROOT/bench/nginx_lib.sh"

port_of() { # FILE PID: the port of PID's "listening on" line in FILE
  i=0
  while [ $i -lt 200 ]; do
    # The file may not be there yet (the shell opens it in the child).
    p=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$1" 2>/dev/null || true)
    [ -n "$p" ] && { echo "$p"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
    i=$((i + 1))
  done
  echo "did not start: $(cat "$1")" >&2
  exit 1
}
stop() { for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
cpu_ns() { # PID: the on-CPU ns of all its threads so far
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'
}

# nginx as a reverse proxy to 127.0.0.1:$1 on a free loopback port (sets
# NGX_PID, NGXPORT, NGXW: its one worker); false when nginx is missing or
# does not answer.
nginx_proxy() {
  NGXPORT=$(free_port)
  rm -rf "$T/ngx"
  nginx_run "$T/ngx" 1 "$NGXPORT" /track/w <<EOF2 || return 1
    upstream up { server 127.0.0.1:$1; keepalive 64; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$NGXPORT;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
EOF2
  NGXW=$(pgrep -P "$NGX_PID" | head -1)
  [ -n "$NGXW" ]
}

# h2o (2.2.5, Debian's) as a reverse proxy to 127.0.0.1:$1 on a free
# loopback port, one thread (sets H2O_PID, H2OPORT): the other peer, a
# proxy made of an HTTP library's server and client on one event loop, as
# stagger's is of libmicrohttpd's and libcurl's; false when h2o is missing
# or does not answer (H2O_PID is then stopped and empty).
h2o_proxy() {
  _h2o=$(command -v h2o || echo /usr/bin/h2o)
  [ -x "$_h2o" ] || return 1
  H2OPORT=$(free_port)
  cat > "$T/h2o.conf" <<EOF2
listen:
  host: 127.0.0.1
  port: $H2OPORT
num-threads: 1
access-log: /dev/null
error-log: $T/h2o.err
proxy.timeout.keepalive: 600000
hosts:
  default:
    paths:
      /:
        proxy.reverse.url: http://127.0.0.1:$1/
EOF2
  "$_h2o" -c "$T/h2o.conf" > "$T/h2o.out" 2>&1 &
  H2O_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$H2OPORT/track/w" && return 0
    sleep 0.05
  done
  stop "$H2O_PID"
  H2O_PID=""
  return 1
}

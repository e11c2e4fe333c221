# nginx on 127.0.0.1 for the benches that put it beside stagger (sourced by
# bench_serve.sh and bench_proxy.sh). Only loopback is ever listened on.
#
# nginx_run DIR WORKERS PORT PATH < SERVER_LINES: writes DIR/nginx.conf
# (WORKERS worker processes, no access log, keep-alive connections that
# never end, every temp path inside DIR, and the http-level lines read
# from stdin: an upstream and a server block listening on 127.0.0.1:PORT),
# starts nginx in the foreground as a background job (sets NGX_PID), and
# waits until http://127.0.0.1:PORT/PATH answers; false when nginx is
# missing or does not answer within 5 s.
nginx_run() {
  _nd=$1 _nw=$2 _np=$3 _nu=$4
  _ngx=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$_ngx" ] || return 1
  mkdir -p "$_nd"
  {
    cat <<EOF
worker_processes $_nw;
daemon off;
pid $_nd/nginx.pid;
error_log $_nd/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $_nd/body;
    proxy_temp_path $_nd/proxy;
    fastcgi_temp_path $_nd/fastcgi;
    uwsgi_temp_path $_nd/uwsgi;
    scgi_temp_path $_nd/scgi;
    default_type application/json;
EOF
    cat
    echo "}"
  } > "$_nd/nginx.conf"
  "$_ngx" -p "$_nd" -c "$_nd/nginx.conf" -e "$_nd/error.log" 2> "$_nd/stderr" &
  NGX_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$_np$_nu" && return 0
    sleep 0.05
  done
  return 1
}

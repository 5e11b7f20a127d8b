#!/usr/bin/env bash
# Several app processes behind Debian's nginx with sticky sessions: one public port, N Streamlit servers.
#
#   bash scripts/serve_many.sh [N=2] [PORT=8500]        # then open http://127.0.0.1:PORT
#   NORMVIZ_SERVE_DIR=/tmp/x bash scripts/serve_many.sh  # where configs, pids and logs go (default: a temp dir)
#   normviz app --procs N [--port PORT] [--warm MODELS] [--public]  # the same, from the command line
#
# Why: one Streamlit process serialises its visitors' Python work on one GIL (issue 22); N processes use N
# cores. Each process keeps its own models, session cache and heavy-maps worker (NORMVIZ_HEAVY_WORKERS per
# process): a job's deadline, kill and replacement stay inside the process that asked, and no cross-process
# queue is needed; the cost is one model copy per process and per worker (see README, "Many visitors").
# Sticky: nginx hashes a cookie (nvsid) it sets on the first response, so a browser's page, its websocket and
# its reconnections reach the same process (a Streamlit session lives in one process); the processes share one
# cookie secret, so the XSRF cookie any of them set is valid on all. Ctrl-C (or SIGTERM) stops everything.
# Supervised: an app process that ends (a crash, kill -9, the OOM killer) is started again on its port within
# a second or two (each restart is logged in app_PORT.log and counted in restarts_PORT); meanwhile nginx sends
# its visitors to the other processes (max_fails=1 fail_timeout=2s). A visitor's page reconnects and reruns
# from its URL, which holds the text and the view (every page writes them there), so nothing typed is lost.
set -euo pipefail
cd "$(dirname "$0")/.."
# idle OpenMP threads sleep, not spin (app.py says why; set here too: --warm loads torch before app.py runs)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
N=${1:-2}
PORT=${2:-8500}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
PY=${PYTHON:-.venv/bin/python}
[ -x "$NGINX" ] || { echo "nginx not found: apt-get install nginx-light (or set NGINX=/path/to/nginx)" >&2; exit 2; }
DIR=${NORMVIZ_SERVE_DIR:-$(mktemp -d -t normviz-serve.XXXXXX)}
mkdir -p "$DIR/tmp"
SECRET=${STREAMLIT_SERVER_COOKIE_SECRET:-$("$PY" -c 'import secrets; print(secrets.token_hex(32))')}
pids=()
stop() {
  trap - INT TERM EXIT
  touch "$DIR/stopping"
  [ -f "$DIR/nginx.pid" ] && kill "$(cat "$DIR/nginx.pid")" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done  # the supervisors first: no restart now
  for f in "$DIR"/app_*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT
rm -f "$DIR/stopping"

supervise() {  # the app process of port $1, started again whenever it ends, until stop()
  local port=$1 restarts=0 app
  while [ ! -e "$DIR/stopping" ]; do
    STREAMLIT_SERVER_COOKIE_SECRET="$SECRET" "$PY" "${runner[@]}" app.py --server.port "$port" \
      --server.address 127.0.0.1 --server.headless true --browser.gatherUsageStats false \
      >>"$DIR/app_$port.log" 2>&1 &
    app=$!
    echo "$app" > "$DIR/app_$port.pid"
    wait "$app" && code=0 || code=$?
    [ -e "$DIR/stopping" ] && break
    restarts=$((restarts + 1))
    echo "$restarts" > "$DIR/restarts_$port"
    echo "normviz: the app on port $port ended (exit $code); starting it again (restart $restarts)" \
      | tee -a "$DIR/app_$port.log" >&2
    sleep 1
  done
}

# NORMVIZ_WARM (normviz app --warm MODELS): each process warms those models up before it listens
runner=(-m streamlit run)
case "${NORMVIZ_WARM:-0}" in 0|"") ;; *) runner=(-m normviz.ui.kit.warm) ;; esac
servers=""
for k in $(seq 1 "$N"); do
  p=$((PORT + k))
  supervise "$p" &
  pids+=($!)
  servers="$servers    server 127.0.0.1:$p max_fails=1 fail_timeout=2s;\n"
done

cat > "$DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/nginx_error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $DIR/tmp/body; proxy_temp_path $DIR/tmp/proxy; fastcgi_temp_path $DIR/tmp/fastcgi;
  uwsgi_temp_path $DIR/tmp/uwsgi; scgi_temp_path $DIR/tmp/scgi;
  map \$cookie_nvsid \$nv_sticky { "" \$request_id; default \$cookie_nvsid; }
  map \$http_upgrade \$connection_upgrade { default upgrade; "" close; }
  upstream normviz {
    hash \$nv_sticky consistent;
$(printf "$servers")  }
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://normviz;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection \$connection_upgrade;
      proxy_set_header Host \$http_host;
      proxy_read_timeout 86400s;
      proxy_buffering off;
      add_header Set-Cookie "nvsid=\$nv_sticky; Path=/; HttpOnly; SameSite=Lax" always;
    }
  }
}
EOF

for k in $(seq 1 "$N"); do  # each app process listening before the proxy opens
  p=$((PORT + k))
  for _ in $(seq 1 240); do
    "$PY" -c "import socket,sys; socket.create_connection(('127.0.0.1', $p), 1)" 2>/dev/null && break
    sleep 0.5
  done
done
"$NGINX" -c "$DIR/nginx.conf" -p "$DIR" &
pids+=($!)
echo "normviz: $N app processes on ports $((PORT + 1))…$((PORT + N)) behind nginx at http://127.0.0.1:$PORT (logs in $DIR)"
wait

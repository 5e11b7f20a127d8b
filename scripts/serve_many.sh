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
# its visitors to the other processes (max_fails=1 fail_timeout=10s). A visitor's page reconnects and reruns
# from its URL, which holds the text and the view (every page writes them there; a text typed while the page
# was cut off from its server is written there too once the page reconnects, see docs/deployment-memory.md).
# Health: a process that stops answering (stopped, deadlocked: it has not ended, so it is not restarted by the
# above) is found by asking its /_stcore/health every NORMVIZ_HEALTH_EVERY_S (5) s; once it has answered since
# it started and then not for NORMVIZ_HEALTH_TIMEOUT_S (20) s, it is killed (kill -9) and so started again
# (counted in hung_PORT). Meanwhile nginx gives up on it after short timeouts (connect 3 s, a plain request's
# reply 15 s; the websocket's handshake waits until the process is killed) and sends the request to another.
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
HEALTH_EVERY=${NORMVIZ_HEALTH_EVERY_S:-5}
HEALTH_TIMEOUT=${NORMVIZ_HEALTH_TIMEOUT_S:-20}
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

healthy() {  # whether the app on port $1 answers GET /_stcore/health with 200 within $2 s (bash's /dev/tcp)
  timeout "$2" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET /_stcore/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" >&3
    read -r line <&3 && [[ "$line" == *" 200"* ]]' "$1" 2>/dev/null
}

watch_health() {  # kill -9 the app $2 on port $1 once it has answered and then not for HEALTH_TIMEOUT s
  local port=$1 app=$2 seen=0 last=$SECONDS hung
  while kill -0 "$app" 2>/dev/null && [ ! -e "$DIR/stopping" ]; do
    sleep "$HEALTH_EVERY"
    if healthy "$port" "$HEALTH_EVERY"; then
      seen=1
      last=$SECONDS
    elif [ "$seen" = 1 ] && [ $((SECONDS - last)) -ge "$HEALTH_TIMEOUT" ] && [ ! -e "$DIR/stopping" ]; then
      hung=$(( $(cat "$DIR/hung_$port" 2>/dev/null || echo 0) + 1 ))
      echo "$hung" > "$DIR/hung_$port"
      echo "normviz: the app on port $port has not answered its health check for $((SECONDS - last)) s;" \
        "ending it (kill -9) to start it again" | tee -a "$DIR/app_$port.log" >&2
      kill -9 "$app" 2>/dev/null || true
      return
    fi
  done
}

supervise() {  # the app process of port $1, started again whenever it ends (or stops answering), until stop()
  local port=$1 restarts=0 app watcher
  while [ ! -e "$DIR/stopping" ]; do
    STREAMLIT_SERVER_COOKIE_SECRET="$SECRET" "$PY" "${runner[@]}" app.py --server.port "$port" \
      --server.address 127.0.0.1 --server.headless true --browser.gatherUsageStats false \
      >>"$DIR/app_$port.log" 2>&1 &
    app=$!
    echo "$app" > "$DIR/app_$port.pid"
    watch_health "$port" "$app" &
    watcher=$!
    wait "$app" && code=0 || code=$?
    kill "$watcher" 2>/dev/null || true
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
  servers="$servers    server 127.0.0.1:$p max_fails=1 fail_timeout=10s;\n"
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
    # a process that does not answer: the request goes to another (a stopped process still accepts connections,
    # so the reply's timeout is what finds it); a POST (an upload) is not sent twice
    proxy_connect_timeout 3s;
    proxy_next_upstream error timeout http_502 http_503 http_504;
    proxy_next_upstream_tries 3;
    proxy_http_version 1.1;
    proxy_set_header Host \$http_host;
    proxy_buffering off;
    location / {
      proxy_pass http://normviz;
      proxy_read_timeout 15s;
      proxy_send_timeout 15s;
      add_header Set-Cookie "nvsid=\$nv_sticky; Path=/; HttpOnly; SameSite=Lax" always;
    }
    location = /_stcore/stream {  # the page's websocket: open for hours (Streamlit pings it every 30 s)
      proxy_pass http://normviz;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection \$connection_upgrade;
      proxy_read_timeout 86400s;
      proxy_send_timeout 86400s;
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

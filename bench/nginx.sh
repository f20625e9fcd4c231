# Sourced by the load benchmarks: nginx (one worker pinned to CPU 1, a 1 KiB file,
# access log off, keep-alive without limit) serving from $WORK on a free loopback port.
# Sets PORT, NGINX (its pid) and URL; the caller stops it (kill $NGINX) and removes $WORK.
# LISTEN_EXTRA is added to its listen directive (" http2": h2c with prior knowledge).
start_nginx() {
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  chmod 755 "$WORK"; mkdir -p "$WORK/www"
  head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 > "$WORK/www/1k.txt"; chmod 644 "$WORK/www/1k.txt"
  cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity 10;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$PORT${LISTEN_EXTRA:-}; root $WORK/www; }
}
CONF
  nginx -c "$WORK/nginx.conf" -p "$WORK" &
  NGINX=$!
  sleep 0.5
  URL=http://127.0.0.1:$PORT/1k.txt
  case "${LISTEN_EXTRA:-}" in
    *http2*) curl -sf --http2-prior-knowledge "$URL" -o /dev/null ;;
    *) curl -sf "$URL" -o /dev/null ;;
  esac
}

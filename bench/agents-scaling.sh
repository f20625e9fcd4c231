#!/usr/bin/env bash
# How does load from agents scale, and what does coordinating cost? On loopback, in one
# run: nginx (one worker, a 1 KiB file, access log off) is loaded in the open model by
# 1, 2 and 3 agents (`strainline agent --listen 127.0.0.1:PORT`, one generator thread
# each, agent i pinned to core i mod CORES), stepping the total rate through RATES for
# SECONDS_PER_RUN each. For each agent count it prints every step (achieved rate, p99,
# verdict), the highest rate that was VALID and ≥ 95% achieved (the aggregate maximum),
# and the coordinator's own CPU (GNU time) per 10,000 merged requests and per agent as
# a share of one core. On a machine with fewer cores than agents + nginx, the agents
# share cores: the scaling figure is then the machine's, not strainline's.
#   bash bench/agents-scaling.sh
#   SECONDS_PER_RUN=5 RATES="10000 20000 30000" bash bench/agents-scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${SECONDS_PER_RUN:-5}
RATES=${RATES:-10000 20000 30000 40000 50000 60000}
if ! command -v nginx >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
fi
cargo build --release -q --bin strainline
SL=$PWD/target/release/strainline
CORES=$(nproc)
WORK=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
chmod 755 "$WORK"; mkdir -p "$WORK/www"
head -c 1024 /dev/zero | tr '\0' a > "$WORK/www/1k.txt"; chmod 644 "$WORK/www/1k.txt"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; server { listen 127.0.0.1:$PORT; root $WORK/www; } }
CONF
nginx -c "$WORK/nginx.conf" -p "$WORK" &
PIDS=($!)
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
(umask 077; head -c 32 /dev/urandom | base64 > "$WORK/token")
LIST=""
for i in 0 1 2; do
  P=$(free_port)
  taskset -c $((i % CORES)) "$SL" agent --listen 127.0.0.1:$P --token-file "$WORK/token" --name a$i 2>"$WORK/agent$i.log" &
  PIDS+=($!)
  LIST="$LIST tls://127.0.0.1:$P"
done
sleep 1
URL=http://127.0.0.1:$PORT/1k.txt
curl -sf "$URL" -o /dev/null
read -r -a AGENTS <<<"$LIST"

for N in 1 2 3; do
  agents=$(IFS=,; echo "${AGENTS[*]:0:$N}")
  echo
  echo "$N agent(s), 1 generator thread each, ${DUR}s per step"
  printf '%8s %10s %10s %9s  %s\n' rate achieved p99_µs coord_cpu verdict
  best=0; cpu_sum=0; req_sum=0
  for R in $RATES; do
    /usr/bin/time -f '%U %S' -o "$WORK/time" "$SL" --store "$WORK/s.db" load "$URL" -q "$R" -z "${DUR}s" \
      --threads 1 --no-tui --agents "$agents" --agent-token-file "$WORK/token" --json "$WORK/r.json" >/dev/null 2>&1 || true
    cpu=$(tail -1 "$WORK/time" | awk '{printf "%.3f", $1 + $2}')
    read -r achieved p99 status completed < <(python3 -c "
import json; s = json.load(open('$WORK/r.json'))['summary']
print(f\"{s['achieved_rate']:.0f} {s['latency_us']['p99']} {s['status']} {s['completed']}\")")
    printf '%8s %10s %10s %9s  %s\n' "$R" "$achieved" "$p99" "$cpu" "$status"
    if [ "$status" = valid ] && python3 -c "import sys; sys.exit(not $achieved >= 0.95 * $R)"; then best=$R; fi
    cpu_sum=$(echo "$cpu_sum + $cpu" | bc -l); req_sum=$((req_sum + completed))
  done
  steps=$(wc -w <<<"$RATES")
  printf 'aggregate maximum with %s agent(s): %s req/s; coordinator CPU %.3f s per 10,000 merged requests, %.2f%% of a core per agent\n' \
    "$N" "$best" "$(echo "$cpu_sum * 10000 / $req_sum" | bc -l)" "$(echo "100 * $cpu_sum / ($steps * ($DUR + 1.5)) / $N" | bc -l)"
done

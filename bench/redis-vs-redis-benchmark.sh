#!/usr/bin/env bash
# How efficient is strainline's Redis (RESP) client? Side by side on loopback, in one
# run: redis-server (pinned to CPU 1, nothing saved) loaded with SETs of 64-byte values
# by redis-benchmark (Redis's own, single-threaded) and by strainline load redis://, both
# pinned to CPU 0 with one thread and 50 connections, REPS times interleaved, in two
# shapes: one command in flight on each connection, and 16 (pipelining: -P 16 and
# --streams 16). Prints requests per generator-CPU-second (user +
# system, GNU time) of each and the ratio strainline/redis-benchmark. Installs
# redis-server and redis-tools when missing. Loopback only; every run is bounded.
#   bash bench/redis-vs-redis-benchmark.sh
#   REPS=5 REQUESTS=400000 bash bench/redis-vs-redis-benchmark.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
N=${REQUESTS:-200000}
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q --bin strainline
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 1 redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
REDIS=$!
trap 'kill $REDIS 2>/dev/null; wait $REDIS 2>/dev/null; rm -rf "$WORK"' EXIT
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.1; done

# A generator pinned to CPU 0 under GNU time; prints its CPU seconds.
timed() { taskset -c 0 /usr/bin/time -f '%U %S' -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || true
  tail -1 "$WORK/time" | awk '{printf "%.3f\n", $1 + $2}'; }

echo "redis-server on CPU 1; generators on CPU 0, 1 thread, 50 connections, $N SETs of 64 B each"
printf '%-6s %-4s %-16s %10s %8s %12s\n' depth rep tool requests cpu_s req/cpu_s
for depth in 1 16; do
  ratios=()
  for rep in $(seq 1 "$REPS"); do
    redis-cli -p "$PORT" flushall >/dev/null
    bcpu=$(timed redis-benchmark -p "$PORT" -c 50 -P "$depth" -n "$N" -t set -d 64 -r 1000000 -q)
    breq=$N
    redis-cli -p "$PORT" flushall >/dev/null
    scpu=$(timed "$SL" --store "$WORK/s.db" load "redis://127.0.0.1:$PORT" -c 50 --streams "$depth" \
      --threads 1 -n "$N" -d 'SET key:{{seq}} {{random 64}}' --no-progress --json "$WORK/s.json")
    sreq=$(python3 -c "import json; print(json.load(open('$WORK/s.json'))['summary']['ok'])")
    keys=$(redis-cli -p "$PORT" dbsize)
    br=$(awk -v a="$breq" -v b="$bcpu" 'BEGIN{printf "%.0f", a / b}')
    sr=$(awk -v a="$sreq" -v b="$scpu" 'BEGIN{printf "%.0f", a / b}')
    printf '%-6s %-4s %-16s %10s %8s %12s\n' "$depth" "$rep" redis-benchmark "$breq" "$bcpu" "$br"
    printf '%-6s %-4s %-16s %10s %8s %12s  (%s keys stored)\n' "$depth" "$rep" strainline "$sreq" "$scpu" "$sr" "$keys"
    ratios+=("$(awk -v a="$sr" -v b="$br" 'BEGIN{printf "%.3f", a / b}')")
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  echo "in flight per connection $depth: ratio strainline/redis-benchmark per generator-CPU-second: ${ratios[*]} (median $median)"
done

#!/usr/bin/env bash
# How efficient is strainline's HTTP/2 client? Side by side on loopback, in one run:
# nginx (one worker pinned to CPU 1, h2c with prior knowledge, a 1 KiB file) loaded for
# SECONDS_PER_RUN by h2load (nghttp2's benchmark) and by strainline --http2, both pinned
# to CPU 0 with one thread, REPS times interleaved, in two shapes:
#   -c100 -m1   100 connections, one request in flight on each
#   -c10 -m10   10 connections, ten streams in flight on each (strainline: --streams 10)
# Prints requests per generator-CPU-second (user + system, GNU time) of each and the
# ratio strainline/h2load. Installs nginx and nghttp2-client when missing. Loopback
# only; every run is bounded in time.
#   bash bench/h2-vs-h2load.sh
#   REPS=5 SECONDS_PER_RUN=10 bash bench/h2-vs-h2load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DUR=${SECONDS_PER_RUN:-5}
if ! command -v nginx >/dev/null || ! command -v h2load >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light nghttp2-client >/dev/null
fi
cargo build --release -q --bin strainline
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
trap 'kill ${NGINX:-0} 2>/dev/null; wait ${NGINX:-0} 2>/dev/null; rm -rf "$WORK"' EXIT
. bench/nginx.sh
LISTEN_EXTRA=" http2" start_nginx

# A generator pinned to CPU 0 under GNU time; prints its CPU seconds.
timed() { taskset -c 0 /usr/bin/time -f '%U %S' -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || true
  tail -1 "$WORK/time" | awk '{printf "%.3f\n", $1 + $2}'; }

echo "nginx h2c, 1 worker on CPU 1; generators on CPU 0, 1 thread, ${DUR}s per run"
printf '%-8s %-4s %-11s %12s %8s %12s\n' shape rep tool requests cpu_s req/cpu_s
for shape in "100 1" "10 10"; do
  read -r c m <<<"$shape"
  ratios=()
  for rep in $(seq 1 "$REPS"); do
    hcpu=$(timed h2load -c "$c" -m "$m" -t 1 -D "$DUR" "$URL")
    hreq=$(awk '/^requests:/ {print $6}' "$WORK/out")
    scpu=$(timed "$SL" --store "$WORK/s.db" load "$URL" --http2 -c "$c" --streams "$m" --threads 1 \
      -z "${DUR}s" --no-progress --json "$WORK/s.json")
    sreq=$(python3 -c "import json; print(json.load(open('$WORK/s.json'))['summary']['ok'])")
    hr=$(awk -v a="$hreq" -v b="$hcpu" 'BEGIN{printf "%.0f", a / b}')
    sr=$(awk -v a="$sreq" -v b="$scpu" 'BEGIN{printf "%.0f", a / b}')
    printf '%-8s %-4s %-11s %12s %8s %12s\n' "-c$c-m$m" "$rep" h2load "$hreq" "$hcpu" "$hr"
    printf '%-8s %-4s %-11s %12s %8s %12s\n' "-c$c-m$m" "$rep" strainline "$sreq" "$scpu" "$sr"
    ratios+=("$(awk -v a="$sr" -v b="$hr" 'BEGIN{printf "%.3f", a / b}')")
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  echo "-c$c -m$m: ratio strainline/h2load per generator-CPU-second: ${ratios[*]} (median $median)"
done

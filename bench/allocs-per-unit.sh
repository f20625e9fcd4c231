#!/usr/bin/env bash
# How many allocations does a unit of work cost the load generator in steady state?
# strainline runs twice under an LD_PRELOAD shim (bench/allocs.c, built with cc) that
# counts every malloc, calloc, realloc, posix_memalign, aligned_alloc and memalign of
# the process and writes the count at exit: once for SHORT seconds and once for LONG
# (`-z`), the same load otherwise. What starting, connecting, reporting and storing
# allocate is in both (each run the first in a store of its own); allocations per unit in steady state = Δallocs / Δunits (units =
# the summary's `sent`). Connections opened are shown too: opening one allocates (its
# buffers, its registration), and the open model's pool opens and closes some as it
# grows and shrinks — allocations of the pool's churn, not of the units.
#   bash bench/allocs-per-unit.sh                   # HTTP/1.1 closed and open, HTTP/2, Redis
#   bash bench/allocs-per-unit.sh URL [LOAD ARGS…]  # any load: `strainline load URL ARGS -z …`
#   SL=/path/to/strainline SHORT=2 LONG=6 bash bench/allocs-per-unit.sh
# Without arguments it starts nginx (bench/nginx.sh; for HTTP/2 with h2c) and, if
# installed, redis-server, on loopback ports of their own. Loopback only; bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
SHORT=${SHORT:-2}
LONG=${LONG:-6}
if [ -z "${SL:-}" ]; then
  cargo build --release -q --bin strainline
  SL=$PWD/target/release/strainline
fi
WORK=$(mktemp -d)
cleanup() { for p in ${NGINX:-} ${REDIS:-}; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"; }
trap cleanup EXIT
cc -O2 -shared -fPIC -o "$WORK/allocs.so" bench/allocs.c

# The allocations, units and connections opened of one run of `load ARGS -z SECONDS`.
count() { local secs=$1; shift
  rm -f "$WORK/allocs" "$WORK/r.json" "$WORK/s.db"   # each run the store's first
  taskset -c 0 env LD_PRELOAD="$WORK/allocs.so" ALLOCS_OUT="$WORK/allocs" \
    "$SL" --store "$WORK/s.db" load "$@" -z "${secs}s" --json "$WORK/r.json" > /dev/null 2>&1 || true
  echo "$(awk '/^allocs/ {n += $2} END {print n}' "$WORK/allocs") $(python3 -c "import json; s = json.load(open('$WORK/r.json'))['summary']; print(s['sent'], s['connections_opened'])")"
}

# Prints one line: the load, the two runs and allocations per unit in steady state.
measure() { local what=$1; shift
  read -r a1 u1 c1 < <(count "$SHORT" "$@")
  read -r a2 u2 c2 < <(count "$LONG" "$@")
  python3 - "$what" "$a1" "$u1" "$c1" "$a2" "$u2" "$c2" <<'PY'
import sys
what, a1, u1, c1, a2, u2, c2 = sys.argv[1], *map(int, sys.argv[2:])
per = (a2 - a1) / max(u2 - u1, 1)
print(f"{what:<40} {a1:>8} {u1:>8} {c1:>6} {a2:>8} {u2:>8} {c2:>6} {per:>12.4f}")
PY
}

printf '%-40s %8s %8s %6s %8s %8s %6s %12s\n' load "allocs" "units" "conns" "allocs" "units" "conns" "allocs/unit"
printf '%-40s %24s %24s %12s\n' "" "(${SHORT} s run)" "(${LONG} s run)" "(Δ/Δ)"
if [ $# -gt 0 ]; then
  measure "$*" "$@"
  exit
fi
. bench/nginx.sh
start_nginx
measure "HTTP/1.1 closed -c 50 --threads 1" "$URL" -c 50 --threads 1
measure "HTTP/1.1 open -q 20000 --threads 1" "$URL" -q 20000 --threads 1
kill "$NGINX"; wait "$NGINX" 2>/dev/null || true; NGINX=
LISTEN_EXTRA=" http2" start_nginx
measure "HTTP/2 closed -c 50 --threads 1 --http2" "$URL" -c 50 --threads 1 --http2
if command -v redis-server >/dev/null; then
  RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  taskset -c 1 redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no > /dev/null &
  REDIS=$!
  sleep 0.5
  measure "Redis closed -c 50 --threads 1 (SET)" "redis://127.0.0.1:$RPORT" -c 50 --threads 1 -d 'SET k v'
else
  echo "Redis: redis-server not installed — skipped"
fi

#!/usr/bin/env bash
# How efficient is strainline's gRPC client? Side by side on loopback, in one run,
# against the same grpcio server (tests/fixtures/grpc_server.py, pinned to CPU 0), each
# generator pinned to CPU 1 with one thread, the same unary call (demo.Greeter/Hello, a
# 3-field message given as JSON and encoded with the .proto):
#   peer:       ghz --insecure --proto P --call demo.Greeter.Hello -d JSON -n N -c C
#               --connections C (ghz, the gRPC benchmarking tool, Go)
#   strainline: strainline load grpc://…/demo.Greeter/Hello?proto=P -d JSON -n N -c C
#               --threads 1 (closed model, C connections, one call in flight on each)
# REPS times interleaved. Prints calls per generator-CPU-second (user + system time of
# the whole process, /usr/bin/time) and the ratio strainline/ghz. Installs
# python3-grpcio when missing, and ghz with `go install` (the Go module proxy) when it
# is not on PATH or in ~/go/bin. Loopback only; every run is bounded by its count.
#   bash bench/grpc-vs-ghz.sh
#   REPS=5 CALLS=40000 CONC=20 bash bench/grpc-vs-ghz.sh
#   STRAINLINE_BIN=/tmp/old/strainline bash bench/grpc-vs-ghz.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
CALLS=${CALLS:-20000}
CONC=${CONC:-10}
MSG='{"device": "d-42", "seq": 7, "temperature": 21.5}'
PROTO=$PWD/crates/strainline/tests/fixtures/grpc_demo.proto
# Debian's python3-grpcio is for the system Python, not a pyenv one first on PATH.
PY=/usr/bin/python3
if ! "$PY" -c 'import grpc' 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio >/dev/null
fi
GHZ=$(command -v ghz || echo "$HOME/go/bin/ghz")
if [ ! -x "$GHZ" ]; then
  go install github.com/bojand/ghz/cmd/ghz@latest
fi
# STRAINLINE_BIN=/path/to/strainline measures another build (an earlier commit's).
if [ -z "${STRAINLINE_BIN:-}" ]; then
  cargo build --release -q --bin strainline
fi
SL=${STRAINLINE_BIN:-$PWD/target/release/strainline}
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 "$PY" crates/strainline/tests/fixtures/grpc_server.py --port "$PORT" > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 1 50); do grep -q listening "$WORK/server.log" && break; sleep 0.1; done

# CPU seconds (user + system) of a command, from GNU time.
cpu_of() {
  /usr/bin/time -f '%U %S' -o "$WORK/time" "$@" >"$WORK/out" 2>&1
  awk '{print $1 + $2}' "$WORK/time"
}

echo "grpcio $("$PY" -c 'import grpc; print(grpc.__version__)') on 127.0.0.1:$PORT (CPU 0); ghz $(go version -m "$GHZ" 2>/dev/null | awk '$1 == "mod" {print $3}') and strainline on CPU 1; $CALLS unary calls per run over $CONC connections"
printf '%-4s %14s %16s %8s\n' rep ghz/cpu-s strainline/cpu-s ratio
ratios=()
for rep in $(seq 1 "$REPS"); do
  peer=$(cpu_of taskset -c 1 "$GHZ" --insecure --proto "$PROTO" --call demo.Greeter.Hello \
    -d "$MSG" -n "$CALLS" -c "$CONC" --connections "$CONC" --cpus 1 "127.0.0.1:$PORT")
  grep -Eq "\[OK\] +$CALLS responses" "$WORK/out" || { echo "ghz did not get $CALLS OKs:"; cat "$WORK/out"; exit 1; }
  ours=$(cpu_of taskset -c 1 "$SL" --store "$WORK/s.db" load \
    "grpc://127.0.0.1:$PORT/demo.Greeter/Hello?proto=$PROTO" -d "$MSG" -n "$CALLS" \
    -c "$CONC" --threads 1 --no-progress --timeout 30s)
  grep -q "$CALLS ok" "$WORK/out" || { echo "strainline did not get $CALLS OKs:"; cat "$WORK/out"; exit 1; }
  p=$(awk -v c="$CALLS" -v t="$peer" 'BEGIN{printf "%.0f", c / (t > 0 ? t : 0.01)}')
  s=$(awk -v c="$CALLS" -v t="$ours" 'BEGIN{printf "%.0f", c / (t > 0 ? t : 0.01)}')
  r=$(awk -v a="$s" -v b="$p" 'BEGIN{printf "%.3f", a / b}')
  ratios+=("$r")
  printf '%-4s %14s %16s %8s\n' "$rep" "$p" "$s" "$r"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
echo "median ratio strainline/ghz $median (unary calls per generator-CPU-second)"

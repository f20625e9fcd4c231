#!/usr/bin/env bash
# How efficient is strainline's MQTT publisher? Side by side on loopback, in one run,
# against the same mosquitto (pinned to CPU 0), each generator pinned to CPU 1:
#   peer:       mosquitto_pub -q Q -m PAYLOAD --repeat N --repeat-delay 0 (mosquitto's own
#               C client, one connection; at QoS ≥ 1 it publishes the next message when
#               the last was acknowledged)
#   strainline: strainline load mqtt://…?qos=Q -c 1 -n N --threads 1 (closed model, one
#               client: the same sequence)
# for QoS 0 and 1, REPS times interleaved. Prints publishes per generator-CPU-second
# (user + system time of the whole process, /usr/bin/time) and the ratio
# strainline/peer. Installs mosquitto and mosquitto-clients when missing. Loopback
# only; every run is bounded by its count.
#   bash bench/mqtt-vs-peer.sh
#   REPS=5 COUNT=200000 bash bench/mqtt-vs-peer.sh
#   STRAINLINE_BIN=/tmp/old/strainline bash bench/mqtt-vs-peer.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
COUNT=${COUNT:-100000}
PAYLOAD='{"device": 42, "temperature": 21.5, "battery": 0.93}'
if ! command -v mosquitto >/dev/null || ! command -v mosquitto_pub >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto mosquitto-clients >/dev/null
fi
# STRAINLINE_BIN=/path/to/strainline measures another build (an earlier commit's).
if [ -z "${STRAINLINE_BIN:-}" ]; then
  cargo build --release -q --bin strainline
fi
SL=${STRAINLINE_BIN:-$PWD/target/release/strainline}
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\nuser root\n' "$PORT" > "$WORK/mosquitto.conf"
taskset -c 0 mosquitto -c "$WORK/mosquitto.conf" >/dev/null 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 0.5

# CPU seconds (user + system) of a command, from GNU time.
cpu_of() {
  /usr/bin/time -f '%U %S' -o "$WORK/time" "$@" >/dev/null 2>&1
  awk '{print $1 + $2}' "$WORK/time"
}

echo "mosquitto $(mosquitto -h 2>/dev/null | head -1 | awk '{print $3}') on 127.0.0.1:$PORT (CPU 0); generators on CPU 1; $COUNT publishes per run at QoS 1, ten times as many at QoS 0"
printf '%-4s %-4s %14s %14s %8s\n' qos rep peer/cpu-s strainline/cpu-s ratio
for qos in 0 1; do
  ratios=()
  # QoS 0 publishes are not waited for: ten times as many, for CPU times GNU time resolves.
  n=$COUNT
  [ "$qos" = 0 ] && n=$((COUNT * 10))
  for rep in $(seq 1 "$REPS"); do
    peer=$(cpu_of taskset -c 1 mosquitto_pub -p "$PORT" -t bench/peer -q "$qos" -m "$PAYLOAD" \
      --repeat "$n" --repeat-delay 0)
    ours=$(cpu_of taskset -c 1 "$SL" --store "$WORK/s.db" load \
      "mqtt://127.0.0.1:$PORT/bench/strainline?qos=$qos" -c 1 -n "$n" --threads 1 \
      -d "$PAYLOAD" --no-progress --timeout 30s)
    p=$(awk -v c="$n" -v t="$peer" 'BEGIN{printf "%.0f", c / (t > 0 ? t : 0.01)}')
    s=$(awk -v c="$n" -v t="$ours" 'BEGIN{printf "%.0f", c / (t > 0 ? t : 0.01)}')
    r=$(awk -v a="$s" -v b="$p" 'BEGIN{printf "%.3f", a / b}')
    ratios+=("$r")
    printf '%-4s %-4s %14s %14s %8s\n' "$qos" "$rep" "$p" "$s" "$r"
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  echo "QoS $qos: median ratio strainline/peer $median (publishes per generator-CPU-second)"
done

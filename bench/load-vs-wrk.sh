#!/usr/bin/env bash
# How efficient is strainline's load generator? Side by side on loopback, in one run:
#  1. closed model: nginx (one worker, a 1 KiB file, pinned to CPU 1) loaded for
#     SECONDS_PER_RUN by `wrk -t1 -c50` and by `strainline load -c 50 --threads 1`
#     (both pinned to CPU 0), REPS times; prints requests per generator-CPU-second, the
#     ratio strainline/wrk, and each generator's peak RSS;
#  2. open model at 5,000 and 40,000 req/s: strainline and `oha -q R` (installed with
#     `cargo install oha` when missing): achieved
#     rate, dropped sends, p99;
#  3. the open model's limit from one core: strainline at RATES (default 10k…70k req/s),
#     generator CPU per request, connections opened, p99 and the verdict — the highest
#     rate that is VALID and achieved (≥ 95%) is what one generator core can offer.
# Installs nginx and wrk from Debian if missing. Loopback only; every run is bounded.
#   bash bench/load-vs-wrk.sh
#   REPS=1 SECONDS_PER_RUN=5 bash bench/load-vs-wrk.sh
#   NO_OHA=1 RATES="40000 60000" bash bench/load-vs-wrk.sh   # no oha; two rates swept
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DUR=${SECONDS_PER_RUN:-10}
# NO_OHA=1: oha is not installed when missing (its build takes minutes), its runs skipped.
[ -n "${NO_OHA:-}" ] || command -v oha >/dev/null || cargo install oha --locked -q || true
if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light wrk >/dev/null
fi
cargo build --release -q --bin strainline
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
. bench/nginx.sh
trap 'kill ${NGINX:-0} 2>/dev/null; wait ${NGINX:-0} 2>/dev/null; rm -rf "$WORK"' EXIT
start_nginx

# Runs a generator pinned to CPU 0 under GNU time; prints "cpu_seconds max_rss_kib".
timed() { taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || true
  tail -1 "$WORK/time" | awk '{printf "%.3f %d\n", $1 + $2, $3}'; }

echo "Closed model, 50 connections, 1 generator thread, ${DUR}s, nginx 1 worker, 1 KiB file"
printf '%-12s %12s %12s %14s %10s\n' tool requests cpu_s "req/cpu_s" rss_MiB
declare -a RATIOS
for i in $(seq "$REPS"); do
  read -r wcpu wrss < <(timed wrk -t1 -c50 -d"${DUR}s" "$URL")
  wreq=$(awk '/requests in/ {print $1}' "$WORK/out")
  read -r scpu srss < <(timed "$SL" --store "$WORK/s.db" load "$URL" -c 50 --threads 1 -z "${DUR}s" --json "$WORK/s.json")
  sreq=$(python3 -c "import json; print(json.load(open('$WORK/s.json'))['summary']['completed'])")
  printf '%-12s %12s %12s %14.0f %10.1f\n' wrk "$wreq" "$wcpu" "$(echo "$wreq / $wcpu" | bc -l)" "$(echo "$wrss / 1024" | bc -l)"
  printf '%-12s %12s %12s %14.0f %10.1f\n' strainline "$sreq" "$scpu" "$(echo "$sreq / $scpu" | bc -l)" "$(echo "$srss / 1024" | bc -l)"
  RATIOS+=("$(echo "($sreq / $scpu) / ($wreq / $wcpu)" | bc -l)")
  WRK_MAX=$(echo "$wreq / $DUR" | bc -l)
done
printf 'ratio strainline/wrk (requests per generator-CPU-second):'
for r in "${RATIOS[@]}"; do printf ' %.2f' "$r"; done; echo

for R in 5000 40000; do
echo
echo "Open model, $R req/s for ${DUR}s, 1 generator thread"
read -r ocpu orss < <(timed "$SL" --store "$WORK/s.db" load "$URL" -q "$R" --threads 1 -z "${DUR}s" --json "$WORK/o.json")
python3 - "$WORK/o.json" "$DUR" "$ocpu" "$orss" "$R" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
sched = float(sys.argv[5]) * float(sys.argv[2])
print(f"strainline: achieved {s['achieved_rate']:.1f} req/s, sent {s['sent']} of {sched:.0f} scheduled "
      f"(dropped {sched - s['sent']:.0f}), ok {s['ok']}, corrected p99 {s['latency_us']['p99']} µs, "
      f"schedule lag p99 {s['schedule_lag_us']['p99']} µs, CPU {float(sys.argv[3]):.2f} s, "
      f"RSS {int(sys.argv[4]) / 1024:.1f} MiB, verdict {s['status']}")
PY
if command -v oha >/dev/null; then
  read -r hcpu hrss < <(timed oha -q "$R" -z "${DUR}s" --no-tui --latency-correction --output-format json "$URL")
  python3 - "$WORK/out" "$hcpu" "$hrss" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
print(f"oha:        achieved {s['requestsPerSec']:.1f} req/s, success rate {s['successRate']:.4f}, "
      f"corrected p99 {d['latencyPercentiles']['p99'] * 1e6:.0f} µs, CPU {float(sys.argv[2]):.2f} s, "
      f"RSS {int(sys.argv[3]) / 1024:.1f} MiB")
PY
else
  echo "oha: not installed (cargo install oha) — skipped"
fi
done

echo
echo "Open model from one core: strainline -q RATE --threads 1 for ${DUR}s"
printf '%8s %10s %8s %10s %11s %9s  %s\n' rate achieved cpu_s "µs/req" connections p99_µs verdict
for R in ${RATES:-10000 20000 30000 40000 50000 60000 70000}; do
  read -r ocpu orss < <(timed "$SL" --store "$WORK/s.db" load "$URL" -q "$R" --threads 1 -z "${DUR}s" --json "$WORK/r.json")
  python3 - "$WORK/r.json" "$R" "$ocpu" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
cpu = float(sys.argv[3])
why = "; ".join(r.split(":")[0] for r in s.get("reasons", []))
print(f"{sys.argv[2]:>8} {s['achieved_rate']:>10.0f} {cpu:>8.2f} {1e6 * cpu / max(s['completed'], 1):>10.1f} "
      f"{s['connections_opened']:>11} {s['latency_us']['p99']:>9}  {s['status']} {why}")
PY
  # A rate counts when the run was VALID and achieved 95% of it (a VALID run that fell
  # short found the target's limit, not the generator's).
  if python3 -c "import json,sys; s=json.load(open('$WORK/r.json'))['summary']; sys.exit(not (s['status'] == 'valid' and s['achieved_rate'] >= 0.95 * $R))"; then OPEN_MAX=$R; fi
done
printf 'open-model maximum of one strainline thread (highest rate VALID and ≥ 95%% achieved): %s req/s; wrk closed-model maximum: %.0f req/s; ratio %.2f\n' \
  "${OPEN_MAX:-0}" "$WRK_MAX" "$(echo "${OPEN_MAX:-0} / $WRK_MAX" | bc -l)"

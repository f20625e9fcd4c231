#!/usr/bin/env bash
# What does watching a process tree cost? Monitors a parent with 50 sleeping children
# (strainline-testbed forktree) at a 10 ms and a 100 ms interval, with strainline and
# with the peers a team would otherwise use — the stress-suite seed's `ps` loop and
# psrecord — and prints each monitor's own CPU as % of one core, and the ratios.
# Loopback only; every run is bounded (SECONDS_PER_RUN, default 10 s). Usage:
#   bash bench/monitor-overhead.sh            # 3 repetitions
#   REPS=1 SECONDS_PER_RUN=5 bash bench/monitor-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DUR=${SECONDS_PER_RUN:-10}
cargo build --release --workspace --bins -q
SL=$PWD/target/release/strainline
TB=$PWD/target/release/strainline-testbed
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
STORE=$WORK/bench.db

if ! python3 -c 'import psrecord' 2>/dev/null; then
  python3 -m pip install --quiet psrecord >/dev/null 2>&1 || true
fi

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# strainline's own figure: its CPU (RUSAGE_SELF) over the run, from the summary.
strainline_cost() { # interval
  "$SL" --store "$STORE" monitor -q -i "$1" --json "$WORK/s.json" -- \
    "$TB" forktree --children 50 --seconds "$DUR"
  json "$WORK/s.json" "round(d['summary']['overhead']['percent_of_core'], 3)"
}

# A peer's cost: strainline measures the peer's own process tree (the target runs
# outside it, so only the peer's work is counted).
peer_cost() { # command...
  "$TB" forktree --children 50 --seconds "$((DUR + 2))" &
  local target=$!
  sleep 0.5
  "$SL" --store "$STORE" monitor -q -i 1s --json "$WORK/p.json" -- \
    env TARGET="$target" DUR="$DUR" "$@" >/dev/null 2>&1 || true
  kill "$target" 2>/dev/null || true
  wait "$target" 2>/dev/null || true
  json "$WORK/p.json" "round(100 * d['summary']['cpu']['avg_cores'], 3)"
}

# The seed's monitor (run-stress-tests.sh): `ps -o %cpu=,rss=` in a shell loop.
PS_LOOP='end=$((SECONDS + DUR)); while [ $SECONDS -lt $end ]; do ps -o %cpu=,rss= -p $TARGET >/dev/null; sleep $IV; done'

printf '%-34s %10s %10s %10s\n' "monitor (50 children, $DUR s)" "run 1" "run 2" "run 3"
row() { printf '%-34s' "$1"; shift; for v in "$@"; do printf ' %9s%%' "$v"; done; echo; }
declare -A best
for iv in 10ms 100ms; do
  vals=(); for _ in $(seq "$REPS"); do vals+=("$(strainline_cost $iv)"); done
  row "strainline monitor -i $iv" "${vals[@]}"; best[sl_$iv]=$(printf '%s\n' "${vals[@]}" | sort -g | sed -n "$(( (REPS + 1) / 2 ))p")
  sec=$([ $iv = 10ms ] && echo 0.01 || echo 0.1)
  vals=(); for _ in $(seq "$REPS"); do vals+=("$(peer_cost env IV=$sec bash -c "$PS_LOOP")"); done
  row "seed ps loop, every $iv" "${vals[@]}"; best[ps_$iv]=$(printf '%s\n' "${vals[@]}" | sort -g | sed -n "$(( (REPS + 1) / 2 ))p")
  if python3 -c 'import psrecord' 2>/dev/null; then
    vals=(); for _ in $(seq "$REPS"); do vals+=("$(peer_cost bash -c "python3 -m psrecord \$TARGET --include-children --interval $sec --duration \$DUR")"); done
    row "psrecord --include-children $iv" "${vals[@]}"; best[pr_$iv]=$(printf '%s\n' "${vals[@]}" | sort -g | sed -n "$(( (REPS + 1) / 2 ))p")
  fi
done
echo
echo "Median ratios (peer CPU / strainline CPU; higher means strainline is cheaper):"
for iv in 10ms 100ms; do
  python3 - "$iv" "${best[sl_$iv]}" "${best[ps_$iv]}" "${best[pr_$iv]:-}" <<'PY'
import sys
iv, sl, ps, pr = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
line = f"  {iv}: strainline {sl:.2f}% of a core; seed ps loop {ps/sl:.1f}x"
if pr:
    line += f"; psrecord {float(pr)/sl:.1f}x"
print(line)
PY
done

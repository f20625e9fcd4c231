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

# The machine's floor: what the least a cgroup-based monitor must do costs here — a C
# loop that wakes every interval (poll on the target's pidfd) and reads the two cgroup
# counters strainline reads every tick (CPU, memory), nothing else. What strainline
# costs above it is its own; the floor itself moves with the VM's hour (0.6-0.8% at
# 10 ms on 2026-11-25).
if command -v cc >/dev/null; then
  cat > "$WORK/floor.c" <<'C'
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
  int pidfd = syscall(SYS_pidfd_open, atoi(argv[1]), 0), ms = atoi(argv[4]), ticks = atoi(argv[5]);
  int cpu = open(argv[2], O_RDONLY), mem = open(argv[3], O_RDONLY);
  if (pidfd < 0 || cpu < 0 || mem < 0) return 1;
  char buf[4096];
  double start = now();
  for (int i = 0; i < ticks; i++) {
    struct pollfd p = {pidfd, POLLIN, 0};
    poll(&p, 1, ms);
    if (pread(cpu, buf, sizeof buf, 0) < 0 || pread(mem, buf, sizeof buf, 0) < 0) return 1;
  }
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  double used = r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
  printf("%.3f\n", 100 * used / (now() - start));
  return 0;
}
C
  cc -O2 -o "$WORK/floor" "$WORK/floor.c"
  "$SL" --store "$STORE" monitor -q -i 1s -- "$TB" forktree --children 50 --seconds "$((DUR * 2 + 4))" &
  outer=$!
  sleep 1.5
  tree=$(pgrep -P "$outer" -f forktree | head -1 || true)
  cg=$(awk -F: '$1 == "0" {print $3}' "/proc/$tree/cgroup" 2>/dev/null || true)
  memcg=$(awk -F: '$2 == "memory" {print $3}' "/proc/$tree/cgroup" 2>/dev/null || true)
  cpu_file=$(ls /sys/fs/cgroup/unified"$cg"/cpu.stat /sys/fs/cgroup"$cg"/cpu.stat 2>/dev/null | head -1 || true)
  mem_file=$(ls /sys/fs/cgroup"$cg"/memory.current /sys/fs/cgroup/memory"$memcg"/memory.usage_in_bytes 2>/dev/null | head -1 || true)
  if [ -n "$tree" ] && [ -n "$cpu_file" ] && [ -n "$mem_file" ]; then
    f10=$("$WORK/floor" "$tree" "$cpu_file" "$mem_file" 10 $((DUR * 100)) || echo "?")
    f100=$("$WORK/floor" "$tree" "$cpu_file" "$mem_file" 100 $((DUR * 10)) || echo "?")
    echo "The floor (a C loop: wake, read the cgroup's CPU and memory counters): ${f10}% at 10ms, ${f100}% at 100ms"
  else
    echo "The floor: no cgroup for the target here (strainline falls back to /proc)"
  fi
  kill "$outer" 2>/dev/null || true
  wait "$outer" 2>/dev/null || true
fi

#!/usr/bin/env bash
# What does watching a churning tree cost? A parallel build — 15 compilers at a time,
# each living a fraction of a second — monitored by `strainline monitor` at a 10 ms and
# a 100 ms interval; prints strainline's own CPU (RUSAGE_SELF, from its summary) as % of
# one core, and the processes the build started. Local only; every run is bounded
# (SECONDS_PER_RUN, default 15 s). Usage:
#   bash bench/monitor-churn.sh            # 3 repetitions
#   REPS=1 SECONDS_PER_RUN=10 bash bench/monitor-churn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DUR=${SECONDS_PER_RUN:-15}
cargo build --release --bin strainline -q
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# 120 small translation units, each a few hundred lines for the compiler to chew on.
for i in $(seq 1 120); do
  {
    echo "#include <stdio.h>"
    for f in $(seq 1 40); do
      echo "int f${f}_$i(int x) { int s = 0; for (int k = 0; k < x; k++) s += k * $f ^ (k >> 2); return s; }"
    done
  } > "$WORK/u$i.c"
done
# The build: 15 compilers at a time over the units, again and again until DUR is up.
BUILD="end=\$((SECONDS + $DUR)); while [ \$SECONDS -lt \$end ]; do ls $WORK/*.c | xargs -P 15 -n 1 cc -O1 -c -o /dev/null; done"

printf '%-32s %10s %10s %10s\n' "monitor (a -j15 build, $DUR s)" "run 1" "run 2" "run 3"
for iv in 10ms 100ms; do
  vals=(); procs=()
  for _ in $(seq "$REPS"); do
    "$SL" --store "$WORK/s.db" monitor -q -i "$iv" --json "$WORK/m.json" -- bash -c "$BUILD" >/dev/null 2>&1 || true
    vals+=("$(python3 -c "import json; d=json.load(open('$WORK/m.json')); print(round(d['summary']['overhead']['percent_of_core'], 2))")%")
    procs+=("$(python3 -c "import json; d=json.load(open('$WORK/m.json')); print(d['summary'].get('processes_seen', '?'))")")
  done
  printf '%-32s %10s %10s %10s\n' "strainline monitor -i $iv" "${vals[@]}"
  printf '%-32s %10s %10s %10s\n' "  processes seen" "${procs[@]}"
done

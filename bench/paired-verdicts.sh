#!/usr/bin/env bash
# How small a change each way of comparing two versions sees on this machine, beside a
# noisy neighbour (strainline-testbed noise: random spells of CPU and memory-bandwidth
# work on every CPU). Known truth: the testbed at --cpu-cost COST against COST × 1.05
# does 5% more hashing per request (COST=400: about 0.15 ms of CPU per request in a
# release build, most of it hashing); COST against COST is the same build.
#
# For each mode — duet, interleaved, and sequential (every baseline run, then every
# candidate run: what separate runs do) — TRIALS_AB trials of the 5% change and
# TRIALS_AA of the same build; each trial is one `strainline run … --baseline …
# --candidate …` within BUDGET, band 3% on cpu_per_op. Prints how often each was called
# REGRESSED and how long a comparison took. Traffic goes to 127.0.0.1 only.
#
#   bash bench/paired-verdicts.sh                   # TRIALS_AB=10 TRIALS_AA=20 BUDGET=150s
#   MODES="duet" TRIALS_AB=3 TRIALS_AA=3 bash bench/paired-verdicts.sh
#   PROFILE=debug COST=100 MODES=sequential SEQ_REPS=20 bash bench/paired-verdicts.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TRIALS_AB=${TRIALS_AB:-10}
TRIALS_AA=${TRIALS_AA:-20}
BUDGET=${BUDGET:-150s}
MODES=${MODES:-"duet interleaved sequential"}
# Sequential runs a fixed number of repetitions of each version: as many as fit the
# budget at about 2.8 s a repetition.
SEQ_REPS=${SEQ_REPS:-25}
COST=${COST:-400}
# The first trial's seed (of the pairs' order): a second batch continues the first.
START=${START:-1}
CAND=$((COST * 105 / 100))

# PROFILE=debug measures the binaries the end-to-end tests use (no 5-minute release
# build; set COST=100 there, about the same CPU per request).
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = release ]; then cargo build --release --quiet --bins; else cargo build --quiet --bins; fi
SL=$PWD/target/$PROFILE/strainline
TB=$PWD/target/$PROFILE/strainline-testbed
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT

cat > "$work/duo.toml" <<EOF
[suite]
name = "duo"

[target]
command = ["$TB", "serve", "--listen", "127.0.0.1:{{port}}", "--workers", "1", "--cpu-cost", "{{cost}}"]
ready = "http://127.0.0.1:{{port}}/health"

[[test]]
name = "push"
kind = "bench"
url = "http://127.0.0.1:{{port}}/push/dev0"
body = "x"
setup = [{ path = "/register", body = '{"id": "dev0"}' }]
rate = 300
duration = "2s"

[compare]
bands = { cpu_per_op = "3%" }
EOF

# One trial: prints "verdict ratio seconds".
trial() {
  local mode=$1 cost=$2 seed=$3 store="$work/t.db"
  rm -f "$store"
  "$TB" noise --seconds 600 --threads "$(nproc)" &
  local noise=$!
  local args=(--pairs 60 --budget "$BUDGET")
  [ "$mode" = sequential ] && args=(--pairs "$SEQ_REPS")
  local t0=$SECONDS
  "$SL" --store "$store" run "$work/duo.toml" --no-tui --mode "$mode" --seed "$seed" \
    --baseline "cost=$COST" --candidate "cost=$cost" "${args[@]}" > "$work/out.txt" 2>&1 || true
  local took=$((SECONDS - t0))
  kill "$noise" 2>/dev/null; wait "$noise" 2>/dev/null || true
  "$SL" --store "$store" compare baseline candidate --json "$work/c.json" > /dev/null 2>&1 || true
  python3 - "$work/c.json" "$took" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
row = next(r for r in doc["rows"] if r["metric"] == "cpu_per_op")
print(row["verdict"], "%.3f" % row["ratio"], sys.argv[2])
PY
}

printf '%-12s %-6s %7s %10s %18s %14s\n' mode pair trials regressed "median ratio" "median time"
for mode in $MODES; do
  for pair in AB AA; do
    if [ $pair = AB ]; then n=$TRIALS_AB; cost=$CAND; else n=$TRIALS_AA; cost=$COST; fi
    results=()
    for i in $(seq "$START" $((START + n - 1))); do
      results+=("$(trial "$mode" "$cost" "$i")")
      echo "  $mode $pair trial $i: ${results[-1]}" >&2
    done
    printf '%s\n' "${results[@]}" | python3 -c "
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
reg = sum(1 for r in rows if r[0] == 'regressed')
print('%-12s %-6s %7d %10s %18.3f %12.0f s' % ('$mode', '$pair', len(rows), '%d/%d' % (reg, len(rows)),
      statistics.median(float(r[1]) for r in rows), statistics.median(float(r[2]) for r in rows)))
"
  done
done

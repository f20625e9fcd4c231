#!/usr/bin/env bash
# Did a change cost the load generator anything? Two builds of strainline — REV (default:
# the previous commit) and the working tree — loaded against the same nginx, one after
# the other in alternating order (before/after, then after/before, …), so that the
# machine's drift falls on both:
#  1. closed model: `load -c 50 --threads 1` for SECONDS_PER_RUN, pinned to CPU 0,
#     nginx's one worker on CPU 1: requests per generator-CPU-second and peak RSS;
#  2. open model at RATE (default 40,000 req/s) for SECONDS_PER_RUN: CPU µs per request,
#     corrected p99 and schedule lag p99.
# Prints every run, then the medians and after/before ratios. Loopback only; bounded.
#   bash bench/before-after.sh                 # HEAD~1 against the working tree
#   REPS=5 bash bench/before-after.sh 4350fa4  # a given revision
#   BEFORE_BIN=/path/to/strainline bash bench/before-after.sh 4350fa4   # already built
set -euo pipefail
cd "$(dirname "$0")/.."
REV=${1:-HEAD~1}
REPS=${REPS:-4}
DUR=${SECONDS_PER_RUN:-5}
RATE=${RATE:-40000}
if ! command -v nginx >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
fi
WORK=$(mktemp -d)
SRC=$WORK/before-src
cleanup() { kill "${NGINX:-0}" 2>/dev/null || true; wait "${NGINX:-0}" 2>/dev/null || true
  git worktree remove --force "$SRC" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
if [ -n "${BEFORE_BIN:-}" ]; then
  BEFORE=$BEFORE_BIN
else
  git worktree add -q --detach "$SRC" "$REV"
  (cd "$SRC" && CARGO_TARGET_DIR=$WORK/tgt cargo build --release -q --bin strainline)
  BEFORE=$WORK/tgt/release/strainline
fi
cargo build --release -q --bin strainline
AFTER=$PWD/target/release/strainline
echo "before: $REV ($(git rev-parse --short "$REV")), after: the working tree at $(git rev-parse --short HEAD)"

. bench/nginx.sh
start_nginx

# One run of binary $1 with the rest as load arguments, pinned to CPU 0 under GNU time
# (each build its own store: an older one may not open a store a newer one migrated);
# appends a JSON line {which, model, completed, cpu, rss_kib, p99, lag_p99} to results.
run() { local which=$1 bin=$2 model=$3; shift 3
  rm -f "$WORK/r.json"   # a run that fails is not read as the last one
  taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$WORK/time" \
    "$bin" --store "$WORK/s-$which.db" load "$URL" "$@" -z "${DUR}s" --json "$WORK/r.json" > /dev/null 2>&1 || true
  python3 - "$WORK/r.json" "$WORK/time" "$which" "$model" >> "$WORK/results" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
u, k, m = open(sys.argv[2]).read().split()[-3:]
print(json.dumps({"which": sys.argv[3], "model": sys.argv[4], "completed": s["completed"],
                  "cpu": float(u) + float(k), "rss_kib": int(m), "p99": s["latency_us"]["p99"],
                  "lag_p99": s["schedule_lag_us"]["p99"], "status": s["status"]}))
PY
}

: > "$WORK/results"
for i in $(seq "$REPS"); do
  if (( i % 2 )); then order="before after"; else order="after before"; fi
  for w in $order; do
    bin=$BEFORE; [ "$w" = after ] && bin=$AFTER
    run "$w" "$bin" closed -c 50 --threads 1
    run "$w" "$bin" open -q "$RATE" --threads 1
  done
done

python3 - "$WORK/results" "$RATE" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def pick(w, m): return [r for r in rows if r["which"] == w and r["model"] == m]
print(f"{'run':<8} {'model':<7} {'req/CPU-s':>10} {'µs CPU/req':>11} {'RSS MiB':>8} {'p99 µs':>8} {'lag p99':>8}  verdict")
for r in rows:
    print(f"{r['which']:<8} {r['model']:<7} {r['completed'] / r['cpu']:>10.0f} {1e6 * r['cpu'] / max(r['completed'], 1):>11.2f} "
          f"{r['rss_kib'] / 1024:>8.1f} {r['p99']:>8} {r['lag_p99']:>8}  {r['status']}")
print()
for m, what, f in [("closed", "req per CPU-s", lambda r: r["completed"] / r["cpu"]),
                   ("closed", "peak RSS MiB", lambda r: r["rss_kib"] / 1024),
                   ("open", f"CPU µs per request at {sys.argv[2]} req/s", lambda r: 1e6 * r["cpu"] / max(r["completed"], 1)),
                   ("open", "corrected p99 µs", lambda r: r["p99"]),
                   ("open", "schedule lag p99 µs", lambda r: r["lag_p99"])]:
    b = statistics.median(map(f, pick("before", m))); a = statistics.median(map(f, pick("after", m)))
    print(f"{m:<7} {what:<38} before {b:>10.1f}  after {a:>10.1f}  after/before {a / b:.3f}")
PY

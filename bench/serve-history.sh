#!/usr/bin/env bash
# How fast does `strainline serve` answer over a big history? Fills an SQLite store
# with 10,000 runs × 20 cases × 15 metrics (3 million metric rows; a shift injected at
# run 7,000 in one series), serves it on loopback, and times each page with curl:
# the median and the slowest of REPS requests, plus the server's peak RSS. Local only.
# Usage:
#   bash bench/serve-history.sh             # 20 requests per page
#   RUNS=2000 REPS=5 bash bench/serve-history.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10000}
REPS=${REPS:-20}
cargo build --release --bin strainline -q
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
DB=$WORK/big.db

# A real store (schema, host) from one import, then the history written in bulk.
echo '{"results":[{"command":"seed","times":[0.01,0.011]}]}' > "$WORK/seed.json"
"$SL" --store "$DB" import hyperfine "$WORK/seed.json" --label seed >/dev/null
t0=$(date +%s.%N)
/usr/bin/python3 - "$DB" "$RUNS" <<'PY'
import random, sqlite3, sys
db, runs = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
host = c.execute("SELECT id FROM hosts LIMIT 1").fetchone()[0]
random.seed(7)
metrics = ["latency_p50", "latency_p90", "latency_p99", "latency_p999", "latency_max",
           "throughput", "error_rate", "cpu_per_op", "target_cpu", "peak_rss",
           "service_p50", "service_p99", "log_errors", "log_warnings", "leak_slope"]
units = {"throughput": ("req/s", "higher"), "peak_rss": ("B", "lower")}
case_id = c.execute("SELECT COALESCE(MAX(id), 0) FROM cases").fetchone()[0]
run_id = c.execute("SELECT MAX(id) FROM runs").fetchone()[0]
for r in range(runs):
    run_id += 1
    t = f"2026-{1 + r * 11 // runs:02d}-{1 + r % 28:02d}T{r % 24:02d}:{r % 60:02d}:00.000Z"
    status = "failed" if r % 97 == 0 else "passed"
    c.execute("INSERT INTO runs (id, kind, label, suite, command, cwd, git_commit, git_dirty, host_id,"
              " strainline_version, pid, started_at, ended_at, status, exit_code, reasons)"
              " VALUES (?, 'suite', ?, 'big', 'run big.toml', '/src', ?, 0, ?, '0.1.0', 1, ?, ?, ?, ?, '[]')",
              (run_id, f"nightly-{r}", f"{r:040x}", host, t, t, status, 1 if status == "failed" else 0))
    cases, values = [], []
    for k in range(20):
        case_id += 1
        summary = '{"reasons": ["latency_p99 < 2ms: 2.4 ms"]}' if status == "failed" and k == 3 else None
        cases.append((case_id, run_id, f"case-{k}", "bench", t, t, status if k == 3 else "passed", summary))
        for m in metrics:
            base = 1.0 + k * 0.1
            if m == "latency_p99" and k == 3 and r >= runs * 7 // 10:
                base *= 1.25
            unit, direction = units.get(m, ("ms", "lower"))
            values.append((case_id, m, base * random.gauss(1.0, 0.02), unit, direction))
    c.executemany("INSERT INTO cases (id, run_id, name, test_kind, started_at, ended_at, status, summary)"
                  " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", cases)
    c.executemany("INSERT INTO metrics (case_id, name, value, unit, direction) VALUES (?, ?, ?, ?, ?)", values)
    if r % 1000 == 999:
        c.commit()
c.commit()
c.close()
PY
t1=$(date +%s.%N)
size=$(du -m "$DB" | cut -f1)
printf 'store: %d runs × 20 cases × 15 metrics, %d MiB, written in %.0f s\n' "$RUNS" "$size" "$(echo "$t1 - $t0" | bc)"

"$SL" --store "$DB" serve --listen 127.0.0.1:0 > "$WORK/serve.out" &
SERVER=$!
for _ in $(seq 50); do grep -q http:// "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
BASE=$(grep -o 'http://[0-9.:]*' "$WORK/serve.out")

printf '%-58s %10s %10s %10s\n' "page" "median ms" "max ms" "KiB"
for page in "/runs" "/runs?page=150" "/runs?suite=big&status=failed" \
  "/runs/$((RUNS / 2))" \
  "/history?suite=big&case=case-3&metric=latency_p99" \
  "/history?suite=big&case=case-3&metric=latency_p99&last=1000" \
  "/api/v1/history?suite=big&case=case-3&metric=latency_p99" \
  "/history?suite=big" \
  "/compare?baseline=nightly-100&candidate=nightly-9000"; do
  times=()
  for _ in $(seq "$REPS"); do
    times+=("$(curl -s -o "$WORK/page" -w '%{time_total}' "$BASE$page")")
  done
  kib=$(( $(stat -c %s "$WORK/page") / 1024 ))
  printf '%s\n' "${times[@]}" | sort -n | awk -v p="$page" -v k="$kib" '
    { t[NR] = $1 * 1000 } END { printf "%-58s %10.1f %10.1f %10d\n", p, t[int((NR + 1) / 2)], t[NR], k }'
done
printf 'server peak RSS: %s\n' "$(grep VmHWM /proc/$SERVER/status | awk '{print $2 " " $3}')"

#!/usr/bin/env bash
# How fast, and in how much memory, does `strainline workload characterize` read a big
# access log? A synthetic Combined log of SIZE_MB (default 1024 MiB: ~8 million lines,
# 12 route templates with ids, Poisson arrivals at 100 req/s, a response time last) is
# read by strainline and by GoAccess (Debian package, installed when missing) — the
# usual tool for this, as the anchor — each under GNU time: wall time, CPU, peak RSS.
#   bash bench/workload-vs-goaccess.sh
#   SIZE_MB=256 bash bench/workload-vs-goaccess.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-1024}
if ! command -v goaccess >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq goaccess >/dev/null
fi
cargo build --release -q --bin strainline
SL=$PWD/target/release/strainline
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG=$WORK/access.log

python3 - "$LOG" "$SIZE_MB" <<'PY'
import random, sys, time
path, size = sys.argv[1], int(sys.argv[2]) << 20
rng = random.Random(1)
routes = [("GET", "/api/v1/users/{}", 900), ("POST", "/push/dev-{}", 20),
          ("GET", "/devices/{}/state", 800), ("GET", "/health", 2),
          ("GET", "/static/app.{}.js", 120000), ("PUT", "/users/{}/settings", 64),
          ("GET", "/orders/{}/items/{}", 4000), ("DELETE", "/sessions/{}", 0),
          ("GET", "/search", 15000), ("GET", "/", 5200),
          ("POST", "/login", 300), ("GET", "/feed/{}", 30000)]
weights = [30, 20, 15, 10, 5, 5, 5, 3, 3, 2, 1, 1]
t = 1795338000.0
written = 0
months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
with open(path, "w", buffering=1 << 20) as f:
    while written < size:
        lines = []
        for _ in range(10000):
            t += rng.expovariate(100.0)
            m, p, b = rng.choices(routes, weights)[0]
            ids = [rng.randrange(1, 10**6) for _ in range(p.count("{}"))]
            tm = time.gmtime(t)
            stamp = "%02d/%s/%04d:%02d:%02d:%02d +0000" % (tm.tm_mday, months[tm.tm_mon - 1], tm.tm_year, tm.tm_hour, tm.tm_min, tm.tm_sec)
            status = 200 if rng.random() < 0.97 else 503
            lines.append('10.%d.%d.%d - - [%s] "%s %s HTTP/1.1" %d %d "-" "Mozilla/5.0 (X11; Linux x86_64)" %.3f\n' % (
                rng.randrange(256), rng.randrange(256), rng.randrange(256), stamp, m, p.format(*ids), status,
                b + rng.randrange(100), rng.expovariate(50.0)))
        chunk = "".join(lines)
        f.write(chunk)
        written += len(chunk)
PY
echo "log: $(du -m "$LOG" | cut -f1) MiB, $(wc -l < "$LOG") lines"

# Runs a command under GNU time; prints "wall_s cpu_s max_rss_mib".
timed() { /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || { cat "$WORK/out"; exit 1; }
  awk '{printf "%.1f %.1f %.1f\n", $1, $2 + $3, $4 / 1024}' "$WORK/time"; }

printf '%-34s %8s %8s %12s\n' tool wall_s cpu_s peak_rss_MiB
read -r w c r < <(timed "$SL" workload characterize "$LOG" --json "$WORK/p.json")
printf '%-34s %8s %8s %12s\n' "strainline workload characterize" "$w" "$c" "$r"
grep -E "lines|Rate|Dispersion" "$WORK/out" | head -3
# GoAccess's time grows faster than the log (its memory holds every distinct visitor
# and URL): it gets GOACCESS_TIMEOUT seconds (default 1200).
GT=${GOACCESS_TIMEOUT:-1200}
if /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" timeout "$GT" goaccess "$LOG" --log-format=COMBINED -o "$WORK/report.json" > "$WORK/out" 2>&1; then
  read -r gw gc gr < <(awk '{printf "%.1f %.1f %.1f\n", $1, $2 + $3, $4 / 1024}' "$WORK/time")
  printf '%-34s %8s %8s %12s\n' "goaccess --log-format=COMBINED" "$gw" "$gc" "$gr"
  awk -v a="$w" -v b="$gw" -v ra="$r" -v rb="$gr" 'BEGIN { printf "ratio strainline/goaccess: time %.2f, peak RSS %.2f\n", a / b, ra / rb }'
else
  echo "goaccess did not finish within ${GT}s (peak RSS so far $(tail -1 "$WORK/time" | awk '{printf "%.0f", $4 / 1024}') MiB)"
fi

#!/usr/bin/env bash
# Data files in bounded memory, with every byte written (the e2e test leaves the long
# files' tails a hole): `strainline check` on 60 MiB of `1,2` rows, a one-row CSV of
# 200 MB and a 300 MB file without a line end; prints each one's peak RSS (the child's
# ru_maxrss), time and first line of output. Needs ~560 MB of disk in $TMPDIR. Usage:
#   bash bench/feeders.sh                  # release build
#   PROFILE=debug bash bench/feeders.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = release ]; then cargo build --release --bin strainline -q; else cargo build --bin strainline -q; fi
SL=$PWD/target/$PROFILE/strainline
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK" <<'PY'
import sys, os
d = sys.argv[1]
with open(f"{d}/small.csv", "wb") as f:
    f.write(b"a,b\n" + b"1,2\n" * ((60 << 20) // 4))
with open(f"{d}/one-row.csv", "wb") as f:
    f.write(b"a,b\n")
    for _ in range(200):
        f.write(b"x" * 1_000_000)
    f.write(b"\n")
with open(f"{d}/no-newline.csv", "wb") as f:
    for _ in range(300):
        f.write(b"x" * 1_000_000)
for name in ["small.csv", "one-row.csv", "no-newline.csv"]:
    with open(f"{d}/{name}.toml", "w") as f:
        f.write(f'clients = 4\ncsv = "{name}"\ncsv_order = "random"\n\n[[step]]\nname = "get"\nweight = 1\npath = "/{{{{row.a}}}}"\n')
PY
printf '%-16s %10s %8s  %s\n' file "peak RSS" seconds output
for name in small.csv one-row.csv no-newline.csv; do
  python3 - "$SL" "$WORK/$name.toml" "$name" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run([sys.argv[1], "check", sys.argv[2]], capture_output=True, text=True)
dt = time.monotonic() - t
kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
said = (r.stdout or r.stderr).strip().splitlines()[0]
print(f"{sys.argv[3]:<16} {kib / 1024:7.1f} MiB {dt:8.2f}  {said[-110:]}")
PY
done

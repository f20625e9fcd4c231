#!/usr/bin/env bash
# A duet of 60 pairs whose targets take 200 ms to bind (issue 51): every target logs the
# {{port}} it was given; no port may appear twice, no case may crash or be INVALID for a
# port, and the +5% candidate must exit 1. About 2 minutes on a 2-core VM.
#   bash bench/duet-ports.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bins -q
bin="$PWD/target/release"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/duo.toml" <<TOML
[suite]
name = "duo"

[target]
command = ["sh", "-c", "echo {{port}} >> $dir/ports.log; sleep 0.2; exec $bin/strainline-testbed serve --listen 127.0.0.1:{{port}} --workers 1 --cpu-cost {{cost}}"]
ready = "http://127.0.0.1:{{port}}/health"

[[test]]
name = "push"
kind = "bench"
url = "http://127.0.0.1:{{port}}/push/dev0"
body = "reading=42"
setup = [{ path = "/register", body = '{"id": "dev0"}' }]
rate = 300
duration = "1s"

[compare]
bands = { cpu_per_op = "3%" }
TOML
cd "$dir"
set +e
"$bin/strainline" run duo.toml --no-tui --mode duet --baseline cost=100 --candidate cost=105 \
  --pairs 60 --min-pairs 60 --seed 7 > out.txt 2>&1
code=$?
set -e
ports=$(wc -l < ports.log)
shared=$(sort ports.log | uniq -d | wc -l)
lost=$(grep -cE "Address already in use|already answers" out.txt || true)
echo "exit $code (1 expected: +5% regressed); $ports targets started, $shared ports shared, $lost cases lost to a port"
grep -E "^(REGRESSION|no regression)" out.txt || true
[ "$code" = 1 ] && [ "$shared" = 0 ] && [ "$lost" = 0 ]

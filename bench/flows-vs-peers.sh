#!/usr/bin/env bash
# What does a user flow cost the generator? Side by side on loopback, in one run: the
# testbed (pinned to CPU 1) driven from CPU 0 by 50 virtual clients for DURATION, REPS
# times interleaved, as
#   plain  — strainline, the flow's requests without extraction, checks or cookies;
#   flow   — strainline, a three-step flow: POST /devices (extract the JSON id, keep
#            the cookie it sets), then a mix of POST /push/{{id}} and GET /health, each
#            checked;
#   hook   — the flow with a Lua script hook on every request and reply (request(r)
#            signs the body with an HMAC header, response(r) decodes the JSON reply);
#   rich   — the flow written with the flow language's newer parts: a templated check
#            (body_contains = "{{word}}" from [vars]), a tag on every step and a custom
#            trend fed by an extraction on every push (its reply's Content-Length);
#   locust — Locust (FastHttpUser, one process) playing the same flow, if installed
#            (pip install locust);
#   artillery — Artillery 2 (one Node process, its expect plugin silent) playing the same
#            flow, if installed (npm install artillery; PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
#            and --ignore-scripts where its browser cannot be fetched), found on PATH or
#            at $ARTILLERY.
# Prints requests per generator-CPU-second (user + system, GNU time) and the ratios
# flow/plain (goal >= 0.95, issue 56), rich/plain (goal >= 0.85), hook/plain (goal >=
# 0.7, issue 56), flow/locust (goal >= 25, issue 56) and flow/artillery. Loopback only;
# every run is bounded.
#   bash bench/flows-vs-peers.sh
#   REPS=5 DURATION=20s bash bench/flows-vs-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
DURATION=${DURATION:-10s}
SECS=${DURATION%s}
cargo build --release -q --bin strainline && cargo build --release -q -p strainline-testbed
SL=$PWD/target/release/strainline
TB=$PWD/target/release/strainline-testbed
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 1 "$TB" serve --listen "127.0.0.1:$PORT" --cpu-cost 1 >/dev/null 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; rm -rf "$WORK"' EXIT
until curl -s "127.0.0.1:$PORT/health" >/dev/null; do sleep 0.1; done

cat > "$WORK/flow.toml" <<'TOML'
clients = 50

[[step]]
name = "enroll"
once = true
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }
check.created = { status = 201 }

[[step]]
name = "push"
weight = 1
method = "POST"
path = "/push/{{id}}"
body = "x"
check.pushed = { status = 200 }

[[step]]
name = "health"
weight = 1
path = "/health"
check.alive = { body_contains = "ok" }
TOML
sed 's/^clients = 50$/clients = 50\nscript = "hook.lua"/' "$WORK/flow.toml" > "$WORK/hook.toml"
cat > "$WORK/rich.toml" <<'TOML'
clients = 50

[vars]
word = "ok"

[metrics]
reply_bytes = "trend"

[[step]]
name = "enroll"
once = true
tags = { kind = "write" }
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }
check.created = { status = 201 }

[[step]]
name = "push"
weight = 1
tags = { kind = "write" }
method = "POST"
path = "/push/{{id}}"
body = "x"
extract.bytes = { header = "content-length", metric = "reply_bytes" }
check.pushed = { status = 200 }

[[step]]
name = "health"
weight = 1
tags = { kind = "read" }
path = "/health"
check.alive = { body_contains = "{{word}}" }
TOML
cat > "$WORK/hook.lua" <<'LUA'
function request(r)
  r.headers["x-signature"] = strainline.hmac_sha256("k3y", r.body)
end

function response(r)
  if r.step == "enroll" then return strainline.json(r.body) ~= nil end
end
LUA
# The same requests without a flow: no extraction (the id fixed by the client number
# after the enroll), no checks, no cookies.
cat > "$WORK/plain.toml" <<'TOML'
clients = 50
cookies = false

[[step]]
name = "enroll"
once = true
method = "POST"
path = "/register"
body = '{"id": "p-{{client}}"}'

[[step]]
name = "push"
weight = 1
method = "POST"
path = "/push/p-{{client}}"
body = "x"

[[step]]
name = "health"
weight = 1
path = "/health"
TOML
cat > "$WORK/locustfile.py" <<'PY'
from locust import task
from locust.contrib.fasthttp import FastHttpUser

class Device(FastHttpUser):
    def on_start(self):
        with self.client.post("/devices", catch_response=True) as r:
            if r.status_code != 201:
                r.failure("not created")
            self.id = r.json()["id"]

    @task
    def push(self):
        with self.client.post(f"/push/{self.id}", data="x", name="/push", catch_response=True) as r:
            if r.status_code != 200:
                r.failure("not pushed")

    @task
    def health(self):
        with self.client.get("/health", catch_response=True) as r:
            if "ok" not in r.text:
                r.failure("not alive")
PY

cat > "$WORK/artillery.yml" <<YML
config:
  target: "http://127.0.0.1:$PORT"
  phases:
    - duration: 1
      arrivalCount: 50
  plugins:
    expect:
      outputFormat: silent
scenarios:
  - flow:
      - post:
          url: "/devices"
          capture:
            - json: "\$.id"
              as: "id"
          expect:
            - statusCode: 201
      - loop:
          - post:
              url: "/push/{{ id }}"
              body: "x"
              expect:
                - statusCode: 200
          - get:
              url: "/health"
              expect:
                - statusCode: 200
        count: 100000000
YML

timed() { taskset -c 0 /usr/bin/time -f '%U %S' -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || true
  tail -1 "$WORK/time" | awk '{printf "%.3f\n", $1 + $2}'; }
sl() { local cpu; cpu=$(timed "$SL" --store "$WORK/s.db" load "http://127.0.0.1:$PORT" --scenario "$WORK/$1.toml" \
    --threads 1 -z "$DURATION" --no-progress --json "$WORK/$1.json")
  local n; n=$(python3 -c "import json; print(json.load(open('$WORK/$1.json'))['summary']['completed'])")
  echo "$n $cpu"; }
have_locust=$(python3 -c 'import locust' 2>/dev/null && echo yes || echo no)
lc() { local cpu; cpu=$(timed python3 -m locust -f "$WORK/locustfile.py" --headless -u 50 -r 50 -t "$DURATION" \
    -H "http://127.0.0.1:$PORT" --csv "$WORK/lc" --only-summary)
  local n; n=$(python3 -c "import csv; r=[x for x in csv.DictReader(open('$WORK/lc_stats.csv')) if x['Name']=='Aggregated'][0]; print(int(r['Request Count']))")
  echo "$n $cpu"; }

ART=${ARTILLERY:-$(command -v artillery || true)}
served() { curl -s "127.0.0.1:$PORT/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["requests"])'; }
# Artillery's requests as the testbed counts them, and its CPU read from /proc before it
# is stopped (its loop never ends by itself, and a killed process leaves its parent no
# usage to collect).
ar() { local before ticks pid; before=$(served)
  taskset -c 0 "$ART" run --quiet "$WORK/artillery.yml" > "$WORK/ar.out" 2>&1 & pid=$!
  sleep "$SECS"
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
  echo "$(( $(served) - before - 1 )) $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.3f", t / hz}')"; }

echo "testbed on CPU 1; generators on CPU 0 (1 thread / 1 process), 50 clients, $DURATION each"
printf '%-4s %-8s %10s %8s %12s\n' rep tool requests cpu_s req/cpu_s
fp=(); fr2=(); fh=(); fl=(); fa=()
for rep in $(seq 1 "$REPS"); do
  read -r pn pc < <(sl plain); read -r fn fc < <(sl flow); read -r hn hc < <(sl hook)
  pr=$(awk -v a="$pn" -v b="$pc" 'BEGIN{printf "%.0f", a / b}'); fr=$(awk -v a="$fn" -v b="$fc" 'BEGIN{printf "%.0f", a / b}')
  printf '%-4s %-8s %10s %8s %12s\n' "$rep" plain "$pn" "$pc" "$pr"
  printf '%-4s %-8s %10s %8s %12s\n' "$rep" flow "$fn" "$fc" "$fr"
  hr=$(awk -v a="$hn" -v b="$hc" 'BEGIN{printf "%.0f", a / b}')
  printf '%-4s %-8s %10s %8s %12s\n' "$rep" hook "$hn" "$hc" "$hr"
  read -r rn rc < <(sl rich); rr=$(awk -v a="$rn" -v b="$rc" 'BEGIN{printf "%.0f", a / b}')
  printf '%-4s %-8s %10s %8s %12s\n' "$rep" rich "$rn" "$rc" "$rr"
  fr2+=("$(awk -v a="$rr" -v b="$pr" 'BEGIN{printf "%.3f", a / b}')")
  fp+=("$(awk -v a="$fr" -v b="$pr" 'BEGIN{printf "%.3f", a / b}')")
  fh+=("$(awk -v a="$hr" -v b="$pr" 'BEGIN{printf "%.3f", a / b}')")
  if [ "$have_locust" = yes ]; then
    read -r ln lcpu < <(lc); lr=$(awk -v a="$ln" -v b="$lcpu" 'BEGIN{printf "%.0f", a / b}')
    printf '%-4s %-8s %10s %8s %12s\n' "$rep" locust "$ln" "$lcpu" "$lr"
    fl+=("$(awk -v a="$fr" -v b="$lr" 'BEGIN{printf "%.2f", a / b}')")
  fi
  if [ -n "$ART" ]; then
    read -r an acpu < <(ar); arr=$(awk -v a="$an" -v b="$acpu" 'BEGIN{printf "%.0f", a / b}')
    printf '%-4s %-8s %10s %8s %12s\n' "$rep" artillery "$an" "$acpu" "$arr"
    fa+=("$(awk -v a="$fr" -v b="$arr" 'BEGIN{printf "%.2f", a / b}')")
  fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "flow/plain per generator-CPU-second: ${fp[*]} (median $(median "${fp[@]}"))"
echo "rich/plain per generator-CPU-second: ${fr2[*]} (median $(median "${fr2[@]}"))"
echo "hook/plain per generator-CPU-second: ${fh[*]} (median $(median "${fh[@]}"))"
if [ "$have_locust" = yes ]; then
  echo "flow/locust per generator-CPU-second: ${fl[*]} (median $(median "${fl[@]}"))"
else
  echo "Locust not installed (pip install locust): no ratio against it"
fi
if [ -n "$ART" ]; then
  echo "flow/artillery per generator-CPU-second: ${fa[*]} (median $(median "${fa[@]}"))"
else
  echo "Artillery not installed (npm install artillery, or ARTILLERY=PATH): no ratio against it"
fi

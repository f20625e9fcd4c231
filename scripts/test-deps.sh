#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing (Debian/Ubuntu):
# a C compiler and pkg-config (bundled SQLite), curl (the testbed's TLS and HTTP/2
# tests), PostgreSQL (the shared results store's tests start a real server), Chromium
# (the HTML report is opened headless and screenshotted), xmllint (JUnit XML is
# validated against its schema), perf (flame graphs of the testbed), Python 3 (its
# http.server is a target we did not write; its YAML parser reads the Kubernetes
# manifest), tmux (the live view is driven in a
# terminal it emulates), iproute2 (load agents run on "hosts" that are network
# namespaces joined by a bridge), nginx (a target we did not write, with its access log)
# jq (the GitHub Action's comment script), Prometheus (it scrapes --metrics-listen),
# nftables (a lossy link: a namespace's firewall drops a known share of packets) and
# redis-server (a target that daemonises, and the Redis protocol's server; redis-cli counts
# its keys), python3-websockets and python3-grpcio (a
# WebSocket echo server and a gRPC server we did not write), mosquitto (an MQTT broker we did not write, and its clients), a JDK (its built-in HTTP server), Node (its http2 server), openssl (its s_client plays a stranger at an
# agent's TLS port), man-db (it renders strainline's man pages), python3-djangorestframework (a JSON API we did not write); and from PyPI kubernetes-validate (the Kubernetes API schemas) and Playwright (it drives Chromium to record sessions as HAR).
set -euo pipefail

need=()
command -v cc >/dev/null || need+=(gcc)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v curl >/dev/null || need+=(curl)
command -v git >/dev/null || need+=(git)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null || need+=(chromium)
command -v xmllint >/dev/null || need+=(libxml2-utils)
command -v perf >/dev/null || need+=(linux-perf)
command -v python3 >/dev/null || need+=(python3)
python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
# Debian's Python with its `websockets` (a WebSocket server we did not write).
/usr/bin/python3 -c 'import websockets' 2>/dev/null || need+=(python3 python3-websockets)
# …and its grpcio (a gRPC server we did not write).
/usr/bin/python3 -c 'import grpc' 2>/dev/null || need+=(python3 python3-grpcio)
# …and its Django (a web framework we did not write: sessions, CSRF, its admin login).
/usr/bin/python3 -c 'import django' 2>/dev/null || need+=(python3 python3-django)
command -v tmux >/dev/null || need+=(tmux)
# man renders the man pages `strainline man` writes.
command -v man >/dev/null || need+=(man-db)
command -v ip >/dev/null || need+=(iproute2)
command -v nginx >/dev/null || need+=(nginx-light)
command -v jq >/dev/null || need+=(jq)
command -v prometheus >/dev/null || need+=(prometheus)
command -v nft >/dev/null || need+=(nftables)
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v openssl >/dev/null || need+=(openssl)
command -v mosquitto >/dev/null || need+=(mosquitto)
command -v mosquitto_passwd >/dev/null || need+=(mosquitto)
command -v mosquitto_sub >/dev/null || need+=(mosquitto-clients)
# The JDK's built-in HTTP server, a target we did not write (its responses meet delayed ACKs).
command -v java >/dev/null || need+=(default-jdk-headless)
# Node's http2 module (nghttp2 inside), an HTTP/2 server we did not write.
command -v node >/dev/null || need+=(nodejs)
# …and Django REST framework (a JSON API with token logins, for recorded flows).
/usr/bin/python3 -c 'import rest_framework' 2>/dev/null || need+=(python3-djangorestframework)
# Playwright drives Debian's Chromium to record sessions as HAR (workload flow's tests).
python3 -c 'import playwright' 2>/dev/null \
  || python3 -m pip install --quiet --break-system-packages playwright==1.65.2
# The Kubernetes API's own schemas, offline: the agents' manifest is validated against them.
python3 -c 'import kubernetes_validate' 2>/dev/null \
  || python3 -m pip install --quiet --break-system-packages kubernetes-validate==1.37.0
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "missing packages: ${need[*]} (install them, or run as root)" >&2; exit 1; }
  sudo="sudo"
fi
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
# The tests start their own PostgreSQL; the package's cluster is not needed.
if command -v pg_lsclusters >/dev/null; then
  $sudo systemctl disable --now postgresql >/dev/null 2>&1 || $sudo service postgresql stop >/dev/null 2>&1 || true
fi
# Nor the package's Prometheus or Redis service: the tests start their own, on free ports.
for service in prometheus redis-server mosquitto; do
  if command -v "$service" >/dev/null; then
    $sudo systemctl disable --now "$service" >/dev/null 2>&1 || $sudo service "$service" stop >/dev/null 2>&1 || true
  fi
done

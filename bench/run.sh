#!/usr/bin/env bash
# `make bench`: installs what the benchmarks need (nginx from the Debian
# packages) and runs them; the figures land in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/sbin/nginx ]; then
  echo "installing nginx with apt-get" >&2
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nginx-light >/dev/null 2>&1 || \
    $SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi
go run ./bench -duration "${BENCH_DURATION:-10s}" -out docs/benchmarks.md

#!/usr/bin/env bash
# Installs PostgreSQL from the Debian packages when initdb cannot be found
# (on PATH or under /usr/lib/postgresql/*/bin). Tests and `tally dev` start
# their own servers; the package's own service is not used.
set -euo pipefail
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
echo "PostgreSQL not found: installing it with apt-get" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb >/dev/null

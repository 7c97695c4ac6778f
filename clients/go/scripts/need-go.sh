#!/usr/bin/env bash
# Go 1.22 or later for the Go module's tests and benchmark, and what its tests run
# besides: unshare (util-linux) and ip (iproute2), which give redis_rate's example a
# network namespace of its own. Nothing to do when they are there; as root on
# Debian/Ubuntu, apt-get installs what is missing (Debian 12's golang-go is 1.19: then
# install Go 1.22 or later from go.dev or bookworm-backports' golang-1.22); otherwise
# the command is printed and the make target fails.
set -euo pipefail
go_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local v
  v=$(go env GOVERSION 2>/dev/null | sed -e 's/^go//')
  [ "$(printf '%s\n' 1.22 "${v%%[a-z]*}" | sort -V | head -n 1)" = 1.22 ]
}
missing=()
go_ok || missing+=(golang-go)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "need-go: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  if ! go_ok; then
    echo "need-go: Go 1.22 or later is needed, the distribution has $(go version 2>&1)" >&2
    exit 1
  fi
  exit 0
fi
echo "need-go: Go 1.22 or later, unshare and ip are needed: sudo apt-get install -y ${missing[*]}" >&2
echo "  (Go from go.dev where the distribution's is older than 1.22)" >&2
exit 1

#!/usr/bin/env bash
# Prints the path of the go command that the Go module's make targets run (Go 1.22 or
# later), after making sure that it is there, with what the tests run besides: unshare
# (util-linux) and ip (iproute2), which give redis_rate's example a network namespace
# of its own. Everything but that path goes to stderr, so a make target runs
#
#   go=$(clients/go/scripts/need-go.sh) && export PATH="$(dirname "$go"):$PATH" && ...
#
# - The go on PATH, when it is Go 1.22 or later.
# - Otherwise the Go toolchain as the Go module proxy publishes it, the module
#   golang.org/toolchain@v0.0.1-go1.22.12.<os>-<arch>, kept under .cache/go-toolchain
#   at the repository's root (ignored by git; `rm -rf .cache/go-toolchain` drops it). The
#   go there is (Debian 12's golang-go is Go 1.19) downloads it, as a module, into that
#   directory alone (GOMODCACHE): the checksum database vouches for it as for any
#   module, and on linux-amd64 its hash must also be the one written below. Where there
#   is no go at all, apt-get installs Debian's golang-go first (as root; otherwise the
#   command is printed and the target fails). The machine's own Go is left as it is.
# - unshare and ip: apt-get installs what is missing (as root).
set -euo pipefail

toolchain_version=v0.0.1-go1.22.12
# The module's hash (go.sum's h1:) for linux-amd64, as `go mod download -json` reports it.
toolchain_sum_linux_amd64="h1:Hdh4VJAlDWzMnhKpqDwqJJr+sE7NgsJ86dyR4wrv2oY="

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cache="$repo/.cache/go-toolchain"

say() { echo "need-go: $*" >&2; }

# go_version GO: the version of that go command ("1.19.8"), without switching toolchains.
go_version() {
  local v
  v=$(cd / && GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || v=""
  if [ -z "$v" ]; then
    v=$(cd / && GOTOOLCHAIN=local "$1" version 2>/dev/null | awk '{print $3}') || v=""
  fi
  v=${v#go}
  echo "${v%%[!0-9.]*}"
}

# recent GO: that go command runs and is Go 1.22 or later.
recent() {
  local v
  v=$(go_version "$1")
  [ -n "$v" ] && [ "$(printf '%s\n' 1.22 "$v" | sort -V | head -n 1)" = 1.22 ]
}

apt_install() {
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "$@" >&2
  else
    say "needed: sudo apt-get install -y $*"
    exit 1
  fi
}

missing=()
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)

system_go=$(command -v go || true)
if [ -n "$system_go" ] && recent "$system_go"; then
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  echo "$system_go"
  exit 0
fi

os=$(uname -s | tr '[:upper:]' '[:lower:]')
case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  i?86) arch=386 ;;
  *) arch="" ;;
esac
if [ -z "$arch" ] && [ -n "$system_go" ]; then
  arch=$("$system_go" env GOHOSTARCH)
fi
if [ -z "$arch" ]; then
  say "no Go toolchain module is known for $(uname -m): install Go 1.22 or later"
  exit 1
fi
module="golang.org/toolchain@$toolchain_version.$os-$arch"
dir="$cache/$module"
want=${toolchain_version#v0.0.1-go}

# usable: the toolchain in the cache runs and is the version asked for.
usable() { [ -x "$dir/bin/go" ] && [ "$(go_version "$dir/bin/go")" = "$want" ]; }

if ! usable; then
  [ -n "$system_go" ] || missing+=(golang-go)
fi
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
  system_go=$(command -v go || true)
fi

if ! usable; then
  old=$system_go
  if [ -z "$old" ]; then
    say "no go command after installing golang-go"
    exit 1
  fi
  say "$old is Go $(go_version "$old"); fetching Go $want from the Go module proxy ($module) into $cache"
  mkdir -p "$cache"
  # The cache is the project's, not a part of it.
  [ -e "$repo/.cache/.gitignore" ] || echo '*' >"$repo/.cache/.gitignore"
  # Outside any module (an old go refuses this repository's go.mod), with this
  # directory as its only module cache; -modcacherw so that rm -rf can remove it.
  json=$(cd "$cache" && env GOMODCACHE="$cache" GOFLAGS=-modcacherw GO111MODULE=on GOWORK=off GOTOOLCHAIN=local \
    "$old" mod download -json "$module") || {
    say "could not download $module with $old (is the Go module proxy reachable? GOPROXY=$("$old" env GOPROXY))"
    say "$json"
    exit 1
  }
  sum=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')
  if [ "$os-$arch" = linux-amd64 ] && [ "$sum" != "$toolchain_sum_linux_amd64" ]; then
    say "$module has the hash '$sum', not $toolchain_sum_linux_amd64: not used"
    exit 1
  fi
  # An old go extracts module files without their executable bits.
  chmod a+x "$dir"/bin/* "$dir"/pkg/tool/*/*
  for f in "$dir"/bin/* "$dir"/pkg/tool/*/*; do
    if [ ! -x "$f" ]; then
      say "$f is not executable"
      exit 1
    fi
  done
  if ! usable; then
    say "$dir/bin/go does not run as Go $want"
    exit 1
  fi
fi
say "using $dir/bin/go (Go $want; the go on PATH is ${system_go:-none}$([ -z "$system_go" ] || echo ", Go $(go_version "$system_go")"))"
echo "$dir/bin/go"

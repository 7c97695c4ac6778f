#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks for a make target, checking what the
# build really uses rather than what happens to be installed:
#   build  libclang (found the way bindgen finds it) and a C compiler
#   test   build + redis-server, redis-cli (redis-tools) and python3 with venv (the
#          Valkey run and the examples install their packages from PyPI into .venv)
#   bench  test (redis-benchmark comes with redis-tools)
#   dist   test + debhelper and dpkg-dev (make dist builds the Debian package with them)
# As root it installs the missing packages with apt-get; otherwise it prints the exact
# command and fails. Nothing is installed, and no root is needed, when nothing is missing.
#
#   scripts/deps.sh [build|test|bench|dist]     check, then install what is missing
#   scripts/deps.sh --list [build|test|bench|dist]
#                                          print the missing Debian packages, one per
#                                          line, and exit 0 (used by the tests)
#
# DEPS_ROOT (tests only) puts the library directories under another root, so the
# detection can be checked against a fake library tree.
set -euo pipefail

list_only=false
if [ "${1:-}" = "--list" ]; then
  list_only=true
  shift
fi
goal=${1:-test}
case "$goal" in
  build | test | bench | dist) ;;
  *)
    echo "deps: unknown goal '$goal' (build, test, bench or dist)" >&2
    exit 2
    ;;
esac
root=${DEPS_ROOT:-}

# libclang as bindgen (through clang-sys) looks for it at build time: the directory in
# LIBCLANG_PATH, then `llvm-config --libdir`, then the usual library directories; the
# file names libclang.so, libclang-N.so, libclang.so.N and libclang-N.so.M, but never
# libclang-cpp (the C++ library, which other packages install on their own and which
# bindgen cannot use).
libclang_in() {
  local dir=$1 f name
  for f in "$dir"/libclang.so "$dir"/libclang-*.so "$dir"/libclang.so.* "$dir"/libclang-*.so.*; do
    [ -e "$f" ] || continue
    name=${f##*/}
    case "$name" in
      *-cpp.*) continue ;;
    esac
    return 0
  done
  return 1
}

have_libclang() {
  local dir
  if [ -n "${LIBCLANG_PATH:-}" ]; then
    libclang_in "$LIBCLANG_PATH" && return 0
  fi
  if dir=$("${LLVM_CONFIG_PATH:-llvm-config}" --libdir 2>/dev/null); then
    libclang_in "$dir" && return 0
  fi
  shopt -s nullglob
  for dir in "$root"/usr/local/llvm*/lib* "$root"/usr/local/lib*/*/* "$root"/usr/local/lib*/* \
    "$root"/usr/local/lib* "$root"/usr/lib*/*/* "$root"/usr/lib*/* "$root"/usr/lib*; do
    [ -d "$dir" ] || continue
    if libclang_in "$dir"; then
      shopt -u nullglob
      return 0
    fi
  done
  shopt -u nullglob
  return 1
}

missing=()
have_libclang || missing+=(libclang-dev)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
if [ "$goal" != build ]; then
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
  if ! command -v python3 >/dev/null 2>&1; then
    missing+=(python3 python3-venv)
  elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    # Debian's python3 has the venv module but not ensurepip until python3-venv is in.
    missing+=(python3-venv)
  fi
fi

if [ "$goal" = dist ]; then
  command -v dh >/dev/null 2>&1 || missing+=(debhelper)
  command -v dpkg-buildpackage >/dev/null 2>&1 || missing+=(dpkg-dev)
fi

if $list_only; then
  [ ${#missing[@]} -eq 0 ] || printf '%s\n' "${missing[@]}"
  exit 0
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "deps: cargo is missing: install Rust with rustup (https://rustup.rs), then run make again." >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # Installing redis-server on Debian starts a system server on port 6379; the tests
  # use ports of their own, and `make run` says what to do when 6379 is taken.
else
  echo "deps: missing ${missing[*]}. Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

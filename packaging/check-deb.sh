#!/usr/bin/env bash
# make check-dist: install the Debian package that make dist built on this machine, start
# redis-server (Debian's, /usr/bin/redis-server) with the installed module on a free port
# of 127.0.0.1, check the commands, the sweep tool on PATH and the twins, then purge
# the package and check that nothing of it is left. Needs root (dpkg -i); refuses to run
# where redis-ratelimit is already installed, rather than remove someone's install.
#   packaging/check-deb.sh redis-ratelimit_V_ARCH.deb
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 PACKAGE.deb" >&2; exit 2; }
deb=$(realpath "$1")
say() { echo "check-deb: $*"; }
fail() { echo "check-deb: FAILED: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: installing a package needs root (run make check-dist as root)" >&2
  exit 0
fi
if dpkg-query -W -f='${Status}' redis-ratelimit 2>/dev/null | grep -q 'ok installed'; then
  fail "redis-ratelimit is already installed on this machine; this check installs and removes its own build, so it will not touch that one (dpkg --purge redis-ratelimit first)"
fi
server=/usr/bin/redis-server
[ -x "$server" ] || fail "$server is missing (scripts/deps.sh test installs redis-server)"

tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  dpkg --purge redis-ratelimit >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

say "dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; fail "dpkg -i"; }
module=/usr/lib/redis/modules/libredis_ratelimit.so
lua=/usr/share/redis-ratelimit/lua
for f in "$module" $lua/ratelimit.lua $lua/scripts/rl_gcra.lua $lua/scripts/rl_fixed.lua \
  /etc/redis/ratelimit.conf /usr/share/doc/redis-ratelimit/copyright; do
  [ -f "$f" ] || fail "$f is not installed"
done
[ "$(command -v ratelimit-sweep)" = /usr/bin/ratelimit-sweep ] || fail "ratelimit-sweep is not on PATH as /usr/bin/ratelimit-sweep"
ratelimit-sweep --version >/dev/null || fail "ratelimit-sweep --version"

# A free port: bind one, then start the server on it (another start picks another).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
started=false
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  printf 'port %s\nbind 127.0.0.1\nsave ""\nappendonly no\ndir %s\ninclude /etc/redis/ratelimit.conf\n' \
    "$port" "$tmp" >"$tmp/redis.conf"
  "$server" "$tmp/redis.conf" >"$tmp/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
      started=true
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  $started && break
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  say "attempt $attempt: the server did not start on port $port:"
  cat "$tmp/server.log" >&2
done
$started || fail "redis-server with the installed module did not start"
say "redis-server on 127.0.0.1:$port with $module"

cli() { redis-cli -p "$port" "$@"; }
cli MODULE LIST | grep -qx ratelimit || fail "MODULE LIST does not name ratelimit: $(cli MODULE LIST | tr '\n' ' ')"
got=$(cli RL.GCRA check-deb:user 2 1 10s AT 1900000000000 | tr '\n' ' ')
[ "$got" = "0 3 2 -1 10000 " ] || fail "RL.GCRA replied '$got'"
# The installed twins give the command's reply, each on a key of its own: the
# Functions library (FCALL) and the function's script (EVAL).
cli FUNCTION LOAD REPLACE "$(cat $lua/ratelimit.lua)" >/dev/null || fail "FUNCTION LOAD of $lua/ratelimit.lua"
got=$(cli FCALL rl_gcra 1 check-deb:function 2 1 10s AT 1900000000000 | tr '\n' ' ')
[ "$got" = "0 3 2 -1 10000 " ] || fail "the installed library's rl_gcra replied '$got'"
got=$(cli EVAL "$(cat $lua/scripts/rl_gcra.lua)" 1 check-deb:script 2 1 10s AT 1900000000000 | tr '\n' ' ')
[ "$got" = "0 3 2 -1 10000 " ] || fail "the installed script rl_gcra.lua replied '$got'"
cli SET check-deb:plain v >/dev/null
ratelimit-sweep -p "$port" --ttl 1h --quiet >"$tmp/sweep.out" 2>&1 || { cat "$tmp/sweep.out" >&2; fail "ratelimit-sweep"; }
[ "$(cli TTL check-deb:plain)" -gt 0 ] || fail "ratelimit-sweep gave check-deb:plain no TTL: $(cat "$tmp/sweep.out")"
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=

dpkg --purge redis-ratelimit >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; fail "dpkg --purge"; }
if dpkg-query -W -f='${Status}' redis-ratelimit 2>/dev/null | grep -q 'ok installed'; then
  fail "redis-ratelimit is still installed after dpkg --purge"
fi
for f in "$module" /usr/bin/ratelimit-sweep /usr/share/redis-ratelimit /etc/redis/ratelimit.conf; do
  [ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
say "ok: installed, served RL.GCRA, its function, its script and ratelimit-sweep on port $port, and removed"

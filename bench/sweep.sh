#!/usr/bin/env bash
# The bulk-TTL job before and after: give a TTL to N persistent keys (default 1 000 000) on a
# throwaway redis-server on 127.0.0.1, with
#   1. ratelimit-sweep (RL.SWEEP, default COUNT 1000), then at the COUNT cap (5000),
#   2. the article's SCAN + EVAL loop as published (bench/published-expire-loop.sh),
#      unless BASELINE=0.
# Prints wall times, keys/s, keys left without a TTL, and the slow log of RL.SWEEP
# (every call is logged: slowlog-log-slower-than 0).
# Usage: bench/sweep.sh [N]     env: PORT (default 17100), BASELINE=0 to skip that loop,
#                                    REDIS_SERVER (default redis-server)
# Needs the release build (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
PORT=${PORT:-17100}
SERVER=${REDIS_SERVER:-redis-server}
# `make bench-sweep` passes where cargo put the release build.
MODULE=${RATELIMIT_MODULE:-$PWD/target/release/libredis_ratelimit.so}
TOOL=${RATELIMIT_SWEEP:-$PWD/target/release/ratelimit-sweep}
[ -x "$TOOL" ] && [ -f "$MODULE" ] || { echo "run 'make build' first" >&2; exit 1; }

DIR=$(mktemp -d)
"$SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --save '' --appendonly no \
  --enable-debug-command local --loadmodule "$MODULE" \
  --slowlog-log-slower-than 0 --slowlog-max-len 1000000 --logfile "$DIR/log" --daemonize yes
trap 'redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$PORT" "$@"; }

fill() {
  cli FLUSHALL >/dev/null
  cli DEBUG POPULATE "$N" key >/dev/null # key:0 .. key:N-1, strings, no TTL
  [ "$(cli PTTL key:0)" = "-1" ] || { echo "populated keys have a TTL?" >&2; exit 1; }
}
left() { # keys still without a TTL, counted by a dry run
  "$TOOL" --url "redis://127.0.0.1:$PORT" --ttl 1h --dry-run --quiet | tail -1 | sed -n 's/.*would expire \([0-9]*\).*/\1/p'
}
now() { date +%s.%N; }
report() { # label start end
  awk -v l="$1" -v s="$2" -v e="$3" -v n="$N" 'BEGIN { t = e - s; printf "%-34s %8.1f s  %9.0f keys/s\n", l, t, n / t }'
}

echo "$N persistent keys, $(nproc) cores, $("$SERVER" --version | cut -d' ' -f1-3)"
for count in 1000 5000; do
  fill
  cli SLOWLOG RESET >/dev/null
  args=(--url "redis://127.0.0.1:$PORT" --ttl 1h --quiet)
  [ "$count" = 1000 ] || args+=(--count "$count")
  s=$(now); "$TOOL" "${args[@]}" >/dev/null; e=$(now)
  report "ratelimit-sweep (COUNT $count)" "$s" "$e"
  echo "  $(python3 -m bench.slowlog "$PORT" RL.SWEEP)"
  echo "  left without TTL: $(left)"
done

if [ "${BASELINE:-1}" != 0 ]; then
  fill
  cli CONFIG SET slowlog-log-slower-than 10000 >/dev/null
  s=$(now); bench/published-expire-loop.sh 127.0.0.1 "$PORT" 'key:*' >/dev/null; e=$(now)
  report "published SCAN + EVAL loop (COUNT 100)" "$s" "$e"
  echo "  left without TTL: $(left)"
fi

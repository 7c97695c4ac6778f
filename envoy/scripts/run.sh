#!/usr/bin/env bash
# Run the rate limit service on the example configuration (envoy/examples), with a
# redis-server and the module on 127.0.0.1:$REDIS_PORT (6379, the service's default
# REDIS_URL), both in the foreground until Ctrl-C.
#   envoy/scripts/run.sh SERVICE_BINARY MODULE [REDIS_PORT]
set -euo pipefail
service=$(realpath "$1") module=$(realpath "$2") port=${3:-6379}
here=$(cd "$(dirname "$0")/.." && pwd)
if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
  echo "envoy-run: something already listens on 127.0.0.1:$port (a redis-server?)." >&2
  echo "           Pick another port: make envoy-run PORT=6380" >&2
  exit 1
fi
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$module" --logfile "$dir/redis.log" &
redis=$!
trap 'kill "$redis" 2>/dev/null; wait "$redis" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" PING >/dev/null 2>&1 && break
  sleep 0.1
done
if ! redis-cli -p "$port" PING >/dev/null 2>&1; then
  echo "envoy-run: redis-server did not start:" >&2
  cat "$dir/redis.log" >&2
  exit 1
fi
echo "redis-server with the module on 127.0.0.1:$port; the service: gRPC on 127.0.0.1:${GRPC_PORT:-8081}, HTTP on 127.0.0.1:${HTTP_PORT:-8080}"
RUNTIME_ROOT="$here/examples" RUNTIME_SUBDIRECTORY=ratelimit \
  REDIS_URL="127.0.0.1:$port" GRPC_HOST=127.0.0.1 GRPC_PORT="${GRPC_PORT:-8081}" \
  HOST=127.0.0.1 PORT="${HTTP_PORT:-8080}" LOG_LEVEL="${LOG_LEVEL:-info}" \
  "$service"

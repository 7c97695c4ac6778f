#!/bin/bash
# The bulk-TTL article's SCAN + EVAL loop, as published (redis-cli SCAN ... COUNT 100, then one
# EVAL of expire.lua per chunk), kept as the baseline RL.SWEEP is compared with.
# Usage: bench/published-expire-loop.sh <host> <port> <pattern>
# Kept as is, including its flaw: `for (i=2; i<NF; i++)` drops the last key of every
# SCAN chunk, so about one key in a hundred never gets a TTL.

if [ $# -ne 3 ]
then
  echo "Expire keys from Redis matching a pattern using SCAN & EXPIRE"
  echo "Usage: $0 <host> <port> <pattern>"
  exit 1
fi

script="$(cat "$(dirname "$0")/published-expire.lua")"
cursor=-1
keys=""

while [[ $cursor -ne 0 ]]; do
  if [[ $cursor -eq -1 ]]
  then
    cursor=0
  fi

  reply=$(redis-cli -h $1 -p $2 SCAN $cursor MATCH $3 COUNT 100)
  cursor=$(expr "$reply" : '\([0-9]*[0-9 ]\)')
  echo "Cursor: $cursor"

  keys=$(echo $reply | awk '{for (i=2; i<NF; i++) print $i}')
  [ -z "$keys" ] && continue

  keya=( $keys )
  count=$(echo ${#keya[@]})
  redis-cli -h $1 -p $2 EVAL "$script" $count $keys
done

-- A baseline for `make bench`, not a twin: the least a hand-written fixed-window script
-- does for RL.FIXED's job and reply (GET, compare, SET PX or INCRBY, PTTL; five fields),
-- with no argument checks. The 1 it writes is text: the server takes a Lua number through
-- printf's %.17g, which costs Redis 7.0 about 2 000 instructions a call.
--   EVALSHA sha 1 key limit window_ms
local limit = tonumber(ARGV[1])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count + 1 > limit then
  local ttl = redis.call('PTTL', KEYS[1])
  return { 1, limit, limit - count, ttl, ttl }
end
if count == 0 then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
else
  redis.call('INCRBY', KEYS[1], '1')
end
return { 0, limit, limit - count - 1, -1, redis.call('PTTL', KEYS[1]) }

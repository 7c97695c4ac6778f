-- RL.BULKEXPIRE twin: EVALSHA sha numkeys key [key ...] seconds
-- The bulk-TTL article's expire.lua with a duration argument: each key that exists and has no TTL
-- gets one (PEXPIREAT at the call's millisecond plus `seconds`, the same absolute time
-- for every key); the reply lists those keys in argument order. A key named twice gets
-- its TTL at its first place and is listed once. Keys of any type.
-- Needs lua/prelude.lua in front of it.

local function bulkexpire()
  if #KEYS < 1 or #ARGV ~= 1 then
    arity_error('RL.BULKEXPIRE', 'RL.BULKEXPIRE seconds key [key ...]')
  end
  local ttl_ms = parse_duration('seconds', ARGV[1])
  local at = int(floor_ms(now_us(nil)) + ttl_ms)
  local modified = {}
  for _, k in ipairs(KEYS) do
    if redis.call('PTTL', k) == -1 then
      redis.call('PEXPIREAT', k, at)
      modified[#modified + 1] = k
    end
  end
  return modified
end

return run(bulkexpire)

-- RL.BULKEXPIRE: numkeys key [key ...] seconds (the keys first, as FCALL wants them).
-- The bulk-TTL article's expire.lua with a duration argument: each key that exists and
-- has no TTL gets one (PEXPIREAT at the call's millisecond plus `seconds`, the same
-- absolute time for every key); the reply lists those keys in argument order. A key
-- named twice gets its TTL at its first place and is listed once. Keys of any type.
local function bulkexpire_command(keys, args, name)
  if #keys < 1 then keys_error(name, '1 or more', #keys) end
  if #args ~= 1 then
    arity_error('RL.BULKEXPIRE', 'RL.BULKEXPIRE seconds key [key ...]')
  end
  local ttl_ms = parse_duration('seconds', args[1])
  local at = floor_ms(clock_us()) + ttl_ms
  local modified = {}
  for _, k in ipairs(keys) do
    if redis.call('PTTL', k) == -1 then
      redis.call('PEXPIREAT', k, at)
      modified[#modified + 1] = k
    end
  end
  return modified
end

local function rl_bulkexpire(keys, args)
  return run(bulkexpire_command, keys, args, 'rl_bulkexpire')
end

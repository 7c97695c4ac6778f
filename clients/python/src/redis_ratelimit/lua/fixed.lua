-- RL.FIXED twin: EVALSHA sha 1 key limit window [COST n] [ALIGN] [AT unix_ms]
-- State: KEYS[1] is a plain integer string (the count) whose expiry ends the window.
-- Needs lua/prelude.lua in front of it.

local function fixed()
  if #KEYS ~= 1 or #ARGV < 2 then
    fail("ERR wrong number of arguments for 'RL.FIXED' command")
  end
  local key = KEYS[1]
  local limit = parse_int('limit', ARGV[1], 1)
  local window_ms = parse_duration('window', ARGV[2])
  local o = parse_options(3, #ARGV, true)
  if o.cost > limit then
    fail('ERR cost ' .. int(o.cost) .. ' exceeds the limit ' .. int(limit)
      .. ': the request can never be allowed')
  end
  local now = now_us(o.at)

  local raw, exp = read_string(key)
  local count = 0
  if raw then
    if not string.match(raw, '^%d+$') or #raw > 19 or tonumber(raw) > MAX_SAFE_INTEGER then
      fail('ERR the key does not hold RL.FIXED state (expected a non-negative integer counter)')
    end
    count = tonumber(raw)
  end

  -- The current window: kept while it has not ended; a counter without TTL gets a
  -- window starting now; an ended window counts as empty.
  local now_ms = floor_ms(now)
  local fresh_end = now_ms + window_ms
  if o.align then fresh_end = now_ms - now_ms % window_ms + window_ms end
  local ends, missing_ttl = fresh_end, false
  if raw and not exp then
    missing_ttl = true
  elseif raw and exp * 1000 > now then
    ends = exp
  else
    count = 0
  end
  local until_end = ends * 1000 - now
  if until_end < 0 then until_end = 0 end

  local after = count + o.cost
  if after <= limit then
    if o.cost > 0 then
      redis.call('SET', key, int(after), 'PXAT', int(ends))
    end
    local reset = 0
    if after > 0 then reset = ceil_ms(until_end) end
    return { 0, limit, limit - after, -1, reset }
  end
  if missing_ttl and o.cost > 0 then
    redis.call('PEXPIREAT', key, int(ends))
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return { 1, limit, remaining, math.max(1, ceil_ms(until_end)), ceil_ms(until_end) }
end

return run(fixed)

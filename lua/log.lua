-- RL.LOG twin: EVALSHA sha 1 key limit window [META value] [COST n] [AT unix_ms]
-- State: KEYS[1] is a sorted set, one member per allowed request, scored by its time in
-- µs since the Unix epoch, named seq:cost:meta; it expires when its newest entry
-- leaves the window.
-- Needs lua/prelude.lua in front of it.

local STATE_ERROR = 'ERR the key does not hold RL.LOG state'
  .. ' (expected a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch)'

-- A stored number: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
local function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
end

local function log()
  if #KEYS ~= 1 or #ARGV < 2 then
    fail("ERR wrong number of arguments for 'RL.LOG' command")
  end
  local key = KEYS[1]
  local limit = string.match(ARGV[1], '^%-?%d+$') and tonumber(ARGV[1])
  if not limit or limit < 1 or limit > MAX_LOG_LIMIT then
    fail("ERR invalid limit '" .. echo(ARGV[1]) .. "': must be an integer from 1 to " .. int(MAX_LOG_LIMIT))
  end
  local window = parse_duration('window', ARGV[2]) * 1000
  local meta = nil
  local o = parse_options(3, #ARGV, false, function(i)
    if string.upper(ARGV[i]) ~= 'META' then return nil end
    if meta then fail('ERR option META given more than once') end
    if i + 1 > #ARGV then fail('ERR option META needs a value') end
    meta = ARGV[i + 1]
    if #meta > MAX_META_LEN then
      fail('ERR META of ' .. int(#meta) .. ' bytes: at most ' .. int(MAX_META_LEN) .. ' bytes')
    end
    return 2
  end)
  if o.cost > limit then
    fail('ERR cost ' .. int(o.cost) .. ' exceeds the limit ' .. int(limit)
      .. ': the request can never be allowed')
  end
  local now = now_us(o.at)

  -- The entries: none for a missing key.
  local entries = {}
  local kind = redis.call('TYPE', key)
  kind = type(kind) == 'table' and kind.ok or kind
  if kind ~= 'none' then
    if kind ~= 'zset' then fail('WRONGTYPE Operation against a key holding the wrong kind of value') end
    if redis.call('ZCARD', key) > MAX_LOG_LIMIT then fail(STATE_ERROR) end
    local raw = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 1, #raw, 2 do
      local seq, cost = string.match(raw[i], '^(%d+):(%d+):')
      local t = stored_number(raw[i + 1], MAX_SAFE_INTEGER)
      seq = stored_number(seq, MAX_SAFE_INTEGER)
      cost = stored_number(cost, MAX_LOG_LIMIT)
      if not (t and seq and cost) or cost == 0 then fail(STATE_ERROR) end
      entries[#entries + 1] = { t = t, seq = seq, cost = cost }
    end
  end

  -- Entries in (now - window, now] count, and any later ones (an earlier AT).
  local cutoff = math.max(now - window, 0)
  local function counts(t) return t > cutoff or now < window end
  local counted, newest, maxseq, trim = 0, nil, 0, false
  for _, e in ipairs(entries) do
    if e.seq > maxseq then maxseq = e.seq end
    if counts(e.t) then
      counted = counted + e.cost
      if not newest or e.t > newest then newest = e.t end
    else
      trim = true
    end
  end
  local function reset()
    if not newest then return 0 end
    return ceil_ms(math.max(newest + window - now, 0))
  end
  if counted + o.cost <= limit then
    if o.cost > 0 then
      newest = newest and math.max(newest, now) or now
      redis.call('ZADD', key, int(now), int(maxseq + 1) .. ':' .. int(o.cost) .. ':' .. (meta or ''))
      if trim then redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff)) end
      redis.call('PEXPIREAT', key, int(ceil_ms(newest + window)))
    end
    return { 0, limit, limit - counted - o.cost, -1, reset() }
  end
  -- Denied: when enough of the oldest entries have left for the cost to fit.
  local oldest = {}
  for _, e in ipairs(entries) do
    if counts(e.t) then oldest[#oldest + 1] = e end
  end
  table.sort(oldest, function(a, b)
    if a.t ~= b.t then return a.t < b.t end
    return a.seq < b.seq
  end)
  local left, retry = counted, newest + window
  for _, e in ipairs(oldest) do
    left = left - e.cost
    if left + o.cost <= limit then
      retry = e.t + window
      break
    end
  end
  return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(retry - now)), reset() }
end

return run(log)

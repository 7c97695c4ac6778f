-- RL.LOG twin: EVALSHA sha 1 key limit window [META value] [COST n] [AT unix_ms]
-- State: KEYS[1] is a sorted set, one member per unit of allowed cost, scored by the
-- request's time in µs since the Unix epoch, named seq:meta; it expires when its
-- newest member leaves the window. Each call reads only what it needs (ZCOUNT, the
-- newest member, the oldest that must leave), each in O(log n).
-- Needs lua/prelude.lua in front of it.

local STATE_ERROR = 'ERR the key does not hold RL.LOG state'
  .. ' (expected a sorted set of seq:meta members scored by microseconds since the Unix epoch)'

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

  -- What the call needs of the log; nothing for a missing key.
  local counted, newest, newest_seq = 0, nil, 0
  local cut = math.max(now - window, 0)
  local after = '(' .. int(cut)
  -- A member read: its time and sequence number, or the invalid-state error.
  local function entry(pair)
    if #pair == 0 then return nil end
    local seq = stored_number(string.match(pair[1], '^(%d+):'), MAX_SAFE_INTEGER)
    local t = stored_number(pair[2], MAX_SAFE_INTEGER)
    if not (seq and t) then fail(STATE_ERROR) end
    return { t = t, seq = seq }
  end
  local kind = redis.call('TYPE', key)
  kind = type(kind) == 'table' and kind.ok or kind
  if kind ~= 'none' then
    if kind ~= 'zset' then fail('WRONGTYPE Operation against a key holding the wrong kind of value') end
    if redis.call('ZCARD', key) > MAX_LOG_LIMIT then fail(STATE_ERROR) end
    counted = redis.call('ZCOUNT', key, after, '+inf')
    local last = entry(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES'))
    if last then
      newest_seq = last.seq
      if counted > 0 then newest = last.t end
    end
  end
  local function reset(n)
    if not n then return 0 end
    return ceil_ms(math.max(n + window - now, 0))
  end
  local over = counted + o.cost - limit
  if over <= 0 then
    if o.cost > 0 then
      newest = newest and math.max(newest, now) or now
      local seq = newest_seq + 1
      for _ = 1, o.cost do
        -- A number already taken (a log written with an earlier AT) is skipped.
        while redis.call('ZADD', key, 'NX', int(now), int(seq) .. ':' .. (meta or '')) == 0 do
          seq = seq + 1
        end
        seq = seq + 1
      end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cut))
      redis.call('PEXPIREAT', key, int(ceil_ms(newest + window)))
    end
    return { 0, limit, limit - counted - o.cost, -1, reset(newest) }
  end
  -- Denied: when the oldest member that must leave has left.
  local leaving = entry(redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', over - 1, 1))
  local retry = (leaving and leaving.t or newest) + window
  return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(retry - now)), reset(newest) }
end

return run(log)

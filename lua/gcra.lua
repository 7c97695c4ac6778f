-- RL.GCRA twin: EVALSHA sha 1 key max_burst count period [COST n] [AT unix_ms]
--               [DELAY max_delay]
-- State: KEYS[1] is a plain integer string, the theoretical arrival time (TAT) in µs
-- since the Unix epoch, expiring at the TAT rounded up to the millisecond (redis-cell's
-- TAT in ns is read too).
-- Needs lua/prelude.lua in front of it.

local function gcra()
  if #KEYS ~= 1 or #ARGV < 3 then
    fail("ERR wrong number of arguments for 'RL.GCRA' command")
  end
  local key = KEYS[1]
  local max_burst = parse_int('max_burst', ARGV[1], 0)
  local count = parse_int('count', ARGV[2], 1)
  local period = parse_duration('period', ARGV[3]) * 1000
  local max_delay = nil
  local o = parse_options(4, #ARGV, false, function(i)
    if string.upper(ARGV[i]) ~= 'DELAY' then return nil end
    if max_delay then fail('ERR option DELAY given more than once') end
    if i + 1 > #ARGV then fail('ERR option DELAY needs a value') end
    max_delay = parse_duration('max_delay', ARGV[i + 1]) * 1000
    return 2
  end)
  -- The emission interval T: period / count rounded up to a whole µs.
  if count > period then
    fail('ERR invalid rate: period / count must be at least 1 microsecond')
  end
  local rest = period % count
  local interval = (period - rest) / count
  if rest > 0 then interval = interval + 1 end
  local capacity = max_burst + 1
  local window = interval * capacity
  if window > MAX_BURST_WINDOW_US then
    fail('ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)')
  end
  if o.cost > capacity then
    fail('ERR cost ' .. int(o.cost) .. ' exceeds the burst capacity ' .. int(capacity)
      .. ': the request can never be allowed')
  end
  if max_delay and window + max_delay > MAX_BURST_WINDOW_US then
    fail('ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)')
  end
  local now = now_us(o.at)

  -- Only the value counts: the expiry always follows the TAT.
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    fail('WRONGTYPE Operation against a key holding the wrong kind of value')
  end
  local tat = now
  if raw then
    -- µs, or redis-cell's ns rounded up to the µs.
    local stored = read_tat(raw)
    if not stored then
      fail('ERR the key does not hold RL.GCRA state'
        .. ' (expected a theoretical arrival time in microseconds since the Unix epoch)')
    end
    -- A TAT in the past counts as now.
    tat = math.max(stored, now)
  end

  local new_tat = tat + interval * o.cost
  local ahead = new_tat - now
  -- With DELAY, a request that fits within max_delay is booked.
  local bound = window + (max_delay or 0)
  if ahead <= bound then
    if o.cost > 0 then
      redis.call('SET', key, int(new_tat), 'PXAT', int(ceil_ms(new_tat)))
    end
    local room = math.max(window - ahead, 0)
    local reply = { 0, capacity, (room - room % interval) / interval, -1, ceil_ms(ahead) }
    if max_delay then reply[6] = ceil_ms(math.max(ahead - window, 0)) end
    return reply
  end
  local behind = tat - now
  local room = math.max(window - behind, 0)
  local reply = { 1, capacity, (room - room % interval) / interval, math.max(1, ceil_ms(ahead - bound)),
    ceil_ms(behind) }
  if max_delay then reply[6] = -1 end
  return reply
end

return run(gcra)

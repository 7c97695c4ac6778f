-- RL.GCRA: a theoretical arrival time (TAT), in µs since the Unix epoch, whose TTL
-- follows it; and CL.THROTTLE, redis-cell's command over the same state.

-- A stored RL.GCRA TAT in µs, as the module reads it (gcra::parse_tat), or nil: the
-- module's own (1 to MAX_TAT_DIGITS digits of µs) or redis-cell's (19 digits of ns,
-- from 10^18), rounded up to the µs; at most MAX_TAT_US either way. A 19-digit number
-- is above 2^53, so it is read as text: its first 16 digits, plus 1 unless the last 3
-- are 000.
local function read_tat(s)
  if string.find(s, '%D') then return nil end
  local n
  if #s <= MAX_TAT_DIGITS then
    n = tonumber(s)
    if not n then return nil end
  elseif #s == 19 and string.sub(s, 1, 1) ~= '0' then
    n = tonumber(string.sub(s, 1, 16))
    if string.sub(s, 17) ~= '000' then n = n + 1 end
  else
    return nil
  end
  if n > MAX_TAT_US then return nil end
  return n
end

local GCRA = (function()
  local L = { kind = 'GCRA', command = 'RL.GCRA', storage = 'string', nargs = 3, quantity_fifth = true,
    expected = 'a theoretical arrival time in microseconds since the Unix epoch',
    options = NO_RULE_OPTIONS, accepts = { COST = true, AT = true, DELAY = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay] [REFUND|FORCE|UPTO]',
    rule_syntax = 'GCRA i max_burst count period' }
  function L.parse_args(args, i)
    local order = 'RL.GCRA key max_burst count period: the period comes last'
    return { L = L, max_burst = count_in_order('max_burst', args[i], 0, order),
      count = count_in_order('count', args[i + 1], 1, order),
      period = parse_duration('period', args[i + 2]) * 1000,
      interval = 0, capacity = 0, window = 0, max_delay = false }
  end
  -- Checked in the order of the errors: rate and burst window here, then cost and delay
  -- (check_cost).
  function L.build(r, o)
    -- The emission interval T: period / count rounded up to a whole µs.
    if r.count > r.period then
      fail('ERR invalid rate: period / count must be at least 1 microsecond')
    end
    local rest = r.period % r.count
    r.interval = (r.period - rest) / r.count
    if rest > 0 then r.interval = r.interval + 1 end
    r.capacity = r.max_burst + 1
    r.window = r.interval * r.capacity
    if r.window > MAX_BURST_WINDOW_US then
      fail('ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)')
    end
    r.max_delay = o.delay or false
    return r
  end
  -- A refund, a forced request or UPTO of any cost can be settled: no capacity check.
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.capacity then cost_over(cost, 'burst capacity', r.capacity) end
    if r.max_delay and r.window + r.max_delay > MAX_BURST_WINDOW_US then
      fail('ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)')
    end
  end
  function L.judge(r, key, named, raw, _, now, cost, mode)
    -- Only the value counts: the expiry always follows the TAT.
    local tat = now
    if raw then
      local stored = read_tat(raw)
      if not stored then state_error(L, key, named) end
      if stored < MIN_TAT_US and stored ~= 0 then
        foreign_error(L, key, named, "a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes)")
      end
      -- A TAT in the past counts as now.
      if stored > now then tat = stored end
    end
    local interval, window = r.interval, r.window
    if mode == 'take' then
      local new_tat = tat + interval * cost
      local ahead = new_tat - now
      -- With DELAY, a request that fits within max_delay is booked.
      local max_delay = r.max_delay
      local bound = window + (max_delay or 0)
      if ahead <= bound then
        local room = window - ahead
        if room < 0 then room = 0 end
        local allow
        if cost > 0 then allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } end
        local j = { 0, r.capacity, (room - room % interval) / interval, -1, ceil_ms(ahead) }
        if max_delay then j.extra = ceil_ms(math.max(ahead - window, 0)) end
        return j, nil, allow
      end
      local behind = tat - now
      local room = math.max(window - behind, 0)
      local j = { 1, r.capacity, (room - room % interval) / interval, math.max(1, ceil_ms(ahead - bound)),
        ceil_ms(behind) }
      if max_delay then j.extra = -1 end
      return j, ahead - bound
    end
    local function room(ahead)
      local left = math.max(window - ahead, 0)
      return (left - left % interval) / interval
    end
    if mode == 'refund' then
      -- tat = max(now, tat - T * cost); at or before now the key goes.
      if not raw then return { 0, r.capacity, r.capacity, -1, 0 } end
      local new_tat = math.max(now, tat - interval * cost)
      local ahead = new_tat - now
      local allow
      if cost > 0 and new_tat <= now then
        allow = { 'DEL', key }
      elseif cost > 0 then
        allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) }
      end
      return { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, nil, allow
    end
    -- FORCE: stored whether it fits or not, at most the latest AT plus the longest
    -- burst window.
    local new_tat = tat + interval * cost
    if new_tat > MAX_TAT_US then
      force_out_of_bounds('a theoretical arrival time beyond the latest AT plus the longest burst window')
    end
    local ahead = new_tat - now
    local allow
    if cost > 0 then allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } end
    if ahead > window then
      local wait = ahead + interval - window
      return { 1, r.capacity, 0, math.max(1, ceil_ms(wait)), ceil_ms(ahead) }, wait, allow, nil, true
    end
    return { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, nil, allow
  end
  return L
end)()

local function rl_gcra(keys, args)
  return run(single_command, keys, args, GCRA, 'rl_gcra')
end

-- CL.THROTTLE: redis-cell's command, judged by RL.GCRA's limiter on RL.GCRA's key and
-- state: the call is `max_burst count <period>s COST quantity` (COST 0 when the
-- quantity is above max_burst + 1: a peek, replied limited with retry_after -1, nothing
-- written), and the reply's times are whole seconds rounded up.
local MAX_PERIOD_S = MAX_DURATION_MS / 1000
local function throttle_command(keys, args, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  if #args < 3 or #args > 4 then
    arity_error('CL.THROTTLE', 'CL.THROTTLE key max_burst count period [quantity]')
  end
  local max_burst = parse_int('max_burst', args[1], 0)
  local count = parse_int('count', args[2], 1)
  local ok, period = pcall(parse_int, 'period', args[3], 1)
  if not ok or period > MAX_PERIOD_S then
    fail("ERR invalid period '" .. echo(args[3]) .. "': must be an integer from 1 to " .. int(MAX_PERIOD_S))
  end
  local quantity = 1
  if args[4] then quantity = parse_int('quantity', args[4], 0) end
  local r = GCRA.build({ L = GCRA, max_burst = max_burst, count = count, period = period * 1000000,
    interval = 0, capacity = 0, window = 0, max_delay = false }, NO_OPTIONS)
  local over = quantity > r.capacity
  local reply = run_call('one', keys, { r }, nil, over and 0 or quantity, nil, 'take')
  if over then
    reply[1], reply[4] = 1, -1
  elseif reply[4] ~= -1 then
    reply[4] = math.max(1, ceil_ms(reply[4]))
  end
  reply[5] = ceil_ms(reply[5])
  return reply
end

local function cl_throttle(keys, args)
  return run(throttle_command, keys, args, 'cl_throttle')
end

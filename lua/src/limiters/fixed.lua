-- RL.FIXED: a counter per window. State: a plain integer string (the count in the
-- current window) whose TTL ends the window.

-- The counter of one window at `now` (RL.FIXED's rules); also each pair of RL.MULTI.
-- `count`, `exp`: the stored count (nil: none) and its window's end in ms (nil: no
-- TTL). Returns the five reply fields (limited, limit, remaining, retry_after_ms,
-- reset_after_ms), the wait in µs when denied (nil: allowed), the count after the
-- request, the window's end, and whether the counter had no TTL.
local function fixed_window(limit, window_ms, align, count, exp, now, cost)
  local now_ms = (now - now % 1000) / 1000
  local ends, missing_ttl = now_ms + window_ms, false
  if align then ends = now_ms - now_ms % window_ms + window_ms end
  if count and not exp then
    missing_ttl = true
  elseif count and exp * 1000 > now then
    ends = exp
  else
    count = 0
  end
  local until_end = ends * 1000 - now
  if until_end < 0 then until_end = 0 end
  local after = count + cost
  if after <= limit then
    local reset = 0
    if after > 0 then reset = ceil_ms(until_end) end
    return 0, limit, limit - after, -1, reset, nil, after, ends, missing_ttl
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  local reset = ceil_ms(until_end)
  return 1, limit, remaining, math.max(1, reset), reset, until_end, after, ends, missing_ttl
end

-- Cold: REFUND on one window: the count goes down by `cost`, never below 0; the
-- window's end is kept; 0 left: the key goes. A window that has ended (or no key) is
-- not touched. The fields, and the write ('set' or 'del'; nil: none) with the count
-- and end.
local function fixed_refund(limit, window_ms, align, count, exp, now, cost)
  if not count or (exp and exp * 1000 <= now) then
    return 0, limit, limit, -1, 0, nil
  end
  local _, _, _, _, _, _, _, ends = fixed_window(limit, window_ms, align, count, exp, now, 0)
  local after = math.max(count - cost, 0)
  local reset = 0
  if after > 0 then reset = ceil_ms(math.max(ends * 1000 - now, 0)) end
  local remaining = math.max(limit - after, 0)
  if cost == 0 then return 0, limit, remaining, -1, reset, nil end
  if after == 0 then return 0, limit, remaining, -1, reset, 'del', after, ends end
  return 0, limit, remaining, -1, reset, 'set', after, ends
end

-- Cold: FORCE on one window: `cost` is counted whether it fits or not (at most
-- 2^53 - 1). The fields, the wait in µs when over the limit (nil: it fit), the count
-- and end.
local function fixed_force(limit, window_ms, align, count, exp, now, cost)
  local limited, _, remaining, retry_ms, reset, retry, after, ends =
    fixed_window(limit, window_ms, align, count, exp, now, cost)
  if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
  if retry then remaining = 0 end
  return limited, limit, remaining, retry_ms, reset, retry, after, ends
end

local FIXED = (function()
  local L = { kind = 'FIXED', command = 'RL.FIXED', storage = 'string', expiry = true, nargs = 2,
    expected = 'a non-negative integer counter', options = { ALIGN = true },
    accepts = { COST = true, AT = true, ALIGN = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'FIXED i limit window [ALIGN]' }
  function L.parse_args(args, i)
    local order = 'RL.FIXED key limit window: the limit comes first'
    return { L = L, limit = count_in_order('limit', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]), align = false }
  end
  function L.build(r, o)
    r.align = o.align or false
    return r
  end
  L.check_cost = check_limit_cost
  function L.judge(r, key, named, raw, exp, now, cost, mode)
    local count
    if raw then
      count = #raw <= 19 and not string.find(raw, '%D') and tonumber(raw)
      if not count or count > MAX_SAFE_INTEGER then state_error(L, key, named) end
      -- A time RL.GCRA could have written, where the limit is below any such time:
      -- RL.GCRA's state (fixed::check_not_a_tat).
      if r.limit < MIN_TAT_US and count >= MIN_TAT_US then
        foreign_error(L, key, named, "what can only be RL.GCRA's state (a time in microseconds, above the limit)")
      end
    end
    if mode == 'take' then
      local limited, limit, remaining, retry_ms, reset, retry, after, ends, missing_ttl =
        fixed_window(r.limit, r.window_ms, r.align, count, exp, now, cost)
      -- The write of the call as this rule judged it: the count when allowed, the TTL a
      -- counter without one gets when denied; none for a peek.
      if cost == 0 then return { limited, limit, remaining, retry_ms, reset }, retry end
      if not retry then return { limited, limit, remaining, retry_ms, reset }, nil, { 'SET', key, after, 'PXAT', ends } end
      if missing_ttl then return { limited, limit, remaining, retry_ms, reset }, retry, nil, { 'PEXPIREAT', key, ends } end
      return { limited, limit, remaining, retry_ms, reset }, retry
    elseif mode == 'refund' then
      local limited, limit, remaining, retry_ms, reset, w, after, ends =
        fixed_refund(r.limit, r.window_ms, r.align, count, exp, now, cost)
      local allow
      if w == 'del' then allow = { 'DEL', key } end
      if w == 'set' then allow = { 'SET', key, after, 'PXAT', ends } end
      return { limited, limit, remaining, retry_ms, reset }, nil, allow
    end
    local limited, limit, remaining, retry_ms, reset, retry, after, ends =
      fixed_force(r.limit, r.window_ms, r.align, count, exp, now, cost)
    local allow
    if cost > 0 then allow = { 'SET', key, after, 'PXAT', ends } end
    return { limited, limit, remaining, retry_ms, reset }, retry, allow, nil, retry and true
  end
  return L
end)()

local function rl_fixed(keys, args)
  return run(single_command, keys, args, FIXED, 'rl_fixed')
end

-- RL.ALL's BAN rule: a penalty box, `strikes:<count>:<end_ms>` while a strike window
-- runs, `banned:<end_ms>` while a ban runs (docs/all.md). A gate: judged before the
-- other rules, and while a ban runs the call is denied there; a strike is its penalty,
-- the one write of a denied call. A rule of RL.ALL only: no command of its own.
local BAN = (function()
  local L = { kind = 'BAN', command = 'RL.ALL', storage = 'string', nargs = 3, gate = true,
    expected = 'a penalty box: strikes:<count>:<end_ms> or banned:<end_ms>', options = NO_RULE_OPTIONS,
    rule_syntax = 'BAN i strikes window duration' }
  function L.parse_args(args, i)
    local order = 'BAN i strikes window duration: the strikes come first'
    return { L = L, strikes = count_in_order('strikes', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]),
      duration_ms = parse_duration('duration', args[i + 2]) }
  end
  function L.build(r)
    return r
  end
  function L.check_cost()
  end
  function L.judge(r, key, named, raw, _, now, cost, mode)
    local count, strike_end = 0, nil
    local function live(e) return e * 1000 > now end
    if raw then
      local until_ms = string.match(raw, '^banned:(%d+)$')
      local c, e = string.match(raw, '^strikes:(%d+):(%d+)$')
      if until_ms then
        until_ms = stored_number(until_ms, MAX_END_MS)
        if not until_ms then state_error(L, key, named) end
        if live(until_ms) then
          local left = until_ms * 1000 - now
          if mode == 'refund' then
            return { 0, r.strikes, 0, -1, ceil_ms(left) }
          end
          return { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) }, left
        end
      elseif c then
        c, e = stored_number(c, MAX_SAFE_INTEGER), stored_number(e, MAX_END_MS)
        if not (c and e) then state_error(L, key, named) end
        if live(e) then count, strike_end = c, e end
      else
        state_error(L, key, named)
      end
    end
    local reset = 0
    if strike_end then reset = ceil_ms(strike_end * 1000 - now) end
    local j = { 0, r.strikes, math.max(r.strikes - count, 0), -1, reset }
    -- The strike a denial of this call records (not a peek, a refund or a forced call);
    -- an allowed call leaves the key as it is.
    if cost == 0 or mode ~= 'take' then return j end
    if count + 1 >= r.strikes then
      local until_ms = floor_ms(now) + r.duration_ms
      local left = until_ms * 1000 - now
      j.penalty = { 'SET', key, 'banned:' .. int(until_ms), 'PXAT', until_ms }
      j.binds = { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) }
    else
      local ends = strike_end or (floor_ms(now) + r.window_ms)
      j.penalty = { 'SET', key, 'strikes:' .. int(count + 1) .. ':' .. int(ends), 'PXAT', ends }
    end
    return j
  end
  return L
end)()

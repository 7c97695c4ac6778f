-- RL.MULTI: a counter per window on each key, RL.FIXED's rules for each pair
-- (fixed_window). State:
-- one string per key, `window_ms:count:end_ms` entries separated by commas.
local MULTI = (function()
  local L = { kind = 'MULTI', command = 'RL.MULTI', storage = 'string', expiry = true, nargs = 0,
    expected = 'window_ms:count:end_ms entries separated by commas',
    options = { LIMIT = true, ALIGN = true },
    accepts = { COST = true, AT = true, LIMIT = true, ALIGN = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'MULTI i LIMIT window limit [LIMIT window limit ...] [ALIGN]' }
  limits_rule(L)
  function L.build(r, o)
    if not o.limits then fail('ERR at least one LIMIT window limit is needed') end
    return { L = L, limits = o.limits, named = o.named, align = o.align }
  end
  -- A key's entries ({ w = window_ms, c = count, e = end_ms }) in order and by window,
  -- or an error naming the key.
  function L.parse_state(key, named, raw)
    local bad = function() state_error(L, key, named) end
    local entries, by_w, pos, len = {}, {}, 1, #raw
    if len == 0 then bad() end
    while true do
      local _, last, w, c, e = string.find(raw, '^(%d+):(%d+):(%d+)', pos)
      if not last then bad() end
      w = stored_digits(w, MAX_DURATION_MS)
      c = stored_digits(c, MAX_SAFE_INTEGER)
      e = stored_digits(e, MAX_END_MS)
      if not (w and c and e) or w == 0 or by_w[w] then bad() end
      by_w[w] = { w = w, c = c, e = e }
      entries[#entries + 1] = by_w[w]
      pos = last + 1
      if pos > len then return entries, by_w end
      if string.sub(raw, pos, pos) ~= ',' then bad() end
      pos = pos + 1
    end
  end
  -- A counter counts until its window ends (µs).
  function L.ends(e)
    return e.e * 1000
  end
  function L.encode(entries)
    local parts = {}
    for i, e in ipairs(entries) do parts[i] = int(e.w) .. ':' .. int(e.c) .. ':' .. int(e.e) end
    return table.concat(parts, ',')
  end
  -- One window: RL.FIXED's counter.
  function L.judge_window(r, entry, w, limit, now, cost, mode)
    local count, exp = entry and entry.c, entry and entry.e or 0
    if mode == 'refund' then
      local limited, _, remaining, retry_ms, reset, write, after, ends =
        fixed_refund(limit, w, r.align, count, exp, now, cost)
      local fields = { limited, limit, remaining, retry_ms, reset }
      if write == 'set' then return fields, nil, { w = w, c = after, e = ends } end
      return fields, nil, nil
    elseif mode == 'force' then
      local limited, _, remaining, retry_ms, reset, retry, after, ends =
        fixed_force(limit, w, r.align, count, exp, now, cost)
      return { limited, limit, remaining, retry_ms, reset }, retry, { w = w, c = after, e = ends }
    end
    local limited, _, remaining, retry_ms, reset, retry, after, ends =
      fixed_window(limit, w, r.align, count, exp, now, cost)
    local fields = { limited, limit, remaining, retry_ms, reset }
    if retry then return fields, retry, nil end
    return fields, nil, { w = w, c = after, e = ends }
  end
  return L
end)()

local function rl_multi(keys, args)
  return run(each_key_command, keys, args, MULTI, 'rl_multi')
end

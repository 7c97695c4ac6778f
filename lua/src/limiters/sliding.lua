-- RL.SLIDING: counts in buckets per window on each key. State: one string per key,
-- `window_ms:buckets:first:counts` entries separated by commas (the counts separated by
-- dots, from bucket number `first`).
local SLIDING = (function()
  local L = { kind = 'SLIDING', command = 'RL.SLIDING', storage = 'string', expiry = true, nargs = 0,
    buckets_per_key = true,
    expected = 'window_ms:buckets:first:counts entries separated by commas',
    options = { LIMIT = true, BUCKETS = true },
    accepts = { COST = true, AT = true, LIMIT = true, BUCKETS = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'SLIDING i LIMIT window limit [LIMIT window limit ...] [BUCKETS n]' }
  limits_rule(L)
  function L.build(r, o)
    if not o.limits then fail('ERR at least one LIMIT window limit is needed') end
    local n = o.buckets or DEFAULT_BUCKETS
    for _, lw in ipairs(o.limits) do
      if (lw[1] * 1000) % n ~= 0 then
        fail('ERR a window of ' .. int(lw[1]) .. ' ms does not split into ' .. int(n)
          .. ' buckets of whole microseconds (choose BUCKETS dividing ' .. int(lw[1]) .. '000)')
      end
    end
    return { L = L, limits = o.limits, named = o.named, buckets = n }
  end
  -- a // b for integers below 2^53, exactly.
  local function idiv(a, b)
    return (a - a % b) / b
  end
  -- A key's entries, sorted by window ({ w, n, first, counts }), and by window; or an
  -- error naming the key.
  function L.parse_state(key, named, raw)
    if #raw == 0 then state_error(L, key, named) end
    local entries, by_w = {}, {}
    local total_buckets = 0
    for item in string.gmatch(raw .. ',', '([^,]*),') do
      local w, n, first, counts = string.match(item, '^(%d+):(%d+):(%d+):([%d%.]+)$')
      if not w then state_error(L, key, named) end
      w = stored_digits(w, MAX_DURATION_MS)
      n = stored_digits(n, MAX_BUCKETS)
      first = stored_digits(first, MAX_SAFE_INTEGER)
      if not (w and n and first) or w == 0 or n == 0 or (w * 1000) % n ~= 0 then state_error(L, key, named) end
      local list, sum = {}, 0
      for c in string.gmatch(counts .. '.', '(%d*)%.') do
        local v = stored_digits(c, MAX_SAFE_INTEGER)
        if not v then state_error(L, key, named) end
        sum = sum + v
        if sum > MAX_SAFE_INTEGER then state_error(L, key, named) end
        list[#list + 1] = v
      end
      if #list > n + 1 then state_error(L, key, named) end
      -- No bucket later than a call writes into: the one holding the latest AT.
      if (first + #list) * (w * 1000 / n) > MAX_AT_US + w * 1000 / n then state_error(L, key, named) end
      total_buckets = total_buckets + n
      if total_buckets > MAX_BUCKETS_PER_KEY then state_error(L, key, named) end
      if #entries > 0 and entries[#entries].w >= w then state_error(L, key, named) end
      local e = { w = w, n = n, first = first, counts = list }
      entries[#entries + 1] = e
      by_w[w] = e
    end
    return entries, by_w
  end
  local function width(e)
    return e.w * 1000 / e.n
  end
  -- The number of the newest bucket with a count, or nil.
  local function newest(e)
    local counts = e.counts
    for i = #counts, 1, -1 do
      if counts[i] ~= 0 then return e.first + i - 1 end
    end
    return nil
  end
  -- When the newest counted bucket leaves the window, or nil.
  local function ends_at(e)
    local m = newest(e)
    if not m then return nil end
    return (m + 1) * width(e) + e.w * 1000
  end
  local function add(e, j, c)
    if #e.counts == 0 then e.first = j end
    if j < e.first then
      local shift, moved = e.first - j, {}
      for i = 1, shift do moved[i] = 0 end
      for i = 1, #e.counts do moved[shift + i] = e.counts[i] end
      e.counts, e.first = moved, j
    end
    local counts = e.counts
    local i = j - e.first + 1
    for x = #counts + 1, i do counts[x] = 0 end
    counts[i] = counts[i] + c
  end
  -- Drop the buckets before `lo` and the empty ones at both ends (in place).
  local function trim(e, lo)
    local counts, len = e.counts, #e.counts
    local lead = math.min(math.max(lo - e.first, 0), len)
    while lead < len and counts[lead + 1] == 0 do lead = lead + 1 end
    if lead > 0 then
      for i = 1, len - lead do counts[i] = counts[i + lead] end
      for i = len, len - lead + 1, -1 do counts[i] = nil end
      e.first, len = e.first + lead, len - lead
    end
    while len > 0 and counts[len] == 0 do
      counts[len] = nil
      len = len - 1
    end
  end
  -- The same counts in n buckets: each count goes to the new bucket holding the last
  -- microsecond of its old one.
  local function rebucketed(e, n)
    local old, new = width(e), e.w * 1000 / n
    local out = { w = e.w, n = n, first = 0, counts = {} }
    for i, c in ipairs(e.counts) do
      if c ~= 0 then add(out, idiv((e.first + i) * old - 1, new), c) end
    end
    return out
  end
  local function copy(e)
    local counts, from = {}, e.counts
    for i = 1, #from do counts[i] = from[i] end
    return { w = e.w, n = e.n, first = e.first, counts = counts }
  end
  -- µs from `now` until the newest counted bucket has left the window (0: none).
  local function reset_us(e, bw, window, now)
    local m = newest(e)
    if not m then return 0 end
    return math.max((m + 1) * bw + window - now, 0)
  end
  -- When enough of the oldest buckets (which count `total`) have left for `c` to fit
  -- under `limit`: when the bucket after which it fits leaves the window.
  local function fits_at(e, total, c, limit, bw, window)
    local counts, left = e.counts, total
    for i = 1, #counts do
      left = left - counts[i]
      if left + c <= limit then return (e.first + i) * bw + window end
    end
    return (e.first + #counts) * bw + window
  end
  -- One (key, window) pair at `now`: the reply fields, the entry after an allowed
  -- request, and retry_after in µs (nil when allowed).
  local function pair(stored, now, w_ms, limit, n, cost, mode)
    local window = w_ms * 1000
    local bw = window / n
    local e
    if stored and stored.n == n then
      e = copy(stored)
    elseif stored then
      e = rebucketed(stored, n)
    else
      e = { w = w_ms, n = n, first = 0, counts = {} }
    end
    -- A call judged before the newest bucket starts is judged at its start.
    local m = newest(e)
    local t = now
    if m and m * bw > t then t = m * bw end
    local current = idiv(t, bw)
    local lo = idiv(math.max(t - window, 0), bw)
    trim(e, lo)
    local counts, counted = e.counts, 0
    for i = 1, #counts do counted = counted + counts[i] end
    if mode == 'take' then
      if counted + cost <= limit then
        if cost > 0 then add(e, current, cost) end
        return { 0, limit, limit - counted - cost, -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
      end
      local wait = fits_at(e, counted, cost, limit, bw, window) - now
      return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(wait)),
        ceil_ms(reset_us(e, bw, window, now)) }, e, wait
    elseif mode == 'refund' then
      -- Newest buckets first, never below 0.
      local give = cost
      for i = #counts, 1, -1 do
        if give == 0 then break end
        local back = math.min(give, counts[i])
        counts[i], give = counts[i] - back, give - back
      end
      trim(e, e.first)
      local left = 0
      for i = 1, #e.counts do left = left + e.counts[i] end
      return { 0, limit, math.max(limit - left, 0), -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
    end
    -- FORCE.
    local after = counted + cost
    if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
    if cost > 0 then add(e, current, cost) end
    if after <= limit then
      return { 0, limit, limit - after, -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
    end
    local wait = fits_at(e, after, 1, limit, bw, window) - now
    return { 1, limit, 0, math.max(1, ceil_ms(wait)), ceil_ms(reset_us(e, bw, window, now)) }, e, wait
  end
  -- The entries as stored: numbers below 10^14 are written by concatenation (%.14g,
  -- exact there), larger ones by int.
  function L.encode(entries)
    local parts = {}
    for i = 1, #entries do
      local e = entries[i]
      local counts, first = e.counts, e.first
      for j = 1, #counts do
        if counts[j] >= 1e14 then
          local texts = {}
          for k = 1, #counts do texts[k] = int(counts[k]) end
          counts = texts
          break
        end
      end
      if first >= 1e14 then first = int(first) end
      parts[i] = e.w .. ':' .. e.n .. ':' .. first .. ':' .. table.concat(counts, '.')
    end
    if #parts == 1 then return parts[1] end
    return table.concat(parts, ',')
  end
  L.ends = ends_at
  function L.judge_window(r, entry, w, limit, now, cost, mode)
    local fields, e, wait = pair(entry, now, w, limit, r.buckets, cost, mode)
    return fields, wait, e
  end
  return L
end)()

local function rl_sliding(keys, args)
  return run(each_key_command, keys, args, SLIDING, 'rl_sliding')
end

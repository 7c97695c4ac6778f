-- RL.SLIDING twin:
--   EVALSHA sha numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
--           [BUCKETS n] [COST n] [AT unix_ms]
-- The same argument vector as the command: numkeys is EVALSHA's, so KEYS are the
-- identifiers and ARGV the LIMIT triples and options.
-- State: each key is a string of `window_ms:n:first:c0.c1...` entries separated by
-- commas, sorted by window: the counts of the buckets numbered first, first + 1, ...
-- of width window / n (bucket i covers [i * width, (i + 1) * width) µs since the
-- epoch). The key expires when its last counted bucket leaves its window.
-- Needs lua/prelude.lua in front of it.

local STATE_ERROR = "' does not hold RL.SLIDING state"
  .. ' (expected window_ms:buckets:first:counts entries separated by commas)'

-- a // b for integers below 2^53, exactly.
local function idiv(a, b)
  return (a - a % b) / b
end

-- A key's entries, sorted by window ({ w, n, first, counts }), and by window; or an
-- error naming the key.
local function parse_state(key, raw)
  local bad = function() fail("ERR the key '" .. echo(key) .. STATE_ERROR) end
  if #raw == 0 then bad() end
  local entries, by_w = {}, {}
  for item in string.gmatch(raw .. ',', '([^,]*),') do
    local w, n, first, counts = string.match(item, '^(%d+):(%d+):(%d+):([%d%.]+)$')
    if not w then bad() end
    w = stored_number(w, MAX_DURATION_MS)
    n = stored_number(n, MAX_BUCKETS)
    first = stored_number(first, MAX_SAFE_INTEGER)
    if not (w and n and first) or w == 0 or n == 0 or (w * 1000) % n ~= 0 then bad() end
    local list, sum = {}, 0
    for c in string.gmatch(counts .. '.', '([^%.]*)%.') do
      local v = stored_number(c, MAX_SAFE_INTEGER)
      if not v then bad() end
      sum = sum + v
      if sum > MAX_SAFE_INTEGER then bad() end
      list[#list + 1] = v
    end
    if #list > n + 1 then bad() end
    if (first + #list) * (w * 1000 / n) + w * 1000 > MAX_SAFE_INTEGER then bad() end
    if #entries > 0 and entries[#entries].w >= w then bad() end
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
  for i = #e.counts, 1, -1 do
    if e.counts[i] ~= 0 then return e.first + i - 1 end
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
    for i, v in ipairs(e.counts) do moved[shift + i] = v end
    e.counts, e.first = moved, j
  end
  local i = j - e.first + 1
  for x = #e.counts + 1, i do e.counts[x] = 0 end
  e.counts[i] = e.counts[i] + c
end

-- Drop the buckets before `lo` and the empty ones at both ends.
local function trim(e, lo)
  local drop = math.min(math.max(lo - e.first, 0), #e.counts)
  local lead = drop
  while lead < #e.counts and e.counts[lead + 1] == 0 do lead = lead + 1 end
  local kept = {}
  for i = lead + 1, #e.counts do kept[#kept + 1] = e.counts[i] end
  e.counts, e.first = kept, e.first + lead
  while #e.counts > 0 and e.counts[#e.counts] == 0 do e.counts[#e.counts] = nil end
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
  local counts = {}
  for i, v in ipairs(e.counts) do counts[i] = v end
  return { w = e.w, n = e.n, first = e.first, counts = counts }
end

-- One (key, window) pair at `now`: the reply fields, the entry after an allowed
-- request, and retry_after in µs (nil when allowed).
local function judge(stored, now, w_ms, limit, n, cost)
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
  local t = math.max(now, m and m * bw or 0)
  local current = idiv(t, bw)
  local lo = idiv(math.max(t - window, 0), bw)
  trim(e, lo)
  local counted = 0
  for _, c in ipairs(e.counts) do counted = counted + c end
  local function leaves(j) return (j + 1) * bw + window end
  local function reset()
    local mm = newest(e)
    if not mm then return 0 end
    return math.max(leaves(mm) - now, 0)
  end
  if counted + cost <= limit then
    if cost > 0 then add(e, current, cost) end
    return { 0, limit, limit - counted - cost, -1, ceil_ms(reset()) }, e, nil
  end
  local left, retry = counted, leaves(e.first + #e.counts - 1)
  for i, c in ipairs(e.counts) do
    left = left - c
    if left + cost <= limit then
      retry = leaves(e.first + i - 1)
      break
    end
  end
  local wait = retry - now
  return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(wait)), ceil_ms(reset()) }, e, wait
end

local function encode(entries)
  local parts = {}
  for i, e in ipairs(entries) do
    local counts = {}
    for j, c in ipairs(e.counts) do counts[j] = int(c) end
    parts[i] = int(e.w) .. ':' .. int(e.n) .. ':' .. int(e.first) .. ':' .. table.concat(counts, '.')
  end
  return table.concat(parts, ',')
end

local function sliding()
  local buckets = nil
  local limits, named, o = parse_multikey('RL.SLIDING', false, function(i)
    if string.upper(ARGV[i]) ~= 'BUCKETS' then return nil end
    if buckets then fail('ERR option BUCKETS given more than once') end
    if i + 1 > #ARGV then fail('ERR option BUCKETS needs a value') end
    local v = ARGV[i + 1]
    local n = string.match(v, '^%d+$') and tonumber(v)
    if not n or n < 1 or n > MAX_BUCKETS then
      fail("ERR invalid BUCKETS '" .. echo(v) .. "': must be an integer from 1 to " .. int(MAX_BUCKETS))
    end
    buckets = n
    return 2
  end)
  local n = buckets or DEFAULT_BUCKETS
  for _, lw in ipairs(limits) do
    if (lw[1] * 1000) % n ~= 0 then
      fail('ERR a window of ' .. int(lw[1]) .. ' ms does not split into ' .. int(n)
        .. ' buckets of whole microseconds (choose BUCKETS dividing ' .. int(lw[1]) .. '000)')
    end
  end
  check_cost(limits, o.cost)
  local now = now_us(o.at)

  -- Read every key before deciding anything.
  local states, by_ws, ttls = {}, {}, {}
  for k, key in ipairs(KEYS) do
    local raw, exp = read_string(key)
    if raw then
      states[k], by_ws[k] = parse_state(key, raw)
      ttls[k] = exp
    else
      states[k], by_ws[k] = {}, {}
      ttls[k] = 0 -- missing: nothing to repair
    end
  end

  local denied, least -- { retry_us or remaining, fields, k, w }
  local updates = {}  -- k -> list of entries
  for k = 1, #KEYS do
    updates[k] = {}
    for _, lw in ipairs(limits) do
      local w, limit = lw[1], lw[2]
      local fields, e, wait = judge(by_ws[k][w], now, w, limit, n, o.cost)
      if wait then
        if not denied or wait > denied[1] then denied = { wait, fields, k, w } end
      elseif not least or fields[3] < least[1] then
        least = { fields[3], fields, k, w }
      end
      updates[k][#updates[k] + 1] = e
    end
  end

  local bind = denied or least
  local reply = bind[2]
  reply[6] = KEYS[bind[3]]
  reply[7] = bind[4]
  if o.cost == 0 then return reply end

  if denied then
    -- Nothing is consumed; a key that lost its TTL gets it back when its last counted
    -- bucket leaves.
    for k, key in ipairs(KEYS) do
      if not ttls[k] then
        local latest
        for _, e in ipairs(states[k]) do
          local ends = ends_at(e)
          if ends and ends > now and (not latest or ends > latest) then latest = ends end
        end
        if latest then redis.call('PEXPIREAT', key, int(ceil_ms(latest))) end
      end
    end
    return reply
  end

  -- Every key's new value first: a key that would keep too many windows refuses the
  -- whole request before anything is written.
  local writes = {}
  for k, key in ipairs(KEYS) do
    local merged = {}
    for _, e in ipairs(updates[k]) do
      if #e.counts > 0 then merged[#merged + 1] = e end
    end
    for _, e in ipairs(states[k]) do
      local ends = ends_at(e)
      if not named[e.w] and ends and ends > now then merged[#merged + 1] = e end
    end
    if #merged > MAX_WINDOWS_PER_KEY then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows: RL.SLIDING keeps at most ' .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows per key (use fewer distinct windows, or other keys)')
    end
    table.sort(merged, function(a, b) return a.w < b.w end)
    local latest = 0
    for _, e in ipairs(merged) do
      local ends = ends_at(e)
      if ends and ends > latest then latest = ends end
    end
    writes[k] = { encode(merged), latest }
  end
  for k, key in ipairs(KEYS) do
    redis.call('SET', key, writes[k][1], 'PXAT', int(ceil_ms(writes[k][2])))
  end
  return reply
end

return run(sliding)

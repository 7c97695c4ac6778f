-- RL.MULTI twin:
--   EVALSHA sha numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
--           [COST n] [ALIGN] [AT unix_ms]
-- The same argument vector as the command: numkeys is EVALSHA's, so KEYS are the
-- identifiers and ARGV the LIMIT triples and options.
-- State: each key is a string of `window_ms:count:end_ms` entries separated by commas,
-- sorted by window (end_ms: the window's absolute end), expiring at the latest end.
-- Needs lua/prelude.lua in front of it.

local STATE_ERROR = "' does not hold RL.MULTI state (expected window_ms:count:end_ms entries separated by commas)"

-- A key's entries by window in ms ({count, end}), or an error naming the key.
local function parse_state(key, raw)
  local bad = function() fail("ERR the key '" .. echo(key) .. STATE_ERROR) end
  local entries, pos, len = {}, 1, #raw
  if len == 0 then bad() end
  while true do
    local _, last, w, c, e = string.find(raw, '^(%d+):(%d+):(%d+)', pos)
    if not last then bad() end
    w = stored_number(w, MAX_DURATION_MS)
    c = stored_number(c, MAX_SAFE_INTEGER)
    e = stored_number(e, MAX_END_MS)
    if not (w and c and e) or w == 0 or entries[w] then bad() end
    entries[w] = { c, e }
    pos = last + 1
    if pos > len then return entries end
    if string.sub(raw, pos, pos) ~= ',' then bad() end
    pos = pos + 1
  end
end

local function multi()
  local limits, named, o = parse_multikey('RL.MULTI', true)
  check_cost(limits, o.cost)
  local now = now_us(o.at)
  local now_ms = floor_ms(now)

  -- Read every key before deciding anything.
  local states, ttls = {}, {}
  for k, key in ipairs(KEYS) do
    local raw, exp = read_string(key)
    if raw then
      states[k] = parse_state(key, raw)
      ttls[k] = exp
    else
      states[k] = {}
      ttls[k] = 0 -- missing: nothing to repair
    end
  end

  -- Every (key, window) pair with RL.FIXED's rules.
  local denied, least -- { until_end, fields, k, w }
  local updates = {}  -- k -> window_ms -> { count, end }
  for k = 1, #KEYS do
    updates[k] = {}
    for _, lw in ipairs(limits) do
      local w, limit = lw[1], lw[2]
      local entry = states[k][w]
      local count, ends
      if entry and entry[2] * 1000 > now then
        count, ends = entry[1], entry[2]
      else
        count = 0
        ends = now_ms + w
        if o.align then ends = now_ms - now_ms % w + w end
      end
      local until_end = ends * 1000 - now
      if until_end < 0 then until_end = 0 end
      local after = count + o.cost
      if after <= limit then
        local reset = 0
        if after > 0 then reset = ceil_ms(until_end) end
        local remaining = limit - after
        if not least or remaining < least[2][3] then
          least = { until_end, { 0, limit, remaining, -1, reset }, k, w }
        end
        updates[k][w] = { after, ends }
      else
        local remaining = limit - count
        if remaining < 0 then remaining = 0 end
        if not denied or until_end > denied[1] then
          denied = { until_end, { 1, limit, remaining, math.max(1, ceil_ms(until_end)),
            ceil_ms(until_end) }, k, w }
        end
      end
    end
  end

  local bind = denied or least
  local reply = bind[2]
  reply[6] = KEYS[bind[3]]
  reply[7] = bind[4]
  if o.cost == 0 then return reply end

  if denied then
    -- Nothing is consumed; a key that lost its TTL gets it back at its latest live end.
    for k, key in ipairs(KEYS) do
      if not ttls[k] then
        local latest
        for _, entry in pairs(states[k]) do
          if entry[2] * 1000 > now and (not latest or entry[2] > latest) then latest = entry[2] end
        end
        if latest then redis.call('PEXPIREAT', key, int(latest)) end
      end
    end
    return reply
  end

  -- Every key's new value first: a key that would keep too many windows refuses the
  -- whole request before anything is written.
  local writes = {}
  for k, key in ipairs(KEYS) do
    local merged = {}
    for w, entry in pairs(states[k]) do
      if not named[w] and entry[2] * 1000 > now then merged[#merged + 1] = { w, entry[1], entry[2] } end
    end
    for w, entry in pairs(updates[k]) do
      merged[#merged + 1] = { w, entry[1], entry[2] }
    end
    if #merged > MAX_WINDOWS_PER_KEY then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows: RL.MULTI keeps at most ' .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows per key (use fewer distinct windows, or other keys)')
    end
    table.sort(merged, function(a, b) return a[1] < b[1] end)
    local parts, latest = {}, 0
    for i, e in ipairs(merged) do
      parts[i] = int(e[1]) .. ':' .. int(e[2]) .. ':' .. int(e[3])
      if e[3] > latest then latest = e[3] end
    end
    writes[k] = { table.concat(parts, ','), latest }
  end
  for k, key in ipairs(KEYS) do
    redis.call('SET', key, writes[k][1], 'PXAT', int(writes[k][2]))
  end
  return reply
end

return run(multi)

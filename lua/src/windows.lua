-- What RL.MULTI and RL.SLIDING share: their rule is their LIMITs (and options), their
-- state one string per key of entries by window, their binding pair the denying window
-- that frees up last, else the one with the least remaining (ties: the first LIMIT).

-- A cost above the smallest LIMIT can never be allowed.
local function check_limits_cost(limits, cost)
  local smallest = limits[1][2]
  for _, lw in ipairs(limits) do
    if lw[2] < smallest then smallest = lw[2] end
  end
  if cost > smallest then cost_over(cost, 'limit', smallest) end
end

-- The parts of limiter L that follow from its windows: L.parse_state(key, named, raw)
-- (a key's entries, and the same by window), L.judge_window(r, entry, w, limit, now,
-- cost, mode) (a window's five fields, µs to wait when denied, and the window after
-- the request, nil when it keeps none), L.ends(e) (µs, or nil: counts nothing) and
-- L.encode(entries); and L.buckets_per_key, true when a key's windows also keep at most
-- MAX_BUCKETS_PER_KEY buckets between them (e.n each: RL.SLIDING).
-- A key without state: no entries (read, never written).
local NONE = {}

-- Entries in the order of their windows.
local function by_window(a, b)
  return a.w < b.w
end

local function limits_rule(L)
  function L.parse_args()
    return {}
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' then check_limits_cost(r.limits, cost) end
  end
  -- Judge every named window of a key. The judgement keeps what the write needs: the
  -- windows the key held (`entries`), its expiry (`exp`: nil when it lost its TTL, 0
  -- when there is no key) and the named windows after an allowed request (`updates`).
  -- The key's binding window: the denying one that frees up last, else the one with the
  -- least remaining (ties: the first LIMIT); `full`: the longest reset of the windows
  -- allowed with nothing remaining, in µs of whole ms.
  function L.judge(r, key, named, raw, exp, now, cost, mode)
    local entries, by_w = NONE, NONE
    if raw then entries, by_w = L.parse_state(key, named, raw) else exp = 0 end
    local f, retry, window, full, updates = nil, nil, nil, 0, {}
    local limits = r.limits
    for i = 1, #limits do
      local w, limit = limits[i][1], limits[i][2]
      local fields, wait, update = L.judge_window(r, by_w[w], w, limit, now, cost, mode)
      if not wait and fields[3] <= 0 and fields[5] * 1000 > full then full = fields[5] * 1000 end
      if wait then
        if not retry or wait > retry then f, retry, window = fields, wait, w end
      elseif not retry and (not f or fields[3] < f[3]) then
        f, window = fields, w
      end
      if update then updates[#updates + 1] = update end
    end
    local over
    if mode == 'force' and retry then
      -- Over: a request of cost 1 fits when every window has room again.
      retry, over = math.max(retry, full), true
      f[4] = math.max(1, ceil_ms(retry))
    end
    return { f[1], f[2], f[3], f[4], f[5], window = window, entries = entries, exp = exp, updates = updates },
      retry, nil, nil, over
  end
  -- The write of a key once the call is settled, as the module's multikey::write_windows:
  -- a peek writes nothing; a denial gives a key that lost its TTL the end of its last
  -- live window; an allowed request stores the named windows that still count with the
  -- others kept while they have not ended, raising before any write when the key would
  -- hold too many.
  function L.write(r, key, p, allowed, now, cost)
    if cost == 0 then return nil end
    if not allowed then
      if p.exp then return nil end
      local latest
      for i = 1, #p.entries do
        local ends = L.ends(p.entries[i])
        if ends and ends > now and (not latest or ends > latest) then latest = ends end
      end
      if latest then return { 'PEXPIREAT', key, ceil_ms(latest) } end
      return nil
    end
    local merged, latest, buckets = {}, 0, 0
    local updates, entries = p.updates, p.entries
    for i = 1, #updates do
      local e = updates[i]
      local ends = L.ends(e)
      if ends then
        merged[#merged + 1] = e
        buckets = buckets + (e.n or 0)
        if ends > latest then latest = ends end
      end
    end
    for i = 1, #entries do
      local e = entries[i]
      local ends = L.ends(e)
      if not r.named[e.w] and ends and ends > now then
        merged[#merged + 1] = e
        buckets = buckets + (e.n or 0)
        if ends > latest then latest = ends end
      end
    end
    if L.buckets_per_key and (#merged > MAX_WINDOWS_PER_KEY or buckets > MAX_BUCKETS_PER_KEY) then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows or ' .. int(MAX_BUCKETS_PER_KEY) .. ' buckets: ' .. L.command .. ' keeps at most '
        .. int(MAX_WINDOWS_PER_KEY) .. ' windows per key, their BUCKETS adding up to at most '
        .. int(MAX_BUCKETS_PER_KEY) .. ' (use fewer distinct windows or buckets, or other keys)')
    end
    if #merged > MAX_WINDOWS_PER_KEY then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows: ' .. L.command .. ' keeps at most ' .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows per key (use fewer distinct windows, or other keys)')
    end
    -- Nothing left to keep (a refund gave everything back): the key goes.
    if #merged == 0 then
      if p.exp ~= 0 then return { 'DEL', key } end
      return nil
    end
    if #merged > 1 then table.sort(merged, by_window) end
    return { 'SET', key, L.encode(merged), 'PXAT', ceil_ms(latest) }
  end
end

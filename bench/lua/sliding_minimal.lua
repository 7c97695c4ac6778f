-- A baseline for `make bench`, not a twin: the least a hand-written sliding-window script
-- does for RL.SLIDING's job, state and reply: every key, every window of 10 buckets, all
-- or nothing, counting every bucket that overlaps the window; one string per key in
-- RL.SLIDING's format (`window_ms:10:first:c.c.c` entries by window, separated by
-- commas), read with GET, written with SET PXAT; seven fields. No argument checks, no
-- checks of the stored state, no COST, AT or BUCKETS.
--   EVALSHA sha numkeys key [key ...] window_ms limit [window_ms limit ...]
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local best, bk, bw, denied, wait
local states = {}
for k, key in ipairs(KEYS) do
  -- The key's windows: { first, counts } by window (µs).
  local by_w = {}
  local raw = redis.call('GET', key)
  if raw then
    for w, first, counts in string.gmatch(raw, '(%d+):10:(%d+):([%d%.]+)') do
      local list = {}
      for c in string.gmatch(counts, '%d+') do list[#list + 1] = tonumber(c) end
      by_w[tonumber(w)] = { tonumber(first), list }
    end
  end
  states[k] = by_w
  for i = 1, #ARGV, 2 do
    local w, limit = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    local window, e = w * 1000, by_w[w]
    local bucket = window / 10
    local current = math.floor(now / bucket)
    local lo = math.floor((now - window) / bucket)
    -- Keep the buckets that overlap (now - window, now].
    local first, kept, counted = current, {}, 0
    if e then
      for j, c in ipairs(e[2]) do
        local b = e[1] + j - 1
        if b >= lo and c > 0 then
          if #kept == 0 then first = b end
          for _ = #kept + 1, b - first do kept[#kept + 1] = 0 end
          kept[b - first + 1] = c
          counted = counted + c
        end
      end
    end
    local newest = #kept > 0 and first + #kept - 1 or nil
    local reset = newest and math.ceil(((newest + 1) * bucket + window - now) / 1000) or 0
    if counted + 1 <= limit then
      if #kept == 0 then first = current end
      for _ = #kept + 1, current - first + 1 do kept[#kept + 1] = 0 end
      kept[current - first + 1] = kept[current - first + 1] + 1
      by_w[w] = { first, kept }
      reset = math.ceil(((current + 1) * bucket + window - now) / 1000)
      if not denied and (not best or limit - counted - 1 < best[3]) then
        best, bk, bw = { 0, limit, limit - counted - 1, -1, reset }, key, w
      end
    else
      -- Denied: when enough of the oldest buckets have left for one more to fit.
      local left, at = counted, nil
      for j, c in ipairs(kept) do
        left = left - c
        if left + 1 <= limit then
          at = (first + j) * bucket + window
          break
        end
      end
      local retry = at - now
      if not denied or retry > wait then
        best, bk, bw, denied, wait = { 1, limit, math.max(limit - counted, 0), math.ceil(retry / 1000), reset }, key, w,
          true, retry
      end
    end
  end
end
if not denied then
  for k, key in ipairs(KEYS) do
    local parts, latest, ws = {}, 0, {}
    for w in pairs(states[k]) do ws[#ws + 1] = w end
    table.sort(ws)
    for _, w in ipairs(ws) do
      local e = states[k][w]
      local last = e[1] + #e[2] - 1
      local ends = (last + 1) * (w * 100) + w * 1000
      if ends > now then
        parts[#parts + 1] = w .. ':10:' .. string.format('%d', e[1]) .. ':' .. table.concat(e[2], '.')
        if ends > latest then latest = ends end
      end
    end
    redis.call('SET', key, table.concat(parts, ','), 'PXAT', string.format('%d', math.ceil(latest / 1000)))
  end
end
best[6], best[7] = bk, bw
return best

-- A baseline for `make bench`, not a twin: a hand-written sliding-window-counter script
-- for RL.SLIDING's job and reply: every key, every window of 10 buckets, all or
-- nothing; one hash per key (field window:bucket), read with one HMGET per key, written
-- with HINCRBY and PEXPIRE; seven fields. No argument checks, no pruning of old buckets
-- beyond the key's TTL.
--   EVALSHA sha numkeys key [key ...] window_ms limit [window_ms limit ...]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local windows = {}
for i = 1, #ARGV, 2 do windows[#windows + 1] = { tonumber(ARGV[i]), tonumber(ARGV[i + 1]) } end
local best, bk, bw, denied
for _, key in ipairs(KEYS) do
  local fields = {}
  for _, w in ipairs(windows) do
    local width = w[1] / 10
    local cur = math.floor(now / width)
    for b = cur - 9, cur do fields[#fields + 1] = w[1] .. ':' .. b end
  end
  local counts = redis.call('HMGET', key, unpack(fields))
  for i, w in ipairs(windows) do
    local sum = 0
    for j = (i - 1) * 10 + 1, i * 10 do sum = sum + tonumber(counts[j] or '0') end
    local remaining = w[2] - sum - 1
    if remaining < 0 then
      if not denied then best, bk, bw, denied = { 1, w[2], math.max(w[2] - sum, 0), w[1] / 10, w[1] }, key, w[1], true end
    elseif not denied and (not best or remaining < best[3]) then
      best, bk, bw = { 0, w[2], remaining, -1, w[1] }, key, w[1]
    end
  end
end
if not denied then
  for _, key in ipairs(KEYS) do
    local longest = 0
    for _, w in ipairs(windows) do
      redis.call('HINCRBY', key, w[1] .. ':' .. math.floor(now / (w[1] / 10)), 1)
      if w[1] > longest then longest = w[1] end
    end
    redis.call('PEXPIRE', key, longest)
  end
end
best[6], best[7] = bk, bw
return best

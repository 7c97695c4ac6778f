-- A baseline for `make bench`, not a twin: the least a hand-written GCRA script does for
-- RL.GCRA's job and reply (TIME, GET, SET PX; five fields), with no argument checks.
--   EVALSHA sha 1 key max_burst count period_ms
local burst, count, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = math.ceil(period * 1000 / count)
local capacity = burst + 1
local window = interval * capacity
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > window then
  local room = math.max(window - (tat - now), 0)
  return { 1, capacity, math.floor(room / interval), math.ceil((new_tat - now - window) / 1000),
    math.ceil((tat - now) / 1000) }
end
local ttl = math.ceil((new_tat - now) / 1000)
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ttl)
return { 0, capacity, math.floor((window - (new_tat - now)) / interval), -1, ttl }

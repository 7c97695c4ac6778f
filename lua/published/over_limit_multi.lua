-- The multi-window script `over_limit_multi_lua_` from the articles on fixed windows and
-- bulk TTLs, kept as it was published, as a benchmark baseline. It is NOT a twin of RL.MULTI: it builds key
-- names inside the script (unsafe in Cluster, invisible to ACLs), increments counters
-- before it knows the request is allowed (a denied request still consumes), and answers
-- only 0 or 1.
--   EVALSHA sha numkeys id [id ...] '[[1,10],[60,120],[3600,240]]' unix_time_seconds
local limits = cjson.decode(ARGV[1])
local now = tonumber(ARGV[2])
for i, limit in ipairs(limits) do
    local duration = limit[1]

    local bucket = ':' .. duration .. ':' .. math.floor(now / duration)
    for j, id in ipairs(KEYS) do
        local key = id .. bucket

        local count = redis.call('INCR', key)
        redis.call('EXPIRE', key, duration)
        if tonumber(count) > limit[2] then
            return 1
        end
    end
end
return 0

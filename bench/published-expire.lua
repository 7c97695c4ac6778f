-- The bulk-TTL article's expire.lua, as published, except for the TTL: 3600 s instead of 60 s,
-- so that no key expires (and gets deleted) while a long benchmark run is still
-- going. Give a TTL to the keys in KEYS that have none; return those keys.
local modified={};

for i,k in ipairs(KEYS) do
    local ttl=redis.call('ttl', k);
    if ttl == -1 then
        redis.call('EXPIRE', k, 3600)
        modified[#modified + 1] = k;
    end
end

return modified;

-- The baseline of the bulk sweep in `make bench`: seed 001's expire.lua as published,
-- run by the benchmark's SCAN + EVALSHA loop on each chunk of keys. It gives the keys
-- that have no TTL one of 60 s and returns them.
local modified={};

for i,k in ipairs(KEYS) do
    local ttl=redis.call('ttl', k);
    if ttl == -1 then
        redis.call('EXPIRE', k, 60)
        modified[#modified + 1] = k;
    end
end

return modified;

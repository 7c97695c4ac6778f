-- A reference point for `make bench`, not a twin: the plainest fixed-window script
-- (the articles' INCR + EXPIRE, with a TTL in ms), no argument checks, no reply fields.
--   EVALSHA sha 1 key ttl_ms  ->  the count after this request
local count = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return count

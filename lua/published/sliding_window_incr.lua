-- The per-second counter script of the article on three Redis rate-limit patterns
-- (its sliding-window pattern), kept as it was published, as a benchmark baseline. It
-- is NOT a twin of RL.SLIDING: it counts the request under
-- `{ratelimit:<ip>:}<unix_seconds>` and keeps the key 16 s; the caller then reads the
-- last 15 such keys with one MGET, sums them on the client and compares the sums of
-- the last 1, 10 and 15 seconds with its limits (1 000, 5 000 and 7 000). Two round
-- trips, fifteen keys per address, and not atomic: the count is read after the
-- increment, so concurrent clients overshoot, and a refused request is counted.
--   EVALSHA sha 1 {ratelimit:<ip>:}<unix_seconds>
redis.call("incr",KEYS[1])
redis.call("expire",KEYS[1],16)

-- The list script of the article on three Redis rate-limit patterns (its pattern that
-- keeps metadata), kept as it was published, as a benchmark baseline. It is NOT a twin
-- of RL.LOG: the caller first reads LLEN (a second round trip; concurrent clients
-- overshoot), and the whole list expires one second after the last push, so it is a
-- fixed window with a memo of who made the requests.
--   EVALSHA sha 1 ratelimit:<ip> <user_id>
redis.call("rpush",KEYS[1],ARGV[1])
redis.call("expire",KEYS[1],1)

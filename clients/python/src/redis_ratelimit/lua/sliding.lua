-- RL.SLIDING twin:
--   EVALSHA sha numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
--           [BUCKETS n] [COST n] [AT unix_ms]
-- The same argument vector as the command: numkeys is EVALSHA's, so KEYS are the
-- identifiers and ARGV the LIMIT triples and options.
-- State: each key is a string of `window_ms:n:first:c0.c1...` entries separated by
-- commas, sorted by window: the counts of the buckets numbered first, first + 1, ...
-- of width window / n (bucket i covers [i * width, (i + 1) * width) µs since the
-- epoch). The key expires when its last counted bucket leaves its window.
-- Needs lua/prelude.lua in front of it (LIMITERS.SLIDING there).

return run(function() return each_key_command(LIMITERS.SLIDING()) end)

-- RL.MULTI twin:
--   EVALSHA sha numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
--           [COST n] [ALIGN] [AT unix_ms]
-- The same argument vector as the command: numkeys is EVALSHA's, so KEYS are the
-- identifiers and ARGV the LIMIT triples and options.
-- State: each key is a string of `window_ms:count:end_ms` entries separated by commas,
-- sorted by window (end_ms: the window's absolute end), expiring at the latest end.
-- Needs lua/prelude.lua in front of it (LIMITERS.MULTI there).

return run(function() return each_key_command(LIMITERS.MULTI()) end)

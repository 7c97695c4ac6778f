-- RL.GCRA twin: EVALSHA sha 1 key max_burst count period [COST n] [AT unix_ms]
--               [DELAY max_delay]
-- State: KEYS[1] is a plain integer string, the theoretical arrival time (TAT) in µs
-- since the Unix epoch, expiring at the TAT rounded up to the millisecond.
-- Needs lua/prelude.lua in front of it (LIMITERS.GCRA there).

return run(function() return single_command(LIMITERS.GCRA()) end)

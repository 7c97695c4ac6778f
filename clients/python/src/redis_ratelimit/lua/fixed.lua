-- RL.FIXED twin: EVALSHA sha 1 key limit window [COST n] [ALIGN] [AT unix_ms]
-- State: KEYS[1] is a plain integer string (the count) whose expiry ends the window.
-- Needs lua/prelude.lua in front of it (LIMITERS.FIXED there).

return run(function() return single_command(LIMITERS.FIXED()) end)

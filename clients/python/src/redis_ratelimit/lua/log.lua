-- RL.LOG twin: EVALSHA sha 1 key limit window [META value] [COST n] [AT unix_ms]
-- State: KEYS[1] is a sorted set with one member per allowed request, scored by its
-- time in µs since the Unix epoch and named seq:cost:meta (seq: 16 digits, the running
-- total of allowed cost through the request); it expires when its newest member leaves
-- the window. Each call reads only what it needs, each in O(log n).
-- Needs lua/prelude.lua in front of it (LIMITERS.LOG there).

return run(function() return single_command(LIMITERS.LOG()) end)

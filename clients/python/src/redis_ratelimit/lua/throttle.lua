-- CL.THROTTLE twin: EVALSHA sha 1 key max_burst count period [quantity]
-- redis-cell's command, judged by RL.GCRA's limiter (LIMITERS.GCRA in the prelude) on
-- RL.GCRA's key and state: the call is `max_burst count <period>s COST quantity`
-- (COST 0 when the quantity is above max_burst + 1: a peek, replied limited with
-- retry_after -1, nothing written), and the reply's times are whole seconds rounded up.
-- Needs lua/prelude.lua in front of it.

local MAX_PERIOD_S = MAX_DURATION_MS / 1000

local function throttle()
  if #KEYS ~= 1 or #ARGV < 3 or #ARGV > 4 then
    arity_error('CL.THROTTLE', 'CL.THROTTLE key max_burst count period [quantity]')
  end
  local G = LIMITERS.GCRA()
  local max_burst = parse_int('max_burst', ARGV[1], 0)
  local count = parse_int('count', ARGV[2], 1)
  local ok, period = pcall(parse_int, 'period', ARGV[3], 1)
  if not ok or period > MAX_PERIOD_S then
    fail("ERR invalid period '" .. echo(ARGV[3]) .. "': must be an integer from 1 to " .. int(MAX_PERIOD_S))
  end
  local quantity = 1
  if ARGV[4] then quantity = parse_int('quantity', ARGV[4], 0) end
  local r = G.build({ max_burst = max_burst, count = count, period = period * 1000000 }, { cost = 0 })
  local over = quantity > r.capacity
  local reply = run_call({ shape = 'single', keys = KEYS, rules = { { k = 1, L = G, r = r } },
    cost = over and 0 or quantity })
  if over then
    reply[1], reply[4] = 1, -1
  elseif reply[4] ~= -1 then
    reply[4] = math.max(1, ceil_ms(reply[4]))
  end
  reply[5] = ceil_ms(reply[5])
  return reply
end

return run(throttle)

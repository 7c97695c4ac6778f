-- CL.THROTTLE twin: EVALSHA sha 1 key max_burst count period [quantity]
-- redis-cell's command, judged by RL.GCRA's twin on RL.GCRA's state. It is loaded as
-- one script of three files, this one between the prelude and RL.GCRA's body:
--   redis-cli SCRIPT LOAD "$(cat lua/prelude.lua lua/throttle.lua lua/gcra.lua)"
-- It checks CL.THROTTLE's arguments, hands RL.GCRA's twin the call
-- `max_burst count <period>s COST quantity` (COST 0 when the quantity is above
-- max_burst + 1: a peek, replied limited with retry_after -1, nothing written), and
-- gives its reply in whole seconds rounded up, as the command does.

local MAX_PERIOD_S = MAX_DURATION_MS / 1000

-- A quantity: an integer from 0; one beyond 2^53 (the twin's exact range) is above
-- any capacity, so it is judged as such.
local function parse_quantity(v)
  local ok, q = pcall(parse_int, 'quantity', v, 0)
  if ok then return q end
  local sig = string.match(v, '^0*(%d+)$')
  if sig and (#sig < 19 or (#sig == 19 and sig <= I64_MAX)) then return math.huge end
  error(q, 0)
end

-- CL.THROTTLE's arguments, checked in the command's order; ARGV becomes RL.GCRA's.
-- Whether the quantity is above the capacity.
local function throttle_args()
  if #KEYS ~= 1 or #ARGV < 3 or #ARGV > 4 then
    fail("ERR wrong number of arguments for 'CL.THROTTLE' command")
  end
  local max_burst = parse_int('max_burst', ARGV[1], 0)
  parse_int('count', ARGV[2], 1)
  local ok, period = pcall(parse_int, 'period', ARGV[3], 1)
  if not ok or period > MAX_PERIOD_S then
    fail("ERR invalid period '" .. echo(ARGV[3]) .. "': must be an integer from 1 to "
      .. int(MAX_PERIOD_S))
  end
  local quantity = 1
  if ARGV[4] then quantity = parse_quantity(ARGV[4]) end
  local over = quantity > max_burst + 1
  ARGV[3] = int(period) .. 's'
  ARGV[4] = 'COST'
  ARGV[5] = over and '0' or int(quantity)
  return over
end

-- RL.GCRA's body runs through `run` (the prelude's); this one wraps it: the arguments
-- first, then RL.GCRA's reply in seconds (ceil_ms rounds ms up to seconds as it rounds
-- µs up to ms).
local gcra_run = run
run = function(body)
  return gcra_run(function()
    local over = throttle_args()
    local reply = body()
    if over then
      reply[1] = 1
      reply[4] = -1
    elseif reply[4] ~= -1 then
      reply[4] = ceil_ms(reply[4])
    end
    reply[5] = ceil_ms(reply[5])
    return reply
  end)
end

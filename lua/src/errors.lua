-- Errors: a command's body raises an error reply with `fail`; `run` turns it into the
-- reply. Every text is the module's (a test compares them).
--
-- A definition whose comment starts with `Cold` serves only errors and rare paths (or
-- only the library): a script makes it only when a call first needs it (lua/build.py).

-- Cold: raise an error reply (caught by `run` below).
local function fail(msg)
  error({ err = msg }, 0)
end

-- Cold: an error's message, whichever way pcall handed it back (see `run`).
local function message(res)
  if type(res) == 'table' and res.err then return res.err end
  return res
end

-- Run a command's body f(...); an error raised with `fail` (or by redis.call) becomes the
-- error reply. Redis 7.0's pcall hands error tables back as their message string;
-- other servers keep the table: both are accepted.
local function run(f, ...)
  local ok, res = pcall(f, ...)
  if ok then return res end
  if type(res) == 'table' and res.err then res = res.err end
  if type(res) == 'string' and string.match(res, '^%u+ ') then
    return redis.error_reply(res)
  end
  error(res, 0)
end

-- Cold: quote user input in an error: printable ASCII kept, the rest as \xNN, cut at ECHO_MAX bytes.
local function echo(v)
  local out = {}
  for i = 1, math.min(#v, ECHO_MAX) do
    local b = string.byte(v, i)
    if b >= 0x20 and b < 0x7f and b ~= 0x5c and b ~= 0x27 then
      out[#out + 1] = string.char(b)
    else
      out[#out + 1] = string.format('\\x%02x', b)
    end
  end
  if #v > ECHO_MAX then out[#out + 1] = '...' end
  return table.concat(out)
end

-- Cold: format an integer-valued number without exponent (for error texts and stored state).
-- redis.call takes such numbers as they are: the server writes an integer below 2^53
-- without exponent (as %.17g does).
local function int(n)
  return string.format('%d', n)
end

-- Cold: the error of a call with too few (or too many) arguments, with the command's syntax.
local function arity_error(command, syntax)
  fail("ERR wrong number of arguments for '" .. command .. "' command (syntax: " .. syntax .. ')')
end

-- Cold: the error of a call with the wrong number of keys: it names the function (or the
-- script, which has the function's name) and the number of keys it takes.
local function keys_error(name, takes, got)
  fail("ERR wrong number of keys for '" .. name .. "': it takes " .. takes .. ', got ' .. int(got))
end

-- Cold: the error of a key of another type.
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- Cold: the invalid-state error of limiter L, naming the key when `named`.
local function state_error(L, key, named)
  local which = named and ("the key '" .. echo(key) .. "'") or 'the key'
  fail('ERR ' .. which .. ' does not hold ' .. L.command .. ' state (expected ' .. L.expected .. ')')
end

-- Cold: the error of limiter L on a key that holds what can only be another limiter's state
-- (`holds` says what), naming the key when `named`.
local function foreign_error(L, key, named, holds)
  local which = named and ("the key '" .. echo(key) .. "'") or 'the key'
  fail('ERR ' .. which .. ' holds ' .. holds .. ', not ' .. L.command
    .. ' state: each algorithm needs keys of its own')
end

-- Cold: a cost a rule can never allow: above its `what` (limit, burst capacity).
local function cost_over(cost, what, capacity)
  fail('ERR cost ' .. int(cost) .. ' exceeds the ' .. what .. ' ' .. int(capacity)
    .. ': the request can never be allowed')
end

-- The check_cost of a rule whose capacity is its limit (RL.FIXED, RL.LOG): a cost above
-- it can never be taken.
local function check_limit_cost(r, cost, mode)
  if mode == 'take' and cost > r.limit then cost_over(cost, 'limit', r.limit) end
end

-- Cold: the error of a FORCE that would store `what` past the bounds every reader accepts.
local function force_out_of_bounds(what)
  fail('ERR FORCE would store ' .. what .. ': nothing was written')
end

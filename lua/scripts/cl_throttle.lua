-- cl_throttle: the Lua twin of CL.THROTTLE as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with CL.THROTTLE's keys and the rest of its arguments in the same order, as
-- `FCALL cl_throttle ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1

local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds

local MAX_DURATION_MS = 315360000000 -- 3650 days

local MAX_BURST_WINDOW_US = 1576800000000000 -- 18250 days, 50 years (RL.GCRA)

local MAX_TAT_US = 5679244800000000 -- the latest AT plus the longest burst window (RL.GCRA)

local MAX_TAT_DIGITS = 16 -- digits of MAX_TAT_US

local ECHO_MAX = 64 -- bytes of a bad argument quoted in an error

-- Raise an error reply (caught by `run` below).
local function fail(msg)
  error({ err = msg }, 0)
end

-- An error's message, whichever way pcall handed it back (see `run`).
local function message(res)
  if type(res) == 'table' and res.err then return res.err end
  return res
end

-- Quote user input in an error: printable ASCII kept, the rest as \xNN, cut at ECHO_MAX bytes.
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

-- Format an integer-valued number without exponent (for error texts and stored state).
-- redis.call takes such numbers as they are: the server writes an integer below 2^53
-- without exponent (as %.17g does).
local function int(n)
  return string.format('%d', n)
end

-- The common case of a count, without building anything: up to 15 digits (always below
-- 2^53) and at least `min`; nil otherwise (parse_int then says why).
local function plain_count(v, min)
  if #v == 0 or #v > 15 or string.find(v, '%D') then return nil end
  local n = tonumber(v)
  if n < min then return nil end
  return n
end

-- Parse a count (a signed decimal integer from min to 2^53 - 1), as the module does;
-- an error when it is not one. These run on every call: the common case builds nothing,
-- and an error's text (and what it needs) is built only when there is an error.
local function parse_int(what, v, min)
  local plain = plain_count(v, min)
  if plain then return plain end
  local neg, digits = string.match(v, '^(%-?)(%d+)$')
  local n
  if digits then
    local sig = string.gsub(digits, '^0+', '')
    -- 17 significant digits or more are above 2^53 - 1 (16 digits) whatever they are.
    if #sig <= 16 then n = tonumber(sig ~= '' and sig or '0') end
  end
  if n and n <= MAX_SAFE_INTEGER then
    if neg == '-' and n ~= 0 then n = -n end
    if n >= min then return n end
  end
  fail('ERR invalid ' .. what .. " '" .. echo(v) .. "': must be an integer from "
    .. int(min) .. ' to ' .. int(MAX_SAFE_INTEGER))
end

-- Parse a duration (integer + optional unit ms, s, m, h, d; bare = seconds) in ms.
-- Valid durations already read are remembered, by their text (at most 256 of them; how
-- many, at DURATIONS[1]): in the library, which lives as long as the server, a call reads
-- its windows without parsing them again.
local UNIT_MS = { [''] = 1000, s = 1000, ms = 1, m = 60000, h = 3600000, d = 86400000 }

local DURATIONS = { 0 }

local function parse_duration(what, v)
  local known = DURATIONS[v]
  if known then return known end
  local digits, unit = string.match(v, '^(%d+)(%a*)$')
  local per = digits and UNIT_MS[unit]
  if per and #digits <= 12 then
    local n = tonumber(digits)
    if n > 0 and n * per <= MAX_DURATION_MS then
      if DURATIONS[1] < 256 then
        DURATIONS[v] = n * per
        DURATIONS[1] = DURATIONS[1] + 1
      end
      return n * per
    end
  end
  -- The rest, read as the module reads it: leading zeros, or the reason of the error.
  local why = 'must be a positive duration (an integer with an optional unit ms, s, m, h or d)'
  digits, unit = string.match(v, '^(%d*)(.*)$')
  per = UNIT_MS[unit]
  if digits ~= '' and not per and string.match(unit, '^%a+$') then
    why = 'unknown unit (use ms, s, m, h or d)'
  elseif digits ~= '' and per then
    local sig = string.gsub(digits, '^0+', '')
    local n = tonumber(sig ~= '' and sig or '0')
    if #sig > 12 or n * per > MAX_DURATION_MS then
      why = 'must be at most 10 years (3650d)'
    elseif n > 0 then
      return n * per
    end
  end
  fail('ERR invalid ' .. what .. " '" .. echo(v) .. "': " .. why)
end

-- Whether v is written as a duration with a unit (1m, 500ms): in the place of a count,
-- the sign of two arguments given in the wrong order.
local function looks_like_a_duration(v)
  return string.match(v, '^%d+ms$') ~= nil or string.match(v, '^%d+[smhd]$') ~= nil
end

-- A count (parse_int) in a place where it is easily swapped with a duration: when `v`
-- is written as a duration, its error names the order of the command's arguments.
local function count_in_order(what, v, min, order)
  local plain = plain_count(v, min)
  if plain then return plain end
  local ok, res = pcall(parse_int, what, v, min)
  if ok then return res end
  local msg = message(res)
  if type(msg) == 'string' and looks_like_a_duration(v) then fail(msg .. ' (' .. order .. ')') end
  error(res, 0)
end

-- The error of a FORCE that would store `what` past the bounds every reader accepts.
local function force_out_of_bounds(what)
  fail('ERR FORCE would store ' .. what .. ': nothing was written')
end

local function cost_over(cost, what, capacity)
  fail('ERR cost ' .. int(cost) .. ' exceeds the ' .. what .. ' ' .. int(capacity)
    .. ': the request can never be allowed')
end

-- The request's time in µs: AT, or the server clock (TIME, as the module reads it).
local function now_us(at_ms)
  if at_ms then return at_ms * 1000 end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Milliseconds rounded down / up from µs (exact below 2^53).
local function floor_ms(us)
  return (us - us % 1000) / 1000
end

local function ceil_ms(us)
  return floor_ms(us + 999)
end

-- A string key's value and, when `expiry`, its absolute expiry in ms (nil: no TTL); nil
-- when missing.
local function read_string(key, expiry)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    fail('WRONGTYPE Operation against a key holding the wrong kind of value')
  end
  if not v or not expiry then return v end
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then exp = nil end
  return v, exp
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

-- The error of a call with too few (or too many) arguments, with the command's syntax.
local function arity_error(command, syntax)
  fail("ERR wrong number of arguments for '" .. command .. "' command (syntax: " .. syntax .. ')')
end

-- The invalid-state error of limiter L, naming the key when `named`.
local function state_error(L, key, named)
  local which = named and ("the key '" .. echo(key) .. "'") or 'the key'
  fail('ERR ' .. which .. ' does not hold ' .. L.command .. ' state (expected ' .. L.expected .. ')')
end

local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- The error of limiter L on a key that holds what can only be another limiter's state
-- (`holds` says what), naming the key when `named`.
local function foreign_error(L, key, named, holds)
  local which = named and ("the key '" .. echo(key) .. "'") or 'the key'
  fail('ERR ' .. which .. ' holds ' .. holds .. ', not ' .. L.command
    .. ' state: each algorithm needs keys of its own')
end

-- The smallest value RL.GCRA stores: a time in µs no earlier than the earliest AT.
local MIN_TAT_US = MIN_AT_MS * 1000

-- A stored RL.GCRA TAT in µs, as the module reads it (gcra::parse_tat), or nil: the
-- module's own (1 to MAX_TAT_DIGITS digits of µs) or redis-cell's (19 digits of ns,
-- from 10^18), rounded up to the µs; at most MAX_TAT_US either way. A 19-digit number
-- is above 2^53, so it is read as text: its first 16 digits, plus 1 unless the last 3
-- are 000.
local function read_tat(s)
  if not string.match(s, '^%d+$') then return nil end
  local n
  if #s <= MAX_TAT_DIGITS then
    n = tonumber(s)
  elseif #s == 19 and string.sub(s, 1, 1) ~= '0' then
    n = tonumber(string.sub(s, 1, 16))
    if string.sub(s, 17) ~= '000' then n = n + 1 end
  else
    return nil
  end
  if n > MAX_TAT_US then return nil end
  return n
end

-- RL.GCRA: a theoretical arrival time.
local GCRA = (function()
  local L = { kind = 'GCRA', command = 'RL.GCRA', storage = 'string', nargs = 3, quantity_fifth = true,
    expected = 'a theoretical arrival time in microseconds since the Unix epoch',
    options = {}, accepts = { COST = true, AT = true, DELAY = true, REFUND = true, FORCE = true },
    syntax = 'RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay] [REFUND|FORCE]',
    rule_syntax = 'GCRA i max_burst count period' }
  function L.parse_args(args, i)
    local order = 'RL.GCRA key max_burst count period: the period comes last'
    return { max_burst = count_in_order('max_burst', args[i], 0, order),
      count = count_in_order('count', args[i + 1], 1, order),
      period = parse_duration('period', args[i + 2]) * 1000 }
  end
  -- Checked in the order of the errors: rate, burst window, cost, delay.
  function L.build(r, o)
    -- The emission interval T: period / count rounded up to a whole µs.
    if r.count > r.period then
      fail('ERR invalid rate: period / count must be at least 1 microsecond')
    end
    local rest = r.period % r.count
    r.interval = (r.period - rest) / r.count
    if rest > 0 then r.interval = r.interval + 1 end
    r.capacity = r.max_burst + 1
    r.window = r.interval * r.capacity
    if r.window > MAX_BURST_WINDOW_US then
      fail('ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)')
    end
    L.check_cost(r, o.cost, 'take')
    if o.delay and r.window + o.delay > MAX_BURST_WINDOW_US then
      fail('ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)')
    end
    r.max_delay = o.delay
    return r
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.capacity then cost_over(cost, 'burst capacity', r.capacity) end
  end
  function L.judge(r, opened, key, named, now, cost, mode)
    -- Only the value counts: the expiry always follows the TAT.
    local tat = now
    if opened.raw then
      local stored = read_tat(opened.raw)
      if not stored then state_error(L, key, named) end
      if stored < MIN_TAT_US and stored ~= 0 then
        foreign_error(L, key, named, "a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes)")
      end
      -- A TAT in the past counts as now.
      tat = math.max(stored, now)
    end
    local window_ms = ceil_ms(r.window)
    local function room(ahead)
      local left = math.max(r.window - ahead, 0)
      return (left - left % r.interval) / r.interval
    end
    if mode == 'refund' then
      -- tat = max(now, tat - T * cost); at or before now the key goes.
      if not opened.raw then return { fields = { 0, r.capacity, r.capacity, -1, 0 }, window = window_ms } end
      local new_tat = math.max(now, tat - r.interval * cost)
      local ahead = new_tat - now
      local j = { fields = { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, window = window_ms }
      if cost > 0 and new_tat <= now then
        j.pending = { { 'DEL', key } }
      elseif cost > 0 then
        j.pending = { { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } }
      end
      return j
    elseif mode == 'force' then
      -- Stored whether it fits or not, at most the latest AT plus the longest burst window.
      local new_tat = tat + r.interval * cost
      if new_tat > MAX_TAT_US then
        force_out_of_bounds('a theoretical arrival time beyond the latest AT plus the longest burst window')
      end
      local ahead = new_tat - now
      local j = { fields = { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, window = window_ms }
      if ahead > r.window then
        local wait = ahead + r.interval - r.window
        j.fields = { 1, r.capacity, 0, math.max(1, ceil_ms(wait)), ceil_ms(ahead) }
        j.retry, j.over = wait, true
      end
      if cost > 0 then j.pending = { { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } } end
      return j
    end
    local new_tat = tat + r.interval * cost
    local ahead = new_tat - now
    -- With DELAY, a request that fits within max_delay is booked.
    local bound = r.window + (r.max_delay or 0)
    if ahead <= bound then
      local room = math.max(r.window - ahead, 0)
      local j = { fields = { 0, r.capacity, (room - room % r.interval) / r.interval, -1, ceil_ms(ahead) },
        window = window_ms }
      if cost > 0 then j.pending = { { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } } end
      if r.max_delay then j.booking = ceil_ms(math.max(ahead - r.window, 0)) end
      return j
    end
    local behind = tat - now
    local room = math.max(r.window - behind, 0)
    local j = { fields = { 1, r.capacity, (room - room % r.interval) / r.interval,
      math.max(1, ceil_ms(ahead - bound)), ceil_ms(behind) }, window = window_ms,
      retry = ahead - bound }
    if r.max_delay then j.booking = -1 end
    return j
  end
  -- The TAT an allowed request moves (pending: nil for a peek or a denial).
  function L.write(r, key, pending, allowed)
    if allowed then return pending end
    return nil
  end
  return L
end)()

-- A name for a call that records one it was not given (a lease without ID), the same
-- for every rule of the call and unused on each of `keys`: 20 hex digits, the call's
-- time in µs and a number from the size of the largest set up (the module's are random).
local function make_token(now, keys)
  local n = 0
  for _, key in ipairs(keys) do n = math.max(n, redis.call('ZCARD', key)) end
  while true do
    local token = string.format('%014x%06x', now, n % 16777216)
    local free = true
    for _, key in ipairs(keys) do
      if redis.call('ZSCORE', key, token) then free = false end
    end
    if free then return token end
    n = n + 1
  end
end

-- Open a key as limiter L keeps it: its raw value and expiry (strings), or whether it
-- exists (sorted sets); WRONGTYPE for another type.
local function open_key(L, key)
  if L.storage == 'string' then
    local raw, exp = read_string(key, L.expiry)
    return { raw = raw, exp = exp }
  end
  local kind = redis.call('TYPE', key)
  kind = type(kind) == 'table' and kind.ok or kind
  if kind == 'none' then return { exists = false } end
  if kind ~= 'zset' then fail(WRONGTYPE) end
  return { exists = true }
end

-- The error of a call with the wrong number of keys: it names the function (or the
-- script, which has the function's name) and the number of keys it takes.
local function keys_error(name, takes, got)
  fail("ERR wrong number of keys for '" .. name .. "': it takes " .. takes .. ', got ' .. int(got))
end

-- A call of one key and one rule (RL.FIXED, RL.GCRA, RL.LOG): the steps of run_call
-- without its lists.
local function run_one(L, key, r, cost, at, mode)
  local now = now_us(at)
  local opened = open_key(L, key)
  if L.wants_token and not r.id and cost > 0 and mode ~= 'refund' then r.token = make_token(now, { key }) end
  local j = L.judge(r, opened, key, false, now, cost, mode or 'take')
  local writes = L.write(r, key, j.pending, not j.retry or j.over == true, now, cost)
  if writes then
    for _, c in ipairs(writes) do redis.call(unpack(c)) end
  end
  return j
end

-- CL.THROTTLE: redis-cell's command, judged by RL.GCRA's limiter on RL.GCRA's key and
-- state: the call is `max_burst count <period>s COST quantity` (COST 0 when the
-- quantity is above max_burst + 1: a peek, replied limited with retry_after -1, nothing
-- written), and the reply's times are whole seconds rounded up.
local MAX_PERIOD_S = MAX_DURATION_MS / 1000

local function throttle_command(keys, args, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  if #args < 3 or #args > 4 then
    arity_error('CL.THROTTLE', 'CL.THROTTLE key max_burst count period [quantity]')
  end
  local max_burst = parse_int('max_burst', args[1], 0)
  local count = parse_int('count', args[2], 1)
  local ok, period = pcall(parse_int, 'period', args[3], 1)
  if not ok or period > MAX_PERIOD_S then
    fail("ERR invalid period '" .. echo(args[3]) .. "': must be an integer from 1 to " .. int(MAX_PERIOD_S))
  end
  local quantity = 1
  if args[4] then quantity = parse_int('quantity', args[4], 0) end
  local r = GCRA.build({ max_burst = max_burst, count = count, period = period * 1000000 }, { cost = 0 })
  local over = quantity > r.capacity
  local reply = run_one(GCRA, keys[1], r, over and 0 or quantity, nil).fields
  if over then
    reply[1], reply[4] = 1, -1
  elseif reply[4] ~= -1 then
    reply[4] = math.max(1, ceil_ms(reply[4]))
  end
  reply[5] = ceil_ms(reply[5])
  return reply
end

local function cl_throttle(keys, args)
  return run(throttle_command, keys, args, 'cl_throttle')
end

return cl_throttle(KEYS, ARGV)

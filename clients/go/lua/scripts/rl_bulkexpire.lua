-- rl_bulkexpire: the Lua twin of RL.BULKEXPIRE as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.BULKEXPIRE's keys and the rest of its arguments in the same order, as
-- `FCALL rl_bulkexpire ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

local MAX_DURATION_MS = 315360000000 -- 3650 days

local ECHO_MAX = 64 -- bytes of a bad argument quoted in an error

-- Raise an error reply (caught by `run` below).
local function fail(msg)
  error({ err = msg }, 0)
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

-- The error of a call with the wrong number of keys: it names the function (or the
-- script, which has the function's name) and the number of keys it takes.
local function keys_error(name, takes, got)
  fail("ERR wrong number of keys for '" .. name .. "': it takes " .. takes .. ', got ' .. int(got))
end

-- RL.BULKEXPIRE: numkeys key [key ...] seconds (the keys first, as FCALL wants them).
-- The bulk-TTL article's expire.lua with a duration argument: each key that exists and
-- has no TTL gets one (PEXPIREAT at the call's millisecond plus `seconds`, the same
-- absolute time for every key); the reply lists those keys in argument order. A key
-- named twice gets its TTL at its first place and is listed once. Keys of any type.
local function bulkexpire_command(keys, args, name)
  if #keys < 1 then keys_error(name, '1 or more', #keys) end
  if #args ~= 1 then
    arity_error('RL.BULKEXPIRE', 'RL.BULKEXPIRE seconds key [key ...]')
  end
  local ttl_ms = parse_duration('seconds', args[1])
  local at = floor_ms(now_us(nil)) + ttl_ms
  local modified = {}
  for _, k in ipairs(keys) do
    if redis.call('PTTL', k) == -1 then
      redis.call('PEXPIREAT', k, at)
      modified[#modified + 1] = k
    end
  end
  return modified
end

local function rl_bulkexpire(keys, args)
  return run(bulkexpire_command, keys, args, 'rl_bulkexpire')
end

return rl_bulkexpire(KEYS, ARGV)

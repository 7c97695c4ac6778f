-- rl_bulkexpire: the Lua twin of RL.BULKEXPIRE as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.BULKEXPIRE's keys and the rest of its arguments in the same order, as
-- `FCALL rl_bulkexpire ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/src/: edit those files, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The definitions a call uses only on an error or a rare path: each is made on the first
-- read of COLD.<its name>.
local COLD, run, MEMO, unit_ms, parse_duration, clock_us, floor_ms, bulkexpire_command, rl_bulkexpire
COLD = {
  __index = function(cold, name)
    local value
    if name == 'fail' then
      -- Cold: raise an error reply (caught by `run` below).
      value = function(msg)
        error({ err = msg }, 0)
      end
    elseif name == 'echo' then
      -- Cold: quote user input in an error: printable ASCII kept, the rest as \xNN, cut at ECHO_MAX bytes.
      value = function(v)
        local out = {}
        for i = 1, math.min(#v, 64) do
          local b = string.byte(v, i)
          if b >= 0x20 and b < 0x7f and b ~= 0x5c and b ~= 0x27 then
            out[#out + 1] = string.char(b)
          else
            out[#out + 1] = string.format('\\x%02x', b)
          end
        end
        if #v > 64 then out[#out + 1] = '...' end
        return table.concat(out)
      end
    elseif name == 'int' then
      -- Cold: format an integer-valued number without exponent (for error texts and stored state).
      -- redis.call takes such numbers as they are: the server writes an integer below 2^53
      -- without exponent (as %.17g does).
      value = function(n)
        return string.format('%d', n)
      end
    elseif name == 'arity_error' then
      -- Cold: the error of a call with too few (or too many) arguments, with the command's syntax.
      value = function(command, syntax)
        COLD.fail("ERR wrong number of arguments for '" .. command .. "' command (syntax: " .. syntax .. ')')
      end
    elseif name == 'keys_error' then
      -- Cold: the error of a call with the wrong number of keys: it names the function (or the
      -- script, which has the function's name) and the number of keys it takes.
      value = function(name, takes, got)
        COLD.fail("ERR wrong number of keys for '" .. name .. "': it takes " .. takes .. ', got ' .. COLD.int(got))
      end
    end
    rawset(cold, name, value)
    return value
  end,
}
setmetatable(COLD, COLD)

-- Run a command's body f(...); an error raised with `fail` (or by redis.call) becomes the
-- error reply. Redis 7.0's pcall hands error tables back as their message string;
-- other servers keep the table: both are accepted.
function run(f, ...)
  local ok, res = pcall(f, ...)
  if ok then return res end
  if type(res) == 'table' and res.err then res = res.err end
  if type(res) == 'string' and string.match(res, '^%u+ ') then
    return redis.error_reply(res)
  end
  error(res, 0)
end

-- What the library, which lives as long as the server, remembers from call to call: the
-- counts and durations it has read (at most 256 texts of each: a call reads its limits
-- and windows without parsing them again), the last second of the clock (keys.lua), what
-- a call keeps of its rules (call.lua) and the calls it has parsed (commands.lua). A
-- script starts afresh on every call and remembers nothing: there MEMO is false.
MEMO = (false) and {
  counts = { 0 }, -- text -> count, and how many at [1]
  durations = { 0 }, -- text -> ms, and how many at [1]
  clock = { '', 0 }, -- the last second TIME gave, as text and in µs
  records = {}, -- rule i -> its record in the call that runs
  calls = { n = 0 }, -- see recalled
}

-- A duration's unit in ms (nil: not a unit); a bare number is seconds.
function unit_ms(unit)
  if unit == '' or unit == 's' then return 1000 end
  if unit == 'm' then return 60000 end
  if unit == 'ms' then return 1 end
  if unit == 'h' then return 3600000 end
  if unit == 'd' then return 86400000 end
  return nil
end

-- Parse a duration (integer + optional unit ms, s, m, h, d; bare = seconds) in ms.
function parse_duration(what, v)
  local known = MEMO and MEMO.durations[v]
  if known then return known end
  local digits, unit = string.match(v, '^(%d+)(%a*)$')
  local per = digits and unit_ms(unit)
  if per and #digits <= 12 then
    local n = tonumber(digits)
    if n > 0 and n * per <= 315360000000 then
      local durations = MEMO and MEMO.durations
      if durations and durations[1] < 256 then
        durations[v] = n * per
        durations[1] = durations[1] + 1
      end
      return n * per
    end
  end
  -- The rest, read as the module reads it: leading zeros, or the reason of the error.
  local why = 'must be a positive duration (an integer with an optional unit ms, s, m, h or d)'
  digits, unit = string.match(v, '^(%d*)(.*)$')
  per = unit_ms(unit)
  if digits ~= '' and not per and string.match(unit, '^%a+$') then
    why = 'unknown unit (use ms, s, m, h or d)'
  elseif digits ~= '' and per then
    local sig = string.gsub(digits, '^0+', '')
    local n = tonumber(sig ~= '' and sig or '0')
    if #sig > 12 or n * per > 315360000000 then
      why = 'must be at most 10 years (3650d)'
    elseif n > 0 then
      return n * per
    end
  end
  COLD.fail('ERR invalid ' .. what .. " '" .. COLD.echo(v) .. "': " .. why)
end

-- The server clock in µs (TIME, as the module reads it). The library remembers the
-- last second it read: a call converts only the microseconds.
function clock_us()
  local t = redis.call('TIME')
  local s = t[1]
  if MEMO then
    local clock = MEMO.clock
    if s ~= clock[1] then clock[1], clock[2] = s, tonumber(s) * 1000000 end
    return clock[2] + tonumber(t[2])
  end
  return tonumber(s) * 1000000 + tonumber(t[2])
end

-- Milliseconds rounded down / up from µs (exact below 2^53).
function floor_ms(us)
  return (us - us % 1000) / 1000
end

-- RL.BULKEXPIRE: numkeys key [key ...] seconds (the keys first, as FCALL wants them).
-- The bulk-TTL article's expire.lua with a duration argument: each key that exists and
-- has no TTL gets one (PEXPIREAT at the call's millisecond plus `seconds`, the same
-- absolute time for every key); the reply lists those keys in argument order. A key
-- named twice gets its TTL at its first place and is listed once. Keys of any type.
function bulkexpire_command(keys, args, name)
  if #keys < 1 then COLD.keys_error(name, '1 or more', #keys) end
  if #args ~= 1 then
    COLD.arity_error('RL.BULKEXPIRE', 'RL.BULKEXPIRE seconds key [key ...]')
  end
  local ttl_ms = parse_duration('seconds', args[1])
  local at = floor_ms(clock_us()) + ttl_ms
  local modified = {}
  for _, k in ipairs(keys) do
    if redis.call('PTTL', k) == -1 then
      redis.call('PEXPIREAT', k, at)
      modified[#modified + 1] = k
    end
  end
  return modified
end

function rl_bulkexpire(keys, args)
  return run(bulkexpire_command, keys, args, 'rl_bulkexpire')
end

return rl_bulkexpire(KEYS, ARGV)

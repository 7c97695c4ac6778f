-- redis-ratelimit: the prelude shared by the Lua twins of the RL.* commands.
-- A twin is this file followed by its command's file, loaded as one script:
--   redis-cli SCRIPT LOAD "$(cat lua/prelude.lua lua/fixed.lua)"
-- It parses arguments, words errors and reads the clock exactly as the module does.
-- Lua numbers are doubles: every integer here stays below 2^53, where they are exact;
-- the twins refuse larger integer arguments with an error the module does not give.

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1
local MAX_AT_MS = 4102444800000 -- 2100-01-01
local MAX_DURATION_MS = 315360000000 -- 3650 days
local MAX_KEYS = 64 -- keys per call (RL.MULTI)
local MAX_WINDOWS = 16 -- LIMITs per call (RL.MULTI)
local MAX_WINDOWS_PER_KEY = 32 -- windows one key keeps (RL.MULTI, RL.SLIDING)
local MAX_BUCKETS = 100 -- buckets per window (RL.SLIDING)
local DEFAULT_BUCKETS = 10 -- buckets per window without BUCKETS (RL.SLIDING)
local MAX_LOG_LIMIT = 10000 -- the largest limit (RL.LOG)
local MAX_META_LEN = 256 -- bytes of a META value (RL.LOG)
local MAX_END_MS = 9007199254740991 -- the latest window end in stored state (RL.MULTI)
local MAX_BURST_WINDOW_US = 1576800000000000 -- 18250 days, 50 years (RL.GCRA)
local MAX_TAT_US = 5679244800000000 -- the latest AT plus the longest burst window (RL.GCRA)
local MAX_TAT_DIGITS = 16 -- digits of MAX_TAT_US
local ECHO_MAX = 64 -- bytes of a bad argument quoted in an error
local I64_MAX = '9223372036854775807'

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

-- Format an integer-valued number without exponent (for replies and redis.call).
local function int(n)
  return string.format('%d', n)
end

-- Parse a signed decimal integer >= min, as the module does; nil when it is not one.
-- Values beyond 2^53 are refused by name, since a double cannot hold them exactly.
-- Error texts are built only when they are needed: this runs on every call.
local function bad_int(what, v, min)
  fail('ERR invalid ' .. what .. " '" .. echo(v) .. "': must be an integer from "
    .. int(min) .. ' to ' .. I64_MAX)
end
local function parse_int(what, v, min)
  local neg, digits = string.match(v, '^(%-?)(%d+)$')
  if not digits then bad_int(what, v, min) end
  local sig = string.gsub(digits, '^0+', '')
  if #sig > 19 or (#sig == 19 and sig > ((neg == '-') and '9223372036854775808' or I64_MAX)) then
    bad_int(what, v, min)
  end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > MAX_SAFE_INTEGER then
    fail('ERR invalid ' .. what .. " '" .. echo(v)
      .. "': the Lua twin computes exactly only up to 9007199254740991")
  end
  if neg == '-' and n ~= 0 then n = -n end
  if n < min then bad_int(what, v, min) end
  return n
end

-- Parse a duration (integer + optional unit ms, s, m, h, d; bare = seconds) in ms.
local UNIT_MS = { [''] = 1000, s = 1000, ms = 1, m = 60000, h = 3600000, d = 86400000 }
local function bad_duration(what, v, reason)
  local why = 'must be a positive duration (an integer with an optional unit ms, s, m, h or d)'
  if reason == 'unit' then
    why = 'unknown unit (use ms, s, m, h or d)'
  elseif reason == 'long' then
    why = 'must be at most 10 years (3650d)'
  end
  fail('ERR invalid ' .. what .. " '" .. echo(v) .. "': " .. why)
end
local function parse_duration(what, v)
  local digits, unit = string.match(v, '^(%d*)(.*)$')
  if digits == '' then bad_duration(what, v) end
  local per = UNIT_MS[unit]
  if not per then
    if string.match(unit, '^%a+$') then bad_duration(what, v, 'unit') end
    bad_duration(what, v)
  end
  local sig = string.gsub(digits, '^0+', '')
  if #sig > 12 then bad_duration(what, v, 'long') end
  local n = tonumber(sig ~= '' and sig or '0')
  if n == 0 then bad_duration(what, v) end
  if n * per > MAX_DURATION_MS then bad_duration(what, v, 'long') end
  return n * per
end

local function parse_at(v)
  local ok, ms = pcall(parse_int, 'AT', v, 0)
  if not ok or ms > MAX_AT_MS then
    fail("ERR invalid AT '" .. echo(v) .. "': must be a Unix time in milliseconds from 0 to "
      .. int(MAX_AT_MS))
  end
  return ms
end

-- Options COST n, AT ms and (when align_ok) ALIGN, case-insensitive, each at most once.
-- Reads ARGV[first..last]; `other(i)` may consume a keyword of the command's own and
-- return how many arguments it used (or nil).
local function parse_options(first, last, align_ok, other)
  local o = { cost = 1, at = nil, align = false }
  local seen = {}
  local function once(name)
    if seen[name] then fail('ERR option ' .. name .. ' given more than once') end
    seen[name] = true
  end
  local i = first
  while i <= last do
    local w = string.upper(ARGV[i])
    if w == 'COST' or w == 'AT' then
      once(w)
      if i + 1 > last then fail('ERR option ' .. w .. ' needs a value') end
      if w == 'COST' then o.cost = parse_int('cost', ARGV[i + 1], 0) else o.at = parse_at(ARGV[i + 1]) end
      i = i + 2
    elseif w == 'ALIGN' and align_ok then
      once('ALIGN')
      o.align = true
      i = i + 1
    else
      local used = other and other(i)
      if not used then fail("ERR unknown option '" .. echo(ARGV[i]) .. "'") end
      i = i + used
    end
  end
  return o
end

-- The call shape of RL.MULTI and RL.SLIDING: numkeys (EVALSHA's) from 1 to MAX_KEYS
-- distinct KEYS, then LIMIT window limit triples among the options (`other(i)` takes
-- the command's own options, as in parse_options), at least one. Returns the LIMITs
-- ({ window_ms, limit } in argument order), the windows named (window_ms -> true) and
-- the options.
local function parse_multikey(command, align_ok, other)
  if 2 + #KEYS + #ARGV < 6 then
    fail("ERR wrong number of arguments for '" .. command .. "' command")
  end
  if #KEYS < 1 or #KEYS > MAX_KEYS then
    fail("ERR invalid numkeys '" .. int(#KEYS) .. "': must be an integer from 1 to " .. int(MAX_KEYS))
  end
  local seen_key = {}
  for _, key in ipairs(KEYS) do
    if seen_key[key] then fail("ERR key '" .. echo(key) .. "' given more than once") end
    seen_key[key] = true
  end
  local limits, named = {}, {}
  local o = parse_options(1, #ARGV, align_ok, function(i)
    if string.upper(ARGV[i]) ~= 'LIMIT' then return other and other(i) end
    if #limits >= MAX_WINDOWS then
      fail('ERR too many LIMITs: at most ' .. int(MAX_WINDOWS) .. ' windows')
    end
    if i + 2 > #ARGV then fail('ERR LIMIT needs a window and a limit') end
    local w = parse_duration('window', ARGV[i + 1])
    local l = parse_int('limit', ARGV[i + 2], 1)
    if named[w] then
      fail("ERR window '" .. echo(ARGV[i + 1]) .. "' given more than once (" .. int(w) .. ' ms)')
    end
    named[w] = true
    limits[#limits + 1] = { w, l }
    return 3
  end)
  if #limits == 0 then fail('ERR at least one LIMIT window limit is needed') end
  return limits, named, o
end

-- A cost above the smallest LIMIT can never be allowed.
local function check_cost(limits, cost)
  local smallest = limits[1][2]
  for _, lw in ipairs(limits) do
    if lw[2] < smallest then smallest = lw[2] end
  end
  if cost > smallest then
    fail('ERR cost ' .. int(cost) .. ' exceeds the limit ' .. int(smallest)
      .. ': the request can never be allowed')
  end
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

-- A number read from stored state: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
local function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
end

-- A string key's value and absolute expiry in ms (nil: no TTL); nil when missing.
local function read_string(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    fail('WRONGTYPE Operation against a key holding the wrong kind of value')
  end
  if not v then return nil end
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then exp = nil end
  return v, exp
end

-- Run the command body; an error raised with `fail` (or by redis.call) becomes the
-- error reply. Redis 7.0's pcall hands error tables back as their message string;
-- other servers keep the table: both are accepted.
local function run(body)
  local ok, res = pcall(body)
  if ok then return res end
  if type(res) == 'table' and res.err then res = res.err end
  if type(res) == 'string' and string.match(res, '^%u+ ') then
    return redis.error_reply(res)
  end
  error(res, 0)
end

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

-- rl_all: the Lua twin of RL.ALL as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.ALL's keys and the rest of its arguments in the same order, as
-- `FCALL rl_all ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1

local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds

local MAX_AT_MS = 4102444800000 -- 2100-01-01

local MAX_DURATION_MS = 315360000000 -- 3650 days

local MAX_ALL_KEYS = 16 -- keys (one rule each) per call (RL.ALL)

local MAX_WINDOWS = 16 -- LIMITs per call (RL.MULTI)

local MAX_WINDOWS_PER_KEY = 32 -- windows one key keeps (RL.MULTI, RL.SLIDING)

local MAX_BUCKETS = 100 -- buckets per window (RL.SLIDING)

local DEFAULT_BUCKETS = 10 -- buckets per window without BUCKETS (RL.SLIDING)

local MAX_LOG_LIMIT = 10000 -- the largest limit (RL.LOG)

local MAX_LOG_MEMBERS = 20000 -- members (and cost of one member) a log holds: twice its largest limit (RL.LOG, FORCE)

local MAX_META_LEN = 256 -- bytes of a META value (RL.LOG)

local MAX_LEASE_LIMIT = 10000 -- the largest limit (RL.LEASE)

local MAX_ID_LEN = 256 -- bytes of a lease id (RL.LEASE, RL.RELEASE)

local MAX_END_MS = 4417804800000 -- the latest window end in stored state: MAX_AT_MS + MAX_DURATION_MS (RL.MULTI)

local MAX_AT_US = 4102444800000000 -- MAX_AT_MS in µs: the latest log entry, the latest bucket start (RL.LOG, RL.SLIDING)

local MAX_BUCKETS_PER_KEY = 1000 -- buckets one key keeps, its windows' BUCKETS added up (RL.SLIDING)

local MAX_LOG_TRIM = 64 -- members that left the window one write removes, oldest first (RL.LOG)

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

local function parse_at(v)
  local plain = plain_count(v, MIN_AT_MS)
  if plain and plain <= MAX_AT_MS then return plain end
  local ok, ms = pcall(parse_int, 'AT', v, 0)
  if ok and ms < MIN_AT_MS then
    fail("ERR invalid AT '" .. echo(v) .. "': AT takes a Unix time in milliseconds, from "
      .. int(MIN_AT_MS) .. ' (2001-09-09) to ' .. int(MAX_AT_MS) .. '; this looks like seconds')
  end
  if not ok or ms > MAX_AT_MS then
    fail("ERR invalid AT '" .. echo(v) .. "': must be a Unix time in milliseconds from "
      .. int(MIN_AT_MS) .. ' to ' .. int(MAX_AT_MS))
  end
  return ms
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

-- The options that follow a command's (or a rule's) positional arguments, as the
-- module's one option parser reads them: `accepts` is a set of keywords among COST, AT,
-- ALIGN, DELAY, BUCKETS, META, LIMIT (LIMIT window limit, repeatable) and ID; each other
-- one at most once, each value checked where it stands. Reads args[first..#args]; at a
-- word that is not accepted, stops there when `stop`, else calls `unknown(word)` when
-- given (which raises), else refuses it. Returns the options and the index after them.
local function parse_options(args, first, accepts, stop, unknown)
  -- The options read so far are also marked under their keyword (o.COST...).
  local o = { cost = 1 }
  local last = #args
  local i = first
  while i <= last do
    local w = string.upper(args[i])
    if not accepts[w] then
      if stop then break end
      if unknown then unknown(args[i]) end
      -- The options in the order error replies list them (the module's Opt order).
      local listed = {}
      for _, k in ipairs({ 'COST', 'AT', 'ALIGN', 'DELAY', 'BUCKETS', 'META', 'LIMIT', 'ID', 'REFUND', 'FORCE' }) do
        if accepts[k] then listed[#listed + 1] = k end
      end
      fail("ERR unknown option '" .. echo(args[i]) .. "' (options here: " .. table.concat(listed, ', ') .. ')')
    end
    if w ~= 'LIMIT' then
      if o[w] then fail('ERR option ' .. w .. ' given more than once') end
      o[w] = true
    end
    if w == 'ALIGN' then
      o.align = true
      i = i + 1
    elseif w == 'REFUND' or w == 'FORCE' then
      i = i + 1
    elseif w == 'LIMIT' then
      if not o.limits then o.limits, o.named = {}, {} end
      if #o.limits >= MAX_WINDOWS then
        fail('ERR too many LIMITs: at most ' .. int(MAX_WINDOWS) .. ' windows')
      end
      if i + 2 > last then fail('ERR LIMIT needs a window and a limit') end
      local wms = parse_duration('window', args[i + 1])
      local l = count_in_order('limit', args[i + 2], 1, 'LIMIT window limit: the window comes first')
      if o.named[wms] then
        fail("ERR window '" .. echo(args[i + 1]) .. "' given more than once (" .. int(wms) .. ' ms)')
      end
      o.named[wms] = true
      o.limits[#o.limits + 1] = { wms, l }
      i = i + 3
    else
      if i + 1 > last then fail('ERR option ' .. w .. ' needs a value') end
      local v = args[i + 1]
      if w == 'COST' then
        o.cost = parse_int('cost', v, 0)
      elseif w == 'AT' then
        o.at = parse_at(v)
      elseif w == 'DELAY' then
        o.delay = parse_duration('max_delay', v) * 1000
      elseif w == 'BUCKETS' then
        local n = string.match(v, '^%d+$') and tonumber(v)
        if not n or n < 1 or n > MAX_BUCKETS then
          fail("ERR invalid BUCKETS '" .. echo(v) .. "': must be an integer from 1 to " .. int(MAX_BUCKETS))
        end
        o.buckets = n
      elseif w == 'META' then
        if #v > MAX_META_LEN then
          fail('ERR META of ' .. int(#v) .. ' bytes: at most ' .. int(MAX_META_LEN) .. ' bytes')
        end
        o.meta = v
      elseif w == 'ID' then
        o.id = v
      end
      i = i + 2
    end
  end
  return o, i
end

-- How a request settles, from REFUND and FORCE: 'take' (the usual), 'refund' or
-- 'force'; at most one of them, and neither with DELAY; a peek (COST 0) takes.
local function settle_mode(o)
  if o.REFUND and o.FORCE then
    fail('ERR REFUND and FORCE cannot be given together: a request is either given back or forced')
  end
  local mode = (o.REFUND and 'refund') or (o.FORCE and 'force') or 'take'
  if mode ~= 'take' and o.delay then
    fail('ERR ' .. string.upper(mode) .. ' cannot be given with DELAY: a settled request is not booked')
  end
  -- COST 0 with either flag is the peek COST 0 is without it.
  if o.cost == 0 then return 'take' end
  return mode
end

-- The error of a FORCE that would store `what` past the bounds every reader accepts.
local function force_out_of_bounds(what)
  fail('ERR FORCE would store ' .. what .. ': nothing was written')
end

-- A cost above the smallest LIMIT can never be allowed.
local function check_limits_cost(limits, cost)
  local smallest = limits[1][2]
  for _, lw in ipairs(limits) do
    if lw[2] < smallest then smallest = lw[2] end
  end
  if cost > smallest then
    fail('ERR cost ' .. int(cost) .. ' exceeds the limit ' .. int(smallest)
      .. ': the request can never be allowed')
  end
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

-- A number read from stored state: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
local function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
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

-- RL.FIXED: a counter per window (see the interface of a limiter at the top).
local FIXED = (function()
  local L = { kind = 'FIXED', command = 'RL.FIXED', storage = 'string', expiry = true, nargs = 2,
    expected = 'a non-negative integer counter', options = { ALIGN = true },
    accepts = { COST = true, AT = true, ALIGN = true, REFUND = true, FORCE = true },
    syntax = 'RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE]',
    rule_syntax = 'FIXED i limit window [ALIGN]' }
  function L.parse_args(args, i)
    local order = 'RL.FIXED key limit window: the limit comes first'
    return { limit = count_in_order('limit', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]) }
  end
  function L.build(r, o)
    r.align = o.align
    return r
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.limit then cost_over(cost, 'limit', r.limit) end
  end
  -- The counter of one window at `now` (RL.FIXED's rules); also each pair of RL.MULTI.
  -- `count`, `exp`: the stored count (nil: none) and its window's end in ms (nil: no TTL).
  function L.window(limit, window_ms, align, count, exp, now, cost)
    local now_ms = floor_ms(now)
    local fresh_end = now_ms + window_ms
    if align then fresh_end = now_ms - now_ms % window_ms + window_ms end
    local ends, missing_ttl = fresh_end, false
    if count and not exp then
      missing_ttl = true
    elseif count and exp * 1000 > now then
      ends = exp
    else
      count = 0
    end
    local until_end = ends * 1000 - now
    if until_end < 0 then until_end = 0 end
    local after = count + cost
    if after <= limit then
      local reset = 0
      if after > 0 then reset = ceil_ms(until_end) end
      return { 0, limit, limit - after, -1, reset }, nil, after, ends, missing_ttl
    end
    local remaining = limit - count
    if remaining < 0 then remaining = 0 end
    return { 1, limit, remaining, math.max(1, ceil_ms(until_end)), ceil_ms(until_end) }, until_end,
      after, ends, missing_ttl
  end
  -- REFUND on one window: the count goes down by `cost`, never below 0; the window's
  -- end is kept; 0 left: the key goes. A window that has ended (or no key) is not
  -- touched. The fields, and the write ({ 'SET', ... } or { 'DEL' }; nil: none) with
  -- the count and end.
  function L.refund_window(limit, window_ms, align, count, exp, now, cost)
    if not count or (exp and exp * 1000 <= now) then
      return { 0, limit, limit, -1, 0 }, nil
    end
    local _, _, _, ends = L.window(limit, window_ms, align, count, exp, now, 0)
    local after = math.max(count - cost, 0)
    local reset = 0
    if after > 0 then reset = ceil_ms(math.max(ends * 1000 - now, 0)) end
    local fields = { 0, limit, math.max(limit - after, 0), -1, reset }
    if cost == 0 then return fields, nil end
    if after == 0 then return fields, 'del', after, ends end
    return fields, 'set', after, ends
  end
  -- FORCE on one window: `cost` is counted whether it fits or not (at most 2^53 - 1).
  -- The fields, the wait in µs when over the limit (nil: it fit), the count and end.
  function L.force_window(limit, window_ms, align, count, exp, now, cost)
    local fields, retry, after, ends = L.window(limit, window_ms, align, count, exp, now, cost)
    if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
    if retry then fields[3] = 0 end
    return fields, retry, after, ends
  end
  function L.judge(r, opened, key, named, now, cost, mode)
    local count
    if opened.raw then
      local raw = opened.raw
      count = #raw <= 19 and string.match(raw, '^%d+$') and tonumber(raw)
      if not count or count > MAX_SAFE_INTEGER then state_error(L, key, named) end
      -- A time RL.GCRA could have written, where the limit is below any such time:
      -- RL.GCRA's state (fixed::check_not_a_tat).
      if r.limit < MIN_TAT_US and count >= MIN_TAT_US then
        foreign_error(L, key, named, "what can only be RL.GCRA's state (a time in microseconds, above the limit)")
      end
    end
    if mode == 'refund' then
      local fields, w, after, ends = L.refund_window(r.limit, r.window_ms, r.align, count, opened.exp, now, cost)
      local j = { fields = fields, window = r.window_ms }
      if w == 'del' then j.pending = { { 'DEL', key }, allowed = true } end
      if w == 'set' then j.pending = { { 'SET', key, after, 'PXAT', ends }, allowed = true } end
      return j
    elseif mode == 'force' then
      local fields, retry, after, ends = L.force_window(r.limit, r.window_ms, r.align, count, opened.exp, now, cost)
      local j = { fields = fields, window = r.window_ms, retry = retry, over = retry and true }
      if cost > 0 then j.pending = { { 'SET', key, after, 'PXAT', ends }, allowed = true } end
      return j
    end
    local fields, retry, after, ends, missing_ttl =
      L.window(r.limit, r.window_ms, r.align, count, opened.exp, now, cost)
    -- The write of the call as this rule judged it (allowed iff not retry): the count
    -- when allowed, the TTL a counter without one gets when denied; none for a peek.
    local pending
    if cost > 0 and not retry then
      pending = { { 'SET', key, after, 'PXAT', ends }, allowed = true }
    elseif cost > 0 and missing_ttl then
      pending = { { 'PEXPIREAT', key, ends }, allowed = false }
    end
    return { fields = fields, window = r.window_ms, retry = retry, pending = pending }
  end
  function L.write(r, key, pending, allowed)
    if pending and pending.allowed == allowed then return pending end
    return nil
  end
  return L
end)()

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

-- What RL.MULTI and RL.SLIDING share: their rule is their LIMITs (and options), their
-- state one string per key of entries by window, their binding pair the denying window
-- that frees up last, else the one with the least remaining (ties: the first LIMIT).
local function limits_rule(L)
  function L.parse_args()
    return {}
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' then check_limits_cost(r.limits, cost) end
  end
  -- Judge every named window of a key: the limiter's L.parse_state(key, named, raw)
  -- (its entries, and the same by window) and L.judge_window(r, entry, w, limit, now,
  -- cost) (the window's five fields, µs to wait when denied, and the window after an
  -- allowed request, nil when it keeps none).
  function L.judge(r, opened, key, named, now, cost, mode)
    local entries, by_w = {}, {}
    if opened.raw then entries, by_w = L.parse_state(key, named, opened.raw) end
    local best, updates = { full = 0 }, {}
    for _, lw in ipairs(r.limits) do
      local w, limit = lw[1], lw[2]
      local fields, retry, update = L.judge_window(r, by_w[w], w, limit, now, cost, mode)
      L.offer(best, fields, retry, w)
      if update then updates[#updates + 1] = update end
    end
    -- The key's expiry: nil when it lost its TTL, 0 when there is no key.
    local exp = 0
    if opened.raw then exp = opened.exp end
    local j = { fields = best.fields, window = best.window, retry = best.retry,
      pending = { entries = entries, exp = exp, updates = updates } }
    if mode == 'force' and j.retry then
      -- Over: a request of cost 1 fits when every window has room again.
      j.retry, j.over = math.max(j.retry, best.full), true
      j.fields[4] = math.max(1, ceil_ms(j.retry))
    end
    return j
  end
  -- Offer a window's verdict to the binding choice of one key (`best.full`: the
  -- longest reset of the windows allowed with nothing remaining, in µs of whole ms).
  function L.offer(best, fields, retry, w)
    if not retry and fields[3] <= 0 then best.full = math.max(best.full, fields[5] * 1000) end
    if retry then
      if not best.retry or retry > best.retry then
        best.retry, best.fields, best.window = retry, fields, w
      end
    elseif not best.retry and (not best.fields or fields[3] < best.fields[3]) then
      best.fields, best.window = fields, w
    end
  end
  -- The write of a key once the call is settled, from its judgement (`p.entries`: the
  -- windows it held, `p.exp` its expiry, `p.updates` the named windows after an allowed
  -- request), as the module's multikey::write_windows: a peek writes nothing; a denial
  -- gives a key that lost its TTL the end of its last live window; an allowed request
  -- stores the named windows that still count with the others kept while they have not
  -- ended, raising before any write when the key would hold too many. The limiter's
  -- L.ends(e) (µs, or nil: counts nothing) and L.encode(entries).
  function L.write(r, key, p, allowed, now, cost)
    if cost == 0 then return nil end
    if not allowed then
      if p.exp then return nil end
      local latest
      for _, e in ipairs(p.entries) do
        local ends = L.ends(e)
        if ends and ends > now and (not latest or ends > latest) then latest = ends end
      end
      if latest then return { { 'PEXPIREAT', key, ceil_ms(latest) } } end
      return nil
    end
    local merged = {}
    for _, e in ipairs(p.updates) do
      if L.ends(e) then merged[#merged + 1] = e end
    end
    for _, e in ipairs(p.entries) do
      local ends = L.ends(e)
      if not r.named[e.w] and ends and ends > now then merged[#merged + 1] = e end
    end
    local buckets = 0
    for _, e in ipairs(merged) do buckets = buckets + (e.n or 0) end
    if L.command == 'RL.SLIDING' and (#merged > MAX_WINDOWS_PER_KEY or buckets > MAX_BUCKETS_PER_KEY) then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows or ' .. int(MAX_BUCKETS_PER_KEY) .. ' buckets: ' .. L.command .. ' keeps at most '
        .. int(MAX_WINDOWS_PER_KEY) .. ' windows per key, their BUCKETS adding up to at most '
        .. int(MAX_BUCKETS_PER_KEY) .. ' (use fewer distinct windows or buckets, or other keys)')
    end
    if #merged > MAX_WINDOWS_PER_KEY then
      fail("ERR the key '" .. echo(key) .. "' would hold more than " .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows: ' .. L.command .. ' keeps at most ' .. int(MAX_WINDOWS_PER_KEY)
        .. ' windows per key (use fewer distinct windows, or other keys)')
    end
    -- Nothing left to keep (a refund gave everything back): the key goes.
    if #merged == 0 then
      if p.exp ~= 0 then return { { 'DEL', key } } end
      return nil
    end
    table.sort(merged, function(a, b) return a.w < b.w end)
    local latest = 0
    for _, e in ipairs(merged) do
      local ends = L.ends(e)
      if ends and ends > latest then latest = ends end
    end
    return { { 'SET', key, L.encode(merged), 'PXAT', ceil_ms(latest) } }
  end
end

-- RL.MULTI: a counter per window on each key, RL.FIXED's rules for each pair.
local MULTI = (function()
  local L = { kind = 'MULTI', command = 'RL.MULTI', storage = 'string', expiry = true, nargs = 0,
    expected = 'window_ms:count:end_ms entries separated by commas',
    options = { LIMIT = true, ALIGN = true },
    accepts = { COST = true, AT = true, LIMIT = true, ALIGN = true, REFUND = true, FORCE = true },
    syntax = 'RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE]',
    rule_syntax = 'MULTI i LIMIT window limit [LIMIT window limit ...] [ALIGN]' }
  limits_rule(L)
  local F = FIXED
  function L.build(r, o)
    if not o.limits then fail('ERR at least one LIMIT window limit is needed') end
    return { limits = o.limits, named = o.named, align = o.align }
  end
  -- A key's entries ({ w = window_ms, c = count, e = end_ms }) in order and by window,
  -- or an error naming the key.
  function L.parse_state(key, named, raw)
    local bad = function() state_error(L, key, named) end
    local entries, by_w, pos, len = {}, {}, 1, #raw
    if len == 0 then bad() end
    while true do
      local _, last, w, c, e = string.find(raw, '^(%d+):(%d+):(%d+)', pos)
      if not last then bad() end
      w = stored_number(w, MAX_DURATION_MS)
      c = stored_number(c, MAX_SAFE_INTEGER)
      e = stored_number(e, MAX_END_MS)
      if not (w and c and e) or w == 0 or by_w[w] then bad() end
      by_w[w] = { w = w, c = c, e = e }
      entries[#entries + 1] = by_w[w]
      pos = last + 1
      if pos > len then return entries, by_w end
      if string.sub(raw, pos, pos) ~= ',' then bad() end
      pos = pos + 1
    end
  end
  -- A counter counts until its window ends (µs).
  function L.ends(e)
    return e.e * 1000
  end
  function L.encode(entries)
    local parts = {}
    for i, e in ipairs(entries) do parts[i] = int(e.w) .. ':' .. int(e.c) .. ':' .. int(e.e) end
    return table.concat(parts, ',')
  end
  -- One window: RL.FIXED's counter.
  function L.judge_window(r, entry, w, limit, now, cost, mode)
    local count, exp = entry and entry.c, entry and entry.e or 0
    if mode == 'refund' then
      local fields, write, after, ends = F.refund_window(limit, w, r.align, count, exp, now, cost)
      if write == 'set' then return fields, nil, { w = w, c = after, e = ends } end
      return fields, nil, nil
    elseif mode == 'force' then
      local fields, retry, after, ends = F.force_window(limit, w, r.align, count, exp, now, cost)
      return fields, retry, { w = w, c = after, e = ends }
    end
    local fields, retry, after, ends = F.window(limit, w, r.align, count, exp, now, cost)
    if retry then return fields, retry, nil end
    return fields, nil, { w = w, c = after, e = ends }
  end
  return L
end)()

-- RL.SLIDING: counts in buckets per window on each key.
local SLIDING = (function()
  local L = { kind = 'SLIDING', command = 'RL.SLIDING', storage = 'string', expiry = true, nargs = 0,
    expected = 'window_ms:buckets:first:counts entries separated by commas',
    options = { LIMIT = true, BUCKETS = true },
    accepts = { COST = true, AT = true, LIMIT = true, BUCKETS = true, REFUND = true, FORCE = true },
    syntax = 'RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE]',
    rule_syntax = 'SLIDING i LIMIT window limit [LIMIT window limit ...] [BUCKETS n]' }
  limits_rule(L)
  function L.build(r, o)
    if not o.limits then fail('ERR at least one LIMIT window limit is needed') end
    local n = o.buckets or DEFAULT_BUCKETS
    for _, lw in ipairs(o.limits) do
      if (lw[1] * 1000) % n ~= 0 then
        fail('ERR a window of ' .. int(lw[1]) .. ' ms does not split into ' .. int(n)
          .. ' buckets of whole microseconds (choose BUCKETS dividing ' .. int(lw[1]) .. '000)')
      end
    end
    return { limits = o.limits, named = o.named, buckets = n }
  end
  -- a // b for integers below 2^53, exactly.
  local function idiv(a, b)
    return (a - a % b) / b
  end
  -- A key's entries, sorted by window ({ w, n, first, counts }), and by window; or an
  -- error naming the key.
  function L.parse_state(key, named, raw)
    local bad = function() state_error(L, key, named) end
    if #raw == 0 then bad() end
    local entries, by_w = {}, {}
    local total_buckets = 0
    for item in string.gmatch(raw .. ',', '([^,]*),') do
      local w, n, first, counts = string.match(item, '^(%d+):(%d+):(%d+):([%d%.]+)$')
      if not w then bad() end
      w = stored_number(w, MAX_DURATION_MS)
      n = stored_number(n, MAX_BUCKETS)
      first = stored_number(first, MAX_SAFE_INTEGER)
      if not (w and n and first) or w == 0 or n == 0 or (w * 1000) % n ~= 0 then bad() end
      local list, sum = {}, 0
      for c in string.gmatch(counts .. '.', '([^%.]*)%.') do
        local v = stored_number(c, MAX_SAFE_INTEGER)
        if not v then bad() end
        sum = sum + v
        if sum > MAX_SAFE_INTEGER then bad() end
        list[#list + 1] = v
      end
      if #list > n + 1 then bad() end
      -- No bucket later than a call writes into: the one holding the latest AT.
      if (first + #list) * (w * 1000 / n) > MAX_AT_US + w * 1000 / n then bad() end
      total_buckets = total_buckets + n
      if total_buckets > MAX_BUCKETS_PER_KEY then bad() end
      if #entries > 0 and entries[#entries].w >= w then bad() end
      local e = { w = w, n = n, first = first, counts = list }
      entries[#entries + 1] = e
      by_w[w] = e
    end
    return entries, by_w
  end
  local function width(e)
    return e.w * 1000 / e.n
  end
  -- The number of the newest bucket with a count, or nil.
  local function newest(e)
    for i = #e.counts, 1, -1 do
      if e.counts[i] ~= 0 then return e.first + i - 1 end
    end
    return nil
  end
  -- When the newest counted bucket leaves the window, or nil.
  local function ends_at(e)
    local m = newest(e)
    if not m then return nil end
    return (m + 1) * width(e) + e.w * 1000
  end
  local function add(e, j, c)
    if #e.counts == 0 then e.first = j end
    if j < e.first then
      local shift, moved = e.first - j, {}
      for i = 1, shift do moved[i] = 0 end
      for i, v in ipairs(e.counts) do moved[shift + i] = v end
      e.counts, e.first = moved, j
    end
    local i = j - e.first + 1
    for x = #e.counts + 1, i do e.counts[x] = 0 end
    e.counts[i] = e.counts[i] + c
  end
  -- Drop the buckets before `lo` and the empty ones at both ends.
  local function trim(e, lo)
    local drop = math.min(math.max(lo - e.first, 0), #e.counts)
    local lead = drop
    while lead < #e.counts and e.counts[lead + 1] == 0 do lead = lead + 1 end
    local kept = {}
    for i = lead + 1, #e.counts do kept[#kept + 1] = e.counts[i] end
    e.counts, e.first = kept, e.first + lead
    while #e.counts > 0 and e.counts[#e.counts] == 0 do e.counts[#e.counts] = nil end
  end
  -- The same counts in n buckets: each count goes to the new bucket holding the last
  -- microsecond of its old one.
  local function rebucketed(e, n)
    local old, new = width(e), e.w * 1000 / n
    local out = { w = e.w, n = n, first = 0, counts = {} }
    for i, c in ipairs(e.counts) do
      if c ~= 0 then add(out, idiv((e.first + i) * old - 1, new), c) end
    end
    return out
  end
  local function copy(e)
    local counts = {}
    for i, v in ipairs(e.counts) do counts[i] = v end
    return { w = e.w, n = e.n, first = e.first, counts = counts }
  end
  -- One (key, window) pair at `now`: the reply fields, the entry after an allowed
  -- request, and retry_after in µs (nil when allowed).
  local function pair(stored, now, w_ms, limit, n, cost, mode)
    local window = w_ms * 1000
    local bw = window / n
    local e
    if stored and stored.n == n then
      e = copy(stored)
    elseif stored then
      e = rebucketed(stored, n)
    else
      e = { w = w_ms, n = n, first = 0, counts = {} }
    end
    -- A call judged before the newest bucket starts is judged at its start.
    local m = newest(e)
    local t = math.max(now, m and m * bw or 0)
    local current = idiv(t, bw)
    local lo = idiv(math.max(t - window, 0), bw)
    trim(e, lo)
    local counted = 0
    for _, c in ipairs(e.counts) do counted = counted + c end
    local function leaves(j) return (j + 1) * bw + window end
    local function reset()
      local mm = newest(e)
      if not mm then return 0 end
      return math.max(leaves(mm) - now, 0)
    end
    -- When enough of the oldest buckets (which count `total`) have left for `c` to fit.
    local function fits_at(total, c)
      local left, at = total, leaves(e.first + #e.counts - 1)
      for i, v in ipairs(e.counts) do
        left = left - v
        if left + c <= limit then
          at = leaves(e.first + i - 1)
          break
        end
      end
      return at
    end
    if mode == 'refund' then
      -- Newest buckets first, never below 0.
      local give = cost
      for i = #e.counts, 1, -1 do
        if give == 0 then break end
        local back = math.min(give, e.counts[i])
        e.counts[i], give = e.counts[i] - back, give - back
      end
      trim(e, e.first)
      local left = 0
      for _, c in ipairs(e.counts) do left = left + c end
      return { 0, limit, math.max(limit - left, 0), -1, ceil_ms(reset()) }, e, nil
    elseif mode == 'force' then
      local after = counted + cost
      if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
      if cost > 0 then add(e, current, cost) end
      if after <= limit then
        return { 0, limit, limit - after, -1, ceil_ms(reset()) }, e, nil
      end
      local wait = fits_at(after, 1) - now
      return { 1, limit, 0, math.max(1, ceil_ms(wait)), ceil_ms(reset()) }, e, wait
    end
    if counted + cost <= limit then
      if cost > 0 then add(e, current, cost) end
      return { 0, limit, limit - counted - cost, -1, ceil_ms(reset()) }, e, nil
    end
    local wait = fits_at(counted, cost) - now
    return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(wait)), ceil_ms(reset()) }, e, wait
  end
  function L.encode(entries)
    local parts = {}
    for i, e in ipairs(entries) do
      local counts = {}
      for j, c in ipairs(e.counts) do counts[j] = int(c) end
      parts[i] = int(e.w) .. ':' .. int(e.n) .. ':' .. int(e.first) .. ':' .. table.concat(counts, '.')
    end
    return table.concat(parts, ',')
  end
  L.ends = ends_at
  function L.judge_window(r, entry, w, limit, now, cost, mode)
    local fields, e, wait = pair(entry, now, w, limit, r.buckets, cost, mode)
    return fields, wait, e
  end
  return L
end)()

-- RL.LOG: a sorted set of the allowed requests.
local LOG = (function()
  local L = { kind = 'LOG', command = 'RL.LOG', storage = 'zset', nargs = 2,
    expected = 'a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch',
    options = { META = true }, accepts = { COST = true, AT = true, META = true, REFUND = true, FORCE = true },
    syntax = 'RL.LOG key limit window [META value] [COST n] [AT unix_ms] [REFUND|FORCE]',
    rule_syntax = 'LOG i limit window [META value]' }
  -- How many counted members a denial reads one by one before it searches by score.
  local SCAN_STEPS = 8
  function L.parse_args(args, i)
    local v = args[i]
    local limit = string.match(v, '^%-?%d+$') and tonumber(v)
    if not limit or limit < 1 or limit > MAX_LOG_LIMIT then
      local msg = "ERR invalid limit '" .. echo(v) .. "': must be an integer from 1 to " .. int(MAX_LOG_LIMIT)
      if looks_like_a_duration(v) then msg = msg .. ' (RL.LOG key limit window: the limit comes first)' end
      fail(msg)
    end
    return { limit = limit, window_ms = parse_duration('window', args[i + 1]) }
  end
  function L.build(r, o)
    r.window = r.window_ms * 1000
    r.meta = o.meta or ''
    return r
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.limit then cost_over(cost, 'limit', r.limit) end
  end
  function L.judge(r, opened, key, named, now, cost, mode)
    local bad = function() state_error(L, key, named) end
    -- The entry a ZRANGE ... WITHSCORES reply starts with, or nil: seq (16 digits), its
    -- cost and its time; anything else is not a log.
    local function entry(pair)
      if #pair == 0 then return nil end
      local seq, c, meta = string.match(pair[1], '^(%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d):([1-9]%d*):(.*)$')
      seq = stored_number(seq, MAX_SAFE_INTEGER)
      c = c and #c <= 5 and tonumber(c)
      local t = stored_number(pair[2], MAX_AT_US)
      if not (seq and c and t) or c > MAX_LOG_MEMBERS or seq < c or #meta > MAX_META_LEN then bad() end
      return { t = t, seq = seq, cost = c, meta = meta, member = pair[1] }
    end
    if mode == 'refund' and not opened.exists then
      return { fields = { 0, r.limit, r.limit, -1, 0 }, window = r.window_ms, pending = {} }
    end
    local newest, first
    local t = now
    if opened.exists then
      local members = redis.call('ZCARD', key)
      if members > MAX_LOG_MEMBERS then bad() end
      local last_two = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
      newest = entry({ last_two[#last_two - 1], last_two[#last_two] })
      -- The members agree with each other as the module writes them: each one's units
      -- follow the one before it, and the set holds no more members than the units from
      -- its first member to its newest.
      if #last_two == 4 and entry(last_two).seq ~= newest.seq - newest.cost then bad() end
      local lowest = entry(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES'))
      local units = newest.seq - (lowest.seq - lowest.cost)
      if units < 0 or members > units then bad() end
      -- Time does not go back inside a log: a call older than its newest entry is
      -- judged, and recorded, at that entry's time.
      if newest then t = math.max(now, newest.t) end
    end
    local cutoff = math.max(t - r.window, 0)
    local after = '(' .. int(cutoff)
    if opened.exists then
      local first_two = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
      first = entry(first_two)
      if #first_two == 4 then
        local second = entry({ first_two[3], first_two[4] })
        if second.seq - second.cost ~= first.seq then bad() end
      end
    end
    local counted, base = 0, 0
    if first then
      base = first.seq - first.cost
      if newest.seq < base then bad() end
      counted = newest.seq - base
    end
    local function reset(n)
      if not n then return 0 end
      return ceil_ms(math.max(n + r.window - now, 0))
    end
    local newest_counted = (counted > 0) and newest.t or nil
    if mode == 'refund' then
      -- `cost` units leave the newest counted members first: a member whose whole cost
      -- is given back is removed, one partly given back is replaced by a member of the
      -- same time and META with the rest of its cost (its units keep their numbers).
      local give, given, left_newest = cost, 0, nil
      local adds, rems = {}, {}
      if give == 0 then left_newest = newest_counted end
      if give > 0 and counted > 0 then
        local n = math.min(give + 1, redis.call('ZCARD', key))
        local got = redis.call('ZREVRANGEBYSCORE', key, '+inf', after, 'WITHSCORES', 'LIMIT', 0, n)
        for i = 1, #got, 2 do
          local e = entry({ got[i], got[i + 1] })
          if give == 0 then
            left_newest = e.t
            break
          end
          local back = math.min(give, e.cost)
          give, given = give - back, given + back
          rems[#rems + 1] = { 'ZREM', key, e.member }
          if back < e.cost then
            local rest = string.format('%016d', e.seq - back) .. ':' .. int(e.cost - back) .. ':' .. e.meta
            adds[1] = { 'ZADD', key, e.t, rest }
            left_newest = e.t
            break
          end
        end
      end
      local left = counted - given
      local j = { fields = { 0, r.limit, math.max(r.limit - left, 0), -1, reset(left_newest) },
        window = r.window_ms, pending = {} }
      if given > 0 and not left_newest then
        j.pending.allow = { { 'DEL', key } }
      elseif given > 0 then
        local w = adds
        for _, c in ipairs(rems) do w[#w + 1] = c end
        w[#w + 1] = { 'ZREMRANGEBYSCORE', key, '-inf', cutoff }
        w[#w + 1] = { 'PEXPIREAT', key, ceil_ms(left_newest + r.window) }
        j.pending.allow = w
      end
      return j
    end
    -- The time of the first counted member whose running total reaches `target`: the
    -- first few one by one, then a search by score (running totals grow with scores).
    local function must_leave(target)
      local scanned = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, SCAN_STEPS)
      local last_seen, previous
      for i = 1, #scanned, 2 do
        local e = entry({ scanned[i], scanned[i + 1] })
        if previous and e.seq - e.cost ~= previous.seq then bad() end
        previous = e
        last_seen = e.t
        if e.seq >= target then return e.t end
      end
      local lo, hi = cutoff, newest.t
      if last_seen then lo = math.max(last_seen - 1, cutoff) end
      while lo + 1 < hi do
        local mid = lo + ((hi - lo) - (hi - lo) % 2) / 2
        local e = entry(redis.call('ZREVRANGEBYSCORE', key, int(mid), '-inf', 'WITHSCORES', 'LIMIT', 0, 1))
        if e and e.seq >= target then hi = mid else lo = mid end
      end
      return hi
    end
    local total = counted + cost
    if mode == 'force' and total > 2 * r.limit then
      fail('ERR FORCE would leave the log holding more than twice its limit (' .. int(2 * r.limit)
        .. '): nothing was written')
    end
    if total <= r.limit or mode == 'force' then
      local j = { window = r.window_ms, pending = {} }
      if cost > 0 then
        local seq = (newest and newest.seq or 0) + cost
        if seq > MAX_SAFE_INTEGER then
          fail('ERR the log has numbered ' .. int(MAX_SAFE_INTEGER)
            .. ' units since it began: delete the key (or let it expire) to start a new log')
        end
        j.pending.allow = {
          { 'ZADD', key, t, string.format('%016d', seq) .. ':' .. int(cost) .. ':' .. r.meta },
        }
        -- The members that left the window, oldest first, at most MAX_LOG_TRIM of them
        -- (later writes remove the rest): no call does more than that.
        if opened.exists then
          local leaving = redis.call('ZRANGEBYSCORE', key, '-inf', int(cutoff), 'LIMIT', 0, MAX_LOG_TRIM)
          if #leaving > 0 then
            local zrem = { 'ZREM', key }
            for _, m in ipairs(leaving) do zrem[#zrem + 1] = m end
            j.pending.allow[#j.pending.allow + 1] = zrem
          end
        end
        j.pending.allow[#j.pending.allow + 1] = { 'PEXPIREAT', key, ceil_ms(t + r.window) }
        newest_counted = t
      end
      if total <= r.limit then
        j.fields = { 0, r.limit, r.limit - total, -1, reset(newest_counted) }
        return j
      end
      -- Forced over the limit: a cost of 1 fits when the units through
      -- base + total + 1 - limit have left (the forced ones themselves: at t).
      local target = base + total + 1 - r.limit
      local must = t
      if counted > 0 and target <= newest.seq then must = must_leave(target) end
      local retry = math.max(must + r.window - now, 1)
      j.fields = { 1, r.limit, 0, math.max(1, ceil_ms(retry)), reset(newest_counted) }
      j.retry, j.over = retry, true
      return j
    end
    -- Denied: when the counted members that must leave for `cost` to fit have left.
    local must = must_leave(base + total - r.limit)
    local retry = math.max(must + r.window - now, 1)
    return { fields = { 1, r.limit, math.max(r.limit - counted, 0), math.max(1, ceil_ms(retry)),
      reset(newest_counted) }, window = r.window_ms, retry = retry, pending = {} }
  end
  function L.write(r, key, pending, allowed)
    if allowed then return pending.allow end
    return nil
  end
  return L
end)()

-- A lease id as given (ID, RL.RELEASE's argument): 1 to MAX_ID_LEN bytes.
local function check_id(v)
  if #v == 0 then fail("ERR invalid ID '': a lease id is 1 to " .. int(MAX_ID_LEN) .. ' bytes') end
  if #v > MAX_ID_LEN then
    fail('ERR ID of ' .. int(#v) .. ' bytes: a lease id is 1 to ' .. int(MAX_ID_LEN) .. ' bytes')
  end
  return v
end

-- RL.LEASE: a sorted set of lease ids scored by their expiry in Unix ms. At most `limit`
-- live leases (expiry after the call's ms); a live id renews; COST 0 peeks.
local LEASE = (function()
  local L = { kind = 'LEASE', command = 'RL.LEASE', storage = 'zset', nargs = 2,
    expected = 'a sorted set of lease ids scored by their expiry in Unix milliseconds',
    options = {}, accepts = { COST = true, AT = true, ID = true }, call_options = { ID = true },
    wants_token = true,
    syntax = 'RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms]',
    rule_syntax = 'LEASE i limit ttl' }
  function L.parse_args(args, i)
    local v = args[i]
    local limit = string.match(v, '^%-?%d+$') and tonumber(v)
    if not limit or limit < 1 or limit > MAX_LEASE_LIMIT then
      local msg = "ERR invalid limit '" .. echo(v) .. "': must be an integer from 1 to " .. int(MAX_LEASE_LIMIT)
        .. ' (leases held at once)'
      if looks_like_a_duration(v) then msg = msg .. ' (RL.LEASE key limit ttl: the limit comes first)' end
      fail(msg)
    end
    return { limit = limit, ttl_ms = parse_duration('ttl', args[i + 1]) }
  end
  function L.build(r, o)
    if o.id then r.id = check_id(o.id) end
    return r
  end
  -- RL.ALL: the call's ID names the lease of every LEASE rule.
  function L.call_opts(r, o)
    if o.id then r.id = check_id(o.id) end
  end
  -- A lease is one slot: COST 1, or 0 to peek, whatever the call's flag.
  function L.check_cost(r, cost)
    if cost ~= 0 and cost ~= 1 then
      fail('ERR invalid cost ' .. int(cost) .. ': a lease takes COST 1 (the default) or COST 0 to peek')
    end
  end
  -- A member and its score as a lease's expiry (ms, at most the latest a call can
  -- write), or the invalid-state error.
  local function lease_of(member, score, bad)
    local e = stored_number(score, MAX_END_MS)
    if not e or #member < 1 or #member > MAX_ID_LEN then bad() end
    return e
  end
  -- The latest live expiry of a member other than `except`, from the two highest.
  local function latest_except(key, now_ms, except, bad)
    local top = redis.call('ZREVRANGE', key, 0, 1, 'WITHSCORES')
    for i = 1, #top, 2 do
      local e = lease_of(top[i], top[i + 1], bad)
      if e <= now_ms then return nil end
      if top[i] ~= except then return e end
    end
    return nil
  end
  L.latest_except = latest_except
  L.lease_of = lease_of
  -- Live and expired leases at now_ms, counted by score range (the expired ones are
  -- not read), and the latest live expiry; the lowest and the highest members are read
  -- and checked, so every score lies between two valid expiries.
  function L.held(key, now_ms, bad)
    local card = redis.call('ZCARD', key)
    if card > MAX_LEASE_LIMIT then bad() end
    if card == 0 then return 0, 0, nil end
    local low = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    lease_of(low[1], low[2], bad)
    local latest
    local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local e = lease_of(top[1], top[2], bad)
    if e > now_ms then latest = e end
    local expired = redis.call('ZCOUNT', key, '-inf', now_ms)
    return card - expired, expired, latest
  end
  function L.judge(r, opened, key, named, now, cost, mode)
    local bad = function() state_error(L, key, named) end
    local now_ms = floor_ms(now)
    local live, expired, latest = 0, 0, nil
    if opened.exists then live, expired, latest = L.held(key, now_ms, bad) end
    local limit = r.limit
    local free = math.max(limit - live, 0)
    local expiry = now_ms + r.ttl_ms
    local function granted(remaining, id, key_expiry)
      local w = { { 'ZADD', key, expiry, id } }
      if expired > 0 then w[#w + 1] = { 'ZREMRANGEBYSCORE', key, '-inf', now_ms } end
      w[#w + 1] = { 'PEXPIREAT', key, key_expiry }
      return { fields = { 0, limit, remaining, -1, key_expiry - now_ms }, window = r.ttl_ms,
        pending = { allow = w, id = id } }
    end
    if mode == 'refund' then
      -- RL.ALL's REFUND gives back what its other rules took: the lease rule takes,
      -- renews and denies nothing; its numbers are a peek's. (FORCE is ignored.)
      return { fields = { 0, limit, free, -1, latest and (latest - now_ms) or 0 }, window = r.ttl_ms, pending = {} }
    end
    if cost > 0 then
      -- The call's id holds a live lease: a renewal, always allowed.
      if r.id and opened.exists then
        local s = redis.call('ZSCORE', key, r.id)
        if s and lease_of(r.id, s, bad) > now_ms then
          local others = latest_except(key, now_ms, r.id, bad)
          return granted(free, r.id, others and math.max(others, expiry) or expiry)
        end
      end
      if live < limit then
        return granted(limit - live - 1, r.id or r.token, latest and math.max(latest, expiry) or expiry)
      end
    end
    local reset = latest and (latest - now_ms) or 0
    if live < limit then
      return { fields = { 0, limit, free, -1, reset }, window = r.ttl_ms, pending = {} }
    end
    -- Denied: until the (live - limit + 1)-th earliest live lease has expired.
    local k = live - limit + 1
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(now_ms), '+inf', 'WITHSCORES', 'LIMIT', 0, k)
    local retry_at
    for i = 1, #first, 2 do retry_at = lease_of(first[i], first[i + 1], bad) end
    local retry = retry_at - now_ms
    return { fields = { 1, limit, free, retry, reset }, window = r.ttl_ms, retry = retry * 1000, pending = {} }
  end
  function L.write(r, key, pending, allowed)
    if allowed then return pending.allow end
    return nil
  end
  -- Field 6 (RL.ALL's field 8): the lease id when the call holds a lease, nil (false)
  -- otherwise.
  function L.reply_field(pending, allowed)
    return (allowed and pending.id) or false
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

-- Give the rules of a call that ask for one (a lease without ID) the call's token, when
-- the call records something (cost > 0).
local function give_token(call, now)
  if call.cost == 0 or call.mode == 'refund' then return end
  local wanting = {}
  for _, rule in ipairs(call.rules) do
    if rule.L.wants_token and not rule.r.id then wanting[#wanting + 1] = call.keys[rule.k] end
  end
  if #wanting == 0 then return end
  local token = make_token(now, wanting)
  for _, rule in ipairs(call.rules) do
    if rule.L.wants_token then rule.r.token = token end
  end
end

-- RL.ALL's BAN rule: a penalty box, `strikes:<count>:<end_ms>` while a strike window
-- runs, `banned:<end_ms>` while a ban runs (docs/all.md). A gate: judged before the
-- other rules, and while a ban runs the call is denied there; a strike is its penalty,
-- the one write of a denied call.
local BAN = (function()
  local L = { kind = 'BAN', command = 'RL.ALL', storage = 'string', nargs = 3, gate = true,
    expected = 'a penalty box: strikes:<count>:<end_ms> or banned:<end_ms>', options = {},
    rule_syntax = 'BAN i strikes window duration' }
  function L.parse_args(args, i)
    local order = 'BAN i strikes window duration: the strikes come first'
    return { strikes = count_in_order('strikes', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]),
      duration_ms = parse_duration('duration', args[i + 2]) }
  end
  function L.build(r)
    return r
  end
  function L.check_cost()
  end
  function L.judge(r, opened, key, named, now, cost, mode)
    local count, strike_end = 0, nil
    local function live(e) return e * 1000 > now end
    if opened.raw then
      local raw = opened.raw
      local until_ms = string.match(raw, '^banned:(%d+)$')
      local c, e = string.match(raw, '^strikes:(%d+):(%d+)$')
      if until_ms then
        until_ms = stored_number(until_ms, MAX_END_MS)
        if not until_ms then state_error(L, key, named) end
        if live(until_ms) then
          local left = until_ms * 1000 - now
          if mode == 'refund' then
            return { fields = { 0, r.strikes, 0, -1, ceil_ms(left) }, window = r.duration_ms }
          end
          return { fields = { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) },
            window = r.duration_ms, retry = left }
        end
      elseif c then
        c, e = stored_number(c, MAX_SAFE_INTEGER), stored_number(e, MAX_END_MS)
        if not (c and e) then state_error(L, key, named) end
        if live(e) then count, strike_end = c, e end
      else
        state_error(L, key, named)
      end
    end
    local reset = 0
    if strike_end then reset = ceil_ms(strike_end * 1000 - now) end
    local j = { fields = { 0, r.strikes, math.max(r.strikes - count, 0), -1, reset }, window = r.duration_ms }
    -- The strike a denial of this call records.
    if count + 1 >= r.strikes then
      local until_ms = floor_ms(now) + r.duration_ms
      local left = until_ms * 1000 - now
      j.pending = { writes = { { 'SET', key, 'banned:' .. int(until_ms), 'PXAT', until_ms } },
        binds = { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) } }
    else
      local ends = strike_end or (floor_ms(now) + r.window_ms)
      j.pending = { writes = { { 'SET', key, 'strikes:' .. int(count + 1) .. ':' .. int(ends), 'PXAT', ends } } }
    end
    return j
  end
  -- An allowed call leaves the key as it is.
  function L.write()
    return nil
  end
  -- A denied call records a strike (not a peek, a refund or a forced call).
  function L.penalty(r, pending, cost, mode)
    if cost == 0 or mode ~= 'take' then return nil end
    return pending
  end
  return L
end)()

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

-- f(...) for rule i of a call: RL.ALL names the rule in the error (not in WRONGTYPE or
-- OOM, which are the server's); a single command's errors pass as they are.
local function rule_step(call, i, f, ...)
  if call.shape ~= 'all' then return f(...) end
  local ok, res = pcall(f, ...)
  if ok then return res end
  local msg = message(res)
  if type(msg) ~= 'string' or string.match(msg, '^WRONGTYPE ') or string.match(msg, '^OOM ') then
    error(res, 0)
  end
  fail('ERR rule ' .. int(i) .. ' (' .. call.rules[i].L.kind .. '): ' .. string.gsub(msg, '^ERR ', '', 1))
end

-- Run a parsed call of several keys, as the module does: `call` = { shape = 'each' |
-- 'all', keys = the key names, rules = list of { k = key index, L = limiter, r = rule },
-- cost, at }. Open every key, judge every rule, decide all or nothing, write every
-- key (nothing at all when RL.ALL is denied), reply with the binding rule's numbers.
local function run_call(call)
  local now = now_us(call.at)
  local keys, rules, mode = call.keys, call.rules, call.mode or 'take'
  local opened = {}
  for i, rule in ipairs(rules) do
    opened[rule.k] = rule_step(call, i, open_key, rule.L, keys[rule.k])
  end
  give_token(call, now)
  local judged = {}
  local function judge(i)
    local rule = rules[i]
    judged[i] = rule_step(call, i, rule.L.judge, rule.r, opened[rule.k], keys[rule.k], true, now, call.cost, mode)
    return judged[i]
  end
  -- Gates first (the BAN rule): one that denies ends the call, the other rules not
  -- judged and nothing written; it binds.
  local gates_only = true
  for i, rule in ipairs(rules) do
    if rule.L.gate then
      if judge(i).retry then
        local reply = judged[i].fields
        reply[6], reply[7] = i, keys[rule.k]
        -- The other rules, not judged, give their own field as in any denial (nil).
        for _, other in ipairs(rules) do
          if other.L.reply_field then
            reply[8] = false
            break
          end
        end
        return reply
      end
    else
      gates_only = false
    end
  end
  -- The binding rule: the denying one with the largest retry (ties: the first), else
  -- the one forced over its limit with the largest retry, else the one with the least
  -- remaining (ties: the first). A gate that allows binds only a call of gates.
  local deny, over, least, full = nil, nil, nil, 0
  for i, rule in ipairs(rules) do
    local j = judged[i] or judge(i)
    if not rule.L.gate or gates_only then
      if j.over then
        if not over or j.retry > judged[over].retry then over = i end
      elseif j.retry then
        if not deny or j.retry > judged[deny].retry then deny = i end
      else
        if j.fields[3] <= 0 then full = math.max(full, j.fields[5] * 1000) end
        if not least or j.fields[3] < judged[least].fields[3] then least = i end
      end
    end
  end
  local blocked = deny ~= nil
  local bind = deny or over or least
  local reply = judged[bind].fields
  if judged[bind].over then
    -- Forced over: a request of cost 1 fits when every rule has room again.
    reply[4] = math.max(1, ceil_ms(math.max(judged[bind].retry, full)))
  end
  -- Every key's writes first (a key that would be full refuses the whole request
  -- before anything is written), then the writes. RL.ALL's denial writes nothing but
  -- a penalty (a strike), which binds when it starts a ban.
  local writes = {}
  if not blocked or call.shape ~= 'all' then
    for i, rule in ipairs(rules) do
      local res = rule_step(call, i, rule.L.write, rule.r, keys[rule.k], judged[i].pending, not blocked, now,
        call.cost)
      if res then
        for _, c in ipairs(res) do writes[#writes + 1] = c end
      end
    end
  else
    for i, rule in ipairs(rules) do
      local p = rule.L.penalty and rule.L.penalty(rule.r, judged[i].pending, call.cost, mode)
      if p then
        for _, c in ipairs(p.writes) do writes[#writes + 1] = c end
        if p.binds then reply, bind = p.binds, i end
      end
    end
  end
  for _, c in ipairs(writes) do redis.call(unpack(c)) end
  if call.shape == 'each' then
    reply[6] = keys[rules[bind].k]
    reply[7] = judged[bind].window
  else
    reply[6] = bind
    reply[7] = keys[rules[bind].k]
    -- A rule's own field (a LEASE rule's id or nil), whatever the binding rule.
    for i, rule in ipairs(rules) do
      if rule.L.reply_field then
        reply[8] = rule.L.reply_field(judged[i].pending, not blocked)
        break
      end
    end
  end
  return reply
end

-- The error of a call with the wrong number of keys: it names the function (or the
-- script, which has the function's name) and the number of keys it takes.
local function keys_error(name, takes, got)
  fail("ERR wrong number of keys for '" .. name .. "': it takes " .. takes .. ', got ' .. int(got))
end

-- The keys of a call with numkeys (FCALL's or EVALSHA's): from 1 to `max`, each at most
-- once.
local function check_keys(keys, max, name)
  if #keys < 1 or #keys > max then keys_error(name, '1 to ' .. int(max), #keys) end
  local seen_key = {}
  for _, key in ipairs(keys) do
    if seen_key[key] then fail("ERR key '" .. echo(key) .. "' given more than once") end
    seen_key[key] = true
  end
end

-- The errors a wrong numkeys can explain (the module's numkeys_hint takes the same).
local NUMKEYS_HINTED = {
  "^ERR unknown option '", "^ERR unknown rule '", '^ERR at least one LIMIT window limit is needed$',
  "^ERR key %d+ '.*' is named by no rule",
}

-- A call with numkeys, parsed by `parse(keys, args)` (which raises the call's error and
-- writes nothing). When it fails with an error that a wrong numkeys explains, and the
-- same arguments parse with another number of keys (the nearest first, fewer before
-- more, up to `max`), the error says which, as the module's does.
local function with_numkeys_hint(parse, keys, args, max)
  local ok, res = pcall(parse, keys, args)
  if ok then return res end
  local msg = message(res)
  local hinted = false
  for _, pattern in ipairs(NUMKEYS_HINTED) do
    if type(msg) == 'string' and string.find(msg, pattern) then hinted = true end
  end
  if not hinted then error(res, 0) end
  local all = {}
  for _, k in ipairs(keys) do all[#all + 1] = k end
  for _, a in ipairs(args) do all[#all + 1] = a end
  local given, most = #keys, math.min(max, #all)
  for d = 1, most do
    for _, meant in ipairs({ given - d, given + d }) do
      if meant >= 1 and meant <= most then
        local k2, a2 = {}, {}
        for i = 1, #all do
          if i <= meant then k2[#k2 + 1] = all[i] else a2[#a2 + 1] = all[i] end
        end
        if pcall(parse, k2, a2) then
          if meant < given then
            fail('ERR numkeys is ' .. int(given) .. " but '" .. echo(all[meant + 1]) .. "' starts the arguments after "
              .. int(meant) .. (meant == 1 and ' key' or ' keys') .. ': did you mean numkeys ' .. int(meant) .. '?')
          end
          fail('ERR numkeys is ' .. int(given) .. " but '" .. echo(all[given + 1]) .. "' reads as a key: did you mean numkeys "
            .. int(meant) .. '?')
        end
      end
    end
  end
  error(res, 0)
end

-- The rules of RL.ALL by keyword.
local RULES = { FIXED = FIXED, GCRA = GCRA, MULTI = MULTI, SLIDING = SLIDING, LOG = LOG, LEASE = LEASE, BAN = BAN }

local ALL_OPTIONS = {
  COST = true, AT = true, ALIGN = true, DELAY = true, BUCKETS = true, META = true, LIMIT = true,
  ID = true, REFUND = true, FORCE = true,
}

local CALL_OPTIONS = { COST = true, AT = true, REFUND = true, FORCE = true }

-- RL.ALL: numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms] [ID id]
-- [REFUND|FORCE], with the rules FIXED i limit window [ALIGN] | GCRA i max_burst count
-- period | MULTI i LIMIT window limit [...] [ALIGN] | SLIDING i LIMIT window limit [...]
-- [BUCKETS n] | LOG i limit window [META value] | LEASE i limit ttl | BAN i strikes
-- window duration, each naming its key by its 1-based position among the keys.
-- Each rule is judged by the same limiter as its own command, on the same state; the
-- call is allowed iff every rule allows, and a denial writes nothing.
local function all_parse(keys, args, name)
  if 1 + #keys + #args < 4 then
    arity_error('RL.ALL', 'RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE]')
  end
  check_keys(keys, MAX_ALL_KEYS, name)
  local rules, taken = {}, {}
  local o = { cost = 1 }
  local function in_rule(index, kind, res)
    fail('ERR rule ' .. int(index) .. ' (' .. kind .. '): ' .. string.gsub(message(res), '^ERR ', '', 1))
  end
  local i = 1
  while i <= #args do
    local w = string.upper(args[i])
    local index = #rules + 1
    if CALL_OPTIONS[w] or w == 'ID' then
      -- The call's options: COST, AT, REFUND, FORCE, and those its rules take from the
      -- call (ID).
      local accepts = {}
      for k in pairs(CALL_OPTIONS) do accepts[k] = true end
      for _, rule in ipairs(rules) do
        for k in pairs(rule.L.call_options or {}) do accepts[k] = true end
      end
      o = parse_options(args, i, accepts, false, function(word)
        if RULES[string.upper(word)] then fail('ERR COST and AT come after every rule') end
      end)
      break
    end
    if ALL_OPTIONS[w] then
      -- An option after a rule that does not take it.
      local last = rules[#rules]
      local why = (w == 'DELAY') and 'DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)'
        or ('option ' .. w .. ' does not belong to this rule')
      in_rule(last and #rules or 1, last and last.L.kind or 'RL.ALL', why)
    end
    local L = RULES[w]
    if not L then
      fail("ERR unknown rule '" .. echo(args[i]) .. "': a rule is BAN, FIXED, GCRA, LEASE, LOG, MULTI or SLIDING"
        .. ' followed by its key\'s position (COST and AT come after the rules)')
    end
    local raw = args[i + 1] or ''
    local ok, position = pcall(parse_int, 'position', raw, 1)
    if not ok or position > #keys then
      in_rule(index, L.kind, "invalid key position '" .. echo(raw) .. "': must be an integer from 1 to "
        .. int(#keys) .. " (the keys' places after numkeys)")
    end
    if taken[position] then
      in_rule(index, L.kind, 'key ' .. int(position) .. ' is already named by rule ' .. int(taken[position])
        .. ': one rule per key')
    end
    local ok2, res = pcall(function()
      if #args - (i + 1) < L.nargs then
        fail('ERR wrong number of arguments for a ' .. L.kind .. ' rule (syntax: ' .. L.rule_syntax .. ')')
      end
      local p = L.parse_args(args, i + 2)
      local ro, next_i = parse_options(args, i + 2 + L.nargs, L.options, true)
      ro.cost = 1
      return { r = L.build(p, ro), next = next_i }
    end)
    if not ok2 then in_rule(index, L.kind, res) end
    taken[position] = index
    rules[index] = { k = position, L = L, r = res.r }
    i = res.next
  end
  for k = 1, #keys do
    if not taken[k] then
      fail('ERR key ' .. int(k) .. " '" .. echo(keys[k]) .. "' is named by no rule: every key needs exactly one rule")
    end
  end
  -- At most one penalty box per call.
  local gate
  for index, rule in ipairs(rules) do
    if rule.L.gate then
      if gate then in_rule(index, rule.L.kind, 'at most one BAN rule per call') end
      gate = index
    end
  end
  local mode = settle_mode(o)
  for index, rule in ipairs(rules) do
    if rule.L.call_opts then
      local ok, res = pcall(rule.L.call_opts, rule.r, o)
      if not ok then in_rule(index, rule.L.kind, res) end
    end
    local ok, res = pcall(rule.L.check_cost, rule.r, o.cost, mode)
    if not ok then in_rule(index, rule.L.kind, res) end
  end
  return { shape = 'all', keys = keys, rules = rules, cost = o.cost, at = o.at, mode = mode }
end

local function all_command(keys, args, name)
  return run_call(with_numkeys_hint(function(ks, as) return all_parse(ks, as, name) end, keys, args, MAX_ALL_KEYS))
end

local function rl_all(keys, args)
  return run(all_command, keys, args, 'rl_all')
end

return rl_all(KEYS, ARGV)

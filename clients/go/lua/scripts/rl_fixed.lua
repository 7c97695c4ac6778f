-- rl_fixed: the Lua twin of RL.FIXED as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.FIXED's keys and the rest of its arguments in the same order, as
-- `FCALL rl_fixed ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1

local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds

local MAX_AT_MS = 4102444800000 -- 2100-01-01

local MAX_DURATION_MS = 315360000000 -- 3650 days

local MAX_WINDOWS = 16 -- LIMITs per call (RL.MULTI)

local MAX_BUCKETS = 100 -- buckets per window (RL.SLIDING)

local MAX_META_LEN = 256 -- bytes of a META value (RL.LOG)

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

-- The options of a call that gives none (read, never written).
local NO_OPTIONS = { cost = 1 }

-- A single-key command: `FCALL name 1 key <its arguments>` (or EVALSHA of its script).
local function single_command(keys, args, L, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  if #args < L.nargs then arity_error(L.command, L.syntax) end
  local p = L.parse_args(args, 1)
  local fifth = args[1 + L.nargs]
  if L.quantity_fifth and fifth and pcall(parse_int, 'quantity', fifth, 0) then
    -- redis-cell's quantity as a fifth argument: RL.GCRA takes it as COST n.
    fail("ERR unknown option '" .. echo(fifth) .. "': RL.GCRA takes redis-cell's quantity as COST "
      .. echo(fifth) .. ' (or call CL.THROTTLE, which takes it fifth)')
  end
  local o = NO_OPTIONS
  if #args > L.nargs then o = parse_options(args, 1 + L.nargs, L.accepts, false) end
  local mode = settle_mode(o)
  local r
  if mode == 'take' then
    r = L.build(p, o)
  else
    -- A refund or a forced request of any cost can be settled: no capacity check.
    local cost = o.cost
    o.cost = 0
    r = L.build(p, o)
    o.cost = cost
  end
  L.check_cost(r, o.cost, mode)
  local j = run_one(L, keys[1], r, o.cost, o.at, mode)
  local reply = j.fields
  if j.booking then reply[6] = j.booking end
  if L.reply_field then reply[6] = L.reply_field(j.pending, not j.retry) end
  return reply
end

local function rl_fixed(keys, args)
  return run(single_command, keys, args, FIXED, 'rl_fixed')
end

return rl_fixed(KEYS, ARGV)

#!lua name=ratelimit
-- redis-ratelimit: the Lua twins of the RL.* commands, as one Redis Functions library.
--
--   redis-cli FUNCTION LOAD REPLACE "$(cat lua/ratelimit.lua)"
--   redis-cli FCALL rl_gcra 1 rl:user:42 2 1 10s
--
-- One function per command:
--   rl_fixed, rl_gcra, cl_throttle, rl_lease, rl_release, rl_log, rl_multi,
--   rl_sliding, rl_all, rl_bulkexpire
-- with the command's keys as the function's keys, the rest of its arguments in the same
-- order; the same replies, error texts and state as the command, so the two can be
-- mixed on one key. The self-contained scripts in lua/scripts/ (one per function, for
-- EVAL/EVALSHA where FUNCTION is not allowed) are made from the same sources.
--
-- Written by lua/build.py from lua/src/ (the shared part, then one file per limiter in
-- lua/src/limiters/): edit those, then run `python3 lua/build.py` (a test fails when
-- this file is stale). docs/lua-twins.md describes the layout.
--
-- Lua numbers are doubles: every integer here stays below 2^53, where they are exact,
-- as the module's counts do (at most 2^53 - 1), so both give the same replies and errors.

-- True in the library, false in a script (lua/build.py writes both).
local LIBRARY = true

-- lua/src/bounds.lua

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1
local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds
local MAX_AT_MS = 4102444800000 -- 2100-01-01
local MAX_DURATION_MS = 315360000000 -- 3650 days
local MAX_KEYS = 64 -- keys per call (RL.MULTI)
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

-- The smallest value RL.GCRA stores: a time in µs no earlier than the earliest AT (RL.FIXED
-- refuses a count that can only be such a time).
local MIN_TAT_US = MIN_AT_MS * 1000

-- lua/src/errors.lua

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

-- lua/src/args.lua

-- Reading arguments: counts, durations, AT, the options after a command's (or a rule's)
-- positional arguments, and how a request settles (REFUND, FORCE, UPTO).
--
-- These run on every call. The common case builds nothing, and an error's text (and
-- what it needs) is built only when there is an error.

-- What the library, which lives as long as the server, remembers from call to call: the
-- counts and durations it has read (at most 256 texts of each: a call reads its limits
-- and windows without parsing them again), the last second of the clock (keys.lua), what
-- a call keeps of its rules (call.lua) and the calls it has parsed (commands.lua). A
-- script starts afresh on every call and remembers nothing: there MEMO is false.
local MEMO = LIBRARY and {
  counts = { 0 }, -- text -> count, and how many at [1]
  durations = { 0 }, -- text -> ms, and how many at [1]
  clock = { '', 0 }, -- the last second TIME gave, as text and in µs
  records = {}, -- rule i -> its record in the call that runs
  calls = { n = 0 }, -- see recalled
}

-- A duration's unit in ms (nil: not a unit); a bare number is seconds.
local function unit_ms(unit)
  if unit == '' or unit == 's' then return 1000 end
  if unit == 'm' then return 60000 end
  if unit == 'ms' then return 1 end
  if unit == 'h' then return 3600000 end
  if unit == 'd' then return 86400000 end
  return nil
end

-- The common case of a count: up to 15 digits (always below 2^53) and at least `min`;
-- nil otherwise (parse_int then says why).
local function plain_count(v, min)
  local n = MEMO and MEMO.counts[v]
  if n then
    if n >= min then return n end
    return nil
  end
  if #v == 0 or #v > 15 or string.find(v, '%D') then return nil end
  n = tonumber(v)
  local counts = MEMO and MEMO.counts
  if counts and counts[1] < 256 then
    counts[v] = n
    counts[1] = counts[1] + 1
  end
  if n < min then return nil end
  return n
end

-- Cold: parse a count (a signed decimal integer from min to 2^53 - 1), as the module
-- does; an error when it is not one.
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
local function parse_duration(what, v)
  local known = MEMO and MEMO.durations[v]
  if known then return known end
  local digits, unit = string.match(v, '^(%d+)(%a*)$')
  local per = digits and unit_ms(unit)
  if per and #digits <= 12 then
    local n = tonumber(digits)
    if n > 0 and n * per <= MAX_DURATION_MS then
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
    if #sig > 12 or n * per > MAX_DURATION_MS then
      why = 'must be at most 10 years (3650d)'
    elseif n > 0 then
      return n * per
    end
  end
  fail('ERR invalid ' .. what .. " '" .. echo(v) .. "': " .. why)
end

-- Cold: AT's value, a time in ms.
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

-- Cold: whether v is written as a duration with a unit (1m, 500ms): in the place of a count,
-- the sign of two arguments given in the wrong order.
local function looks_like_a_duration(v)
  return string.match(v, '^%d+ms$') ~= nil or string.match(v, '^%d+[smhd]$') ~= nil
end

-- Cold: the error of a limit `v` that is not an integer from 1 to `max` (RL.LOG,
-- RL.LEASE): `what` follows the bounds, and `order` (the command's arguments) when `v` is
-- written as a duration.
local function limit_error(v, max, what, order)
  local msg = "ERR invalid limit '" .. echo(v) .. "': must be an integer from 1 to " .. int(max) .. what
  if looks_like_a_duration(v) then msg = msg .. ' (' .. order .. ')' end
  fail(msg)
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
      for _, k in ipairs({ 'COST', 'AT', 'ALIGN', 'DELAY', 'BUCKETS', 'META', 'LIMIT', 'ID', 'REFUND', 'FORCE', 'UPTO' }) do
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
    elseif w == 'REFUND' or w == 'FORCE' or w == 'UPTO' then
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

-- The options of a call that gives none (read, never written).
local NO_OPTIONS = { cost = 1 }

-- The options of a rule that takes none of its own (read, never written).
local NO_RULE_OPTIONS = {}

-- How a request settles, from REFUND, FORCE and UPTO: 'take' (the usual), 'refund',
-- 'force' or 'upto' (as much of COST as fits now); at most one of them, none with
-- DELAY, and UPTO with a cost of at least 1; a peek (COST 0) takes. The errors in the
-- module's order (Mode::of).
local function settle_mode(o)
  if o.REFUND and o.FORCE then
    fail('ERR REFUND and FORCE cannot be given together: a request is either given back or forced')
  end
  if o.UPTO and (o.REFUND or o.FORCE) then
    fail('ERR UPTO cannot be given with ' .. (o.REFUND and 'REFUND' or 'FORCE')
      .. ': UPTO takes as much of COST as fits now')
  end
  local mode = (o.REFUND and 'refund') or (o.FORCE and 'force') or (o.UPTO and 'upto') or 'take'
  if mode == 'upto' then
    if o.delay then fail('ERR UPTO cannot be given with DELAY: UPTO takes as much of COST as fits now') end
    if o.cost == 0 then fail('ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)') end
  elseif mode ~= 'take' and o.delay then
    fail('ERR ' .. string.upper(mode) .. ' cannot be given with DELAY: a settled request is not booked')
  end
  -- COST 0 with either flag is the peek COST 0 is without it.
  if o.cost == 0 then return 'take' end
  return mode
end

-- lua/src/keys.lua

-- Time, and reading keys as the limiters keep them.

-- The server clock in µs (TIME, as the module reads it). The library remembers the
-- last second it read: a call converts only the microseconds.
local function clock_us()
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
local function floor_ms(us)
  return (us - us % 1000) / 1000
end
local function ceil_ms(us)
  us = us + 999
  return (us - us % 1000) / 1000
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

-- The same for a number that a pattern's %d+ (or [%d]*) captured: at most 15 digits
-- are read as they are.
local function stored_digits(s, max)
  if #s == 0 or #s > 15 then return stored_number(s, max) end
  local n = tonumber(s)
  if n > max then return nil end
  return n
end

-- Open a key as limiter L keeps it: a string's value (nil when missing) and, when
-- L.expiry, its absolute expiry in ms (nil: no TTL); a sorted set: its number of
-- members (false when missing). Another type: WRONGTYPE.
local function open_key(L, key)
  if L.storage == 'string' then
    -- A value is a string or false; an error, a table (a string's `err` is nil).
    local v = redis.pcall('GET', key)
    if not v then return v end
    if v.err then fail(WRONGTYPE) end
    if not L.expiry then return v end
    local exp = redis.call('PEXPIRETIME', key)
    if exp < 0 then return v, nil end
    return v, exp
  end
  -- A count, or an error (a table).
  local card = redis.pcall('ZCARD', key)
  if type(card) ~= 'number' then fail(WRONGTYPE) end
  if card == 0 then return false end
  return card
end

-- lua/src/call.lua

-- The one loop of a call: every limiter command (one key, several keys, RL.ALL) runs
-- its parsed rules through run_call, as the module's Call::run does.
--
-- A limiter is a table of its parts (one file each, lua/src/limiters/<kind>.lua):
--   kind, command, expected        its rule keyword (RL.ALL), its command, its state in
--                                  errors
--   storage, expiry                'string' or 'zset'; whether a string's expiry is read
--   nargs, options, accepts        positional arguments after the key, the options of
--                                  its rule (in RL.ALL), those of its command (with
--                                  COST, AT, REFUND, FORCE, UPTO and the command's own:
--                                  DELAY)
--   syntax, rule_syntax            its command's syntax line and its rule's
--   parse_args(args, i)            the positional arguments at args[i...]: the rule, a
--                                  table whose field L is the limiter
--   build(r, o)                    the rule, completed from the options
--   check_cost(r, cost, mode)      a cost the rule can never settle: an error (above the
--                                  capacity when taking; a lease's other than 0 or 1);
--                                  then what is checked after the cost (GCRA's DELAY)
--   judge(r, key, named, state, exp, now, cost, mode, token)
--                                  the rule at `now` (µs) on its key, opened by open_key
--                                  (state, exp); mode is 'take', 'refund' (REFUND) or
--                                  'force' (FORCE): UPTO is judged as 'take' of the
--                                  cost it takes; `named`: errors name the key. Returns
--                                    j        the five reply fields j[1..5]
--                                    retry    µs to wait when denied (nil: allowed)
--                                    allow    the write of an allowed call
--                                    deny     the write of a denied call (a counter
--                                             without TTL gets one), not in RL.ALL
--                                    over     true: forced over the limit (retry: until
--                                             a request of cost 1 fits), written all the
--                                             same
--                                  A write is one command ({ 'SET', key, ... }) for a
--                                  string key, a list of them for a sorted set. What
--                                  some limiters add goes in j's fields: extra (the
--                                  command's sixth field, RL.ALL's eighth: a booking, a
--                                  lease id; false: nil), window (the binding window of
--                                  RL.MULTI, RL.SLIDING), penalty (the write of an RL.ALL
--                                  call another rule denied: a BAN rule's strike) and
--                                  binds (the reply then)
--   write(r, key, j, allowed, now, cost)
--                                  optional: the write, made once the call is settled
--                                  (raising before any write when the key would be full)
--   gate                           judged first: its denial ends the call (BAN); at
--                                  most one per call
--   reply_field                    RL.ALL's eighth field is this rule's extra (LEASE;
--                                  the first such rule's)
--   wants_token(r), make_token(now, keys, states)
--                                  a rule that records a name it was not given (a lease
--                                  without ID): one name per call, unused on its keys
--                                  (states: what open_key gave for each)
-- and the file defines its command's function (rl_<command>), which the build registers.

-- Cold: the error `err` (an error, or its text) of rule i of RL.ALL, a rule of `kind`:
-- its text, naming the rule.
local function rule_error(i, kind, err)
  fail('ERR rule ' .. int(i) .. ' (' .. kind .. '): ' .. string.gsub(message(err), '^ERR ', '', 1))
end

-- Cold: rule i's step f(...) in RL.ALL: the error names the rule (not WRONGTYPE or OOM, which
-- are the server's).
local function rule_step(i, r, f, ...)
  local ok, a, b, c, d, e = pcall(f, ...)
  if ok then return a, b, c, d, e end
  local msg = message(a)
  if type(msg) ~= 'string' or string.match(msg, '^WRONGTYPE ') or string.match(msg, '^OOM ') then
    error(a, 0)
  end
  rule_error(i, r.L.kind, msg)
end

-- Run a parsed call: `shape` is 'one' (a command of one key), 'each' (RL.MULTI,
-- RL.SLIDING: rule i on key i) or 'all' (RL.ALL: rule i on key positions[i]); `rules`
-- the rules in the order given; in RL.ALL, `gate` the index of its gate (nil: none) and
-- `field` that of the first rule with a reply_field (nil: none). Open every key, judge
-- every rule (the gate first), decide all or nothing and the binding rule, write every
-- key (RL.ALL's denial writes nothing but a penalty), reply with the binding rule's
-- numbers. With UPTO (mode 'upto') the call is the call of cost k, the largest up to
-- `cost` that a peek says remains (1 without a peek for a cost of 1, all of it for a
-- call of its gate alone), or of cost 1 denied; its reply ends with k (0 when denied),
-- as the module's Call::resolve_up_to.
local function run_call(shape, keys, rules, positions, cost, at, mode, gate, field)
  local now = at and at * 1000 or clock_us()
  local n, all = #rules, shape == 'all'
  -- What the call keeps of each rule (its key's state and expiry, its judgement, its
  -- write). The library reuses them from call to call (one call runs at a time, and each
  -- call sets every field of the rules it has); a script makes its own.
  local records = MEMO and MEMO.records or {}
  -- Open every key (a key of another type is an error before any rule is judged).
  local token, wanting, cards = nil, nil, nil
  for i = 1, n do
    local r, rec = rules[i], records[i]
    if not rec then
      rec = {}
      records[i] = rec
    end
    local L = r.L
    if all then
      rec.state, rec.exp = rule_step(i, r, open_key, L, keys[positions[i]])
    else
      rec.state, rec.exp = open_key(L, keys[i])
    end
    rec.j = nil
    if L.wants_token and cost > 0 and mode ~= 'refund' and L.wants_token(r) then
      wanting, cards = wanting or {}, cards or {}
      wanting[#wanting + 1] = keys[all and positions[i] or i]
      cards[#wanting] = rec.state
      token = L.make_token
    end
  end
  -- One name for the rules that record one they were not given, unused on their keys.
  if wanting then token = token(now, wanting, cards) end
  -- UPTO (mode 'upto'): a peek first (COST 0) when the cost is above 1, whose
  -- remaining is the cost taken, k; then the call of that cost, or of cost 1 denied.
  local upto, peeking = mode == 'upto', false
  if upto then mode, peeking = 'take', cost > 1 end
  local named = shape ~= 'one'
  -- A call of its gate alone: the gate binds.
  local gate_alone = gate and n == 1
  local deny, deny_retry, over, over_retry, least, least_left, full
  repeat
    local judged = peeking and 0 or cost
    local gated = false
    if gate then
      -- The gate (the BAN rule) is judged first: when it denies, it ends the call, the
      -- other rules not judged and nothing written; it binds.
      local r, rec, key = rules[gate], records[gate], keys[positions[gate]]
      local j, retry = rule_step(gate, r, r.L.judge, r, key, true, rec.state, rec.exp, now, judged, mode, token)
      rec.j, rec.retry, rec.allow, rec.deny, rec.over = j, retry, nil, nil, nil
      if retry and peeking then
        gated = true
      elseif retry then
        j[6], j[7] = gate, key
        -- The other rules, not judged, give their own field as in any denial (nil).
        if field then j[8] = false end
        if upto then j[#j + 1] = 0 end
        return j
      end
    end
    -- The binding rule: the denying one with the largest retry (ties: the first), else
    -- the one forced over its limit with the largest retry, else the one with the least
    -- remaining (ties: the first). A gate that allows binds only a call of gates.
    deny, deny_retry, over, over_retry, least, least_left, full = nil, 0, nil, 0, nil, 0, 0
    for i = 1, gated and 0 or n do
      local r, rec = rules[i], records[i]
      local L = r.L
      local j = rec.j
      if not j then
        local retry, allow, denial, forced
        if all then
          j, retry, allow, denial, forced =
            rule_step(i, r, L.judge, r, keys[positions[i]], true, rec.state, rec.exp, now, judged, mode, token)
        else
          j, retry, allow, denial, forced = L.judge(r, keys[i], named, rec.state, rec.exp, now, judged, mode, token)
        end
        rec.j, rec.retry, rec.allow, rec.deny, rec.over = j, retry, allow, denial, forced
      end
      if i ~= gate or gate_alone then
        local retry = rec.retry
        if rec.over then
          if not over or retry > over_retry then over, over_retry = i, retry end
        elseif retry then
          if not deny or retry > deny_retry then deny, deny_retry = i, retry end
        else
          if j[3] <= 0 and j[5] * 1000 > full then full = j[5] * 1000 end
          if not least or j[3] < least_left then least, least_left = i, j[3] end
        end
      end
    end
    local again = peeking
    if peeking then
      -- What the peek says remains (nothing when it is denied; all of it for gates).
      local k = 0
      if not (gated or deny) then k = gate_alone and cost or math.min(math.max(least_left, 0), cost) end
      cost, peeking = math.max(k, 1), false
      for i = 1, n do records[i].j = nil end
    end
  until not again
  local allowed = not deny
  local bind = deny or over or least
  local reply = records[bind].j
  if bind == over then
    -- Forced over: a request of cost 1 fits when every rule has room again.
    reply[4] = math.max(1, ceil_ms(math.max(over_retry, full)))
  end
  -- Every key's write first (a key that would be full refuses the whole request before
  -- anything is written), then the writes. RL.ALL's denial writes nothing but a
  -- penalty (a strike), which binds when it starts a ban.
  if allowed or not all then
    for i = 1, n do
      local r, rec = rules[i], records[i]
      local write = r.L.write
      if write and all then
        rec.write = rule_step(i, r, write, r, keys[positions[i]], rec.j, allowed, now, cost)
      elseif write then
        rec.write = write(r, keys[i], rec.j, allowed, now, cost)
      elseif allowed then
        rec.write = rec.allow
      else
        rec.write = rec.deny
      end
    end
  else
    for i = 1, n do
      local rec = records[i]
      rec.write = rec.j.penalty
      if rec.j.binds then reply, bind = rec.j.binds, i end
    end
  end
  for i = 1, n do
    local w = records[i].write
    if w and rules[i].L.storage == 'string' then
      redis.call(unpack(w))
    elseif w then
      for k = 1, #w do redis.call(unpack(w[k])) end
    end
  end
  if shape == 'one' then
    if reply.extra ~= nil then reply[6] = reply.extra end
  elseif shape == 'each' then
    reply[6] = keys[bind]
    reply[7] = reply.window
  else
    reply[6] = bind
    reply[7] = keys[positions[bind]]
    -- A rule's own field (a LEASE rule's id or nil), whatever the binding rule.
    if field then reply[8] = allowed and records[field].j.extra or false end
  end
  if upto then reply[#reply + 1] = allowed and cost or 0 end
  return reply
end

-- lua/src/commands.lua

-- The shapes of the limiter commands: one key (RL.FIXED ...), numkeys keys under one
-- rule (RL.MULTI, RL.SLIDING) or each under its own (RL.ALL, all.lua); each parses its
-- call and hands it to run_call. A
-- limiter's file names its shape in its function:
--   local function rl_fixed(keys, args)
--     return run(single_command, keys, args, FIXED, 'rl_fixed')
--   end

-- The library remembers the calls it has parsed that give neither AT nor COST (at most
-- 256, in MEMO.calls), by command, number of keys and arguments: such a call is not
-- parsed again (its keys are still checked). A parsed call: { rules, positions, cost,
-- at, mode, gate, field } (run_call's arguments of those names).

-- Cold (the library only): the parsed call of `what` (a limiter, or 'all') remembered
-- for these arguments, or nil.
local function recalled(what, nkeys, args)
  local node = MEMO.calls[what]
  node = node and node[nkeys]
  node = node and node[#args]
  for i = 1, #args do node = node and node[args[i]] end
  return node
end

-- Cold (the library only): remember a parsed call, while there is room.
local function remember(what, nkeys, args, call)
  local calls = MEMO.calls
  if calls.n >= 256 then return end
  calls.n = calls.n + 1
  local node, path = calls, { what, nkeys, #args }
  for i = 1, #args do path[3 + i] = args[i] end
  for i = 1, #path - 1 do
    local k = path[i]
    node[k] = node[k] or {}
    node = node[k]
  end
  node[path[#path]] = call
end

-- A single-key command's arguments, parsed: the call's rules, cost, AT and mode, and
-- whether to remember it.
local function single_parse(args, L)
  local nargs, given = L.nargs, #args
  if given < nargs then arity_error(L.command, L.syntax) end
  local r = L.parse_args(args, 1)
  local o = NO_OPTIONS
  if given > nargs then
    local fifth = args[1 + nargs]
    if L.quantity_fifth and pcall(parse_int, 'quantity', fifth, 0) then
      -- redis-cell's quantity as a fifth argument: RL.GCRA takes it as COST n.
      fail("ERR unknown option '" .. echo(fifth) .. "': RL.GCRA takes redis-cell's quantity as COST "
        .. echo(fifth) .. ' (or call CL.THROTTLE, which takes it fifth)')
    end
    o = parse_options(args, 1 + nargs, L.accepts, false)
  end
  local mode = 'take'
  if o ~= NO_OPTIONS then mode = settle_mode(o) end
  r = L.build(r, o)
  L.check_cost(r, o.cost, mode)
  return { r }, o.cost, o.at, mode, not (o.AT or o.COST)
end

-- A single-key command: `FCALL name 1 key <its arguments>` (or EVALSHA of its script).
local function single_command(keys, args, L, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  local call = MEMO and recalled(L, 1, args)
  if call then return run_call('one', keys, call[1], nil, call[3], call[4], call[5]) end
  local rules, cost, at, mode, again = single_parse(args, L)
  if MEMO and again then remember(L, 1, args, { rules, nil, cost, at, mode }) end
  return run_call('one', keys, rules, nil, cost, at, mode)
end

-- The keys of a call with numkeys (FCALL's or EVALSHA's): from 1 to `max`, each at most
-- once.
local function check_keys(keys, max, name)
  if #keys < 1 or #keys > max then keys_error(name, '1 to ' .. int(max), #keys) end
  if #keys == 1 then return end
  local seen_key = {}
  for _, key in ipairs(keys) do
    if seen_key[key] then fail("ERR key '" .. echo(key) .. "' given more than once") end
    seen_key[key] = true
  end
end

-- Cold: the errors a wrong numkeys can explain (the module's numkeys_hint takes the same).
local NUMKEYS_HINTED = {
  "^ERR unknown option '", "^ERR unknown rule '", '^ERR at least one LIMIT window limit is needed$',
  "^ERR key %d+ '.*' is named by no rule",
}

-- A call with numkeys, parsed by `parse(keys, args, ...)` (which raises the call's
-- error and writes nothing): its call, and whether to remember it. When it fails with an
-- error that a wrong numkeys explains, and the same arguments parse with another number
-- of keys (the nearest first, fewer before more, up to `max`), the error says which, as
-- the module's does.
local function with_numkeys_hint(parse, keys, args, max, ...)
  local ok, res, again = pcall(parse, keys, args, ...)
  if ok then return res, again end
  local msg = message(res)
  local hinted = false
  for _, pattern in ipairs(NUMKEYS_HINTED) do
    if type(msg) == 'string' and string.find(msg, pattern) then hinted = true end
  end
  if not hinted then error(res, 0) end
  local all = {}
  for _, k in ipairs(keys) do all[#all + 1] = k end
  for _, v in ipairs(args) do all[#all + 1] = v end
  local given, most = #keys, math.min(max, #all)
  for dist = 1, most do
    for _, meant in ipairs({ given - dist, given + dist }) do
      if meant >= 1 and meant <= most then
        local k2, a2 = {}, {}
        for i = 1, #all do
          if i <= meant then k2[#k2 + 1] = all[i] else a2[#a2 + 1] = all[i] end
        end
        if pcall(parse, k2, a2, ...) then
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

-- The arguments of RL.MULTI and RL.SLIDING, parsed: the call, and whether to remember it.
local function each_key_parse(ks, as, name, L)
  if 2 + #ks + #as < 6 then arity_error(L.command, L.syntax) end
  check_keys(ks, MAX_KEYS, name)
  local o = parse_options(as, 1, L.accepts, false)
  local mode = settle_mode(o)
  local r = L.build({}, o)
  L.check_cost(r, o.cost, mode)
  local rules = {}
  for k = 1, #ks do rules[k] = r end
  return { rules, nil, o.cost, o.at, mode }, not (o.AT or o.COST)
end

-- A command with numkeys (FCALL's): from 1 to `max` distinct keys, run as `shape`
-- ('each' or 'all', see run_call); its arguments parsed by parse(keys, args, name,
-- what) (which with_numkeys_hint explains), the call remembered under `what` (the
-- limiter, or 'all').
local function numkeys_command(keys, args, shape, parse, max, what, name)
  local call = MEMO and recalled(what, #keys, args)
  if call then
    check_keys(keys, max, name)
  else
    local again
    call, again = with_numkeys_hint(parse, keys, args, max, name, what)
    if MEMO and again then remember(what, #keys, args, call) end
  end
  return run_call(shape, keys, call[1], call[2], call[3], call[4], call[5], call[6], call[7])
end

-- The call shape of RL.MULTI and RL.SLIDING: numkeys from 1 to MAX_KEYS distinct keys,
-- then LIMIT window limit triples among the options, the same rule on every key.
local function each_key_command(keys, args, L, name)
  return numkeys_command(keys, args, 'each', each_key_parse, MAX_KEYS, L, name)
end

-- lua/src/windows.lua

-- What RL.MULTI and RL.SLIDING share: their rule is their LIMITs (and options), their
-- state one string per key of entries by window, their binding pair the denying window
-- that frees up last, else the one with the least remaining (ties: the first LIMIT).

-- A cost above the smallest LIMIT can never be allowed.
local function check_limits_cost(limits, cost)
  local smallest = limits[1][2]
  for _, lw in ipairs(limits) do
    if lw[2] < smallest then smallest = lw[2] end
  end
  if cost > smallest then cost_over(cost, 'limit', smallest) end
end

-- The parts of limiter L that follow from its windows: L.parse_state(key, named, raw)
-- (a key's entries, and the same by window), L.judge_window(r, entry, w, limit, now,
-- cost, mode) (a window's five fields, µs to wait when denied, and the window after
-- the request, nil when it keeps none), L.ends(e) (µs, or nil: counts nothing) and
-- L.encode(entries); and L.buckets_per_key, true when a key's windows also keep at most
-- MAX_BUCKETS_PER_KEY buckets between them (e.n each: RL.SLIDING).
-- A key without state: no entries (read, never written).
local NONE = {}

-- Entries in the order of their windows.
local function by_window(a, b)
  return a.w < b.w
end

local function limits_rule(L)
  function L.parse_args()
    return {}
  end
  function L.check_cost(r, cost, mode)
    if mode == 'take' then check_limits_cost(r.limits, cost) end
  end
  -- Judge every named window of a key. The judgement keeps what the write needs: the
  -- windows the key held (`entries`), its expiry (`exp`: nil when it lost its TTL, 0
  -- when there is no key) and the named windows after an allowed request (`updates`).
  -- The key's binding window: the denying one that frees up last, else the one with the
  -- least remaining (ties: the first LIMIT); `full`: the longest reset of the windows
  -- allowed with nothing remaining, in µs of whole ms.
  function L.judge(r, key, named, raw, exp, now, cost, mode)
    local entries, by_w = NONE, NONE
    if raw then entries, by_w = L.parse_state(key, named, raw) else exp = 0 end
    local f, retry, window, full, updates = nil, nil, nil, 0, {}
    local limits = r.limits
    for i = 1, #limits do
      local w, limit = limits[i][1], limits[i][2]
      local fields, wait, update = L.judge_window(r, by_w[w], w, limit, now, cost, mode)
      if not wait and fields[3] <= 0 and fields[5] * 1000 > full then full = fields[5] * 1000 end
      if wait then
        if not retry or wait > retry then f, retry, window = fields, wait, w end
      elseif not retry and (not f or fields[3] < f[3]) then
        f, window = fields, w
      end
      if update then updates[#updates + 1] = update end
    end
    local over
    if mode == 'force' and retry then
      -- Over: a request of cost 1 fits when every window has room again.
      retry, over = math.max(retry, full), true
      f[4] = math.max(1, ceil_ms(retry))
    end
    return { f[1], f[2], f[3], f[4], f[5], window = window, entries = entries, exp = exp, updates = updates },
      retry, nil, nil, over
  end
  -- The write of a key once the call is settled, as the module's multikey::write_windows:
  -- a peek writes nothing; a denial gives a key that lost its TTL the end of its last
  -- live window; an allowed request stores the named windows that still count with the
  -- others kept while they have not ended, raising before any write when the key would
  -- hold too many.
  function L.write(r, key, p, allowed, now, cost)
    if cost == 0 then return nil end
    if not allowed then
      if p.exp then return nil end
      local latest
      for i = 1, #p.entries do
        local ends = L.ends(p.entries[i])
        if ends and ends > now and (not latest or ends > latest) then latest = ends end
      end
      if latest then return { 'PEXPIREAT', key, ceil_ms(latest) } end
      return nil
    end
    local merged, latest, buckets = {}, 0, 0
    local updates, entries = p.updates, p.entries
    for i = 1, #updates do
      local e = updates[i]
      local ends = L.ends(e)
      if ends then
        merged[#merged + 1] = e
        buckets = buckets + (e.n or 0)
        if ends > latest then latest = ends end
      end
    end
    for i = 1, #entries do
      local e = entries[i]
      local ends = L.ends(e)
      if not r.named[e.w] and ends and ends > now then
        merged[#merged + 1] = e
        buckets = buckets + (e.n or 0)
        if ends > latest then latest = ends end
      end
    end
    if L.buckets_per_key and (#merged > MAX_WINDOWS_PER_KEY or buckets > MAX_BUCKETS_PER_KEY) then
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
      if p.exp ~= 0 then return { 'DEL', key } end
      return nil
    end
    if #merged > 1 then table.sort(merged, by_window) end
    return { 'SET', key, L.encode(merged), 'PXAT', ceil_ms(latest) }
  end
end

-- lua/src/limiters/ban.lua

-- RL.ALL's BAN rule: a penalty box, `strikes:<count>:<end_ms>` while a strike window
-- runs, `banned:<end_ms>` while a ban runs (docs/all.md). A gate: judged before the
-- other rules, and while a ban runs the call is denied there; a strike is its penalty,
-- the one write of a denied call. A rule of RL.ALL only: no command of its own.
local BAN = (function()
  local L = { kind = 'BAN', command = 'RL.ALL', storage = 'string', nargs = 3, gate = true,
    expected = 'a penalty box: strikes:<count>:<end_ms> or banned:<end_ms>', options = NO_RULE_OPTIONS,
    rule_syntax = 'BAN i strikes window duration' }
  function L.parse_args(args, i)
    local order = 'BAN i strikes window duration: the strikes come first'
    return { L = L, strikes = count_in_order('strikes', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]),
      duration_ms = parse_duration('duration', args[i + 2]) }
  end
  function L.build(r)
    return r
  end
  function L.check_cost()
  end
  function L.judge(r, key, named, raw, _, now, cost, mode)
    local count, strike_end = 0, nil
    local function live(e) return e * 1000 > now end
    if raw then
      local until_ms = string.match(raw, '^banned:(%d+)$')
      local c, e = string.match(raw, '^strikes:(%d+):(%d+)$')
      if until_ms then
        until_ms = stored_number(until_ms, MAX_END_MS)
        if not until_ms then state_error(L, key, named) end
        if live(until_ms) then
          local left = until_ms * 1000 - now
          if mode == 'refund' then
            return { 0, r.strikes, 0, -1, ceil_ms(left) }
          end
          return { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) }, left
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
    local j = { 0, r.strikes, math.max(r.strikes - count, 0), -1, reset }
    -- The strike a denial of this call records (not a peek, a refund or a forced call);
    -- an allowed call leaves the key as it is.
    if cost == 0 or mode ~= 'take' then return j end
    if count + 1 >= r.strikes then
      local until_ms = floor_ms(now) + r.duration_ms
      local left = until_ms * 1000 - now
      j.penalty = { 'SET', key, 'banned:' .. int(until_ms), 'PXAT', until_ms }
      j.binds = { 1, r.strikes, 0, math.max(1, ceil_ms(left)), ceil_ms(left) }
    else
      local ends = strike_end or (floor_ms(now) + r.window_ms)
      j.penalty = { 'SET', key, 'strikes:' .. int(count + 1) .. ':' .. int(ends), 'PXAT', ends }
    end
    return j
  end
  return L
end)()

-- lua/src/limiters/fixed.lua

-- RL.FIXED: a counter per window. State: a plain integer string (the count in the
-- current window) whose TTL ends the window.

-- The counter of one window at `now` (RL.FIXED's rules); also each pair of RL.MULTI.
-- `count`, `exp`: the stored count (nil: none) and its window's end in ms (nil: no
-- TTL). Returns the five reply fields (limited, limit, remaining, retry_after_ms,
-- reset_after_ms), the wait in µs when denied (nil: allowed), the count after the
-- request, the window's end, and whether the counter had no TTL.
local function fixed_window(limit, window_ms, align, count, exp, now, cost)
  local now_ms = (now - now % 1000) / 1000
  local ends, missing_ttl = now_ms + window_ms, false
  if align then ends = now_ms - now_ms % window_ms + window_ms end
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
    return 0, limit, limit - after, -1, reset, nil, after, ends, missing_ttl
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  local reset = ceil_ms(until_end)
  return 1, limit, remaining, math.max(1, reset), reset, until_end, after, ends, missing_ttl
end

-- Cold: REFUND on one window: the count goes down by `cost`, never below 0; the
-- window's end is kept; 0 left: the key goes. A window that has ended (or no key) is
-- not touched. The fields, and the write ('set' or 'del'; nil: none) with the count
-- and end.
local function fixed_refund(limit, window_ms, align, count, exp, now, cost)
  if not count or (exp and exp * 1000 <= now) then
    return 0, limit, limit, -1, 0, nil
  end
  local _, _, _, _, _, _, _, ends = fixed_window(limit, window_ms, align, count, exp, now, 0)
  local after = math.max(count - cost, 0)
  local reset = 0
  if after > 0 then reset = ceil_ms(math.max(ends * 1000 - now, 0)) end
  local remaining = math.max(limit - after, 0)
  if cost == 0 then return 0, limit, remaining, -1, reset, nil end
  if after == 0 then return 0, limit, remaining, -1, reset, 'del', after, ends end
  return 0, limit, remaining, -1, reset, 'set', after, ends
end

-- Cold: FORCE on one window: `cost` is counted whether it fits or not (at most
-- 2^53 - 1). The fields, the wait in µs when over the limit (nil: it fit), the count
-- and end.
local function fixed_force(limit, window_ms, align, count, exp, now, cost)
  local limited, _, remaining, retry_ms, reset, retry, after, ends =
    fixed_window(limit, window_ms, align, count, exp, now, cost)
  if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
  if retry then remaining = 0 end
  return limited, limit, remaining, retry_ms, reset, retry, after, ends
end

local FIXED = (function()
  local L = { kind = 'FIXED', command = 'RL.FIXED', storage = 'string', expiry = true, nargs = 2,
    expected = 'a non-negative integer counter', options = { ALIGN = true },
    accepts = { COST = true, AT = true, ALIGN = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'FIXED i limit window [ALIGN]' }
  function L.parse_args(args, i)
    local order = 'RL.FIXED key limit window: the limit comes first'
    return { L = L, limit = count_in_order('limit', args[i], 1, order),
      window_ms = parse_duration('window', args[i + 1]), align = false }
  end
  function L.build(r, o)
    r.align = o.align or false
    return r
  end
  L.check_cost = check_limit_cost
  function L.judge(r, key, named, raw, exp, now, cost, mode)
    local count
    if raw then
      count = #raw <= 19 and not string.find(raw, '%D') and tonumber(raw)
      if not count or count > MAX_SAFE_INTEGER then state_error(L, key, named) end
      -- A time RL.GCRA could have written, where the limit is below any such time:
      -- RL.GCRA's state (fixed::check_not_a_tat).
      if r.limit < MIN_TAT_US and count >= MIN_TAT_US then
        foreign_error(L, key, named, "what can only be RL.GCRA's state (a time in microseconds, above the limit)")
      end
    end
    if mode == 'take' then
      local limited, limit, remaining, retry_ms, reset, retry, after, ends, missing_ttl =
        fixed_window(r.limit, r.window_ms, r.align, count, exp, now, cost)
      -- The write of the call as this rule judged it: the count when allowed, the TTL a
      -- counter without one gets when denied; none for a peek.
      if cost == 0 then return { limited, limit, remaining, retry_ms, reset }, retry end
      if not retry then return { limited, limit, remaining, retry_ms, reset }, nil, { 'SET', key, after, 'PXAT', ends } end
      if missing_ttl then return { limited, limit, remaining, retry_ms, reset }, retry, nil, { 'PEXPIREAT', key, ends } end
      return { limited, limit, remaining, retry_ms, reset }, retry
    elseif mode == 'refund' then
      local limited, limit, remaining, retry_ms, reset, w, after, ends =
        fixed_refund(r.limit, r.window_ms, r.align, count, exp, now, cost)
      local allow
      if w == 'del' then allow = { 'DEL', key } end
      if w == 'set' then allow = { 'SET', key, after, 'PXAT', ends } end
      return { limited, limit, remaining, retry_ms, reset }, nil, allow
    end
    local limited, limit, remaining, retry_ms, reset, retry, after, ends =
      fixed_force(r.limit, r.window_ms, r.align, count, exp, now, cost)
    local allow
    if cost > 0 then allow = { 'SET', key, after, 'PXAT', ends } end
    return { limited, limit, remaining, retry_ms, reset }, retry, allow, nil, retry and true
  end
  return L
end)()

local function rl_fixed(keys, args)
  return run(single_command, keys, args, FIXED, 'rl_fixed')
end

-- lua/src/limiters/gcra.lua

-- RL.GCRA: a theoretical arrival time (TAT), in µs since the Unix epoch, whose TTL
-- follows it; and CL.THROTTLE, redis-cell's command over the same state.

-- A stored RL.GCRA TAT in µs, as the module reads it (gcra::parse_tat), or nil: the
-- module's own (1 to MAX_TAT_DIGITS digits of µs) or redis-cell's (19 digits of ns,
-- from 10^18), rounded up to the µs; at most MAX_TAT_US either way. A 19-digit number
-- is above 2^53, so it is read as text: its first 16 digits, plus 1 unless the last 3
-- are 000.
local function read_tat(s)
  if string.find(s, '%D') then return nil end
  local n
  if #s <= MAX_TAT_DIGITS then
    n = tonumber(s)
    if not n then return nil end
  elseif #s == 19 and string.sub(s, 1, 1) ~= '0' then
    n = tonumber(string.sub(s, 1, 16))
    if string.sub(s, 17) ~= '000' then n = n + 1 end
  else
    return nil
  end
  if n > MAX_TAT_US then return nil end
  return n
end

local GCRA = (function()
  local L = { kind = 'GCRA', command = 'RL.GCRA', storage = 'string', nargs = 3, quantity_fifth = true,
    expected = 'a theoretical arrival time in microseconds since the Unix epoch',
    options = NO_RULE_OPTIONS, accepts = { COST = true, AT = true, DELAY = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay] [REFUND|FORCE|UPTO]',
    rule_syntax = 'GCRA i max_burst count period' }
  function L.parse_args(args, i)
    local order = 'RL.GCRA key max_burst count period: the period comes last'
    return { L = L, max_burst = count_in_order('max_burst', args[i], 0, order),
      count = count_in_order('count', args[i + 1], 1, order),
      period = parse_duration('period', args[i + 2]) * 1000,
      interval = 0, capacity = 0, window = 0, max_delay = false }
  end
  -- Checked in the order of the errors: rate and burst window here, then cost and delay
  -- (check_cost).
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
    r.max_delay = o.delay or false
    return r
  end
  -- A refund, a forced request or UPTO of any cost can be settled: no capacity check.
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.capacity then cost_over(cost, 'burst capacity', r.capacity) end
    if r.max_delay and r.window + r.max_delay > MAX_BURST_WINDOW_US then
      fail('ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)')
    end
  end
  function L.judge(r, key, named, raw, _, now, cost, mode)
    -- Only the value counts: the expiry always follows the TAT.
    local tat = now
    if raw then
      local stored = read_tat(raw)
      if not stored then state_error(L, key, named) end
      if stored < MIN_TAT_US and stored ~= 0 then
        foreign_error(L, key, named, "a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes)")
      end
      -- A TAT in the past counts as now.
      if stored > now then tat = stored end
    end
    local interval, window = r.interval, r.window
    if mode == 'take' then
      local new_tat = tat + interval * cost
      local ahead = new_tat - now
      -- With DELAY, a request that fits within max_delay is booked.
      local max_delay = r.max_delay
      local bound = window + (max_delay or 0)
      if ahead <= bound then
        local room = window - ahead
        if room < 0 then room = 0 end
        local allow
        if cost > 0 then allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } end
        local j = { 0, r.capacity, (room - room % interval) / interval, -1, ceil_ms(ahead) }
        if max_delay then j.extra = ceil_ms(math.max(ahead - window, 0)) end
        return j, nil, allow
      end
      local behind = tat - now
      local room = math.max(window - behind, 0)
      local j = { 1, r.capacity, (room - room % interval) / interval, math.max(1, ceil_ms(ahead - bound)),
        ceil_ms(behind) }
      if max_delay then j.extra = -1 end
      return j, ahead - bound
    end
    local function room(ahead)
      local left = math.max(window - ahead, 0)
      return (left - left % interval) / interval
    end
    if mode == 'refund' then
      -- tat = max(now, tat - T * cost); at or before now the key goes.
      if not raw then return { 0, r.capacity, r.capacity, -1, 0 } end
      local new_tat = math.max(now, tat - interval * cost)
      local ahead = new_tat - now
      local allow
      if cost > 0 and new_tat <= now then
        allow = { 'DEL', key }
      elseif cost > 0 then
        allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) }
      end
      return { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, nil, allow
    end
    -- FORCE: stored whether it fits or not, at most the latest AT plus the longest
    -- burst window.
    local new_tat = tat + interval * cost
    if new_tat > MAX_TAT_US then
      force_out_of_bounds('a theoretical arrival time beyond the latest AT plus the longest burst window')
    end
    local ahead = new_tat - now
    local allow
    if cost > 0 then allow = { 'SET', key, new_tat, 'PXAT', ceil_ms(new_tat) } end
    if ahead > window then
      local wait = ahead + interval - window
      return { 1, r.capacity, 0, math.max(1, ceil_ms(wait)), ceil_ms(ahead) }, wait, allow, nil, true
    end
    return { 0, r.capacity, room(ahead), -1, ceil_ms(ahead) }, nil, allow
  end
  return L
end)()

local function rl_gcra(keys, args)
  return run(single_command, keys, args, GCRA, 'rl_gcra')
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
  local r = GCRA.build({ L = GCRA, max_burst = max_burst, count = count, period = period * 1000000,
    interval = 0, capacity = 0, window = 0, max_delay = false }, NO_OPTIONS)
  local over = quantity > r.capacity
  local reply = run_call('one', keys, { r }, nil, over and 0 or quantity, nil, 'take')
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

-- lua/src/limiters/lease.lua

-- RL.LEASE: a sorted set of lease ids scored by their expiry in Unix ms. At most `limit`
-- live leases (expiry after the call's ms); a live id renews; COST 0 peeks. And
-- RL.RELEASE, which ends a lease.

-- A lease id as given (ID, RL.RELEASE's argument): 1 to MAX_ID_LEN bytes.
local function check_id(v)
  if #v == 0 then fail("ERR invalid ID '': a lease id is 1 to " .. int(MAX_ID_LEN) .. ' bytes') end
  if #v > MAX_ID_LEN then
    fail('ERR ID of ' .. int(#v) .. ' bytes: a lease id is 1 to ' .. int(MAX_ID_LEN) .. ' bytes')
  end
  return v
end

local LEASE = (function()
  local L = { kind = 'LEASE', command = 'RL.LEASE', storage = 'zset', nargs = 2,
    expected = 'a sorted set of lease ids scored by their expiry in Unix milliseconds',
    options = NO_RULE_OPTIONS, accepts = { COST = true, AT = true, ID = true }, call_options = { ID = true },
    reply_field = true,
    syntax = 'RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms]',
    rule_syntax = 'LEASE i limit ttl' }
  function L.parse_args(args, i)
    local v = args[i]
    local limit = string.match(v, '^%-?%d+$') and tonumber(v)
    if not limit or limit < 1 or limit > MAX_LEASE_LIMIT then
      limit_error(v, MAX_LEASE_LIMIT, ' (leases held at once)', 'RL.LEASE key limit ttl: the limit comes first')
    end
    return { L = L, limit = limit, ttl_ms = parse_duration('ttl', args[i + 1]), id = false }
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
  -- A call without ID records a lease under a name made for the call.
  function L.wants_token(r)
    return not r.id
  end
  -- A name for a call that records one it was not given (a lease without ID), the same
  -- for every rule of the call and unused on each of `keys` (opened: `cards`, their
  -- sizes, false when missing): 20 hex digits, the call's time in µs and a number from
  -- the size of the largest set up (the module's are random).
  function L.make_token(now, keys, cards)
    local n = 0
    for k = 1, #keys do n = math.max(n, cards[k] or 0) end
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
  -- Live and expired leases at now_ms of a key of `card` members, counted by score range
  -- (the expired ones are not read), and the latest live expiry; the lowest and the
  -- highest members are read and checked, so every score lies between two valid expiries.
  function L.held(key, card, now_ms, bad)
    if card > MAX_LEASE_LIMIT then bad() end
    local low = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    lease_of(low[1], low[2], bad)
    local latest
    local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local e = lease_of(top[1], top[2], bad)
    if e > now_ms then latest = e end
    local expired = redis.call('ZCOUNT', key, '-inf', now_ms)
    return card - expired, expired, latest
  end
  function L.judge(r, key, named, card, _, now, cost, mode, token)
    local bad = function() state_error(L, key, named) end
    local now_ms = floor_ms(now)
    local live, expired, latest = 0, 0, nil
    if card then live, expired, latest = L.held(key, card, now_ms, bad) end
    local limit = r.limit
    local free = math.max(limit - live, 0)
    local expiry = now_ms + r.ttl_ms
    local function granted(remaining, id, key_expiry)
      local w = { { 'ZADD', key, expiry, id } }
      if expired > 0 then w[#w + 1] = { 'ZREMRANGEBYSCORE', key, '-inf', now_ms } end
      w[#w + 1] = { 'PEXPIREAT', key, key_expiry }
      return { 0, limit, remaining, -1, key_expiry - now_ms, extra = id }, nil, w
    end
    if mode == 'refund' then
      -- RL.ALL's REFUND gives back what its other rules took: the lease rule takes,
      -- renews and denies nothing; its numbers are a peek's. (FORCE is ignored.)
      return { 0, limit, free, -1, latest and (latest - now_ms) or 0, extra = false }
    end
    if cost > 0 then
      -- The call's id holds a live lease: a renewal, always allowed.
      if r.id and card then
        local s = redis.call('ZSCORE', key, r.id)
        if s and lease_of(r.id, s, bad) > now_ms then
          local others = latest_except(key, now_ms, r.id, bad)
          return granted(free, r.id, others and math.max(others, expiry) or expiry)
        end
      end
      if live < limit then
        return granted(limit - live - 1, r.id or token, latest and math.max(latest, expiry) or expiry)
      end
    end
    local reset = latest and (latest - now_ms) or 0
    if live < limit then
      return { 0, limit, free, -1, reset, extra = false }
    end
    -- Denied: until the (live - limit + 1)-th earliest live lease has expired.
    local k = live - limit + 1
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(now_ms), '+inf', 'WITHSCORES', 'LIMIT', 0, k)
    local retry_at
    for i = 1, #first, 2 do retry_at = lease_of(first[i], first[i + 1], bad) end
    local retry = retry_at - now_ms
    return { 1, limit, free, retry, reset, extra = false }, retry * 1000
  end
  return L
end)()

local function rl_lease(keys, args)
  return run(single_command, keys, args, LEASE, 'rl_lease')
end

-- RL.RELEASE: key id [AT unix_ms]. Ends a lease: 1 if a live lease with that id was
-- released, 0 otherwise; also removes the key's expired members; a key left without
-- live leases is deleted (by the removals), otherwise it expires with its latest lease.
local function release_command(keys, args, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  if #args < 1 then arity_error('RL.RELEASE', 'RL.RELEASE key id [AT unix_ms]') end
  local key, id = keys[1], check_id(args[1])
  local o = NO_OPTIONS
  if #args > 1 then o = parse_options(args, 2, { AT = true }, false) end
  local now_ms = floor_ms(o.at and o.at * 1000 or clock_us())
  local card = open_key(LEASE, key)
  if not card then return 0 end
  local bad = function() state_error(LEASE, key, false) end
  local live, expired = LEASE.held(key, card, now_ms, bad)
  local released = false
  local s = redis.call('ZSCORE', key, id)
  if s then released = LEASE.lease_of(id, s, bad) > now_ms end
  local left = live - (released and 1 or 0)
  local latest
  if (released or expired > 0) and left > 0 then
    latest = LEASE.latest_except(key, now_ms, released and id or nil, bad)
  end
  if expired > 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms) end
  if released then redis.call('ZREM', key, id) end
  if latest then redis.call('PEXPIREAT', key, latest) end
  return released and 1 or 0
end

local function rl_release(keys, args)
  return run(release_command, keys, args, 'rl_release')
end

-- lua/src/limiters/log.lua

-- RL.LOG: an exact moving window, kept as a sorted set of the allowed requests: members
-- `seq:cost:meta` (seq: 16 digits, the number of the request's last unit) scored by
-- their time in µs.
local LOG = (function()
  local L = { kind = 'LOG', command = 'RL.LOG', storage = 'zset', nargs = 2,
    expected = 'a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch',
    options = { META = true }, accepts = { COST = true, AT = true, META = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.LOG key limit window [META value] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'LOG i limit window [META value]' }
  -- How many counted members a denial reads one by one before it searches by score.
  local SCAN_STEPS = 8
  function L.parse_args(args, i)
    local v = args[i]
    local limit = string.match(v, '^%-?%d+$') and tonumber(v)
    if not limit or limit < 1 or limit > MAX_LOG_LIMIT then
      limit_error(v, MAX_LOG_LIMIT, '', 'RL.LOG key limit window: the limit comes first')
    end
    return { L = L, limit = limit, window_ms = parse_duration('window', args[i + 1]), window = 0, meta = '' }
  end
  function L.build(r, o)
    r.window = r.window_ms * 1000
    r.meta = o.meta or ''
    return r
  end
  L.check_cost = check_limit_cost
  function L.judge(r, key, named, members, _, now, cost, mode)
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
    if mode == 'refund' and not members then
      return { 0, r.limit, r.limit, -1, 0 }
    end
    local newest, first
    local t = now
    if members then
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
    if members then
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
        local n = math.min(give + 1, members)
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
      local allow
      if given > 0 and not left_newest then
        allow = { { 'DEL', key } }
      elseif given > 0 then
        allow = adds
        for _, c in ipairs(rems) do allow[#allow + 1] = c end
        allow[#allow + 1] = { 'ZREMRANGEBYSCORE', key, '-inf', cutoff }
        allow[#allow + 1] = { 'PEXPIREAT', key, ceil_ms(left_newest + r.window) }
      end
      return { 0, r.limit, math.max(r.limit - left, 0), -1, reset(left_newest) }, nil, allow
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
      local allow
      if cost > 0 then
        local seq = (newest and newest.seq or 0) + cost
        if seq > MAX_SAFE_INTEGER then
          fail('ERR the log has numbered ' .. int(MAX_SAFE_INTEGER)
            .. ' units since it began: delete the key (or let it expire) to start a new log')
        end
        allow = {
          { 'ZADD', key, t, string.format('%016d', seq) .. ':' .. int(cost) .. ':' .. r.meta },
        }
        -- The members that left the window, oldest first, at most MAX_LOG_TRIM of them
        -- (later writes remove the rest): no call does more than that.
        if members then
          local leaving = redis.call('ZRANGEBYSCORE', key, '-inf', int(cutoff), 'LIMIT', 0, MAX_LOG_TRIM)
          if #leaving > 0 then
            local zrem = { 'ZREM', key }
            for _, m in ipairs(leaving) do zrem[#zrem + 1] = m end
            allow[#allow + 1] = zrem
          end
        end
        allow[#allow + 1] = { 'PEXPIREAT', key, ceil_ms(t + r.window) }
        newest_counted = t
      end
      if total <= r.limit then
        return { 0, r.limit, r.limit - total, -1, reset(newest_counted) }, nil, allow
      end
      -- Forced over the limit: a cost of 1 fits when the units through
      -- base + total + 1 - limit have left (the forced ones themselves: at t).
      local target = base + total + 1 - r.limit
      local must = t
      if counted > 0 and target <= newest.seq then must = must_leave(target) end
      local retry = math.max(must + r.window - now, 1)
      return { 1, r.limit, 0, math.max(1, ceil_ms(retry)), reset(newest_counted) }, retry, allow, nil, true
    end
    -- Denied: when the counted members that must leave for `cost` to fit have left.
    local must = must_leave(base + total - r.limit)
    local retry = math.max(must + r.window - now, 1)
    return { 1, r.limit, math.max(r.limit - counted, 0), math.max(1, ceil_ms(retry)), reset(newest_counted) },
      retry
  end
  return L
end)()

local function rl_log(keys, args)
  return run(single_command, keys, args, LOG, 'rl_log')
end

-- lua/src/limiters/multi.lua

-- RL.MULTI: a counter per window on each key, RL.FIXED's rules for each pair
-- (fixed_window). State:
-- one string per key, `window_ms:count:end_ms` entries separated by commas.
local MULTI = (function()
  local L = { kind = 'MULTI', command = 'RL.MULTI', storage = 'string', expiry = true, nargs = 0,
    expected = 'window_ms:count:end_ms entries separated by commas',
    options = { LIMIT = true, ALIGN = true },
    accepts = { COST = true, AT = true, LIMIT = true, ALIGN = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'MULTI i LIMIT window limit [LIMIT window limit ...] [ALIGN]' }
  limits_rule(L)
  function L.build(r, o)
    if not o.limits then fail('ERR at least one LIMIT window limit is needed') end
    return { L = L, limits = o.limits, named = o.named, align = o.align }
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
      w = stored_digits(w, MAX_DURATION_MS)
      c = stored_digits(c, MAX_SAFE_INTEGER)
      e = stored_digits(e, MAX_END_MS)
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
      local limited, _, remaining, retry_ms, reset, write, after, ends =
        fixed_refund(limit, w, r.align, count, exp, now, cost)
      local fields = { limited, limit, remaining, retry_ms, reset }
      if write == 'set' then return fields, nil, { w = w, c = after, e = ends } end
      return fields, nil, nil
    elseif mode == 'force' then
      local limited, _, remaining, retry_ms, reset, retry, after, ends =
        fixed_force(limit, w, r.align, count, exp, now, cost)
      return { limited, limit, remaining, retry_ms, reset }, retry, { w = w, c = after, e = ends }
    end
    local limited, _, remaining, retry_ms, reset, retry, after, ends =
      fixed_window(limit, w, r.align, count, exp, now, cost)
    local fields = { limited, limit, remaining, retry_ms, reset }
    if retry then return fields, retry, nil end
    return fields, nil, { w = w, c = after, e = ends }
  end
  return L
end)()

local function rl_multi(keys, args)
  return run(each_key_command, keys, args, MULTI, 'rl_multi')
end

-- lua/src/limiters/sliding.lua

-- RL.SLIDING: counts in buckets per window on each key. State: one string per key,
-- `window_ms:buckets:first:counts` entries separated by commas (the counts separated by
-- dots, from bucket number `first`).
local SLIDING = (function()
  local L = { kind = 'SLIDING', command = 'RL.SLIDING', storage = 'string', expiry = true, nargs = 0,
    buckets_per_key = true,
    expected = 'window_ms:buckets:first:counts entries separated by commas',
    options = { LIMIT = true, BUCKETS = true },
    accepts = { COST = true, AT = true, LIMIT = true, BUCKETS = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]',
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
    return { L = L, limits = o.limits, named = o.named, buckets = n }
  end
  -- a // b for integers below 2^53, exactly.
  local function idiv(a, b)
    return (a - a % b) / b
  end
  -- A key's entries, sorted by window ({ w, n, first, counts }), and by window; or an
  -- error naming the key.
  function L.parse_state(key, named, raw)
    if #raw == 0 then state_error(L, key, named) end
    local entries, by_w = {}, {}
    local total_buckets = 0
    for item in string.gmatch(raw .. ',', '([^,]*),') do
      local w, n, first, counts = string.match(item, '^(%d+):(%d+):(%d+):([%d%.]+)$')
      if not w then state_error(L, key, named) end
      w = stored_digits(w, MAX_DURATION_MS)
      n = stored_digits(n, MAX_BUCKETS)
      first = stored_digits(first, MAX_SAFE_INTEGER)
      if not (w and n and first) or w == 0 or n == 0 or (w * 1000) % n ~= 0 then state_error(L, key, named) end
      local list, sum = {}, 0
      for c in string.gmatch(counts .. '.', '(%d*)%.') do
        local v = stored_digits(c, MAX_SAFE_INTEGER)
        if not v then state_error(L, key, named) end
        sum = sum + v
        if sum > MAX_SAFE_INTEGER then state_error(L, key, named) end
        list[#list + 1] = v
      end
      if #list > n + 1 then state_error(L, key, named) end
      -- No bucket later than a call writes into: the one holding the latest AT.
      if (first + #list) * (w * 1000 / n) > MAX_AT_US + w * 1000 / n then state_error(L, key, named) end
      total_buckets = total_buckets + n
      if total_buckets > MAX_BUCKETS_PER_KEY then state_error(L, key, named) end
      if #entries > 0 and entries[#entries].w >= w then state_error(L, key, named) end
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
    local counts = e.counts
    for i = #counts, 1, -1 do
      if counts[i] ~= 0 then return e.first + i - 1 end
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
      for i = 1, #e.counts do moved[shift + i] = e.counts[i] end
      e.counts, e.first = moved, j
    end
    local counts = e.counts
    local i = j - e.first + 1
    for x = #counts + 1, i do counts[x] = 0 end
    counts[i] = counts[i] + c
  end
  -- Drop the buckets before `lo` and the empty ones at both ends (in place).
  local function trim(e, lo)
    local counts, len = e.counts, #e.counts
    local lead = math.min(math.max(lo - e.first, 0), len)
    while lead < len and counts[lead + 1] == 0 do lead = lead + 1 end
    if lead > 0 then
      for i = 1, len - lead do counts[i] = counts[i + lead] end
      for i = len, len - lead + 1, -1 do counts[i] = nil end
      e.first, len = e.first + lead, len - lead
    end
    while len > 0 and counts[len] == 0 do
      counts[len] = nil
      len = len - 1
    end
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
    local counts, from = {}, e.counts
    for i = 1, #from do counts[i] = from[i] end
    return { w = e.w, n = e.n, first = e.first, counts = counts }
  end
  -- µs from `now` until the newest counted bucket has left the window (0: none).
  local function reset_us(e, bw, window, now)
    local m = newest(e)
    if not m then return 0 end
    return math.max((m + 1) * bw + window - now, 0)
  end
  -- When enough of the oldest buckets (which count `total`) have left for `c` to fit
  -- under `limit`: when the bucket after which it fits leaves the window.
  local function fits_at(e, total, c, limit, bw, window)
    local counts, left = e.counts, total
    for i = 1, #counts do
      left = left - counts[i]
      if left + c <= limit then return (e.first + i) * bw + window end
    end
    return (e.first + #counts) * bw + window
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
    local t = now
    if m and m * bw > t then t = m * bw end
    local current = idiv(t, bw)
    local lo = idiv(math.max(t - window, 0), bw)
    trim(e, lo)
    local counts, counted = e.counts, 0
    for i = 1, #counts do counted = counted + counts[i] end
    if mode == 'take' then
      if counted + cost <= limit then
        if cost > 0 then add(e, current, cost) end
        return { 0, limit, limit - counted - cost, -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
      end
      local wait = fits_at(e, counted, cost, limit, bw, window) - now
      return { 1, limit, math.max(limit - counted, 0), math.max(1, ceil_ms(wait)),
        ceil_ms(reset_us(e, bw, window, now)) }, e, wait
    elseif mode == 'refund' then
      -- Newest buckets first, never below 0.
      local give = cost
      for i = #counts, 1, -1 do
        if give == 0 then break end
        local back = math.min(give, counts[i])
        counts[i], give = counts[i] - back, give - back
      end
      trim(e, e.first)
      local left = 0
      for i = 1, #e.counts do left = left + e.counts[i] end
      return { 0, limit, math.max(limit - left, 0), -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
    end
    -- FORCE.
    local after = counted + cost
    if after > MAX_SAFE_INTEGER then force_out_of_bounds('a count above 9007199254740991') end
    if cost > 0 then add(e, current, cost) end
    if after <= limit then
      return { 0, limit, limit - after, -1, ceil_ms(reset_us(e, bw, window, now)) }, e, nil
    end
    local wait = fits_at(e, after, 1, limit, bw, window) - now
    return { 1, limit, 0, math.max(1, ceil_ms(wait)), ceil_ms(reset_us(e, bw, window, now)) }, e, wait
  end
  -- The entries as stored: numbers below 10^14 are written by concatenation (%.14g,
  -- exact there), larger ones by int.
  function L.encode(entries)
    local parts = {}
    for i = 1, #entries do
      local e = entries[i]
      local counts, first = e.counts, e.first
      for j = 1, #counts do
        if counts[j] >= 1e14 then
          local texts = {}
          for k = 1, #counts do texts[k] = int(counts[k]) end
          counts = texts
          break
        end
      end
      if first >= 1e14 then first = int(first) end
      parts[i] = e.w .. ':' .. e.n .. ':' .. first .. ':' .. table.concat(counts, '.')
    end
    if #parts == 1 then return parts[1] end
    return table.concat(parts, ',')
  end
  L.ends = ends_at
  function L.judge_window(r, entry, w, limit, now, cost, mode)
    local fields, e, wait = pair(entry, now, w, limit, r.buckets, cost, mode)
    return fields, wait, e
  end
  return L
end)()

local function rl_sliding(keys, args)
  return run(each_key_command, keys, args, SLIDING, 'rl_sliding')
end

-- (RL.ALL's rules, written by the build)

-- RL.ALL's rules by keyword: every limiter of lua/src/limiters/; and their keywords in
-- order (the error of an unknown rule lists them).
local RULES = { BAN = BAN, FIXED = FIXED, GCRA = GCRA, LEASE = LEASE, LOG = LOG, MULTI = MULTI, SLIDING = SLIDING }
local RULE_KINDS = { 'BAN', 'FIXED', 'GCRA', 'LEASE', 'LOG', 'MULTI', 'SLIDING' }

-- lua/src/all.lua

-- RL.ALL: numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms] [ID id]
-- [REFUND|FORCE|UPTO], each rule one limiter's arguments with its key replaced by the key's
-- 1-based position among the keys (`FIXED i limit window [ALIGN]`, ...). Each rule is
-- judged by the same limiter as its own command, on the same state; the call is allowed
-- iff every rule allows, and a denial writes nothing. The rules are the limiters of
-- lua/src/limiters/ (RULES and RULE_KINDS, written by the build).

local ALL_OPTIONS = {
  COST = true, AT = true, ALIGN = true, DELAY = true, BUCKETS = true, META = true, LIMIT = true,
  ID = true, REFUND = true, FORCE = true, UPTO = true,
}
local CALL_OPTIONS = { COST = true, AT = true, REFUND = true, FORCE = true, UPTO = true }

-- The arguments of RL.ALL, parsed: the call (its rules, their keys' positions, the
-- call's cost, AT and mode, the index of its gate and that of its first rule with a
-- reply_field), and whether to remember it.
local function all_parse(keys, args, name)
  if 1 + #keys + #args < 4 then
    arity_error('RL.ALL', 'RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE|UPTO]')
  end
  check_keys(keys, MAX_ALL_KEYS, name)
  local rules, positions, taken = {}, {}, {}
  local o = { cost = 1 }
  local i = 1
  while i <= #args do
    local w = string.upper(args[i])
    local index = #rules + 1
    if CALL_OPTIONS[w] or w == 'ID' then
      -- The call's options: COST, AT, REFUND, FORCE, UPTO, and those its rules take from the
      -- call (ID).
      local accepts = {}
      for k in pairs(CALL_OPTIONS) do accepts[k] = true end
      for _, r in ipairs(rules) do
        for k in pairs(r.L.call_options or {}) do accepts[k] = true end
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
      rule_error(last and #rules or 1, last and last.L.kind or 'RL.ALL', why)
    end
    local L = RULES[w]
    if not L then
      fail("ERR unknown rule '" .. echo(args[i]) .. "': a rule is "
        .. table.concat(RULE_KINDS, ', ', 1, #RULE_KINDS - 1) .. ' or ' .. RULE_KINDS[#RULE_KINDS]
        .. ' followed by its key\'s position (COST and AT come after the rules)')
    end
    local raw = args[i + 1] or ''
    local ok, position = pcall(parse_int, 'position', raw, 1)
    if not ok or position > #keys then
      rule_error(index, L.kind, "invalid key position '" .. echo(raw) .. "': must be an integer from 1 to "
        .. int(#keys) .. " (the keys' places after numkeys)")
    end
    if taken[position] then
      rule_error(index, L.kind, 'key ' .. int(position) .. ' is already named by rule ' .. int(taken[position])
        .. ': one rule per key')
    end
    local ok2, res = pcall(function()
      if #args - (i + 1) < L.nargs then
        fail('ERR wrong number of arguments for a ' .. L.kind .. ' rule (syntax: ' .. L.rule_syntax .. ')')
      end
      local p = L.parse_args(args, i + 2)
      local ro, next_i = parse_options(args, i + 2 + L.nargs, L.options, true)
      return { r = L.build(p, ro), next = next_i }
    end)
    if not ok2 then rule_error(index, L.kind, res) end
    taken[position] = index
    rules[index], positions[index] = res.r, position
    i = res.next
  end
  for k = 1, #keys do
    if not taken[k] then
      fail('ERR key ' .. int(k) .. " '" .. echo(keys[k]) .. "' is named by no rule: every key needs exactly one rule")
    end
  end
  -- At most one penalty box per call.
  local gate, field
  for index, r in ipairs(rules) do
    if r.L.gate then
      if gate then rule_error(index, r.L.kind, 'at most one BAN rule per call') end
      gate = index
    end
    if r.L.reply_field and not field then field = index end
  end
  local mode = settle_mode(o)
  for index, r in ipairs(rules) do
    if r.L.call_opts then
      local ok, res = pcall(r.L.call_opts, r, o)
      if not ok then rule_error(index, r.L.kind, res) end
    end
    local ok, res = pcall(r.L.check_cost, r, o.cost, mode)
    if not ok then rule_error(index, r.L.kind, res) end
  end
  return { rules, positions, o.cost, o.at, mode, gate, field }, not (o.AT or o.COST)
end

local function rl_all(keys, args)
  return run(numkeys_command, keys, args, 'all', all_parse, MAX_ALL_KEYS, 'all', 'rl_all')
end

-- lua/src/bulkexpire.lua

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

local function rl_bulkexpire(keys, args)
  return run(bulkexpire_command, keys, args, 'rl_bulkexpire')
end

-- The functions, one per command: FCALL <name> numkeys key [key ...] arg [arg ...],
-- with the command's keys and the rest of its arguments in the same order. Each is
-- also a script of its own, lua/scripts/<name>.lua (EVALSHA sha numkeys ...).
redis.register_function('rl_fixed', rl_fixed)
redis.register_function('rl_gcra', rl_gcra)
redis.register_function('cl_throttle', cl_throttle)
redis.register_function('rl_lease', rl_lease)
redis.register_function('rl_release', rl_release)
redis.register_function('rl_log', rl_log)
redis.register_function('rl_multi', rl_multi)
redis.register_function('rl_sliding', rl_sliding)
redis.register_function('rl_all', rl_all)
redis.register_function('rl_bulkexpire', rl_bulkexpire)

-- rl_lease: the Lua twin of RL.LEASE as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.LEASE's keys and the rest of its arguments in the same order, as
-- `FCALL rl_lease ...` of the library lua/ratelimit.lua.
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

local MAX_LEASE_LIMIT = 10000 -- the largest limit (RL.LEASE)

local MAX_ID_LEN = 256 -- bytes of a lease id (RL.LEASE, RL.RELEASE)

local MAX_END_MS = 4417804800000 -- the latest window end in stored state: MAX_AT_MS + MAX_DURATION_MS (RL.MULTI)

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

local function rl_lease(keys, args)
  return run(single_command, keys, args, LEASE, 'rl_lease')
end

return rl_lease(KEYS, ARGV)

-- rl_release: the Lua twin of RL.RELEASE as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.RELEASE's keys and the rest of its arguments in the same order, as
-- `FCALL rl_release ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/src/: edit those files, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The definitions a call uses only on an error or a rare path: each is made on the first
-- read of COLD.<its name>.
local COLD, run, MEMO, unit_ms, plain_count, parse_duration, count_in_order, parse_options, NO_OPTIONS, NO_RULE_OPTIONS, clock_us, floor_ms, stored_number, open_key, check_id, LEASE, release_command, rl_release
COLD = {
  __index = function(cold, name)
    local value
    if name == 'fail' then
      -- Cold: raise an error reply (caught by `run` below).
      value = function(msg)
        error({ err = msg }, 0)
      end
    elseif name == 'message' then
      -- Cold: an error's message, whichever way pcall handed it back (see `run`).
      value = function(res)
        if type(res) == 'table' and res.err then return res.err end
        return res
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
    elseif name == 'WRONGTYPE' then
      -- Cold: the error of a key of another type.
      value = 'WRONGTYPE Operation against a key holding the wrong kind of value'
    elseif name == 'state_error' then
      -- Cold: the invalid-state error of limiter L, naming the key when `named`.
      value = function(L, key, named)
        local which = named and ("the key '" .. COLD.echo(key) .. "'") or 'the key'
        COLD.fail('ERR ' .. which .. ' does not hold ' .. L.command .. ' state (expected ' .. L.expected .. ')')
      end
    elseif name == 'parse_int' then
      -- Cold: parse a count (a signed decimal integer from min to 2^53 - 1), as the module
      -- does; an error when it is not one.
      value = function(what, v, min)
        local plain = plain_count(v, min)
        if plain then return plain end
        local neg, digits = string.match(v, '^(%-?)(%d+)$')
        local n
        if digits then
          local sig = string.gsub(digits, '^0+', '')
          -- 17 significant digits or more are above 2^53 - 1 (16 digits) whatever they are.
          if #sig <= 16 then n = tonumber(sig ~= '' and sig or '0') end
        end
        if n and n <= 9007199254740991 then
          if neg == '-' and n ~= 0 then n = -n end
          if n >= min then return n end
        end
        COLD.fail('ERR invalid ' .. what .. " '" .. COLD.echo(v) .. "': must be an integer from "
          .. COLD.int(min) .. ' to ' .. COLD.int(9007199254740991))
      end
    elseif name == 'parse_at' then
      -- Cold: AT's value, a time in ms.
      value = function(v)
        local plain = plain_count(v, 1000000000000)
        if plain and plain <= 4102444800000 then return plain end
        local ok, ms = pcall(COLD.parse_int, 'AT', v, 0)
        if ok and ms < 1000000000000 then
          COLD.fail("ERR invalid AT '" .. COLD.echo(v) .. "': AT takes a Unix time in milliseconds, from "
            .. COLD.int(1000000000000) .. ' (2001-09-09) to ' .. COLD.int(4102444800000) .. '; this looks like seconds')
        end
        if not ok or ms > 4102444800000 then
          COLD.fail("ERR invalid AT '" .. COLD.echo(v) .. "': must be a Unix time in milliseconds from "
            .. COLD.int(1000000000000) .. ' to ' .. COLD.int(4102444800000))
        end
        return ms
      end
    elseif name == 'looks_like_a_duration' then
      -- Cold: whether v is written as a duration with a unit (1m, 500ms): in the place of a count,
      -- the sign of two arguments given in the wrong order.
      value = function(v)
        return string.match(v, '^%d+ms$') ~= nil or string.match(v, '^%d+[smhd]$') ~= nil
      end
    elseif name == 'limit_error' then
      -- Cold: the error of a limit `v` that is not an integer from 1 to `max` (RL.LOG,
      -- RL.LEASE): `what` follows the bounds, and `order` (the command's arguments) when `v` is
      -- written as a duration.
      value = function(v, max, what, order)
        local msg = "ERR invalid limit '" .. COLD.echo(v) .. "': must be an integer from 1 to " .. COLD.int(max) .. what
        if COLD.looks_like_a_duration(v) then msg = msg .. ' (' .. order .. ')' end
        COLD.fail(msg)
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

-- The common case of a count: up to 15 digits (always below 2^53) and at least `min`;
-- nil otherwise (parse_int then says why).
function plain_count(v, min)
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

-- A count (parse_int) in a place where it is easily swapped with a duration: when `v`
-- is written as a duration, its error names the order of the command's arguments.
function count_in_order(what, v, min, order)
  local plain = plain_count(v, min)
  if plain then return plain end
  local ok, res = pcall(COLD.parse_int, what, v, min)
  if ok then return res end
  local msg = COLD.message(res)
  if type(msg) == 'string' and COLD.looks_like_a_duration(v) then COLD.fail(msg .. ' (' .. order .. ')') end
  error(res, 0)
end

-- The options that follow a command's (or a rule's) positional arguments, as the
-- module's one option parser reads them: `accepts` is a set of keywords among COST, AT,
-- ALIGN, DELAY, BUCKETS, META, LIMIT (LIMIT window limit, repeatable) and ID; each other
-- one at most once, each value checked where it stands. Reads args[first..#args]; at a
-- word that is not accepted, stops there when `stop`, else calls `unknown(word)` when
-- given (which raises), else refuses it. Returns the options and the index after them.
function parse_options(args, first, accepts, stop, unknown)
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
      COLD.fail("ERR unknown option '" .. COLD.echo(args[i]) .. "' (options here: " .. table.concat(listed, ', ') .. ')')
    end
    if w ~= 'LIMIT' then
      if o[w] then COLD.fail('ERR option ' .. w .. ' given more than once') end
      o[w] = true
    end
    if w == 'ALIGN' then
      o.align = true
      i = i + 1
    elseif w == 'REFUND' or w == 'FORCE' or w == 'UPTO' then
      i = i + 1
    elseif w == 'LIMIT' then
      if not o.limits then o.limits, o.named = {}, {} end
      if #o.limits >= 16 then
        COLD.fail('ERR too many LIMITs: at most ' .. COLD.int(16) .. ' windows')
      end
      if i + 2 > last then COLD.fail('ERR LIMIT needs a window and a limit') end
      local wms = parse_duration('window', args[i + 1])
      local l = count_in_order('limit', args[i + 2], 1, 'LIMIT window limit: the window comes first')
      if o.named[wms] then
        COLD.fail("ERR window '" .. COLD.echo(args[i + 1]) .. "' given more than once (" .. COLD.int(wms) .. ' ms)')
      end
      o.named[wms] = true
      o.limits[#o.limits + 1] = { wms, l }
      i = i + 3
    else
      if i + 1 > last then COLD.fail('ERR option ' .. w .. ' needs a value') end
      local v = args[i + 1]
      if w == 'COST' then
        o.cost = COLD.parse_int('cost', v, 0)
      elseif w == 'AT' then
        o.at = COLD.parse_at(v)
      elseif w == 'DELAY' then
        o.delay = parse_duration('max_delay', v) * 1000
      elseif w == 'BUCKETS' then
        local n = string.match(v, '^%d+$') and tonumber(v)
        if not n or n < 1 or n > 100 then
          COLD.fail("ERR invalid BUCKETS '" .. COLD.echo(v) .. "': must be an integer from 1 to " .. COLD.int(100))
        end
        o.buckets = n
      elseif w == 'META' then
        if #v > 256 then
          COLD.fail('ERR META of ' .. COLD.int(#v) .. ' bytes: at most ' .. COLD.int(256) .. ' bytes')
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
NO_OPTIONS = { cost = 1 }

-- The options of a rule that takes none of its own (read, never written).
NO_RULE_OPTIONS = {}

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

-- A number read from stored state: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
end

-- Open a key as limiter L keeps it: a string's value (nil when missing) and, when
-- L.expiry, its absolute expiry in ms (nil: no TTL); a sorted set: its number of
-- members (false when missing). Another type: WRONGTYPE.
function open_key(L, key)
  if L.storage == 'string' then
    -- A value is a string or false; an error, a table (a string's `err` is nil).
    local v = redis.pcall('GET', key)
    if not v then return v end
    if v.err then COLD.fail(COLD.WRONGTYPE) end
    if not L.expiry then return v end
    local exp = redis.call('PEXPIRETIME', key)
    if exp < 0 then return v, nil end
    return v, exp
  end
  -- A count, or an error (a table).
  local card = redis.pcall('ZCARD', key)
  if type(card) ~= 'number' then COLD.fail(COLD.WRONGTYPE) end
  if card == 0 then return false end
  return card
end

-- A lease id as given (ID, RL.RELEASE's argument): 1 to MAX_ID_LEN bytes.
function check_id(v)
  if #v == 0 then COLD.fail("ERR invalid ID '': a lease id is 1 to " .. COLD.int(256) .. ' bytes') end
  if #v > 256 then
    COLD.fail('ERR ID of ' .. COLD.int(#v) .. ' bytes: a lease id is 1 to ' .. COLD.int(256) .. ' bytes')
  end
  return v
end

LEASE = (function()
  local L = { kind = 'LEASE', command = 'RL.LEASE', storage = 'zset', nargs = 2,
    expected = 'a sorted set of lease ids scored by their expiry in Unix milliseconds',
    options = NO_RULE_OPTIONS, accepts = { COST = true, AT = true, ID = true }, call_options = { ID = true },
    reply_field = true,
    syntax = 'RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms]',
    rule_syntax = 'LEASE i limit ttl' }
  function L.parse_args(args, i)
    local v = args[i]
    local limit = string.match(v, '^%-?%d+$') and tonumber(v)
    if not limit or limit < 1 or limit > 10000 then
      COLD.limit_error(v, 10000, ' (leases held at once)', 'RL.LEASE key limit ttl: the limit comes first')
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
      COLD.fail('ERR invalid cost ' .. COLD.int(cost) .. ': a lease takes COST 1 (the default) or COST 0 to peek')
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
    local e = stored_number(score, 4417804800000)
    if not e or #member < 1 or #member > 256 then bad() end
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
    if card > 10000 then bad() end
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
    local bad = function() COLD.state_error(L, key, named) end
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
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. COLD.int(now_ms), '+inf', 'WITHSCORES', 'LIMIT', 0, k)
    local retry_at
    for i = 1, #first, 2 do retry_at = lease_of(first[i], first[i + 1], bad) end
    local retry = retry_at - now_ms
    return { 1, limit, free, retry, reset, extra = false }, retry * 1000
  end
  return L
end)()

-- RL.RELEASE: key id [AT unix_ms]. Ends a lease: 1 if a live lease with that id was
-- released, 0 otherwise; also removes the key's expired members; a key left without
-- live leases is deleted (by the removals), otherwise it expires with its latest lease.
function release_command(keys, args, name)
  if #keys ~= 1 then COLD.keys_error(name, 'exactly 1', #keys) end
  if #args < 1 then COLD.arity_error('RL.RELEASE', 'RL.RELEASE key id [AT unix_ms]') end
  local key, id = keys[1], check_id(args[1])
  local o = NO_OPTIONS
  if #args > 1 then o = parse_options(args, 2, { AT = true }, false) end
  local now_ms = floor_ms(o.at and o.at * 1000 or clock_us())
  local card = open_key(LEASE, key)
  if not card then return 0 end
  local bad = function() COLD.state_error(LEASE, key, false) end
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

function rl_release(keys, args)
  return run(release_command, keys, args, 'rl_release')
end

return rl_release(KEYS, ARGV)

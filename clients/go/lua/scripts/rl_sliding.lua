-- rl_sliding: the Lua twin of RL.SLIDING as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.SLIDING's keys and the rest of its arguments in the same order, as
-- `FCALL rl_sliding ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The module's bounds (core/src/limits.rs), mirrored under the same names; a test
-- checks that they agree.
local MAX_SAFE_INTEGER = 9007199254740991 -- 2^53 - 1

local MIN_AT_MS = 1000000000000 -- 2001-09-09: a smaller AT is a time in seconds

local MAX_AT_MS = 4102444800000 -- 2100-01-01

local MAX_DURATION_MS = 315360000000 -- 3650 days

local MAX_KEYS = 64 -- keys per call (RL.MULTI)

local MAX_WINDOWS = 16 -- LIMITs per call (RL.MULTI)

local MAX_WINDOWS_PER_KEY = 32 -- windows one key keeps (RL.MULTI, RL.SLIDING)

local MAX_BUCKETS = 100 -- buckets per window (RL.SLIDING)

local DEFAULT_BUCKETS = 10 -- buckets per window without BUCKETS (RL.SLIDING)

local MAX_META_LEN = 256 -- bytes of a META value (RL.LOG)

local MAX_AT_US = 4102444800000000 -- MAX_AT_MS in µs: the latest log entry, the latest bucket start (RL.LOG, RL.SLIDING)

local MAX_BUCKETS_PER_KEY = 1000 -- buckets one key keeps, its windows' BUCKETS added up (RL.SLIDING)

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

-- The call shape of RL.MULTI and RL.SLIDING: numkeys (FCALL's) from 1 to MAX_KEYS
-- distinct keys, then LIMIT window limit triples among the options, the same rule on
-- every key.
local function each_key_command(keys, args, L, name)
  local call = with_numkeys_hint(function(ks, as)
    if 2 + #ks + #as < 6 then arity_error(L.command, L.syntax) end
    check_keys(ks, MAX_KEYS, name)
    local o = parse_options(as, 1, L.accepts, false)
    local mode = settle_mode(o)
    local r = L.build({}, o)
    L.check_cost(r, o.cost, mode)
    local rules = {}
    for k = 1, #ks do rules[k] = { k = k, L = L, r = r } end
    return { shape = 'each', keys = ks, rules = rules, cost = o.cost, at = o.at, mode = mode }
  end, keys, args, MAX_KEYS)
  return run_call(call)
end

local function rl_sliding(keys, args)
  return run(each_key_command, keys, args, SLIDING, 'rl_sliding')
end

return rl_sliding(KEYS, ARGV)

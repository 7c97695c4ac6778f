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

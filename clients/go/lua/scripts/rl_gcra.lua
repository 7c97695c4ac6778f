-- rl_gcra: the Lua twin of RL.GCRA as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.GCRA's keys and the rest of its arguments in the same order, as
-- `FCALL rl_gcra ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/src/: edit those files, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The definitions a call uses only on an error or a rare path: each is made on the first
-- read of COLD.<its name>.
local COLD, run, MEMO, unit_ms, plain_count, parse_duration, count_in_order, parse_options, NO_OPTIONS, NO_RULE_OPTIONS, settle_mode, clock_us, ceil_ms, open_key, run_call, single_parse, single_command, read_tat, GCRA, rl_gcra
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
    elseif name == 'foreign_error' then
      -- Cold: the error of limiter L on a key that holds what can only be another limiter's state
      -- (`holds` says what), naming the key when `named`.
      value = function(L, key, named, holds)
        local which = named and ("the key '" .. COLD.echo(key) .. "'") or 'the key'
        COLD.fail('ERR ' .. which .. ' holds ' .. holds .. ', not ' .. L.command
          .. ' state: each algorithm needs keys of its own')
      end
    elseif name == 'cost_over' then
      -- Cold: a cost a rule can never allow: above its `what` (limit, burst capacity).
      value = function(cost, what, capacity)
        COLD.fail('ERR cost ' .. COLD.int(cost) .. ' exceeds the ' .. what .. ' ' .. COLD.int(capacity)
          .. ': the request can never be allowed')
      end
    elseif name == 'force_out_of_bounds' then
      -- Cold: the error of a FORCE that would store `what` past the bounds every reader accepts.
      value = function(what)
        COLD.fail('ERR FORCE would store ' .. what .. ': nothing was written')
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
    elseif name == 'rule_error' then
      -- Cold: the error `err` (an error, or its text) of rule i of RL.ALL, a rule of `kind`:
      -- its text, naming the rule.
      value = function(i, kind, err)
        COLD.fail('ERR rule ' .. COLD.int(i) .. ' (' .. kind .. '): ' .. string.gsub(COLD.message(err), '^ERR ', '', 1))
      end
    elseif name == 'rule_step' then
      -- Cold: rule i's step f(...) in RL.ALL: the error names the rule (not WRONGTYPE or OOM, which
      -- are the server's).
      value = function(i, r, f, ...)
        local ok, a, b, c, d, e = pcall(f, ...)
        if ok then return a, b, c, d, e end
        local msg = COLD.message(a)
        if type(msg) ~= 'string' or string.match(msg, '^WRONGTYPE ') or string.match(msg, '^OOM ') then
          error(a, 0)
        end
        COLD.rule_error(i, r.L.kind, msg)
      end
    elseif name == 'recalled' then
      -- Cold (the library only): the parsed call of `what` (a limiter, or 'all') remembered
      -- for these arguments, or nil.
      value = function(what, nkeys, args)
        local node = MEMO.calls[what]
        node = node and node[nkeys]
        node = node and node[#args]
        for i = 1, #args do node = node and node[args[i]] end
        return node
      end
    elseif name == 'remember' then
      -- Cold (the library only): remember a parsed call, while there is room.
      value = function(what, nkeys, args, call)
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

-- How a request settles, from REFUND, FORCE and UPTO: 'take' (the usual), 'refund',
-- 'force' or 'upto' (as much of COST as fits now); at most one of them, none with
-- DELAY, and UPTO with a cost of at least 1; a peek (COST 0) takes. The errors in the
-- module's order (Mode::of).
function settle_mode(o)
  if o.REFUND and o.FORCE then
    COLD.fail('ERR REFUND and FORCE cannot be given together: a request is either given back or forced')
  end
  if o.UPTO and (o.REFUND or o.FORCE) then
    COLD.fail('ERR UPTO cannot be given with ' .. (o.REFUND and 'REFUND' or 'FORCE')
      .. ': UPTO takes as much of COST as fits now')
  end
  local mode = (o.REFUND and 'refund') or (o.FORCE and 'force') or (o.UPTO and 'upto') or 'take'
  if mode == 'upto' then
    if o.delay then COLD.fail('ERR UPTO cannot be given with DELAY: UPTO takes as much of COST as fits now') end
    if o.cost == 0 then COLD.fail('ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)') end
  elseif mode ~= 'take' and o.delay then
    COLD.fail('ERR ' .. string.upper(mode) .. ' cannot be given with DELAY: a settled request is not booked')
  end
  -- COST 0 with either flag is the peek COST 0 is without it.
  if o.cost == 0 then return 'take' end
  return mode
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

function ceil_ms(us)
  us = us + 999
  return (us - us % 1000) / 1000
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
function run_call(shape, keys, rules, positions, cost, at, mode, gate, field)
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
      rec.state, rec.exp = COLD.rule_step(i, r, open_key, L, keys[positions[i]])
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
      local j, retry = COLD.rule_step(gate, r, r.L.judge, r, key, true, rec.state, rec.exp, now, judged, mode, token)
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
            COLD.rule_step(i, r, L.judge, r, keys[positions[i]], true, rec.state, rec.exp, now, judged, mode, token)
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
        rec.write = COLD.rule_step(i, r, write, r, keys[positions[i]], rec.j, allowed, now, cost)
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

-- A single-key command's arguments, parsed: the call's rules, cost, AT and mode, and
-- whether to remember it.
function single_parse(args, L)
  local nargs, given = L.nargs, #args
  if given < nargs then COLD.arity_error(L.command, L.syntax) end
  local r = L.parse_args(args, 1)
  local o = NO_OPTIONS
  if given > nargs then
    local fifth = args[1 + nargs]
    if L.quantity_fifth and pcall(COLD.parse_int, 'quantity', fifth, 0) then
      -- redis-cell's quantity as a fifth argument: RL.GCRA takes it as COST n.
      COLD.fail("ERR unknown option '" .. COLD.echo(fifth) .. "': RL.GCRA takes redis-cell's quantity as COST "
        .. COLD.echo(fifth) .. ' (or call CL.THROTTLE, which takes it fifth)')
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
function single_command(keys, args, L, name)
  if #keys ~= 1 then COLD.keys_error(name, 'exactly 1', #keys) end
  local call = MEMO and COLD.recalled(L, 1, args)
  if call then return run_call('one', keys, call[1], nil, call[3], call[4], call[5]) end
  local rules, cost, at, mode, again = single_parse(args, L)
  if MEMO and again then COLD.remember(L, 1, args, { rules, nil, cost, at, mode }) end
  return run_call('one', keys, rules, nil, cost, at, mode)
end

-- A stored RL.GCRA TAT in µs, as the module reads it (gcra::parse_tat), or nil: the
-- module's own (1 to MAX_TAT_DIGITS digits of µs) or redis-cell's (19 digits of ns,
-- from 10^18), rounded up to the µs; at most MAX_TAT_US either way. A 19-digit number
-- is above 2^53, so it is read as text: its first 16 digits, plus 1 unless the last 3
-- are 000.
function read_tat(s)
  if string.find(s, '%D') then return nil end
  local n
  if #s <= 16 then
    n = tonumber(s)
    if not n then return nil end
  elseif #s == 19 and string.sub(s, 1, 1) ~= '0' then
    n = tonumber(string.sub(s, 1, 16))
    if string.sub(s, 17) ~= '000' then n = n + 1 end
  else
    return nil
  end
  if n > 5679244800000000 then return nil end
  return n
end

GCRA = (function()
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
      COLD.fail('ERR invalid rate: period / count must be at least 1 microsecond')
    end
    local rest = r.period % r.count
    r.interval = (r.period - rest) / r.count
    if rest > 0 then r.interval = r.interval + 1 end
    r.capacity = r.max_burst + 1
    r.window = r.interval * r.capacity
    if r.window > 1576800000000000 then
      COLD.fail('ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)')
    end
    r.max_delay = o.delay or false
    return r
  end
  -- A refund, a forced request or UPTO of any cost can be settled: no capacity check.
  function L.check_cost(r, cost, mode)
    if mode == 'take' and cost > r.capacity then COLD.cost_over(cost, 'burst capacity', r.capacity) end
    if r.max_delay and r.window + r.max_delay > 1576800000000000 then
      COLD.fail('ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)')
    end
  end
  function L.judge(r, key, named, raw, _, now, cost, mode)
    -- Only the value counts: the expiry always follows the TAT.
    local tat = now
    if raw then
      local stored = read_tat(raw)
      if not stored then COLD.state_error(L, key, named) end
      if stored < 1000000000000000 and stored ~= 0 then
        COLD.foreign_error(L, key, named, "a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes)")
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
    if new_tat > 5679244800000000 then
      COLD.force_out_of_bounds('a theoretical arrival time beyond the latest AT plus the longest burst window')
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

function rl_gcra(keys, args)
  return run(single_command, keys, args, GCRA, 'rl_gcra')
end

return rl_gcra(KEYS, ARGV)

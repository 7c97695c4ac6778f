-- rl_sliding: the Lua twin of RL.SLIDING as a self-contained script, for EVAL/EVALSHA where
-- FUNCTION is not allowed (nothing to prepend):
--   EVALSHA sha numkeys key [key ...] arg [arg ...]
-- with RL.SLIDING's keys and the rest of its arguments in the same order, as
-- `FCALL rl_sliding ...` of the library lua/ratelimit.lua.
-- Written by lua/build.py from lua/src/: edit those files, then run
-- `python3 lua/build.py` (a test fails when this file is stale).

-- The definitions a call uses only on an error or a rare path: each is made on the first
-- read of COLD.<its name>.
local COLD, run, MEMO, unit_ms, plain_count, parse_duration, count_in_order, parse_options, settle_mode, clock_us, ceil_ms, stored_number, stored_digits, open_key, run_call, check_keys, with_numkeys_hint, each_key_parse, numkeys_command, each_key_command, check_limits_cost, NONE, by_window, limits_rule, SLIDING, rl_sliding
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
    elseif name == 'NUMKEYS_HINTED' then
      -- Cold: the errors a wrong numkeys can explain (the module's numkeys_hint takes the same).
      value = {
        "^ERR unknown option '", "^ERR unknown rule '", '^ERR at least one LIMIT window limit is needed$',
        "^ERR key %d+ '.*' is named by no rule",
      }
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

-- A number read from stored state: 1 to 19 digits, at most `max` (a double holds it exactly); nil if not.
function stored_number(s, max)
  if not s or #s == 0 or #s > 19 or not string.match(s, '^%d+$') then return nil end
  local sig = string.gsub(s, '^0+', '')
  if #sig > 16 then return nil end
  local n = tonumber(sig ~= '' and sig or '0')
  if n > max then return nil end
  return n
end

-- The same for a number that a pattern's %d+ (or [%d]*) captured: at most 15 digits
-- are read as they are.
function stored_digits(s, max)
  if #s == 0 or #s > 15 then return stored_number(s, max) end
  local n = tonumber(s)
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

-- The keys of a call with numkeys (FCALL's or EVALSHA's): from 1 to `max`, each at most
-- once.
function check_keys(keys, max, name)
  if #keys < 1 or #keys > max then COLD.keys_error(name, '1 to ' .. COLD.int(max), #keys) end
  if #keys == 1 then return end
  local seen_key = {}
  for _, key in ipairs(keys) do
    if seen_key[key] then COLD.fail("ERR key '" .. COLD.echo(key) .. "' given more than once") end
    seen_key[key] = true
  end
end

-- A call with numkeys, parsed by `parse(keys, args, ...)` (which raises the call's
-- error and writes nothing): its call, and whether to remember it. When it fails with an
-- error that a wrong numkeys explains, and the same arguments parse with another number
-- of keys (the nearest first, fewer before more, up to `max`), the error says which, as
-- the module's does.
function with_numkeys_hint(parse, keys, args, max, ...)
  local ok, res, again = pcall(parse, keys, args, ...)
  if ok then return res, again end
  local msg = COLD.message(res)
  local hinted = false
  for _, pattern in ipairs(COLD.NUMKEYS_HINTED) do
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
            COLD.fail('ERR numkeys is ' .. COLD.int(given) .. " but '" .. COLD.echo(all[meant + 1]) .. "' starts the arguments after "
              .. COLD.int(meant) .. (meant == 1 and ' key' or ' keys') .. ': did you mean numkeys ' .. COLD.int(meant) .. '?')
          end
          COLD.fail('ERR numkeys is ' .. COLD.int(given) .. " but '" .. COLD.echo(all[given + 1]) .. "' reads as a key: did you mean numkeys "
            .. COLD.int(meant) .. '?')
        end
      end
    end
  end
  error(res, 0)
end

-- The arguments of RL.MULTI and RL.SLIDING, parsed: the call, and whether to remember it.
function each_key_parse(ks, as, name, L)
  if 2 + #ks + #as < 6 then COLD.arity_error(L.command, L.syntax) end
  check_keys(ks, 64, name)
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
function numkeys_command(keys, args, shape, parse, max, what, name)
  local call = MEMO and COLD.recalled(what, #keys, args)
  if call then
    check_keys(keys, max, name)
  else
    local again
    call, again = with_numkeys_hint(parse, keys, args, max, name, what)
    if MEMO and again then COLD.remember(what, #keys, args, call) end
  end
  return run_call(shape, keys, call[1], call[2], call[3], call[4], call[5], call[6], call[7])
end

-- The call shape of RL.MULTI and RL.SLIDING: numkeys from 1 to MAX_KEYS distinct keys,
-- then LIMIT window limit triples among the options, the same rule on every key.
function each_key_command(keys, args, L, name)
  return numkeys_command(keys, args, 'each', each_key_parse, 64, L, name)
end

-- A cost above the smallest LIMIT can never be allowed.
function check_limits_cost(limits, cost)
  local smallest = limits[1][2]
  for _, lw in ipairs(limits) do
    if lw[2] < smallest then smallest = lw[2] end
  end
  if cost > smallest then COLD.cost_over(cost, 'limit', smallest) end
end

-- The parts of limiter L that follow from its windows: L.parse_state(key, named, raw)
-- (a key's entries, and the same by window), L.judge_window(r, entry, w, limit, now,
-- cost, mode) (a window's five fields, µs to wait when denied, and the window after
-- the request, nil when it keeps none), L.ends(e) (µs, or nil: counts nothing) and
-- L.encode(entries); and L.buckets_per_key, true when a key's windows also keep at most
-- MAX_BUCKETS_PER_KEY buckets between them (e.n each: RL.SLIDING).
-- A key without state: no entries (read, never written).
NONE = {}

-- Entries in the order of their windows.
function by_window(a, b)
  return a.w < b.w
end

function limits_rule(L)
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
    if L.buckets_per_key and (#merged > 32 or buckets > 1000) then
      COLD.fail("ERR the key '" .. COLD.echo(key) .. "' would hold more than " .. COLD.int(32)
        .. ' windows or ' .. COLD.int(1000) .. ' buckets: ' .. L.command .. ' keeps at most '
        .. COLD.int(32) .. ' windows per key, their BUCKETS adding up to at most '
        .. COLD.int(1000) .. ' (use fewer distinct windows or buckets, or other keys)')
    end
    if #merged > 32 then
      COLD.fail("ERR the key '" .. COLD.echo(key) .. "' would hold more than " .. COLD.int(32)
        .. ' windows: ' .. L.command .. ' keeps at most ' .. COLD.int(32)
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

-- RL.SLIDING: counts in buckets per window on each key. State: one string per key,
-- `window_ms:buckets:first:counts` entries separated by commas (the counts separated by
-- dots, from bucket number `first`).
SLIDING = (function()
  local L = { kind = 'SLIDING', command = 'RL.SLIDING', storage = 'string', expiry = true, nargs = 0,
    buckets_per_key = true,
    expected = 'window_ms:buckets:first:counts entries separated by commas',
    options = { LIMIT = true, BUCKETS = true },
    accepts = { COST = true, AT = true, LIMIT = true, BUCKETS = true, REFUND = true, FORCE = true, UPTO = true },
    syntax = 'RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]',
    rule_syntax = 'SLIDING i LIMIT window limit [LIMIT window limit ...] [BUCKETS n]' }
  limits_rule(L)
  function L.build(r, o)
    if not o.limits then COLD.fail('ERR at least one LIMIT window limit is needed') end
    local n = o.buckets or 10
    for _, lw in ipairs(o.limits) do
      if (lw[1] * 1000) % n ~= 0 then
        COLD.fail('ERR a window of ' .. COLD.int(lw[1]) .. ' ms does not split into ' .. COLD.int(n)
          .. ' buckets of whole microseconds (choose BUCKETS dividing ' .. COLD.int(lw[1]) .. '000)')
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
    if #raw == 0 then COLD.state_error(L, key, named) end
    local entries, by_w = {}, {}
    local total_buckets = 0
    for item in string.gmatch(raw .. ',', '([^,]*),') do
      local w, n, first, counts = string.match(item, '^(%d+):(%d+):(%d+):([%d%.]+)$')
      if not w then COLD.state_error(L, key, named) end
      w = stored_digits(w, 315360000000)
      n = stored_digits(n, 100)
      first = stored_digits(first, 9007199254740991)
      if not (w and n and first) or w == 0 or n == 0 or (w * 1000) % n ~= 0 then COLD.state_error(L, key, named) end
      local list, sum = {}, 0
      for c in string.gmatch(counts .. '.', '(%d*)%.') do
        local v = stored_digits(c, 9007199254740991)
        if not v then COLD.state_error(L, key, named) end
        sum = sum + v
        if sum > 9007199254740991 then COLD.state_error(L, key, named) end
        list[#list + 1] = v
      end
      if #list > n + 1 then COLD.state_error(L, key, named) end
      -- No bucket later than a call writes into: the one holding the latest AT.
      if (first + #list) * (w * 1000 / n) > 4102444800000000 + w * 1000 / n then COLD.state_error(L, key, named) end
      total_buckets = total_buckets + n
      if total_buckets > 1000 then COLD.state_error(L, key, named) end
      if #entries > 0 and entries[#entries].w >= w then COLD.state_error(L, key, named) end
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
    if after > 9007199254740991 then COLD.force_out_of_bounds('a count above 9007199254740991') end
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
          for k = 1, #counts do texts[k] = COLD.int(counts[k]) end
          counts = texts
          break
        end
      end
      if first >= 1e14 then first = COLD.int(first) end
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

function rl_sliding(keys, args)
  return run(each_key_command, keys, args, SLIDING, 'rl_sliding')
end

return rl_sliding(KEYS, ARGV)

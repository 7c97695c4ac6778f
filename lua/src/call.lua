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

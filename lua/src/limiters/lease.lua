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

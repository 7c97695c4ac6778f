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

-- The shapes of the limiter commands: one key (RL.FIXED ...), numkeys keys under one
-- rule (RL.MULTI, RL.SLIDING); each parses its call and hands it to run_call. A
-- limiter's file names its shape in its function:
--   local function rl_fixed(keys, args)
--     return run(single_command, keys, args, FIXED, 'rl_fixed')
--   end

-- The library remembers the rules of the single-key calls it has read that give no
-- option (at most 256 of them), by their arguments: such a call is not parsed again.
local READ_CALLS = LIBRARY and { n = 0 } -- L -> args[1] -> ... -> args[nargs] -> { rule }

-- A single-key command: `FCALL name 1 key <its arguments>` (or EVALSHA of its script).
local function single_command(keys, args, L, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  local nargs, given = L.nargs, #args
  if LIBRARY and given == nargs then
    local node = READ_CALLS[L]
    for i = 1, nargs do node = node and node[args[i]] end
    if node then return run_call('one', keys, node, nil, 1, nil, 'take') end
  end
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
  local cost = o.cost
  if mode == 'take' then
    r = L.build(r, o)
  else
    -- A refund or a forced request of any cost can be settled: no capacity check.
    o.cost = 0
    r = L.build(r, o)
    o.cost = cost
  end
  L.check_cost(r, cost, mode)
  local rules = { r }
  if LIBRARY and given == nargs and READ_CALLS.n < 256 then
    READ_CALLS.n = READ_CALLS.n + 1
    local node = READ_CALLS
    for i = 0, nargs - 1 do
      local k = i == 0 and L or args[i]
      node[k] = node[k] or {}
      node = node[k]
    end
    node[args[nargs]] = rules
  end
  return run_call('one', keys, rules, nil, cost, o.at, mode)
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

-- Cold: the errors a wrong numkeys can explain (the module's numkeys_hint takes the same).
local NUMKEYS_HINTED = {
  "^ERR unknown option '", "^ERR unknown rule '", '^ERR at least one LIMIT window limit is needed$',
  "^ERR key %d+ '.*' is named by no rule",
}

-- A call with numkeys, parsed by `parse(keys, args)` (which raises the call's error and
-- writes nothing). When it fails with an error that a wrong numkeys explains, and the
-- same arguments parse with another number of keys (the nearest first, fewer before
-- more, up to `max`), the error says which, as the module's does.
local function with_numkeys_hint(parse, keys, args, max)
  local ok, a, b, c, d, e, f = pcall(parse, keys, args)
  if ok then return a, b, c, d, e, f end
  local res = a
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
  local rules, cost, at, mode = with_numkeys_hint(function(ks, as)
    if 2 + #ks + #as < 6 then arity_error(L.command, L.syntax) end
    check_keys(ks, MAX_KEYS, name)
    local o = parse_options(as, 1, L.accepts, false)
    local mode = settle_mode(o)
    local r = L.build({}, o)
    L.check_cost(r, o.cost, mode)
    local rules = {}
    for k = 1, #ks do rules[k] = r end
    return rules, o.cost, o.at, mode
  end, keys, args, MAX_KEYS)
  return run_call('each', keys, rules, nil, cost, at, mode)
end

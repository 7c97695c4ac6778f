-- The shapes of the limiter commands: one key (RL.FIXED ...), numkeys keys under one
-- rule (RL.MULTI, RL.SLIDING) or each under its own (RL.ALL, all.lua); each parses its
-- call and hands it to run_call. A
-- limiter's file names its shape in its function:
--   local function rl_fixed(keys, args)
--     return run(single_command, keys, args, FIXED, 'rl_fixed')
--   end

-- The library remembers the calls it has parsed that give neither AT nor COST (at most
-- 256, in MEMO.calls), by command, number of keys and arguments: such a call is not
-- parsed again (its keys are still checked). A parsed call: { rules, positions, cost,
-- at, mode, gate, field } (run_call's arguments of those names).

-- Cold (the library only): the parsed call of `what` (a limiter, or 'all') remembered
-- for these arguments, or nil.
local function recalled(what, nkeys, args)
  local node = MEMO.calls[what]
  node = node and node[nkeys]
  node = node and node[#args]
  for i = 1, #args do node = node and node[args[i]] end
  return node
end

-- Cold (the library only): remember a parsed call, while there is room.
local function remember(what, nkeys, args, call)
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

-- A single-key command's arguments, parsed: the call's rules, cost, AT and mode, and
-- whether to remember it.
local function single_parse(args, L)
  local nargs, given = L.nargs, #args
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
  r = L.build(r, o)
  L.check_cost(r, o.cost, mode)
  return { r }, o.cost, o.at, mode, not (o.AT or o.COST)
end

-- A single-key command: `FCALL name 1 key <its arguments>` (or EVALSHA of its script).
local function single_command(keys, args, L, name)
  if #keys ~= 1 then keys_error(name, 'exactly 1', #keys) end
  local call = MEMO and recalled(L, 1, args)
  if call then return run_call('one', keys, call[1], nil, call[3], call[4], call[5]) end
  local rules, cost, at, mode, again = single_parse(args, L)
  if MEMO and again then remember(L, 1, args, { rules, nil, cost, at, mode }) end
  return run_call('one', keys, rules, nil, cost, at, mode)
end

-- The keys of a call with numkeys (FCALL's or EVALSHA's): from 1 to `max`, each at most
-- once.
local function check_keys(keys, max, name)
  if #keys < 1 or #keys > max then keys_error(name, '1 to ' .. int(max), #keys) end
  if #keys == 1 then return end
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

-- A call with numkeys, parsed by `parse(keys, args, ...)` (which raises the call's
-- error and writes nothing): its call, and whether to remember it. When it fails with an
-- error that a wrong numkeys explains, and the same arguments parse with another number
-- of keys (the nearest first, fewer before more, up to `max`), the error says which, as
-- the module's does.
local function with_numkeys_hint(parse, keys, args, max, ...)
  local ok, res, again = pcall(parse, keys, args, ...)
  if ok then return res, again end
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
        if pcall(parse, k2, a2, ...) then
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

-- The arguments of RL.MULTI and RL.SLIDING, parsed: the call, and whether to remember it.
local function each_key_parse(ks, as, name, L)
  if 2 + #ks + #as < 6 then arity_error(L.command, L.syntax) end
  check_keys(ks, MAX_KEYS, name)
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
local function numkeys_command(keys, args, shape, parse, max, what, name)
  local call = MEMO and recalled(what, #keys, args)
  if call then
    check_keys(keys, max, name)
  else
    local again
    call, again = with_numkeys_hint(parse, keys, args, max, name, what)
    if MEMO and again then remember(what, #keys, args, call) end
  end
  return run_call(shape, keys, call[1], call[2], call[3], call[4], call[5], call[6], call[7])
end

-- The call shape of RL.MULTI and RL.SLIDING: numkeys from 1 to MAX_KEYS distinct keys,
-- then LIMIT window limit triples among the options, the same rule on every key.
local function each_key_command(keys, args, L, name)
  return numkeys_command(keys, args, 'each', each_key_parse, MAX_KEYS, L, name)
end

-- RL.ALL: numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms] [ID id]
-- [REFUND|FORCE|UPTO], each rule one limiter's arguments with its key replaced by the key's
-- 1-based position among the keys (`FIXED i limit window [ALIGN]`, ...). Each rule is
-- judged by the same limiter as its own command, on the same state; the call is allowed
-- iff every rule allows, and a denial writes nothing. The rules are the limiters of
-- lua/src/limiters/ (RULES and RULE_KINDS, written by the build).

local ALL_OPTIONS = {
  COST = true, AT = true, ALIGN = true, DELAY = true, BUCKETS = true, META = true, LIMIT = true,
  ID = true, REFUND = true, FORCE = true, UPTO = true,
}
local CALL_OPTIONS = { COST = true, AT = true, REFUND = true, FORCE = true, UPTO = true }

-- The arguments of RL.ALL, parsed: the call (its rules, their keys' positions, the
-- call's cost, AT and mode, the index of its gate and that of its first rule with a
-- reply_field), and whether to remember it.
local function all_parse(keys, args, name)
  if 1 + #keys + #args < 4 then
    arity_error('RL.ALL', 'RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE|UPTO]')
  end
  check_keys(keys, MAX_ALL_KEYS, name)
  local rules, positions, taken = {}, {}, {}
  local o = { cost = 1 }
  local i = 1
  while i <= #args do
    local w = string.upper(args[i])
    local index = #rules + 1
    if CALL_OPTIONS[w] or w == 'ID' then
      -- The call's options: COST, AT, REFUND, FORCE, UPTO, and those its rules take from the
      -- call (ID).
      local accepts = {}
      for k in pairs(CALL_OPTIONS) do accepts[k] = true end
      for _, r in ipairs(rules) do
        for k in pairs(r.L.call_options or {}) do accepts[k] = true end
      end
      o = parse_options(args, i, accepts, false, function(word)
        if RULES[string.upper(word)] then fail('ERR COST and AT come after every rule') end
      end)
      break
    end
    if ALL_OPTIONS[w] then
      -- An option after a rule that does not take it.
      local last = rules[#rules]
      local why = (w == 'DELAY') and 'DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)'
        or ('option ' .. w .. ' does not belong to this rule')
      rule_error(last and #rules or 1, last and last.L.kind or 'RL.ALL', why)
    end
    local L = RULES[w]
    if not L then
      fail("ERR unknown rule '" .. echo(args[i]) .. "': a rule is "
        .. table.concat(RULE_KINDS, ', ', 1, #RULE_KINDS - 1) .. ' or ' .. RULE_KINDS[#RULE_KINDS]
        .. ' followed by its key\'s position (COST and AT come after the rules)')
    end
    local raw = args[i + 1] or ''
    local ok, position = pcall(parse_int, 'position', raw, 1)
    if not ok or position > #keys then
      rule_error(index, L.kind, "invalid key position '" .. echo(raw) .. "': must be an integer from 1 to "
        .. int(#keys) .. " (the keys' places after numkeys)")
    end
    if taken[position] then
      rule_error(index, L.kind, 'key ' .. int(position) .. ' is already named by rule ' .. int(taken[position])
        .. ': one rule per key')
    end
    local ok2, res = pcall(function()
      if #args - (i + 1) < L.nargs then
        fail('ERR wrong number of arguments for a ' .. L.kind .. ' rule (syntax: ' .. L.rule_syntax .. ')')
      end
      local p = L.parse_args(args, i + 2)
      local ro, next_i = parse_options(args, i + 2 + L.nargs, L.options, true)
      return { r = L.build(p, ro), next = next_i }
    end)
    if not ok2 then rule_error(index, L.kind, res) end
    taken[position] = index
    rules[index], positions[index] = res.r, position
    i = res.next
  end
  for k = 1, #keys do
    if not taken[k] then
      fail('ERR key ' .. int(k) .. " '" .. echo(keys[k]) .. "' is named by no rule: every key needs exactly one rule")
    end
  end
  -- At most one penalty box per call.
  local gate, field
  for index, r in ipairs(rules) do
    if r.L.gate then
      if gate then rule_error(index, r.L.kind, 'at most one BAN rule per call') end
      gate = index
    end
    if r.L.reply_field and not field then field = index end
  end
  local mode = settle_mode(o)
  for index, r in ipairs(rules) do
    if r.L.call_opts then
      local ok, res = pcall(r.L.call_opts, r, o)
      if not ok then rule_error(index, r.L.kind, res) end
    end
    local ok, res = pcall(r.L.check_cost, r, o.cost, mode)
    if not ok then rule_error(index, r.L.kind, res) end
  end
  return { rules, positions, o.cost, o.at, mode, gate, field }, not (o.AT or o.COST)
end

local function rl_all(keys, args)
  return run(numkeys_command, keys, args, 'all', all_parse, MAX_ALL_KEYS, 'all', 'rl_all')
end

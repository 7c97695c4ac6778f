-- RL.ALL twin:
--   EVALSHA sha numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms]
-- with the rules FIXED i limit window [ALIGN] | GCRA i max_burst count period |
-- MULTI i LIMIT window limit [...] [ALIGN] | SLIDING i LIMIT window limit [...]
-- [BUCKETS n] | LOG i limit window [META value], each naming its key by its 1-based
-- position among KEYS. Each rule is judged by the same limiter as its own twin, on the
-- same state; the call is allowed iff every rule allows, and a denial writes nothing.
-- Needs lua/prelude.lua in front of it (LIMITERS and run_call there).

local function all()
  if 1 + #KEYS + #ARGV < 4 then
    arity_error('RL.ALL', 'RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms]')
  end
  check_keys(MAX_ALL_KEYS)
  local rules, taken = {}, {}
  local o = { cost = 1 }
  local function in_rule(index, kind, res)
    fail('ERR rule ' .. int(index) .. ' (' .. kind .. '): ' .. string.gsub(message(res), '^ERR ', '', 1))
  end
  local options = set('COST', 'AT', 'ALIGN', 'DELAY', 'BUCKETS', 'META', 'LIMIT')
  local i = 1
  while i <= #ARGV do
    local w = string.upper(ARGV[i])
    local index = #rules + 1
    if w == 'COST' or w == 'AT' then
      o = parse_options(i, set('COST', 'AT'), false, function(word)
        if LIMITERS[string.upper(word)] then fail('ERR COST and AT come after every rule') end
      end)
      break
    end
    if options[w] then
      -- An option after a rule that does not take it.
      local last = rules[#rules]
      local why = (w == 'DELAY') and 'DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)'
        or ('option ' .. w .. ' does not belong to this rule')
      in_rule(last and #rules or 1, last and last.L.kind or 'RL.ALL', why)
    end
    local make = LIMITERS[w]
    if not make then
      fail("ERR unknown rule '" .. echo(ARGV[i]) .. "': a rule is FIXED, GCRA, MULTI, SLIDING or LOG"
        .. ' followed by its key\'s position (COST and AT come after the rules)')
    end
    local L = make()
    local raw = ARGV[i + 1] or ''
    local ok, position = pcall(parse_int, 'position', raw, 1)
    if not ok or position > #KEYS then
      in_rule(index, L.kind, "invalid key position '" .. echo(raw) .. "': must be an integer from 1 to "
        .. int(#KEYS) .. " (the keys' places after numkeys)")
    end
    if taken[position] then
      in_rule(index, L.kind, 'key ' .. int(position) .. ' is already named by rule ' .. int(taken[position])
        .. ': one rule per key')
    end
    local ok2, res = pcall(function()
      if #ARGV - (i + 1) < L.nargs then
        fail('ERR wrong number of arguments for a ' .. L.kind .. ' rule (syntax: ' .. L.rule_syntax .. ')')
      end
      local p = L.parse_args(i + 2)
      local ro, next_i = parse_options(i + 2 + L.nargs, L.options, true)
      ro.cost = 1
      return { r = L.build(p, ro), next = next_i }
    end)
    if not ok2 then in_rule(index, L.kind, res) end
    taken[position] = index
    rules[index] = { k = position, L = L, r = res.r }
    i = res.next
  end
  for k = 1, #KEYS do
    if not taken[k] then
      fail('ERR key ' .. int(k) .. " '" .. echo(KEYS[k]) .. "' is named by no rule: every key needs exactly one rule")
    end
  end
  for index, rule in ipairs(rules) do
    local ok, res = pcall(rule.L.check_cost, rule.r, o.cost)
    if not ok then in_rule(index, rule.L.kind, res) end
  end
  return run_call({ shape = 'all', keys = KEYS, rules = rules, cost = o.cost, at = o.at })
end

return run(all)

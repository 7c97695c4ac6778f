//! RL.ALL against real servers: several limiters of different kinds on several keys,
//! all or nothing. Each rule is judged as its own command would judge its key (checked
//! against the single commands run on copies of the keys), a denial writes nothing
//! anywhere, the binding rule follows the tie rules; the twin gives the same replies and
//! states, mixed with the single commands and their twins on the same keys; errors with
//! their exact texts; WRONGTYPE; key declaration, CROSSSLOT and Cluster routing.

use crate::common;

use common::{
    at_base, every_side, limited, log_member, state, wait_for_replicas, Client, Cluster, Rng,
    Server, Twin, Twins, Value, HOUR, MINUTE,
};

/// The five integers a limiter reply starts with.
fn five(v: &Value) -> Vec<i64> {
    v.array()[..5].iter().map(Value::int).collect()
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// `RL.ALL` (native) or its twin's call (`FCALL` or `EVALSHA`) with the same arguments.
fn all_line(twin: Option<&Twin>, keys: &[String], rest: &[String]) -> Vec<String> {
    match twin {
        None => {
            let mut v = vec!["RL.ALL".to_string(), keys.len().to_string()];
            v.extend(keys.iter().cloned());
            v.extend(rest.iter().cloned());
            v
        }
        Some(t) => t.argv(keys, rest),
    }
}

/// A side's letter in key names: n (native), f (function), t (script).
fn letter(twin: Option<&Twin>) -> &'static str {
    match twin {
        None => "n",
        Some(t) if t.call == "FCALL" => "f",
        Some(_) => "t",
    }
}

/// A key's state as a plain client reads it: type, value (GET, or the sorted set's
/// members and scores) and absolute expiry.
fn key_state(c: &mut Client, key: &str) -> (String, Value, i64) {
    let t = c.cmd(&["TYPE", key]).text();
    let v = match t.as_str() {
        "zset" => c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "string" => c.cmd(&["GET", key]),
        _ => Value::Nil,
    };
    (t, v, c.cmd(&["PEXPIRETIME", key]).int())
}

/// Copy `from` to `to` (value and absolute expiry), or delete `to` when `from` is missing.
fn copy_key(c: &mut Client, from: &str, to: &str) {
    c.cmd(&["DEL", to]);
    if let Value::Bulk(dump) = c.cmd(&["DUMP", from]) {
        let exp = c.cmd(&["PEXPIRETIME", from]).int();
        let mut restore = vec![
            b"RESTORE".to_vec(),
            to.as_bytes().to_vec(),
            exp.max(0).to_string().into_bytes(),
            dump,
        ];
        if exp > 0 {
            restore.push(b"ABSTTL".to_vec());
        }
        assert_eq!(c.cmd(&restore), Value::Status("OK".into()));
    }
}

/// One rule of a call: its kind, the key it names, and its own command's line (without
/// `COST` and `AT`) on a given key.
#[derive(Clone, Debug)]
struct Rule {
    kind: &'static str,
    /// The rule's arguments after its key position.
    args: Vec<String>,
    /// The options of the whole call it takes (a LEASE rule's `ID id`): in its own
    /// command with the others, in RL.ALL after `COST` and `AT`.
    call: Vec<String>,
}

impl Rule {
    /// Its own command on `key` with `cost` at `at`.
    fn own_command(&self, key: &str, cost: &str, at: &str) -> Vec<String> {
        let mut v = match self.kind {
            "MULTI" | "SLIDING" => {
                vec![
                    format!("RL.{}", self.kind),
                    "1".to_string(),
                    key.to_string(),
                ]
            }
            _ => vec![format!("RL.{}", self.kind), key.to_string()],
        };
        v.extend(self.args.iter().cloned());
        v.extend(strings(&["COST", cost, "AT", at]));
        v.extend(self.call.iter().cloned());
        v
    }
}

/// A random rule of each kind, small enough to reach its limit in a few calls.
fn random_rule(rng: &mut Rng, kind: &'static str) -> Rule {
    let args = match kind {
        "FIXED" => {
            let mut a = strings(&[
                &rng.range(1, 6).to_string(),
                *rng.pick(&["1s", "10s", "1m"]),
            ]);
            if rng.chance(30) {
                a.push("ALIGN".into());
            }
            a
        }
        "GCRA" => strings(&[
            &rng.range(0, 4).to_string(),
            &rng.range(1, 5).to_string(),
            *rng.pick(&["1s", "10s"]),
        ]),
        "MULTI" | "SLIDING" => {
            let mut a = strings(&["LIMIT", "1s", &rng.range(1, 5).to_string()]);
            if rng.chance(50) {
                a.extend(strings(&["LIMIT", "1m", &rng.range(2, 12).to_string()]));
            }
            if kind == "MULTI" && rng.chance(30) {
                a.push("ALIGN".into());
            }
            if kind == "SLIDING" && rng.chance(40) {
                a.extend(strings(&["BUCKETS", *rng.pick(&["2", "5", "10"])]));
            }
            a
        }
        "LEASE" => strings(&[&rng.range(1, 4).to_string(), *rng.pick(&["1s", "10s"])]),
        _ => {
            let mut a = strings(&[&rng.range(1, 6).to_string(), *rng.pick(&["1s", "10s"])]);
            if rng.chance(60) {
                a.extend(strings(&["META", &format!("user:{}", rng.range(0, 4))]));
            }
            a
        }
    };
    let call = if kind == "LEASE" {
        lease_id(rng)
    } else {
        vec![]
    };
    Rule { kind, args, call }
}

/// `ID id` of a LEASE rule: one of a few holders, so that calls renew and release.
fn lease_id(rng: &mut Rng) -> Vec<String> {
    strings(&["ID", &format!("holder:{}", rng.range(0, 4))])
}

/// The rest of an RL.ALL call after its keys: each rule with its key's position.
fn all_rest(rules: &[(usize, Rule)], cost: &str, at: &str) -> Vec<String> {
    let mut v = Vec::new();
    for (pos, rule) in rules {
        v.push(rule.kind.to_string());
        v.push((pos + 1).to_string());
        v.extend(rule.args.iter().cloned());
    }
    v.extend(strings(&["COST", cost, "AT", at]));
    // The call's own options (one LEASE rule at most here, so one `ID`).
    for (_, rule) in rules {
        v.extend(rule.call.iter().cloned());
    }
    v
}

const KINDS: [&str; 6] = ["FIXED", "GCRA", "MULTI", "SLIDING", "LOG", "LEASE"];

/// The policy of the docs: 10/s smooth per user (GCRA), 10 000/day per account
/// (fixed), 100/min sliding per address; a denial by one consumes nothing in the others.
#[test]
fn a_denial_by_one_rule_consumes_nothing_in_the_others() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let at = at_base(2 * HOUR, HOUR);
    for twin in [None, Some(&tf.all), Some(&ts.all)] {
        let side = letter(twin);
        let keys: Vec<String> = ["user:7", "acct:3", "ip:1"]
            .iter()
            .map(|k| format!("{{{side}}}{k}"))
            .collect();
        let rules = |cost: &str, ms: u64| {
            strings(&[
                "GCRA",
                "1",
                "9",
                "10",
                "1s",
                "FIXED",
                "2",
                "3",
                "1d",
                "SLIDING",
                "3",
                "LIMIT",
                "1m",
                "100",
                "COST",
                cost,
                "AT",
                &(at + ms).to_string(),
            ])
        };
        // The account has 3 a day left: two calls of cost 1 are allowed by all three.
        for ms in [0, 1] {
            let r = c.cmd(&all_line(twin, &keys, &rules("1", ms)));
            assert_eq!(r.array()[0], Value::Int(0), "{r:?}");
        }
        let before: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
        // Cost 2: the user's GCRA and the address's window have room, the account
        // has 1 left: denied by the FIXED rule (rule 2), and nothing is consumed.
        let r = c.cmd(&all_line(twin, &keys, &rules("2", 2)));
        let items = r.array();
        assert_eq!(
            items[..5],
            [1, 3, 1, 86_399_998, 86_399_998].map(Value::Int),
            "{r:?}"
        );
        assert_eq!(items[5], Value::Int(2));
        assert_eq!(items[6].text(), keys[1]);
        let after: Vec<_> = keys.iter().map(|k| key_state(&mut c, k)).collect();
        assert_eq!(after, before, "a denial writes nothing anywhere");
        // Cost 1 still fits everywhere; then the account is full.
        let r = c.cmd(&all_line(twin, &keys, &rules("1", 3)));
        assert_eq!(
            r.array()[..3],
            [0, 3, 0].map(Value::Int),
            "binding: least remaining"
        );
        assert_eq!(r.array()[5], Value::Int(2));
    }
}

/// RL.FIXED alone gives a counter that lost its TTL its window back even when it
/// denies; inside a denied RL.ALL call nothing is written, not even that.
#[test]
fn a_denial_writes_nothing_not_even_a_lost_ttl() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let at = at_base(2 * HOUR, HOUR).to_string();
    for twin in [None, Some(&tf.all), Some(&ts.all)] {
        c.cmd(&["SET", "{d}bare", "1"]);
        c.cmd(&["DEL", "{d}full"]);
        let keys = strings(&["{d}bare", "{d}full"]);
        let rest = strings(&["FIXED", "1", "5", "1m", "FIXED", "2", "1", "1m", "AT", &at]);
        let r = c.cmd(&all_line(twin, &keys, &rest));
        assert_eq!(r.array()[0], Value::Int(0), "{r:?}");
        c.cmd(&["PERSIST", "{d}bare"]);
        // The second key is full now: denied, and the first keeps no TTL.
        let r = c.cmd(&all_line(twin, &keys, &rest));
        assert_eq!(five(&r)[..2], [1, 1], "{r:?}");
        assert_eq!(c.cmd(&["PTTL", "{d}bare"]).int(), -1, "{twin:?}");
        // Its own command repairs it.
        c.cmd(&["RL.FIXED", "{d}bare", "2", "1m", "AT", &at]);
        assert!(c.cmd(&["PTTL", "{d}bare"]).int() > 0);
    }
}

/// Each kind as the only rule of RL.ALL is its own command: the same five fields,
/// field 6 is 1 and field 7 its key, and the key holds the same state. Every call also
/// sends the same keyspace events: the command, its twin, RL.ALL and RL.ALL's twin, each
/// on its own key, write their keys the same way.
#[test]
fn a_single_rule_is_its_own_command() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = s.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    // The function and the script in turn, step by step.
    let twin_of = |t: &Twins, kind: &str| match kind {
        "FIXED" => t.fixed.clone(),
        "GCRA" => t.gcra.clone(),
        "MULTI" => t.multi.clone(),
        "SLIDING" => t.sliding.clone(),
        "LEASE" => t.lease.clone(),
        _ => t.log.clone(),
    };
    let mut marks = 0;
    let mut events_seen = 0;
    for seed in Rng::seeds(&[11, 12]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(2 * HOUR, HOUR);
        for step in 0..300 {
            now += *rng.pick(&[0u64, 1, 7, 120, 999, 1_000, 5_000]);
            let kind = *rng.pick(&KINDS);
            let rule = random_rule(&mut rng, kind);
            let cost = rng.range(0, 3).to_string();
            let at = now.to_string();
            let own_key = format!("own:{seed}:{kind}");
            let own = c.cmd(&rule.own_command(&own_key, &cost, &at));
            let t = &forms[step % 2];
            // The command's twin, on its own key: FCALL and EVALSHA take the same arguments.
            let twin_key = format!("twin:{seed}:{kind}");
            let mut line = rule.own_command(&twin_key, &cost, &at);
            let numkeys = if line[1] == "1" {
                vec![]
            } else {
                vec!["1".to_string()]
            };
            let tw = twin_of(t, kind);
            line.splice(0..1, [vec![tw.call.to_string(), tw.id], numkeys].concat());
            let twin = c.cmd(&line);
            // Its reply names its own key where the command's names the command's.
            let renamed = match &own {
                Value::Array(fields) => Value::Array(
                    fields
                        .iter()
                        .map(|f| match f {
                            Value::Bulk(k) if k == own_key.as_bytes() => {
                                Value::Bulk(twin_key.clone().into_bytes())
                            }
                            other => other.clone(),
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            assert_eq!(
                twin, renamed,
                "seed {seed} step {step} twin of {rule:?} cost {cost}"
            );
            assert_eq!(key_state(&mut c, &twin_key), key_state(&mut c, &own_key));
            for (side, twin) in [("n", None), ("t", Some(&t.all))] {
                let key = format!("all:{side}:{seed}:{kind}");
                let r = c.cmd(&all_line(
                    twin,
                    std::slice::from_ref(&key),
                    &all_rest(&[(0, rule.clone())], &cost, &at),
                ));
                let ctx = format!("seed {seed} step {step} {side} {rule:?} cost {cost}");
                if own.is_err() {
                    let want =
                        own.err()
                            .unwrap()
                            .replacen("ERR ", &format!("ERR rule 1 ({kind}): "), 1);
                    assert_eq!(r.err(), Some(want.as_str()), "{ctx}");
                    continue;
                }
                assert_eq!(r.array()[..5], own.array()[..5], "{ctx}");
                let mut tail = vec![Value::Int(1), Value::Bulk(key.clone().into_bytes())];
                // A LEASE rule's lease id (or nil) is the eighth field, its command's sixth.
                tail.extend(own.array().get(5).filter(|_| kind == "LEASE").cloned());
                assert_eq!(r.array()[5..], tail, "{ctx}");
                assert_eq!(
                    key_state(&mut c, &key),
                    key_state(&mut c, &own_key),
                    "{ctx}"
                );
            }
            // The step's events, up to a mark: the same list on each of the four keys.
            marks += 1;
            c.cmd(&["SET", "mark", &marks.to_string()]);
            let keys = [
                own_key.clone(),
                twin_key.clone(),
                format!("all:n:{seed}:{kind}"),
                format!("all:t:{seed}:{kind}"),
            ];
            let mut by_key: std::collections::BTreeMap<String, Vec<String>> =
                keys.into_iter().map(|k| (k, Vec::new())).collect();
            loop {
                let (key, event) = common::keyspace::next_event(&mut sub);
                if key == "mark" {
                    break;
                }
                by_key
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("an event on {key} at step {step}"))
                    .push(event);
            }
            let own_events = by_key[&own_key].clone();
            events_seen += own_events.len();
            for (k, events) in &by_key {
                assert_eq!(
                    events, &own_events,
                    "seed {seed} step {step}: events of {k} against {own_key} ({rule:?} cost {cost})"
                );
            }
        }
    }
    // Most steps write: two events (a write and its expiry) or more each.
    assert!(events_seen > 300, "{events_seen} events");
}

/// Random calls of several rules on shared keys, natively and through the twin on a
/// mirror of the keys, mixed with the single commands and their twins on the same keys.
/// Before each RL.ALL call, each rule's own command runs on a copy of its key: the call
/// is allowed iff every one of them is; then each key holds what its copy holds, and
/// when denied nothing changed; the five fields are the binding rule's, chosen by the
/// tie rules.
#[test]
fn random_walks_judge_each_rule_as_its_own_command() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let singles = |t: &Twins| {
        [
            t.fixed.clone(),
            t.gcra.clone(),
            t.multi.clone(),
            t.sliding.clone(),
            t.log.clone(),
            t.lease.clone(),
        ]
    };
    let singles = [singles(&tf), singles(&ts)];
    let mut outcomes = [0usize; 3];
    for seed in Rng::seeds(&[21, 22, 23]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(2 * HOUR, HOUR);
        // One key per kind, with a rule fixed for the walk (so states stay compatible).
        let mut rules: Vec<Rule> = KINDS.iter().map(|&k| random_rule(&mut rng, k)).collect();
        let key = |side: &str, i: usize| format!("{{w{seed}}}{side}:{}", KINDS[i]);
        for step in 0..300 {
            now += *rng.pick(&[0u64, 0, 1, 50, 400, 1_000, 3_000]);
            let at = now.to_string();
            // Costs every rule's capacity takes (the smallest limit is 1).
            let cost = rng.pick(&["0", "1", "1", "1"]).to_string();
            let ctx = format!("seed {seed} step {step}");
            // The LEASE rule's holder for this step.
            if let Some(lease) = rules.iter_mut().find(|r| r.kind == "LEASE") {
                lease.call = lease_id(&mut rng);
            }
            if rng.chance(25) {
                // A single command (or its twin) on one key of both sides.
                let i = rng.range(0, KINDS.len() as u64) as usize;
                for side in ["n", "f", "t"] {
                    let mut line = rules[i].own_command(&key(side, i), &cost, &at);
                    if rng.chance(50) {
                        let tw = &singles[rng.range(0, 2) as usize][i];
                        let n = if matches!(KINDS[i], "MULTI" | "SLIDING") {
                            3
                        } else {
                            2
                        };
                        let mut v = strings(&[tw.call, &tw.id, "1"]);
                        v.extend(line.drain(n - 1..));
                        line = v;
                    }
                    let r = c.cmd(&line);
                    assert!(!r.is_err(), "{ctx}: {line:?} {r:?}");
                }
                continue;
            }
            // A call of 1 to 6 rules, in random order, on keys in random order.
            let mut chosen: Vec<usize> = (0..KINDS.len()).collect();
            rng.shuffle(&mut chosen);
            chosen.truncate(rng.range(1, KINDS.len() as u64 + 1) as usize);
            let mut order: Vec<usize> = (0..chosen.len()).collect();
            rng.shuffle(&mut order);
            // Keys in `order`; rules in `chosen` order, naming their key's position.
            let key_of_rule: Vec<usize> = chosen
                .iter()
                .enumerate()
                .map(|(r, _)| order.iter().position(|&o| o == r).unwrap())
                .collect();
            let call_rules: Vec<(usize, Rule)> = chosen
                .iter()
                .zip(&key_of_rule)
                .map(|(&i, &pos)| (pos, rules[i].clone()))
                .collect();
            let rest = all_rest(&call_rules, &cost, &at);
            // Each rule alone, on a copy of its key.
            let mut alone = Vec::new();
            for &i in &chosen {
                let copy = format!("{{w{seed}}}copy:{}", KINDS[i]);
                copy_key(&mut c, &key("n", i), &copy);
                let r = c.cmd(&rules[i].own_command(&copy, &cost, &at));
                assert!(!r.is_err(), "{ctx}: {r:?}");
                alone.push((five(&r), key_state(&mut c, &copy)));
            }
            let before: Vec<_> = chosen
                .iter()
                .map(|&i| key_state(&mut c, &key("n", i)))
                .collect();
            let mut replies = Vec::new();
            for twin in [None, Some(&tf.all), Some(&ts.all)] {
                let side = letter(twin);
                let mut keys = vec![String::new(); chosen.len()];
                for (r, &i) in chosen.iter().enumerate() {
                    keys[key_of_rule[r]] = key(side, i);
                }
                let reply = c.cmd(&all_line(twin, &keys, &rest));
                assert!(!reply.is_err(), "{ctx} {side}: {reply:?}");
                replies.push((reply, keys));
            }
            let (reply, keys) = &replies[0];
            let items = reply.array();
            let allowed = alone.iter().all(|(f, _)| f[0] == 0);
            assert_eq!(
                items[0] == Value::Int(0),
                allowed,
                "{ctx}: {reply:?} vs {alone:?}"
            );
            // With a LEASE rule, an eighth field: its id when the call takes (or renews)
            // the lease, nil otherwise; without one, seven fields.
            match chosen.iter().find(|&&i| KINDS[i] == "LEASE") {
                Some(&i) => {
                    let want = if allowed && cost != "0" {
                        Value::Bulk(rules[i].call[1].clone().into_bytes())
                    } else {
                        Value::Nil
                    };
                    assert_eq!(items.get(7), Some(&want), "{ctx}: the lease id");
                }
                None => assert_eq!(items.len(), 7, "{ctx}"),
            }
            let binding = items[5].int() as usize - 1;
            assert_eq!(items[6].text(), keys[key_of_rule[binding]], "{ctx}");
            assert_eq!(
                items[..5].iter().map(Value::int).collect::<Vec<_>>(),
                alone[binding].0,
                "{ctx}"
            );
            // The tie rules, where milliseconds tell them apart.
            if allowed {
                let least = alone.iter().map(|(f, _)| f[2]).min().unwrap();
                let first = alone.iter().position(|(f, _)| f[2] == least).unwrap();
                assert_eq!(binding, first, "{ctx}: least remaining, the first");
            } else {
                assert_eq!(alone[binding].0[0], 1, "{ctx}: a denying rule binds");
                let most = alone
                    .iter()
                    .filter(|(f, _)| f[0] == 1)
                    .map(|(f, _)| f[3])
                    .max()
                    .unwrap();
                assert_eq!(alone[binding].0[3], most, "{ctx}: the largest retry");
            }
            for (r, &i) in chosen.iter().enumerate() {
                let got = key_state(&mut c, &key("n", i));
                if allowed {
                    assert_eq!(
                        got.1, alone[r].1 .1,
                        "{ctx}: {} as its own command",
                        KINDS[i]
                    );
                    assert_eq!(got.2, alone[r].1 .2, "{ctx}: expiry of {}", KINDS[i]);
                } else {
                    assert_eq!(got, before[r], "{ctx}: denied, {} unchanged", KINDS[i]);
                }
            }
            // The function and the script: the same reply (their own key names) and the
            // same states.
            for (twin_reply, twin_keys) in &replies[1..] {
                assert_eq!(twin_reply.array()[..6], items[..6], "{ctx}: twin");
                assert_eq!(
                    twin_reply.array()[7..],
                    items[7..],
                    "{ctx}: twin's lease id"
                );
                assert_eq!(
                    twin_reply.array()[6].text(),
                    twin_keys[key_of_rule[binding]]
                );
            }
            for &i in &chosen {
                let n = key_state(&mut c, &key("n", i));
                for side in ["f", "t"] {
                    let t = key_state(&mut c, &key(side, i));
                    assert_eq!(n, t, "{ctx}: twin ({side}) state of {}", KINDS[i]);
                }
            }
            outcomes[usize::from(!allowed)] += 1;
            if chosen.len() > 1 {
                outcomes[2] += 1;
            }
        }
    }
    assert!(
        outcomes.iter().all(|&n| n > 50),
        "allowed / denied / several rules: {outcomes:?}"
    );
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    let at = at_base(2 * HOUR, HOUR).to_string();
    c.cmd(&["SET", "a", "1", "PX", "1000000"]);
    let before = key_state(&mut c, "a");
    let max = "9007199254740991";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["1", "a", "FIXED"], "ERR wrong number of arguments for 'RL.ALL' command (syntax: RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE|UPTO])".into()),
        (vec!["0", "a", "FIXED", "1", "5", "1m"], "ERR invalid numkeys '0': must be an integer from 1 to 16".into()),
        (vec!["2", "a", "a", "FIXED", "1", "5", "1m"], "ERR key 'a' given more than once".into()),
        (vec!["1", "a", "FIXD", "1", "5", "1m"], "ERR unknown rule 'FIXD': a rule is BAN, FIXED, GCRA, LEASE, LOG, MULTI or SLIDING followed by its key's position (COST and AT come after the rules)".into()),
        (vec!["1", "a", "FIXED", "2", "5", "1m"], "ERR rule 1 (FIXED): invalid key position '2': must be an integer from 1 to 1 (the keys' places after numkeys)".into()),
        (vec!["1", "a", "FIXED", "x", "5", "1m"], "ERR rule 1 (FIXED): invalid key position 'x': must be an integer from 1 to 1 (the keys' places after numkeys)".into()),
        (vec!["2", "a", "b", "FIXED", "1", "5", "1m", "GCRA", "1", "1", "1", "1s"], "ERR rule 2 (GCRA): key 1 is already named by rule 1: one rule per key".into()),
        (vec!["2", "a", "b", "FIXED", "1", "5", "1m"], "ERR key 2 'b' is named by no rule: every key needs exactly one rule".into()),
        (vec!["1", "a", "FIXED", "1", "0", "1m"], format!("ERR rule 1 (FIXED): invalid limit '0': must be an integer from 1 to {max}")),
        (vec!["1", "a", "FIXED", "1", "5", "0s"], "ERR rule 1 (FIXED): invalid window '0s': must be a positive duration (an integer with an optional unit ms, s, m, h or d)".into()),
        (vec!["1", "a", "FIXED", "1", "5"], "ERR rule 1 (FIXED): wrong number of arguments for a FIXED rule (syntax: FIXED i limit window [ALIGN])".into()),
        (vec!["1", "a", "GCRA", "1", "1", "1001", "1ms"], "ERR rule 1 (GCRA): invalid rate: period / count must be at least 1 microsecond".into()),
        (vec!["1", "a", "GCRA", "1", "1", "1", "1s", "DELAY", "1s"], "ERR rule 1 (GCRA): DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)".into()),
        (vec!["1", "a", "GCRA", "1", "1", "1", "1s", "ALIGN"], "ERR rule 1 (GCRA): option ALIGN does not belong to this rule".into()),
        (vec!["1", "a", "MULTI", "1", "ALIGN"], "ERR rule 1 (MULTI): at least one LIMIT window limit is needed".into()),
        (vec!["1", "a", "SLIDING", "1", "LIMIT", "1ms", "5", "BUCKETS", "3"], "ERR rule 1 (SLIDING): a window of 1 ms does not split into 3 buckets of whole microseconds (choose BUCKETS dividing 1000)".into()),
        (vec!["1", "a", "LOG", "1", "10001", "1m"], "ERR rule 1 (LOG): invalid limit '10001': must be an integer from 1 to 10000".into()),
        (vec!["1", "a", "FIXED", "1", "5", "1m", "COST", "6"], "ERR rule 1 (FIXED): cost 6 exceeds the limit 5: the request can never be allowed".into()),
        (vec!["2", "a", "b", "FIXED", "1", "5", "1m", "GCRA", "2", "1", "1", "1s", "COST", "3"], "ERR rule 2 (GCRA): cost 3 exceeds the burst capacity 2: the request can never be allowed".into()),
        (vec!["2", "a", "b", "FIXED", "1", "5", "1m", "COST", "1", "GCRA", "2", "1", "1", "1s"], "ERR COST and AT come after every rule".into()),
        (vec!["1", "a", "FIXED", "1", "5", "1m", "COST", "1", "FOO"], "ERR unknown option 'FOO' (options here: COST, AT, REFUND, FORCE, UPTO)".into()),
        (vec!["1", "a", "FIXED", "1", "5", "1m", "COST", "-1"], format!("ERR invalid cost '-1': must be an integer from 0 to {max}")),
        (vec!["1", "a", "FIXED", "1", "5", "1m", "AT", "x"], "ERR invalid AT 'x': must be a Unix time in milliseconds from 1000000000000 to 4102444800000".into()),
        // The key holds a counter: not RL.MULTI's state.
        (vec!["1", "a", "MULTI", "1", "LIMIT", "1m", "5", "AT", &at], "ERR rule 1 (MULTI): the key 'a' does not hold RL.MULTI state (expected window_ms:count:end_ms entries separated by commas)".into()),
        (vec!["1", "a", "LOG", "1", "5", "1m", "AT", &at], "WRONGTYPE Operation against a key holding the wrong kind of value".into()),
    ];
    let mut seventeen = vec!["17"];
    let names: Vec<String> = (0..17).map(|i| format!("k{i}")).collect();
    seventeen.extend(names.iter().map(String::as_str));
    seventeen.extend(["FIXED", "1", "5", "1m"]);
    let mut cases = cases;
    cases.push((
        seventeen,
        "ERR invalid numkeys '17': must be an integer from 1 to 16".into(),
    ));
    for (args, want) in &cases {
        let mut native = vec!["RL.ALL"];
        native.extend(args.iter().copied());
        let r = c.cmd(&native);
        assert_eq!(r.err(), Some(want.as_str()), "native {args:?}");
        // The twin: FCALL and EVALSHA take numkeys themselves; a number of keys the
        // twin does not take is an error that names it.
        let n: usize = args[0].parse().unwrap();
        let want = if (1..=16).contains(&n) {
            want.clone()
        } else {
            format!("ERR wrong number of keys for 'rl_all': it takes 1 to 16, got {n}")
        };
        for t in &forms {
            let mut twin = vec![t.all.call, t.all.id.as_str()];
            twin.extend(args.iter().copied());
            let r = c.cmd(&twin);
            assert_eq!(r.err(), Some(want.as_str()), "{} {args:?}", t.all.name());
        }
        assert_eq!(key_state(&mut c, "a"), before, "{args:?} changed a");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1, "{args:?} wrote");
    }
}

/// Two rules, the second key full of windows: the call is refused with RL.MULTI's
/// error, naming the rule, and nothing is written (not even the first key).
#[test]
fn a_full_key_refuses_the_whole_call() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let at = at_base(2 * HOUR, HOUR);
    let far = at + 10 * HOUR;
    let windows: Vec<String> = (1..=32).map(|i| format!("{}:1:{far}", i * 1000)).collect();
    c.cmd(&["SET", "{f}m", &windows.join(","), "PXAT", &far.to_string()]);
    for twin in [None, Some(&tf.all), Some(&ts.all)] {
        let keys = strings(&["{f}a", "{f}m"]);
        let rest = strings(&[
            "FIXED",
            "1",
            "5",
            "1m",
            "MULTI",
            "2",
            "LIMIT",
            "100s",
            "5",
            "AT",
            &at.to_string(),
        ]);
        let r = c.cmd(&all_line(twin, &keys, &rest));
        assert_eq!(
            r.err(),
            Some("ERR rule 2 (MULTI): the key '{f}m' would hold more than 32 windows: RL.MULTI keeps at most 32 windows per key (use fewer distinct windows, or other keys)"),
            "{twin:?}"
        );
        assert_eq!(c.cmd(&["EXISTS", "{f}a"]).int(), 0);
    }
}

/// One RL.ALL call of 16 full LOG rules whose entries all left at once once removed
/// 160 000 entries (28 to 44 ms of the server). A write removes at most 64 leaving
/// entries a key now: the call leaves the rest to later writes. On the command and
/// both forms of its twin, which must agree.
#[test]
fn one_rl_all_call_of_16_full_logs_whose_entries_all_leave_removes_at_most_64_a_rule() {
    let server = Server::start();
    let mut c = server.client();
    let t = at_base(2 * HOUR, HOUR);
    for (side, n) in ["native", "function", "script"].iter().zip(0..) {
        let keys: Vec<String> = (0..16).map(|i| format!("{{all{n}}}:{i}")).collect();
        for key in &keys {
            let mut zadd = vec!["ZADD".to_string(), key.clone()];
            for seq in 1..=10_000u64 {
                zadd.push(t.to_string() + "000");
                zadd.push(log_member(seq, 1, "a-long-enough-meta"));
            }
            assert_eq!(c.cmd(&zadd).int(), 10_000);
        }
        let mut args: Vec<String> = Vec::new();
        for i in 1..=16 {
            args.extend(["LOG", &i.to_string(), "10000", "1s"].map(String::from));
        }
        args.extend(["AT".to_string(), (t + 1_000).to_string()]);
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let argv = &every_side(&mut c, "RL.ALL", &key_refs, &arg_refs)[n];
        let r = c.cmd(&argv.1);
        assert_eq!(limited(&r), 0, "{side}: {r:?}");
        for key in &keys {
            assert_eq!(
                c.cmd(&["ZCARD", key]).int(),
                10_000 - 64 + 1,
                "{side} {key}"
            );
        }
    }
}

#[test]
fn keys_are_declared_and_calls_are_routed_in_a_cluster() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&[
            "COMMAND", "GETKEYS", "RL.ALL", "2", "a", "b", "FIXED", "1", "5", "1m", "LOG", "2",
            "5", "1m"
        ]),
        Value::Array(vec![Value::Bulk(b"a".to_vec()), Value::Bulk(b"b".to_vec())])
    );
    drop(c);
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    let at = at_base(2 * HOUR, HOUR).to_string();
    for i in 0..12 {
        let (a, b) = (format!("{{u{i}}}:user"), format!("{{u{i}}}:ip"));
        let r = cc.cmd(&[
            "RL.ALL", "2", &a, &b, "GCRA", "1", "4", "10", "1s", "LOG", "2", "3", "1m", "AT", &at,
        ]);
        assert_eq!(five(&r), [0, 3, 2, -1, 60_000], "{a}");
    }
    assert!(cc.moved > 0, "some calls were redirected");
    let r = cc.cmd(&[
        "RL.ALL", "2", "a", "b", "FIXED", "1", "5", "1m", "FIXED", "2", "5", "1m",
    ]);
    assert!(r.err().is_some_and(|e| e.starts_with("CROSSSLOT")), "{r:?}");
}

/// RL.ALL's BAN rule on a real server: strikes on denials, a ban once `strikes` is
/// reached, every call denied while it runs (the other keys untouched), the BAN key a
/// plain string with the ban's end as its expiry, replicated as it is to a replica
/// without the module, and `DEL` lifting it.
#[test]
fn a_ban_rule_strikes_bans_and_is_lifted_by_del() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let t = at_base(HOUR, MINUTE);
    let call = |c: &mut Client, ms: u64, flag: &[&str]| {
        let at = (t + ms).to_string();
        let mut args = vec![
            "RL.ALL", "2", "{p}user", "{p}box", "FIXED", "1", "1", "1m", "BAN", "2", "3", "1m",
            "10m", "AT", &at,
        ];
        args.extend_from_slice(flag);
        let r = c.cmd(&args);
        let a = r.array();
        (five(&r), a[5].int(), a[6].text())
    };
    let fixed = |f: [i64; 5]| (f.to_vec(), 1, "{p}user".to_string());
    assert_eq!(call(&mut c, 0, &[]), fixed([0, 1, 0, -1, 60_000]));
    assert_eq!(
        c.cmd(&["EXISTS", "{p}box"]).int(),
        0,
        "an allowed call writes no BAN key"
    );
    assert_eq!(call(&mut c, 1_000, &[]), fixed([1, 1, 0, 59_000, 59_000]));
    assert_eq!(
        call(&mut c, 2_000, &["COST", "0"]),
        fixed([0, 1, 0, -1, 58_000])
    );
    assert_eq!(call(&mut c, 3_000, &[]), fixed([1, 1, 0, 57_000, 57_000]));
    assert_eq!(
        state(&mut c, "{p}box"),
        (
            Some(format!("strikes:2:{}", t + 61_000)),
            (t + 61_000) as i64
        ),
        "two strikes, in a window from the first"
    );
    // The third strike starts the ban, and binds.
    let banned = |f: [i64; 5]| (f.to_vec(), 2, "{p}box".to_string());
    assert_eq!(
        call(&mut c, 4_000, &[]),
        banned([1, 3, 0, 600_000, 600_000])
    );
    let ends = (t + 604_000) as i64;
    assert_eq!(
        state(&mut c, "{p}box"),
        (Some(format!("banned:{ends}")), ends)
    );
    let user = state(&mut c, "{p}user");
    assert_eq!(
        call(&mut c, 120_000, &[]),
        banned([1, 3, 0, 484_000, 484_000])
    );
    assert_eq!(
        call(&mut c, 120_000, &["FORCE"]),
        banned([1, 3, 0, 484_000, 484_000])
    );
    assert_eq!(state(&mut c, "{p}user"), user, "not written while banned");
    // A refund is never denied.
    assert_eq!(call(&mut c, 120_000, &["REFUND"]).0[0], 0);
    wait_for_replicas(&mut c, 1);
    assert_eq!(
        state(&mut replica.client(), "{p}box"),
        (Some(format!("banned:{ends}")), ends)
    );
    // DEL lifts the ban.
    c.cmd(&["DEL", "{p}box"]);
    assert_eq!(call(&mut c, 130_000, &[]), fixed([0, 1, 0, -1, 60_000]));
    // Bad BAN state is refused, naming the rule.
    c.cmd(&["SET", "{p}box", "banned"]);
    let at = (t + 130_000).to_string();
    let r = c.cmd(&[
        "RL.ALL", "2", "{p}user", "{p}box", "FIXED", "1", "1", "1m", "BAN", "2", "3", "1m", "10m",
        "AT", &at,
    ]);
    assert_eq!(
        r.err(),
        Some("ERR rule 2 (BAN): the key '{p}box' does not hold RL.ALL state (expected a penalty box: strikes:<count>:<end_ms> or banned:<end_ms>)")
    );
}

/// The three sides (command, function, script) agree on `lines`; the command's replies.
fn agreed(c: &mut Client, lines: &[&str]) -> Vec<String> {
    let [native, function, script] = common::on_every_side(c, lines);
    assert_eq!(function, native, "function");
    assert_eq!(script, native, "script");
    native
}

/// What a line replied, after its `=>`.
fn replied(line: &str) -> &str {
    line.split_once(" => ").map_or("", |(_, r)| r)
}

/// A call with FORCE that a LEASE rule denies binds the LEASE rule, never a rule the
/// forced request merely pushed over its limit: the client is told the lease's wait
/// (5 s), not the window's (60 s) or the rate's (180 s); nothing is written.
#[test]
fn a_forced_call_denied_by_a_lease_binds_the_lease_not_a_rule_forced_over() {
    let s = Server::start();
    let mut c = s.client();
    let got = agreed(
        &mut c,
        &[
            "RL.LEASE @z 1 5s ID a AT 1900000000000",
            "RL.FIXED @f 1 1m AT 1900000000000",
            "RL.ALL 2 @z @f LEASE 1 1 10s FIXED 2 1 1m COST 1 FORCE ID b AT 1900000000000",
            "GET @f",
            "RL.GCRA @g 0 1 3m AT 1900000000000",
            "RL.ALL 2 @z @g LEASE 1 1 10s GCRA 2 0 1 3m COST 1 FORCE ID b AT 1900000000000",
            "RL.ALL 2 @g @z GCRA 1 0 1 3m LEASE 2 1 10s FORCE ID b AT 1900000000000",
            "ZRANGE @z 0 -1",
        ],
    );
    assert_eq!(replied(&got[2]), r#"[1, 1, 0, 5000, 5000, 1, "@z", nil]"#);
    assert_eq!(replied(&got[3]), r#""1""#, "nothing written");
    assert_eq!(replied(&got[5]), r#"[1, 1, 0, 5000, 5000, 1, "@z", nil]"#);
    assert_eq!(replied(&got[6]), r#"[1, 1, 0, 5000, 5000, 2, "@z", nil]"#);
    assert_eq!(replied(&got[7]), r#"["a"]"#);
}

/// A LEASE rule takes COST 1 or 0 with or without REFUND or FORCE: `COST 5 FORCE` is the
/// error `COST 5` is (it once took one slot), and nothing is written.
#[test]
fn a_lease_rule_refuses_a_cost_above_1_with_or_without_a_flag() {
    let s = Server::start();
    let mut c = s.client();
    let got = agreed(
        &mut c,
        &[
            "RL.ALL 2 @z @f LEASE 1 1 10s FIXED 2 1 1m COST 5 ID b AT 1900000000000",
            "RL.ALL 2 @z @f LEASE 1 1 10s FIXED 2 1 1m COST 5 FORCE ID b AT 1900000000000",
            "RL.ALL 2 @z @f LEASE 1 1 10s FIXED 2 1 1m COST 5 REFUND ID b AT 1900000000000",
            "RL.ALL 2 @f @z FIXED 1 9 1m LEASE 2 1 10s COST 2 FORCE AT 1900000000000",
            "EXISTS @z @f",
        ],
    );
    let error = "error ERR rule 1 (LEASE): invalid cost 5: a lease takes COST 1 (the default) or COST 0 to peek";
    for line in &got[..3] {
        assert_eq!(replied(line), error, "{line}");
    }
    assert_eq!(
        replied(&got[3]),
        "error ERR rule 2 (LEASE): invalid cost 2: a lease takes COST 1 (the default) or COST 0 to peek"
    );
    assert_eq!(replied(&got[4]), "0");
}

/// `COST 0` with REFUND or FORCE is the peek `COST 0` is, on keys over their limit
/// (forced there): the same reply, nothing written (a forced peek once replied the wait
/// for a cost of 1, a refunding one a refund's numbers).
#[test]
fn cost_0_with_refund_or_force_is_the_peek_cost_0_is() {
    let s = Server::start();
    let mut c = s.client();
    let t = "AT 1900000000000";
    let calls = [
        ("RL.FIXED @f 2 1m", "GET @f"),
        ("RL.GCRA @g 0 1 1s", "GET @g"),
        ("RL.MULTI 1 @m LIMIT 1m 2 LIMIT 10s 1", "GET @m"),
        ("RL.SLIDING 1 @s LIMIT 10s 2", "GET @s"),
        ("RL.LOG @l 2 10s", "ZRANGE @l 0 -1 WITHSCORES"),
        ("RL.ALL 2 @f @g FIXED 1 2 1m GCRA 2 0 1 1s", "GET @g"),
    ];
    for (call, read) in calls {
        let force = format!("{call} COST 3 FORCE {t}");
        let peeks: Vec<String> = ["", " FORCE", " REFUND"]
            .iter()
            .map(|flag| format!("{call} COST 0{flag} {t}"))
            .collect();
        let expiry = read
            .replace("GET", "PEXPIRETIME")
            .replace("ZRANGE", "PEXPIRETIME");
        let expiry: String = expiry
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        let mut lines: Vec<&str> = vec![&force, read, &expiry];
        lines.extend(peeks.iter().map(String::as_str));
        lines.extend([read, expiry.as_str()]);
        let got = agreed(&mut c, &lines);
        let peek = replied(&got[3]);
        assert!(peek.starts_with("[1, "), "{call}: over its limit: {peek}");
        assert_eq!(replied(&got[4]), peek, "{call}: COST 0 FORCE");
        assert_eq!(replied(&got[5]), peek, "{call}: COST 0 REFUND");
        assert_eq!(
            replied(&got[6]),
            replied(&got[1]),
            "{call}: nothing written"
        );
        assert_eq!(
            replied(&got[7]),
            replied(&got[2]),
            "{call}: nothing written"
        );
    }
}

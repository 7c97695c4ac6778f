//! RL.LOG against real servers: the exact moving window, the requesters readable with
//! ZRANGE, peeks and costs, wrong type and foreign sorted sets, bad inputs, the
//! differential test (native command, Lua twin and the pure model on the same inputs),
//! concurrency and Cluster routing. Its replicas and AOF restarts are in
//! tests/replication.rs and tests/persistence.rs (the shared workload).

use crate::common;

use common::{
    at_base, command_calls, every_side, limited, log_member, Client, Cluster, Rng, Server, Twin,
    Twins, Value, HOUR,
};
use ratelimit_core::call::memory::{self, Key};
use ratelimit_core::limiters;

/// `None`: the command; `Some(twin)`: its function, then its script.
fn sides(c: &mut Client) -> [Option<Twin>; 3] {
    let [f, s] = Twins::both(c);
    [None, Some(f.log), Some(s.log)]
}

/// "native", "function" or "script".
fn side_name(side: &Option<Twin>) -> &'static str {
    side.as_ref().map_or("native", Twin::name)
}

fn call(c: &mut Client, side: &Option<Twin>, key: &str, args: &[&str]) -> Value {
    let mut v: Vec<&str> = match side {
        None => vec!["RL.LOG", key],
        Some(t) => vec![t.call, &t.id, "1", key],
    };
    v.extend_from_slice(args);
    c.cmd(&v)
}

/// The log as a plain client reads it: (member, score) pairs, oldest first.
fn entries(c: &mut Client, key: &str) -> Vec<(String, String)> {
    let r = c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]);
    r.array()
        .chunks(2)
        .map(|p| (p[0].text(), p[1].text()))
        .collect()
}

#[test]
fn an_exact_moving_window_that_remembers_who_used_it() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    for side in sides(&mut c) {
        let key = format!("rl:ip:1.2.3.4:{}", side_name(&side));
        let at = |ms: u64| (t + ms).to_string();
        // 3 per minute from one address, three users behind it.
        for (ms, user, remaining) in [(0, "alice", 2), (10_000, "bob", 1), (20_000, "alice", 0)] {
            let r = call(
                &mut c,
                &side,
                &key,
                &["3", "1m", "META", user, "AT", &at(ms)],
            );
            assert_eq!(r.ints(), [0, 3, remaining, -1, 60_000], "{user} at {ms}");
        }
        // Full: the oldest entry leaves at exactly 60 s.
        let r = call(
            &mut c,
            &side,
            &key,
            &["3", "1m", "META", "eve", "AT", &at(30_000)],
        );
        assert_eq!(r.ints(), [1, 3, 0, 30_000, 50_000]);
        // Who hit the limit: a plain ZRANGE (members seq:cost:meta, scores µs).
        let who: Vec<String> = entries(&mut c, &key)
            .into_iter()
            .map(|(m, _)| m.splitn(3, ':').nth(2).unwrap_or_default().to_string())
            .collect();
        assert_eq!(who, ["alice", "bob", "alice"]);
        assert_eq!(
            entries(&mut c, &key)[0],
            (
                "0000000000000001:1:alice".to_string(),
                (t * 1000).to_string()
            )
        );
        // A millisecond before the oldest leaves: still refused, retry in 1 ms.
        let r = call(&mut c, &side, &key, &["3", "1m", "AT", &at(59_999)]);
        assert_eq!(r.ints()[..4], [1, 3, 0, 1]);
        // At 60 s it has left: allowed, and the write removes it.
        let r = call(
            &mut c,
            &side,
            &key,
            &["3", "1m", "META", "eve", "AT", &at(60_000)],
        );
        assert_eq!(r.ints(), [0, 3, 0, -1, 60_000]);
        let members: Vec<String> = entries(&mut c, &key).into_iter().map(|(m, _)| m).collect();
        assert_eq!(
            members,
            [
                "0000000000000002:1:bob",
                "0000000000000003:1:alice",
                "0000000000000004:1:eve"
            ]
        );
        // The key expires when its newest entry leaves the window.
        assert_eq!(c.cmd(&["PEXPIRETIME", &key]).int() as u64, t + 120_000);
    }
}

#[test]
fn costs_peeks_and_binary_metadata() {
    let s = Server::start();
    let mut c = s.client();
    let at = at_base(2 * HOUR, HOUR).to_string();
    for side in sides(&mut c) {
        let key = format!("c:{}", side_name(&side));
        let meta = "a\u{0}b:c\r\n";
        let r = call(
            &mut c,
            &side,
            &key,
            &["10", "1h", "COST", "4", "META", meta, "AT", &at],
        );
        assert_eq!(r.ints(), [0, 10, 6, -1, 3_600_000]);
        // One member per request, whatever its cost: its running total and its cost.
        let members: Vec<String> = entries(&mut c, &key).into_iter().map(|(m, _)| m).collect();
        assert_eq!(members, [format!("0000000000000004:4:{meta}")]);
        // A peek writes nothing.
        let before = entries(&mut c, &key);
        let r = call(&mut c, &side, &key, &["10", "1h", "COST", "0", "AT", &at]);
        assert_eq!(r.ints(), [0, 10, 6, -1, 3_600_000]);
        let r = call(&mut c, &side, &key, &["10", "1h", "COST", "7", "AT", &at]);
        assert_eq!(r.ints(), [1, 10, 6, 3_600_000, 3_600_000]);
        assert_eq!(entries(&mut c, &key), before);
        // Nothing without COST: no key is created by a peek either.
        let r = call(&mut c, &side, &key, &["10", "1h", "COST", "0", "AT", &at]);
        assert_eq!(r.ints()[0], 0);
        let r = call(
            &mut c,
            &side,
            "fresh",
            &["10", "1h", "COST", "0", "AT", &at],
        );
        assert_eq!(r.ints(), [0, 10, 10, -1, 0]);
        assert_eq!(c.cmd(&["EXISTS", "fresh"]).int(), 0);
    }
}

#[test]
fn wrong_type_and_foreign_sorted_sets_are_left_alone() {
    let s = Server::start();
    let mut c = s.client();
    let at = at_base(2 * HOUR, HOUR).to_string();
    let invalid = "ERR the key does not hold RL.LOG state (expected a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch)";
    for side in sides(&mut c) {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["SET", "s", "x"]);
        let r = call(&mut c, &side, "s", &["3", "1m", "AT", &at]);
        assert_eq!(
            r.err(),
            Some("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        for (score, member) in [
            ("1", "x"),
            ("1.5", "0000000000000001:1:m"),
            ("5", "a:m"),
            ("-1", "0000000000000001:1:m"),
            ("5", ":m"),
            // The format of an earlier version: one member per unit, `seq:meta`.
            ("5", "1:m"),
            ("5", "0000000000000001:0:m"),
            ("5", "0000000000000001:2:m"),
        ] {
            c.cmd(&["DEL", "z"]);
            c.cmd(&["ZADD", "z", score, member]);
            let r = call(&mut c, &side, "z", &["3", "1m", "AT", &at]);
            assert_eq!(r.err(), Some(invalid), "{score} {member}");
            assert_eq!(c.cmd(&["ZCARD", "z"]).int(), 1);
            assert_eq!(c.cmd(&["PTTL", "z"]).int(), -1);
        }
        // More members than any log holds.
        c.cmd(&["DEL", "big"]);
        let mut args: Vec<String> = vec!["ZADD".into(), "big".into()];
        for i in 0..10_001 {
            args.extend([i.to_string(), format!("{i}:m")]);
        }
        c.cmd(&args);
        let r = call(&mut c, &side, "big", &["3", "1m", "AT", &at]);
        assert_eq!(r.err(), Some(invalid));
    }
}

/// A log whose members repeat or reverse their sequence numbers (three members
/// numbered 1, limit 3) was once read as one request and let two more through. The
/// members a call reads must follow each other, and the set may hold no more members
/// than the units its numbers span: otherwise the key is invalid state. On the command
/// and both forms of its twin, which must agree.
#[test]
fn a_log_whose_members_repeat_or_reverse_their_numbers_is_refused_as_invalid_state() {
    let server = Server::start();
    let mut c = server.client();
    let t = at_base(2 * HOUR, HOUR);
    let us = |ms: u64| (ms * 1000).to_string();
    let bad_logs: [(&str, Vec<(u64, String)>); 4] = [
        (
            "three members numbered 1",
            vec![
                (t, log_member(1, 1, "a")),
                (t, log_member(1, 1, "b")),
                (t, log_member(1, 1, "c")),
            ],
        ),
        (
            "numbers reversed",
            vec![
                (t, log_member(3, 1, "a")),
                (t + 1, log_member(2, 1, "b")),
                (t + 2, log_member(1, 1, "c")),
            ],
        ),
        (
            "a number repeated in the middle",
            vec![
                (t, log_member(1, 1, "a")),
                (t + 1, log_member(2, 1, "b")),
                (t + 2, log_member(2, 1, "c")),
                (t + 3, log_member(3, 1, "d")),
            ],
        ),
        (
            "a gap after the first counted member",
            vec![
                (t, log_member(1, 1, "a")),
                (t + 1, log_member(5, 1, "b")),
                (t + 2, log_member(6, 1, "c")),
            ],
        ),
    ];
    let at = (t + 10).to_string();
    for (what, members) in &bad_logs {
        for (name, argv) in every_side(&mut c, "RL.LOG", &["log:bad"], &["3", "1h", "AT", &at]) {
            c.cmd(&["DEL", "log:bad"]);
            for (time, m) in members {
                c.cmd(&["ZADD", "log:bad", &us(*time), m]);
            }
            let before = c.cmd(&["ZRANGE", "log:bad", "0", "-1", "WITHSCORES"]);
            let r = c.cmd(&argv);
            assert!(
                r.err()
                    .is_some_and(|e| e.contains("does not hold RL.LOG state")),
                "{what}, {name}: {r:?}"
            );
            assert_eq!(
                c.cmd(&["ZRANGE", "log:bad", "0", "-1", "WITHSCORES"]),
                before
            );
        }
    }
    // The same members numbered as RL.LOG numbers them: one more fits, then none.
    for (name, argv) in every_side(&mut c, "RL.LOG", &["log:good"], &["3", "1h", "AT", &at]) {
        c.cmd(&["DEL", "log:good"]);
        c.cmd(&[
            "ZADD",
            "log:good",
            &us(t),
            &log_member(1, 1, "a"),
            &us(t + 1),
            &log_member(2, 1, "b"),
        ]);
        assert_eq!(c.cmd(&argv).ints()[..3], [0, 3, 0], "{name}");
        assert_eq!(limited(&c.cmd(&argv)), 1, "{name}");
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    let at = at_base(2 * HOUR, HOUR).to_string();
    c.cmd(&["RL.LOG", "k", "5", "1m", "AT", &at]);
    let before = entries(&mut c, "k");
    let limit = |v: &str| format!("ERR invalid limit '{v}': must be an integer from 1 to 10000");
    let long = "x".repeat(257);
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["0", "1m"], limit("0")),
        (vec!["10001", "1m"], limit("10001")),
        (vec!["x", "1m"], limit("x")),
        (vec!["-3", "1m"], limit("-3")),
        (vec!["5", "0"], "ERR invalid window '0': must be a positive duration (an integer with an optional unit ms, s, m, h or d)".into()),
        (vec!["5", "1y"], "ERR invalid window '1y': unknown unit (use ms, s, m, h or d)".into()),
        (vec!["5", "1m", "META"], "ERR option META needs a value".into()),
        (vec!["5", "1m", "META", "a", "META", "b"], "ERR option META given more than once".into()),
        (vec!["5", "1m", "META", &long], "ERR META of 257 bytes: at most 256 bytes".into()),
        (vec!["5", "1m", "COST", "6"], "ERR cost 6 exceeds the limit 5: the request can never be allowed".into()),
        (vec!["5", "1m", "COST", "-1"], "ERR invalid cost '-1': must be an integer from 0 to 9007199254740991".into()),
        (vec!["5", "1m", "ALIGN"], "ERR unknown option 'ALIGN' (options here: COST, AT, META, REFUND, FORCE, UPTO)".into()),
        (vec!["5", "1m", "AT", "-5"], "ERR invalid AT '-5': must be a Unix time in milliseconds from 1000000000000 to 4102444800000".into()),
        (vec!["5"], "ERR wrong number of arguments for 'RL.LOG' command (syntax: RL.LOG key limit window [META value] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO])".into()),
    ];
    for (args, want) in &cases {
        let native = {
            let mut v = vec!["RL.LOG", "k"];
            v.extend(args.iter().copied());
            c.cmd(&v)
        };
        if args.len() >= 2 {
            assert_eq!(native.err(), Some(want.as_str()), "native {args:?}");
        } else {
            assert!(native.is_err(), "native {args:?}");
        }
        for twins in &forms {
            let twin = call(&mut c, &Some(twins.log.clone()), "k", args);
            assert_eq!(
                twin.err(),
                Some(want.as_str()),
                "{} {args:?}",
                twins.log.name()
            );
        }
        assert_eq!(entries(&mut c, "k"), before, "{args:?} changed the key");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1);
    }
}

#[test]
fn concurrent_clients_never_get_more_than_the_limit() {
    // 8 clients, some through each form of the twin, 300 requests each on one log of 1 000 per
    // hour: exactly 1 000 are allowed, and the log holds exactly 1 000 entries.
    let s = Server::start();
    let mut c = s.client();
    let sides = sides(&mut c);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let side = sides[i % 3].clone();
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let meta = format!("client:{i}");
                (0..300)
                    .filter(|_| {
                        call(&mut c, &side, "shared", &["1000", "1h", "META", &meta]).ints()[0] == 0
                    })
                    .count()
            })
        })
        .collect();
    let allowed: usize = threads.into_iter().map(|t| t.join().expect("client")).sum();
    assert_eq!(allowed, 1_000);
    assert_eq!(c.cmd(&["ZCARD", "shared"]).int(), 1_000);
}

// ---- the differential test -----------------------------------------------------

/// The model of one key: its entries as ZRANGE shows them, and its expiry.
#[derive(Clone, Debug, Default)]
struct Model {
    entries: Vec<(String, u64)>, // member, score
    expires: Option<u64>,
}

impl Model {
    /// The key as the module's path of a call reads and writes it.
    fn key(&self) -> Option<Key> {
        (!self.entries.is_empty()).then(|| Key::SortedSet {
            members: self
                .entries
                .iter()
                .map(|(member, score)| (*score, member.as_bytes().to_vec()))
                .collect(),
            expires_at: self.expires.map(ratelimit_core::UnixMillis),
        })
    }
}

fn predict(m: &mut Model, args: &[String]) -> Value {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let raw: Vec<&[u8]> = std::iter::once(&b"key"[..]).chain(raw).collect();
    let call = match limiters::log::parse(&raw) {
        Ok(r) => r,
        Err(e) => return Value::Error(e.to_string()),
    };
    let now = call.at.expect("AT");
    let mut keys = [m.key()];
    let settled = match memory::run(&call, &mut keys, now) {
        Ok(s) => s,
        Err(e) => return Value::Error(e.to_string()),
    };
    if let [Some(Key::SortedSet {
        members,
        expires_at,
    })] = &keys
    {
        m.entries = members
            .iter()
            .map(|(score, member)| {
                (
                    String::from_utf8(member.clone()).expect("utf-8 meta"),
                    *score,
                )
            })
            .collect();
        m.expires = expires_at.map(|e| e.0);
    }
    Value::Array(
        settled
            .verdict
            .fields()
            .iter()
            .map(|&f| Value::Int(f))
            .collect(),
    )
}

fn random_args(rng: &mut Rng, now_ms: u64) -> Vec<String> {
    let limit = *rng.pick(&[1i64, 2, 3, 5, 10]);
    let window = rng.pick(&["100ms", "1", "1s", "2500ms", "1m"]).to_string();
    let mut groups: Vec<Vec<String>> = vec![];
    if rng.chance(70) {
        groups.push(vec!["META".into(), format!("user:{}", rng.range(0, 5))]);
    }
    if rng.chance(50) {
        let cost = if rng.chance(5) {
            limit + 1
        } else {
            rng.irange(0, limit + 1)
        };
        groups.push(vec![
            rng.pick(&["COST", "cost"]).to_string(),
            cost.to_string(),
        ]);
    }
    groups.push(vec!["AT".into(), now_ms.to_string()]);
    rng.shuffle(&mut groups);
    let mut args = vec![limit.to_string(), window];
    if rng.chance(2) {
        args[rng.range(0, 2) as usize] = rng.pick(&["0", "x", "-1", "10001"]).to_string();
    }
    args.extend(groups.into_iter().flatten());
    args
}

#[test]
fn differential_native_twin_and_model() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let sides = [None, Some(tf.log), Some(ts.log)];
    let mut calls = [0usize; 3];
    for seed in Rng::seeds(&[1, 2, 3, 4]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(2 * HOUR, HOUR);
        let names = ["a", "b"];
        let mut models = vec![Model::default(); names.len()];
        for step in 0..500 {
            now += *rng.pick(&[0u64, 0, 1, 3, 50, 120, 400, 999, 1_000, 2_500, 61_000]);
            let k = rng.range(0, names.len() as u64) as usize;
            let keys = ["n", "f", "s", "m"].map(|ns| format!("{ns}:{seed}:{}", names[k]));
            if rng.chance(3) {
                for key in &keys {
                    c.cmd(&["DEL", key]);
                }
                models[k] = Model::default();
                continue;
            }
            let args = random_args(&mut rng, now);
            let want = predict(&mut models[k], &args);
            let ctx = format!("seed {seed} step {step} key {} args {args:?}", names[k]);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let mixed = sides[rng.range(0, 3) as usize].clone();
            let [n, f, s] = sides.clone();
            for (key, side) in keys.iter().zip([n, f, s, mixed]) {
                let got = call(&mut c, &side, key, &argv);
                assert_eq!(got, want, "{key}, {ctx}");
                let stored: Vec<(String, u64)> = entries(&mut c, key)
                    .into_iter()
                    .map(|(m, s)| (m, s.parse().expect("integer score")))
                    .collect();
                assert_eq!(stored, models[k].entries, "entries of {key}, {ctx}");
                let exp = c.cmd(&["PEXPIRETIME", key]).int();
                let want_exp = if models[k].entries.is_empty() {
                    -2
                } else {
                    models[k].expires.map_or(-1, |e| e as i64)
                };
                assert_eq!(exp, want_exp, "expiry of {key}, {ctx}");
            }
            calls[match &want {
                Value::Array(v) if v[0] == Value::Int(0) => 0,
                Value::Array(_) => 1,
                _ => 2,
            }] += 1;
        }
    }
    assert!(
        calls.iter().all(|&n| n > 50),
        "allowed/denied/errors: {calls:?}"
    );
}

#[test]
fn command_info_and_cluster_routing() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "RL.LOG", "k", "5", "1m"]),
        Value::Array(vec![Value::Bulk(b"k".to_vec())])
    );
    drop(c);
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    let at = at_base(2 * HOUR, HOUR).to_string();
    for i in 0..12 {
        let key = format!("rl:ip:{i}");
        let r = cc.cmd(&["RL.LOG", &key, "5", "1m", "META", "u", "AT", &at]);
        assert_eq!(r.ints(), [0, 5, 4, -1, 60_000], "{key}");
    }
    assert!(cc.moved > 0, "some calls were redirected");
    let total: i64 = cc
        .nodes
        .iter_mut()
        .map(|(_, c)| c.cmd(&["DBSIZE"]).int())
        .sum();
    assert_eq!(total, 12);
}

/// Calls at AT +72, +73, +75, +86, then +66, +67 with 3 per 10 ms: each late call is
/// judged and recorded at the newest entry's time, so no 10 ms of recorded times
/// holds more than 3 (they used to be recorded at +66 and +67: five in [+66, +76)).
#[test]
fn an_older_at_never_puts_more_than_the_limit_in_a_window() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    for side in sides(&mut c) {
        let key = format!("ooo:{}", side_name(&side));
        for ms in [72u64, 73, 75, 86, 66, 67] {
            let r = call(
                &mut c,
                &side,
                &key,
                &["3", "10ms", "AT", &(t + ms).to_string()],
            );
            assert_eq!(r.ints()[0], 0, "+{ms}");
        }
        let times: Vec<u64> = entries(&mut c, &key)
            .iter()
            .map(|(_, score)| score.parse::<u64>().expect("score") / 1000 - t)
            .collect();
        assert_eq!(times, [86, 86, 86], "the late ones at the newest time");
        // A third late call finds the window at +86 full.
        let r = call(
            &mut c,
            &side,
            &key,
            &["3", "10ms", "AT", &(t + 66).to_string()],
        );
        assert_eq!(r.ints(), [1, 3, 0, 30, 30]);
    }
}

/// A request of any cost is one member and one ZADD to replicas and the AOF: COST
/// 10 000 with a 256-byte META used to send ten thousand ZADDs (3.2 MB).
#[test]
fn a_call_of_any_cost_reaches_replicas_as_one_zadd() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let sides = sides(&mut c);
    let at = at_base(2 * HOUR, HOUR);
    let meta = "m".repeat(256);
    for (i, side) in sides.iter().enumerate() {
        let key = format!("big:{i}");
        let r = call(
            &mut c,
            side,
            &key,
            &[
                "10000",
                "1m",
                "META",
                &meta,
                "COST",
                "10000",
                "AT",
                &at.to_string(),
            ],
        );
        assert_eq!(r.ints(), [0, 10_000, 0, -1, 60_000]);
        assert_eq!(c.cmd(&["ZCARD", &key]).int(), 1);
    }
    common::wait_for_replicas(&mut c, 1);
    let mut rc = replica.client();
    assert_eq!(command_calls(&mut rc, "zadd"), 3, "one ZADD per call");
    for i in 0..3 {
        let key = format!("big:{i}");
        assert_eq!(entries(&mut rc, &key), entries(&mut c, &key), "{key}");
        assert_eq!(
            rc.cmd(&["PEXPIRETIME", &key]).int(),
            c.cmd(&["PEXPIRETIME", &key]).int()
        );
    }
}

/// A write that removes entries: a few are removed through the module's sorted-set API,
/// many (a burst leaving at once) by the server's ZREMRANGEBYSCORE; either way the
/// replicas get one ZREMRANGEBYSCORE with the same bound and hold the primary's set,
/// and subscribers get one `zremrangebyscore` event, as from the twin.
#[test]
fn removed_entries_reach_replicas_as_one_zrem_of_at_most_64_members_a_write() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let sides = sides(&mut c);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let t = at_base(2 * HOUR, HOUR);
    let mut sub = primary.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:burst:*"]);
    let mut removals = 0;
    for (i, side) in sides.iter().enumerate() {
        for burst in [3u64, 100] {
            let key = format!("burst:{i}:{burst}");
            for _ in 0..burst {
                let r = call(&mut c, side, &key, &["200", "1s", "AT", &t.to_string()]);
                assert_eq!(r.ints()[0], 0);
            }
            // One more a second later: the whole burst has left the window; the write
            // removes the oldest 64 of it at most, the next writes the rest.
            let (mut stale, mut new) = (burst, 0);
            for later in [1_000, 1_001, 1_002] {
                let later = (t + later).to_string();
                assert_eq!(
                    call(&mut c, side, &key, &["200", "1s", "AT", &later]).ints()[0],
                    0
                );
                let removed = stale.min(64);
                if removed > 0 {
                    removals += 1;
                }
                stale -= removed;
                new += 1;
                assert_eq!(c.cmd(&["ZCARD", &key]).int() as u64, stale + new, "{key}");
            }
        }
    }
    common::wait_for_replicas(&mut c, 1);
    let mut rc = replica.client();
    assert_eq!(command_calls(&mut rc, "zrem"), removals);
    assert_eq!(command_calls(&mut rc, "zremrangebyscore"), 0);
    for i in 0..sides.len() {
        for burst in [3, 100] {
            let key = format!("burst:{i}:{burst}");
            assert_eq!(entries(&mut rc, &key), entries(&mut c, &key), "{key}");
        }
    }
    // A zrem event for each write that removed, none for the others.
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut zrems = 0;
    while zrems < removals {
        let (key, event) = common::keyspace::next_event(&mut sub);
        if event == "zrem" {
            *seen.entry(key).or_default() += 1;
            zrems += 1;
        }
        assert_ne!(event, "zremrangebyscore");
    }
    assert_eq!(seen.len(), 2 * sides.len(), "{seen:?}");
}

/// RL.LOG once removed a burst of leaving entries by running `ZREMRANGEBYSCORE`
/// inside the module, after its new entry was added and replicated; with that command
/// renamed away the call failed half done (the entry kept, the expiry not moved, an
/// RL.ALL rule of the same call counted). No command runs on the write path now: the
/// same calls succeed whole on such a server, and the server counts no command they
/// ran. On the command and both forms of its twin, which must agree.
#[test]
fn rl_log_runs_no_command_inside_the_module_so_a_renamed_zremrangebyscore_changes_nothing() {
    let primary = Server::builder()
        .config("rename-command", "ZREMRANGEBYSCORE \"\"")
        .start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let t = at_base(2 * HOUR, HOUR);
    let later = (t + 1_000).to_string();
    for (side, key) in ["native", "function", "script"].iter().zip(0..) {
        let (log, fixed) = (format!("{{k{key}}}:log"), format!("{{k{key}}}:fixed"));
        for _ in 0..100 {
            let argv = &every_side(
                &mut c,
                "RL.LOG",
                &[&log],
                &["200", "1s", "AT", &t.to_string()],
            )[key];
            assert_eq!(limited(&c.cmd(&argv.1)), 0, "{side}: the burst");
        }
        // A second later the burst has left: the call that finds it, alone and in RL.ALL.
        let argv = &every_side(&mut c, "RL.LOG", &[&log], &["200", "1s", "AT", &later])[key];
        let r = c.cmd(&argv.1);
        assert_eq!(limited(&r), 0, "{side}: {r:?}");
        assert_eq!(c.cmd(&["ZCARD", &log]).int(), 100 - 64 + 1, "{side}");
        assert_eq!(
            c.cmd(&["PEXPIRETIME", &log]).int(),
            (t + 2_000) as i64,
            "{side}: the expiry moved"
        );
        let rules = [
            "FIXED", "1", "10", "1h", "LOG", "2", "200", "1s", "AT", &later,
        ];
        let argv = &every_side(&mut c, "RL.ALL", &[&fixed, &log], &rules)[key];
        let r = c.cmd(&argv.1);
        assert_eq!(limited(&r), 0, "{side}: RL.ALL {r:?}");
        assert_eq!(
            c.cmd(&["GET", &fixed]),
            Value::Bulk(b"1".to_vec()),
            "{side}"
        );
        assert_eq!(
            c.cmd(&["ZCARD", &log]).int(),
            2,
            "{side}: the last 36 of the burst removed, two new entries"
        );
        if *side == "native" {
            // The server ran no command for the module (a script's calls are counted).
            assert_eq!(command_calls(&mut c, "zremrangebyscore"), 0);
            assert_eq!(command_calls(&mut c, "zrem"), 0);
        }
    }
    common::wait_for_replicas(&mut c, 1);
    let mut r = replica.client();
    for key in 0..3 {
        let log = format!("{{k{key}}}:log");
        assert_eq!(
            r.cmd(&["ZRANGE", &log, "0", "-1", "WITHSCORES"]),
            c.cmd(&["ZRANGE", &log, "0", "-1", "WITHSCORES"])
        );
    }
}

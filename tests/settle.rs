//! `REFUND` and `FORCE` on every limiter command, and RL.ALL's `BAN` rule's counters,
//! against a real server: replies and states with explicit times, keys deleted when
//! full again, replication with and without the module, keyspace events, concurrent
//! clients that reserve and settle, bad inputs and `INFO ratelimit`.

use crate::common;

use common::keyspace::next_event;
use common::workload::snapshot;
use common::{at_base, info_fields, state, wait_for_replicas, Client, Server, Value, HOUR, MINUTE};

fn at(base: u64, ms: u64) -> String {
    (base + ms).to_string()
}

/// Run `line` (words; `{t}` is `base + ms`) and return its integers.
fn ints(c: &mut Client, base: u64, ms: u64, line: &str) -> Vec<i64> {
    let line = line.replace("{t}", &at(base, ms));
    let words: Vec<&str> = line.split_whitespace().collect();
    let r = c.cmd(&words);
    assert!(!r.is_err(), "{line}: {r:?}");
    r.array()
        .iter()
        .take(5)
        .map(|v| match v {
            Value::Int(i) => *i,
            other => panic!("{line}: {other:?}"),
        })
        .collect()
}

fn members(c: &mut Client, key: &str) -> Vec<String> {
    c.cmd(&["ZRANGE", key, "0", "-1"])
        .array()
        .iter()
        .map(Value::text)
        .collect()
}

#[test]
fn every_limiter_refunds_and_forces_with_explicit_times() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    let end = |ms: u64| (t + ms) as i64;
    // RL.FIXED
    assert_eq!(
        ints(&mut c, t, 0, "RL.FIXED f 10 1m COST 4 AT {t}"),
        [0, 10, 6, -1, 60_000]
    );
    assert_eq!(
        ints(&mut c, t, 1_000, "RL.FIXED f 10 1m COST 3 AT {t} REFUND"),
        [0, 10, 9, -1, 59_000]
    );
    assert_eq!(state(&mut c, "f"), (Some("1".into()), end(60_000)));
    assert_eq!(
        ints(&mut c, t, 2_000, "RL.FIXED f 10 1m COST 2 AT {t} refund"),
        [0, 10, 10, -1, 0]
    );
    assert_eq!(state(&mut c, "f"), (None, -2), "full again: deleted");
    assert_eq!(
        ints(&mut c, t, 0, "RL.FIXED f 10 1m COST 13 AT {t} FORCE"),
        [1, 10, 0, 60_000, 60_000]
    );
    assert_eq!(
        ints(&mut c, t, 1_000, "RL.FIXED f 10 1m AT {t}"),
        [1, 10, 0, 59_000, 59_000]
    );
    assert_eq!(state(&mut c, "f"), (Some("13".into()), end(60_000)));
    // RL.GCRA: one a second, a burst of 5.
    assert_eq!(
        ints(&mut c, t, 0, "RL.GCRA g 4 1 1s COST 3 AT {t}"),
        [0, 5, 2, -1, 3_000]
    );
    assert_eq!(
        ints(&mut c, t, 0, "RL.GCRA g 4 1 1s COST 2 AT {t} REFUND"),
        [0, 5, 4, -1, 1_000]
    );
    assert_eq!(
        state(&mut c, "g"),
        (Some(((t + 1_000) * 1_000).to_string()), end(1_000))
    );
    assert_eq!(
        ints(&mut c, t, 0, "RL.GCRA g 4 1 1s COST 1 AT {t} REFUND"),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(state(&mut c, "g"), (None, -2));
    assert_eq!(
        ints(&mut c, t, 0, "RL.GCRA g 4 1 1s COST 8 AT {t} FORCE"),
        [1, 5, 0, 4_000, 8_000]
    );
    assert_eq!(
        ints(&mut c, t, 4_000, "RL.GCRA g 4 1 1s AT {t}"),
        [0, 5, 0, -1, 5_000]
    );
    // RL.MULTI: the second has ended by the refund, the minute gives back.
    assert_eq!(
        ints(
            &mut c,
            t,
            0,
            "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 4 AT {t}"
        ),
        [0, 5, 1, -1, 1_000]
    );
    assert_eq!(
        ints(
            &mut c,
            t,
            1_500,
            "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 1 AT {t} REFUND"
        ),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(
        state(&mut c, "m"),
        (Some(format!("60000:3:{}", t + 60_000)), end(60_000))
    );
    // RL.SLIDING: newest buckets first.
    assert_eq!(
        ints(&mut c, t, 0, "RL.SLIDING 1 s LIMIT 10s 10 COST 3 AT {t}"),
        [0, 10, 7, -1, 11_000]
    );
    assert_eq!(
        ints(
            &mut c,
            t,
            2_000,
            "RL.SLIDING 1 s LIMIT 10s 10 COST 2 AT {t}"
        ),
        [0, 10, 5, -1, 11_000]
    );
    assert_eq!(
        ints(
            &mut c,
            t,
            3_000,
            "RL.SLIDING 1 s LIMIT 10s 10 COST 4 AT {t} REFUND"
        ),
        [0, 10, 9, -1, 8_000]
    );
    assert_eq!(
        state(&mut c, "s"),
        (Some(format!("10000:10:{}:1", t / 1_000)), end(11_000))
    );
    assert_eq!(
        ints(
            &mut c,
            t,
            3_000,
            "RL.SLIDING 1 s LIMIT 10s 10 COST 12 AT {t} FORCE"
        ),
        [1, 10, 0, 11_000, 11_000]
    );
    // RL.LOG: a member partly refunded keeps its META and the rest of its cost.
    assert_eq!(
        ints(&mut c, t, 0, "RL.LOG l 5 1m META a COST 2 AT {t}"),
        [0, 5, 3, -1, 60_000]
    );
    assert_eq!(
        ints(&mut c, t, 1_000, "RL.LOG l 5 1m META b COST 2 AT {t}"),
        [0, 5, 1, -1, 60_000]
    );
    assert_eq!(
        ints(&mut c, t, 2_000, "RL.LOG l 5 1m COST 3 AT {t} REFUND"),
        [0, 5, 4, -1, 58_000]
    );
    assert_eq!(members(&mut c, "l"), ["0000000000000001:1:a"]);
    assert_eq!(c.cmd(&["PEXPIRETIME", "l"]).int(), end(60_000));
    assert_eq!(
        ints(&mut c, t, 2_000, "RL.LOG l 5 1m COST 8 AT {t} FORCE"),
        [1, 5, 0, 60_000, 60_000]
    );
    let r = c.cmd(&[
        "RL.LOG",
        "l",
        "5",
        "1m",
        "COST",
        "2",
        "AT",
        &at(t, 2_000),
        "FORCE",
    ]);
    assert_eq!(
        r.err(),
        Some("ERR FORCE would leave the log holding more than twice its limit (10): nothing was written")
    );
    assert_eq!(
        ints(&mut c, t, 2_000, "RL.LOG l 5 1m COST 99 AT {t} REFUND"),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(c.cmd(&["EXISTS", "l"]).int(), 0);
    // RL.ALL: the flag applies to every rule.
    assert_eq!(
        ints(
            &mut c,
            t,
            0,
            "RL.ALL 2 {a}1 {a}2 FIXED 1 10 1m GCRA 2 4 1 1s COST 3 AT {t}"
        ),
        [0, 5, 2, -1, 3_000]
    );
    assert_eq!(
        ints(
            &mut c,
            t,
            0,
            "RL.ALL 2 {a}1 {a}2 FIXED 1 10 1m GCRA 2 4 1 1s COST 3 AT {t} REFUND"
        ),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(c.cmd(&["EXISTS", "{a}1", "{a}2"]).int(), 0);
    assert_eq!(
        ints(
            &mut c,
            t,
            0,
            "RL.ALL 2 {a}1 {a}2 FIXED 1 10 1m GCRA 2 4 1 1s COST 12 AT {t} FORCE"
        ),
        [1, 10, 0, 60_000, 60_000]
    );
    assert_eq!(state(&mut c, "{a}1"), (Some("12".into()), end(60_000)));
    // A refund on a missing key writes nothing; COST 0 peeks with either flag.
    for line in [
        "RL.FIXED none 10 1m AT {t} REFUND",
        "RL.GCRA none 4 1 1s COST 0 AT {t} FORCE",
        "RL.LOG none 5 1m AT {t} REFUND",
    ] {
        ints(&mut c, t, 0, line);
        assert_eq!(c.cmd(&["EXISTS", "none"]).int(), 0, "{line}");
    }
}

/// A mixed workload of taking, refunding and forcing on every limiter.
fn settle_workload(c: &mut Client, t: u64, calls: usize) {
    let lines = [
        "RL.FIXED w:f 5 1m",
        "RL.GCRA w:g 2 1 1s",
        "RL.MULTI 2 {w}m1 {w}m2 LIMIT 1s 3 LIMIT 1m 8",
        "RL.SLIDING 1 w:s LIMIT 10s 6 BUCKETS 5",
        "RL.LOG w:l 4 1m META who",
        "RL.ALL 2 {w}a {w}b FIXED 1 5 1m LOG 2 4 10s",
    ];
    let mut rng = common::Rng::new(35);
    let mut ms = 0;
    for _ in 0..calls {
        ms += rng.range(0, 700);
        let line = rng.pick(&lines);
        let flag = *rng.pick(&["", "", " REFUND", " FORCE"]);
        let cost = rng.range(0, 4);
        let line = format!("{line} COST {cost} AT {}{flag}", t + ms);
        let words: Vec<&str> = line.split_whitespace().collect();
        c.cmd(&words);
    }
}

#[test]
fn replicas_with_and_without_the_module_hold_what_refunds_and_forces_wrote() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    settle_workload(&mut c, at_base(HOUR, MINUTE), 600);
    wait_for_replicas(&mut c, 2);
    let want = snapshot(&mut c);
    assert!(want.len() >= 5, "the workload wrote too little: {want:?}");
    assert_eq!(
        snapshot(&mut with_module.client()),
        want,
        "replica with the module"
    );
    assert_eq!(
        snapshot(&mut without_module.client()),
        want,
        "replica without the module"
    );
}

#[test]
fn refunds_send_the_events_of_the_plain_commands() {
    let s = Server::builder()
        .config("notify-keyspace-events", "KEA")
        .start();
    let mut c = s.client();
    let mut sub = s.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    let t = at_base(HOUR, MINUTE).to_string();
    c.cmd(&["RL.FIXED", "e:f", "5", "1m", "AT", &t]);
    assert_eq!(next_event(&mut sub), ("e:f".into(), "set".into()));
    assert_eq!(next_event(&mut sub), ("e:f".into(), "expire".into()));
    c.cmd(&["RL.FIXED", "e:f", "5", "1m", "AT", &t, "REFUND"]);
    assert_eq!(next_event(&mut sub), ("e:f".into(), "del".into()));
    c.cmd(&["RL.LOG", "e:l", "5", "1m", "COST", "2", "AT", &t]);
    assert_eq!(next_event(&mut sub), ("e:l".into(), "zadd".into()));
    assert_eq!(next_event(&mut sub), ("e:l".into(), "expire".into()));
    c.cmd(&["RL.LOG", "e:l", "5", "1m", "AT", &t, "REFUND"]);
    assert_eq!(next_event(&mut sub), ("e:l".into(), "zadd".into()));
    assert_eq!(next_event(&mut sub), ("e:l".into(), "zrem".into()));
    assert_eq!(next_event(&mut sub), ("e:l".into(), "expire".into()));
    c.cmd(&["RL.LOG", "e:l", "5", "1m", "AT", &t, "REFUND"]);
    assert_eq!(next_event(&mut sub), ("e:l".into(), "del".into()));
}

/// 32 clients reserve an estimate, then settle the actual cost (a refund of what was
/// not used, or the overage forced), among plain requests: the key always holds
/// exactly what was allowed, refunded and forced, and never more than the limit plus
/// what was forced over it.
#[test]
fn concurrent_reserve_and_settle_never_exceed_the_limit_plus_what_was_forced() {
    let s = Server::start();
    let t = at_base(HOUR, HOUR).to_string();
    let limit = 200i64;
    for (cmd, key) in [("RL.FIXED", "c:f"), ("RL.LOG", "c:l")] {
        let threads: Vec<_> = (0..32u64)
            .map(|th| {
                let (port, t) = (s.port, t.clone());
                std::thread::spawn(move || {
                    let mut c = Client::connect(port).expect("connect");
                    let mut rng = common::Rng::new(th + 1);
                    let (mut net, mut forced) = (0i64, 0i64);
                    let call = |c: &mut Client, cost: i64, flag: &str| {
                        let cost = cost.to_string();
                        let mut args = vec![cmd, key, "200", "1h", "COST", &cost, "AT", &t];
                        if !flag.is_empty() {
                            args.push(flag);
                        }
                        c.cmd(&args).ints()
                    };
                    for _ in 0..25 {
                        if rng.chance(30) {
                            if call(&mut c, 1, "")[0] == 0 {
                                net += 1;
                            }
                            continue;
                        }
                        let estimate = 3;
                        if call(&mut c, estimate, "")[0] != 0 {
                            continue;
                        }
                        net += estimate;
                        let actual = rng.irange(0, 7);
                        if actual < estimate {
                            call(&mut c, estimate - actual, "REFUND");
                            net -= estimate - actual;
                        } else if actual > estimate {
                            call(&mut c, actual - estimate, "FORCE");
                            net += actual - estimate;
                            forced += actual - estimate;
                        }
                    }
                    (net, forced)
                })
            })
            .collect();
        let (mut net, mut forced) = (0, 0);
        for th in threads {
            let (n, f) = th.join().expect("client thread");
            net += n;
            forced += f;
        }
        let mut c = s.client();
        let held = match cmd {
            "RL.FIXED" => c.cmd(&["GET", key]).text().parse::<i64>().unwrap(),
            _ => members(&mut c, key)
                .iter()
                .map(|m| m.split(':').nth(1).unwrap().parse::<i64>().unwrap())
                .sum(),
        };
        assert_eq!(
            held, net,
            "{cmd}: the key holds what was allowed, refunded and forced"
        );
        assert!(held <= limit + forced, "{cmd}: {held} > {limit} + {forced}");
        assert!(
            forced > 0 && net > limit / 2,
            "{cmd}: the workload did too little"
        );
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["RL.FIXED", "k", "5", "1m"]);
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    let cases: &[(&[&str], &str)] = &[
        (&["RL.FIXED", "k", "5", "1m", "REFUND", "FORCE"], "ERR REFUND and FORCE cannot be given together: a request is either given back or forced"),
        (&["RL.GCRA", "k2", "1", "1", "1s", "DELAY", "1s", "REFUND"], "ERR REFUND cannot be given with DELAY: a settled request is not booked"),
        (&["RL.GCRA", "k2", "1", "1", "1s", "FORCE", "DELAY", "1s"], "ERR FORCE cannot be given with DELAY: a settled request is not booked"),
        (&["RL.MULTI", "1", "k3", "LIMIT", "1s", "5", "FORCE", "FORCE"], "ERR option FORCE given more than once"),
        (&["RL.SLIDING", "1", "k3", "LIMIT", "1s", "5", "FORCE", "REFUND"], "ERR REFUND and FORCE cannot be given together: a request is either given back or forced"),
        (&["RL.LOG", "k4", "5", "1m", "REFUND", "FORCE"], "ERR REFUND and FORCE cannot be given together: a request is either given back or forced"),
        (&["RL.ALL", "1", "k", "FIXED", "1", "5", "1m", "REFUND", "FORCE"], "ERR REFUND and FORCE cannot be given together: a request is either given back or forced"),
        (&["RL.ALL", "3", "{b}1", "{b}2", "{b}3", "FIXED", "1", "5", "1m", "BAN", "2", "3", "1m", "1h", "BAN", "3", "3", "1m", "1h"], "ERR rule 3 (BAN): at most one BAN rule per call"),
        (&["RL.ALL", "2", "{b}1", "{b}2", "FIXED", "1", "5", "1m", "BAN", "2", "0", "1m", "1h"], "ERR rule 2 (BAN): invalid strikes '0': must be an integer from 1 to 9007199254740991"),
        (&["RL.ALL", "2", "{b}1", "{b}2", "FIXED", "1", "5", "1m", "BAN", "2", "3", "0", "1h"], "ERR rule 2 (BAN): invalid window '0': must be a positive duration (an integer with an optional unit ms, s, m, h or d)"),
        (&["RL.ALL", "2", "{b}1", "{b}2", "FIXED", "1", "5", "1m", "BAN", "2", "3", "1m", "11y"], "ERR rule 2 (BAN): invalid duration '11y': unknown unit (use ms, s, m, h or d)"),
        (&["RL.ALL", "2", "{b}1", "{b}2", "FIXED", "1", "5", "1m", "BAN", "2", "3", "1m"], "ERR rule 2 (BAN): wrong number of arguments for a BAN rule (syntax: BAN i strikes window duration)"),
        (&["CL.THROTTLE", "k5", "1", "1", "1", "REFUND"], "ERR invalid quantity 'REFUND': must be an integer from 0 to 9007199254740991"),
    ];
    for (args, want) in cases {
        assert_eq!(c.cmd(args).err(), Some(*want), "{args:?}");
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest);
}

#[test]
fn info_counts_refunds_forced_requests_and_bans() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE).to_string();
    c.cmd(&["RL.FIXED", "i", "1", "1m", "AT", &t]);
    c.cmd(&["RL.FIXED", "i", "1", "1m", "AT", &t, "REFUND"]);
    c.cmd(&["RL.FIXED", "i", "1", "1m", "COST", "3", "AT", &t, "FORCE"]);
    c.cmd(&["RL.FIXED", "i", "1", "1m", "AT", &t, "FORCE", "REFUND"]);
    let ban = |c: &mut Client| {
        c.cmd(&[
            "RL.ALL", "2", "{i}u", "{i}b", "FIXED", "1", "1", "1m", "BAN", "2", "2", "1m", "1h",
            "AT", &t,
        ])
        .array()
        .iter()
        .take(5)
        .map(Value::int)
        .collect::<Vec<_>>()
    };
    assert_eq!(ban(&mut c)[0], 0);
    assert_eq!(ban(&mut c)[0], 1);
    assert_eq!(
        ban(&mut c)[..3],
        [1, 2, 0],
        "the second strike starts the ban"
    );
    assert_eq!(ban(&mut c)[..3], [1, 2, 0]);
    let fields = info_fields(&mut c);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    assert_eq!(
        ["calls", "allowed", "denied", "errors", "refunds", "forced"]
            .map(|f| get(&format!("ratelimit_fixed_{f}"))),
        [Some(4), Some(2), Some(1), Some(1), Some(1), Some(1)],
        "{fields:?}"
    );
    assert_eq!(
        [
            "calls",
            "denied",
            "refunds",
            "forced",
            "bans_started",
            "denied_by_ban"
        ]
        .map(|f| get(&format!("ratelimit_all_{f}"))),
        [Some(4), Some(3), Some(0), Some(0), Some(1), Some(1)],
        "{fields:?}"
    );
    assert_eq!(get("ratelimit_cl_throttle_refunds"), None);
}

/// A reply with the key names' namespace replaced, to compare replies of calls made
/// on different keys.
fn norm(v: &Value, ns: &str) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::Bulk(b) => String::from_utf8_lossy(b).replace(ns, "NS"),
        Value::Status(s) => s.clone(),
        Value::Error(e) => format!("error {}", e.replace(ns, "NS")),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(|x| norm(x, ns)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// What a key holds, as plain commands read it: its type, value and absolute expiry.
fn key_view(c: &mut Client, key: &str) -> String {
    let t = c.cmd(&["TYPE", key]).text();
    let v = match t.as_str() {
        "string" => c.cmd(&["GET", key]).text(),
        "zset" => norm(&c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]), ""),
        _ => String::new(),
    };
    format!("{t} {v} {}", c.cmd(&["PEXPIRETIME", key]).int())
}

/// The command, its function and its script give the same replies (error texts
/// included) and leave the same states, call by call, on keys of their own; and the
/// three mixed at random on one set of keys give the command's replies and states:
/// taking, refunding and forcing on every limiter, and RL.ALL with a BAN rule.
#[test]
fn differential_command_function_and_script_mixed_on_one_key() {
    let s = Server::start();
    let mut c = s.client();
    let [functions, scripts] = common::Twins::both(&mut c);
    // (function, command, key suffixes, arguments after the keys, numkeys shape)
    let calls: &[(&str, &str, &[&str], &str, bool)] = &[
        ("fixed", "RL.FIXED", &["f"], "5 2s", false),
        ("fixed", "RL.FIXED", &["f"], "5 2s ALIGN", false),
        ("gcra", "RL.GCRA", &["g"], "2 1 1s", false),
        (
            "multi",
            "RL.MULTI",
            &["m1", "m2"],
            "LIMIT 1s 3 LIMIT 1m 8",
            true,
        ),
        (
            "sliding",
            "RL.SLIDING",
            &["s"],
            "LIMIT 10s 6 BUCKETS 5",
            true,
        ),
        ("log", "RL.LOG", &["l"], "4 10s META who", false),
        (
            "all",
            "RL.ALL",
            &["a", "l2", "b"],
            "FIXED 1 3 1m LOG 2 4 10s BAN 3 2 5s 20s",
            true,
        ),
        (
            "all",
            "RL.ALL",
            &["g", "a"],
            "GCRA 1 2 1 1s FIXED 2 3 1m",
            true,
        ),
        (
            "all",
            "RL.ALL",
            &["f", "g", "s"],
            "FIXED 1 1 2s GCRA 2 0 1 1s SLIDING 3 LIMIT 10s 7 BUCKETS 5",
            true,
        ),
    ];
    let twin = |t: &common::Twins, f: &str| match f {
        "fixed" => t.fixed.clone(),
        "gcra" => t.gcra.clone(),
        "multi" => t.multi.clone(),
        "sliding" => t.sliding.clone(),
        "log" => t.log.clone(),
        _ => t.all.clone(),
    };
    let suffixes = ["f", "g", "m1", "m2", "s", "l", "a", "l2", "b"];
    for seed in common::Rng::seeds(&[1, 2, 3]) {
        let mut rng = common::Rng::new(seed);
        let base = at_base(HOUR, MINUTE);
        let ns = |side: &str| format!("{{d{seed}}}{side}:");
        let mut ms = 0;
        for step in 0..150 {
            ms += rng.range(0, 900);
            let &(f, cmd, keys, args, numkeys) = rng.pick(calls);
            let cost = rng.range(0, 5).to_string();
            let flag = *rng.pick(&["", "", " REFUND", " FORCE", " REFUND FORCE"]);
            let rest = format!("{args} COST {cost} AT {}{flag}", base + ms);
            let rest: Vec<&str> = rest.split_whitespace().collect();
            let argv = |side: usize, space: &str| -> Vec<String> {
                let names: Vec<String> = keys.iter().map(|k| format!("{space}{k}")).collect();
                match side {
                    0 => {
                        let mut v = vec![cmd.to_string()];
                        if numkeys {
                            v.push(names.len().to_string());
                        }
                        v.extend(names);
                        v.extend(rest.iter().map(|a| a.to_string()));
                        v
                    }
                    1 => twin(&functions, f).argv(&names, &rest),
                    _ => twin(&scripts, f).argv(&names, &rest),
                }
            };
            let spaces = [ns("n"), ns("f"), ns("s")];
            let replies: Vec<String> = (0..3)
                .map(|side| norm(&c.cmd(&argv(side, &spaces[side])), &spaces[side]))
                .collect();
            let ctx = format!("seed {seed} step {step}: {cmd} {}", rest.join(" "));
            assert_eq!(replies[1], replies[0], "{ctx}: function");
            assert_eq!(replies[2], replies[0], "{ctx}: script");
            // The mixed keys: a side at random.
            let side = rng.range(0, 3) as usize;
            let mixed = norm(&c.cmd(&argv(side, &ns("x"))), &ns("x"));
            assert_eq!(mixed, replies[0], "{ctx}: mixed, side {side}");
            for k in suffixes {
                let want = key_view(&mut c, &format!("{}{k}", ns("n")));
                for space in [ns("f"), ns("s"), ns("x")] {
                    let got = key_view(&mut c, &format!("{space}{k}"));
                    assert_eq!(got, want, "{ctx}: key {space}{k}");
                }
            }
        }
    }
}

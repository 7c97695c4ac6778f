//! Counts at most 2^53 - 1 for every command and its twin alike, and no state that a
//! later call cannot read: whatever an allowed call writes, the command and its twin
//! both read back (a peek on each side answers, and answers the same).

use crate::common;

use common::{
    at_base, every_side, limited, log_member, Client, Rng, Server, Twin, Twins, Value, MINUTE,
};

const MAX: &str = "9007199254740991"; // 2^53 - 1
const OVER: &str = "9007199254740992"; // 2^53

/// How a command takes its keys, so the twin can be called with the same vector.
#[derive(Clone, Copy)]
enum Keys {
    /// `CMD key rest...`
    First,
    /// `CMD numkeys key... rest...`
    NumKeys,
}

/// The twin of `args` (a full command line): `FCALL name numkeys keys... rest...` or
/// `EVALSHA sha numkeys keys... rest...`.
fn twin_line(twin: &Twin, keys: Keys, args: &[String]) -> Vec<String> {
    let rest = &args[1..];
    let (ks, argv) = match keys {
        Keys::First => rest.split_at(1),
        Keys::NumKeys => {
            let n: usize = rest[0].parse().expect("numkeys");
            let (ks, argv) = rest[1..].split_at(n);
            (ks, argv)
        }
    };
    twin.argv(ks, argv)
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Call `args` natively and through the twin on a copy of each key's state; both
/// replies. The native call runs on the keys as they are; the twin runs first on the
/// same state (restored with DUMP/RESTORE), so both judge the same state.
fn both(
    c: &mut Client,
    sha: &Twin,
    keys: Keys,
    args: &[String],
    key_names: &[String],
) -> (Value, Value) {
    let dumps: Vec<(Value, i64)> = key_names
        .iter()
        .map(|k| (c.cmd(&["DUMP", k]), c.cmd(&["PEXPIRETIME", k]).int()))
        .collect();
    let twin = c.cmd(&twin_line(sha, keys, args));
    for (k, (dump, exp)) in key_names.iter().zip(&dumps) {
        c.cmd(&["DEL", k]);
        if let Value::Bulk(d) = dump {
            let ttl = if *exp > 0 {
                exp.to_string()
            } else {
                "0".to_string()
            };
            let mut restore: Vec<Vec<u8>> = vec![
                b"RESTORE".to_vec(),
                k.as_bytes().to_vec(),
                ttl.into_bytes(),
                d.clone(),
            ];
            if *exp > 0 {
                restore.push(b"ABSTTL".to_vec());
            }
            assert_eq!(c.cmd(&restore), Value::Status("OK".into()), "restore {k}");
        }
    }
    let native = c.cmd(args);
    (native, twin)
}

#[test]
fn counts_above_two_to_the_53_are_refused_alike_by_every_command_and_twin() {
    let s = Server::start();
    let mut c = s.client();
    for t in Twins::both(&mut c) {
        c.cmd(&["FLUSHALL"]);
        let at = at_base(MINUTE, MINUTE).to_string();
        let cases: Vec<(&Twin, Keys, Vec<String>, String)> = vec![
            (
                &t.fixed,
                Keys::First,
                strings(&["RL.FIXED", "k", OVER, "1h", "AT", &at]),
                format!("ERR invalid limit '{OVER}': must be an integer from 1 to {MAX}"),
            ),
            (
                &t.fixed,
                Keys::First,
                strings(&["RL.FIXED", "k", "5", "1h", "COST", OVER, "AT", &at]),
                format!("ERR invalid cost '{OVER}': must be an integer from 0 to {MAX}"),
            ),
            (
                &t.gcra,
                Keys::First,
                strings(&["RL.GCRA", "k", OVER, "1", "1s", "AT", &at]),
                format!("ERR invalid max_burst '{OVER}': must be an integer from 0 to {MAX}"),
            ),
            (
                &t.gcra,
                Keys::First,
                strings(&["RL.GCRA", "k", "1", OVER, "1s", "AT", &at]),
                format!("ERR invalid count '{OVER}': must be an integer from 1 to {MAX}"),
            ),
            (
                &t.multi,
                Keys::NumKeys,
                strings(&["RL.MULTI", "1", "k", "LIMIT", "1h", OVER, "AT", &at]),
                format!("ERR invalid limit '{OVER}': must be an integer from 1 to {MAX}"),
            ),
            (
                &t.sliding,
                Keys::NumKeys,
                strings(&["RL.SLIDING", "1", "k", "LIMIT", "3650d", OVER, "COST", OVER]),
                format!("ERR invalid limit '{OVER}': must be an integer from 1 to {MAX}"),
            ),
            (
                &t.log,
                Keys::First,
                strings(&["RL.LOG", "k", "5", "1h", "COST", OVER, "AT", &at]),
                format!("ERR invalid cost '{OVER}': must be an integer from 0 to {MAX}"),
            ),
        ];
        for (sha, keys, args, want) in cases {
            let (native, twin) = both(&mut c, sha, keys, &args, &["k".to_string()]);
            assert_eq!(native.err(), Some(want.as_str()), "{args:?}");
            assert_eq!(
                twin.err(),
                Some(want.as_str()),
                "{} of {args:?}",
                sha.name()
            );
            assert_eq!(c.cmd(&["EXISTS", "k"]).int(), 0, "{args:?} wrote");
        }
    }
}

/// The reproduction: an RL.SLIDING window filled to 2^53 made every later call on the
/// key refuse it as invalid state, for ten years. Now the largest limit is 2^53 - 1, a
/// window filled to it stays readable, and a call over it is denied, not refused.
#[test]
fn a_sliding_window_filled_to_the_largest_limit_stays_readable() {
    let s = Server::start();
    let mut c = s.client();
    for t in Twins::both(&mut c) {
        c.cmd(&["FLUSHALL"]);
        let k = vec!["k".to_string()];
        let call =
            |cost: &str| strings(&["RL.SLIDING", "1", "k", "LIMIT", "3650d", MAX, "COST", cost]);
        let (native, twin) = both(&mut c, &t.sliding, Keys::NumKeys, &call(MAX), &k);
        assert_eq!(native.array()[..3], twin.array()[..3]);
        assert_eq!(
            native.array()[..3],
            [Value::Int(0), Value::Int(9007199254740991), Value::Int(0)]
        );
        for cost in ["1", "0"] {
            let (native, twin) = both(&mut c, &t.sliding, Keys::NumKeys, &call(cost), &k);
            assert!(
                !native.is_err() && !twin.is_err(),
                "COST {cost}: {native:?} / {twin:?}"
            );
            assert_eq!(
                native.array()[0],
                Value::Int(i64::from(cost == "1")),
                "COST {cost}"
            );
            assert_eq!(native.array()[..3], twin.array()[..3], "COST {cost}");
        }
    }
}

/// The reproduction: the fixed-window twin refused a counter the command had written
/// above 2^53. Now the largest counter a call can write is the largest limit, which
/// both read.
#[test]
fn the_twins_read_the_largest_counters_the_commands_write() {
    let s = Server::start();
    let mut c = s.client();
    for t in Twins::both(&mut c) {
        c.cmd(&["FLUSHALL"]);
        let at = at_base(MINUTE, MINUTE).to_string();
        let k = vec!["k".to_string()];
        let fixed = |cost: &str| strings(&["RL.FIXED", "k", MAX, "1h", "COST", cost, "AT", &at]);
        let (native, twin) = both(&mut c, &t.fixed, Keys::First, &fixed(MAX), &k);
        assert_eq!(native, twin);
        assert_eq!(c.cmd(&["GET", "k"]).text(), MAX);
        for cost in ["0", "1"] {
            let (native, twin) = both(&mut c, &t.fixed, Keys::First, &fixed(cost), &k);
            assert!(!native.is_err(), "{native:?}");
            assert_eq!(native, twin, "COST {cost}");
        }
        c.cmd(&["DEL", "k"]);
        let multi = |cost: &str| {
            strings(&[
                "RL.MULTI", "1", "k", "LIMIT", "1h", MAX, "LIMIT", "1m", MAX, "COST", cost, "AT",
                &at,
            ])
        };
        let (native, twin) = both(&mut c, &t.multi, Keys::NumKeys, &multi(MAX), &k);
        assert_eq!(native, twin);
        for cost in ["0", "1"] {
            let (native, twin) = both(&mut c, &t.multi, Keys::NumKeys, &multi(cost), &k);
            assert!(!native.is_err(), "{native:?}");
            assert_eq!(native, twin, "COST {cost}");
        }
    }
}

/// A count drawn near the bounds: 1, small, or near 2^53 - 1.
fn count(rng: &mut Rng, min: i64) -> i64 {
    let max = 9_007_199_254_740_991i64;
    match rng.range(0, 4) {
        0 => min.max(1),
        1 => rng.irange(min.max(1), 20),
        2 => max - rng.irange(0, 3),
        _ => rng.irange(min.max(1), max),
    }
}

/// One random allowed-or-not call of every limiter, with counts near the bounds,
/// judged by the command or its twin; after each, a peek on the same keys by the
/// command and by the twin must both answer (no invalid state) and agree.
#[test]
fn whatever_a_call_writes_the_command_and_its_twin_both_read() {
    let s = Server::start();
    let mut c = s.client();
    for t in Twins::both(&mut c) {
        c.cmd(&["FLUSHALL"]);
        for seed in Rng::seeds(&[21, 2153]) {
            let mut rng = Rng::new(seed);
            let base = at_base(MINUTE, MINUTE);
            let mut now = base;
            for step in 0..400 {
                now += rng.range(0, 3_000);
                let at = now.to_string();
                let kind = rng.range(0, 5);
                let (sha, keys, call, peek, names): (
                    &Twin,
                    Keys,
                    Vec<String>,
                    Vec<String>,
                    Vec<String>,
                ) = match kind {
                    0 => {
                        let limit = count(&mut rng, 1);
                        let cost = rng.irange(0, limit.min(5) + 1).max(if rng.chance(30) {
                            limit
                        } else {
                            0
                        });
                        let w = rng.pick(&["1s", "10s", "1h"]).to_string();
                        // Limits below 10^15 and above it on keys of their own: below,
                        // a count of 10^15 or more is taken for RL.GCRA's state (an
                        // error), and only a call with a larger limit could write one.
                        let key = if limit < 1_000_000_000_000_000 {
                            "f"
                        } else {
                            "{f}big"
                        };
                        let mut args = strings(&["RL.FIXED", key, &limit.to_string(), &w]);
                        if rng.chance(30) {
                            args.push("ALIGN".into());
                        }
                        let mut peek = args.clone();
                        args.extend(strings(&["COST", &cost.to_string(), "AT", &at]));
                        peek.extend(strings(&["COST", "0", "AT", &at]));
                        (&t.fixed, Keys::First, args, peek, vec![key.into()])
                    }
                    1 => {
                        let period = *rng.pick(&[1_000u64, 60_000, 86_400_000]);
                        let burst = rng.irange(0, 1_000);
                        let count = rng.irange(1, 1_000);
                        let cost = rng.irange(0, burst + 2);
                        let base_args = strings(&[
                            "RL.GCRA",
                            "g",
                            &burst.to_string(),
                            &count.to_string(),
                            &format!("{period}ms"),
                        ]);
                        let mut args = base_args.clone();
                        args.extend(strings(&["COST", &cost.to_string(), "AT", &at]));
                        let mut peek = base_args;
                        peek.extend(strings(&["COST", "0", "AT", &at]));
                        (&t.gcra, Keys::First, args, peek, vec!["g".into()])
                    }
                    2 | 3 => {
                        let name = if kind == 2 { "RL.MULTI" } else { "RL.SLIDING" };
                        let (a, b) = if kind == 2 {
                            ("{m}a", "{m}b")
                        } else {
                            ("{s}a", "{s}b")
                        };
                        let mut base_args = strings(&[name, "2", a, b]);
                        let mut smallest = i64::MAX;
                        for w in ["1s", "1m", "1h"] {
                            if rng.chance(60) || w == "1s" {
                                let l = count(&mut rng, 1);
                                smallest = smallest.min(l);
                                base_args.extend(strings(&["LIMIT", w, &l.to_string()]));
                            }
                        }
                        let cost = if rng.chance(20) {
                            smallest
                        } else {
                            rng.irange(0, smallest.min(4) + 1)
                        };
                        let mut args = base_args.clone();
                        args.extend(strings(&["COST", &cost.to_string(), "AT", &at]));
                        let mut peek = base_args;
                        peek.extend(strings(&["COST", "0", "AT", &at]));
                        let sha = if kind == 2 { &t.multi } else { &t.sliding };
                        (sha, Keys::NumKeys, args, peek, vec![a.into(), b.into()])
                    }
                    _ => {
                        let limit = rng.irange(1, 10_001);
                        let cost = if rng.chance(20) {
                            limit
                        } else {
                            rng.irange(0, limit.min(4) + 1)
                        };
                        let base_args = strings(&["RL.LOG", "l", &limit.to_string(), "1s"]);
                        let mut args = base_args.clone();
                        args.extend(strings(&[
                            "META",
                            "u",
                            "COST",
                            &cost.to_string(),
                            "AT",
                            &at,
                        ]));
                        let mut peek = base_args;
                        peek.extend(strings(&["COST", "0", "AT", &at]));
                        (&t.log, Keys::First, args, peek, vec!["l".into()])
                    }
                };
                let reply = if rng.chance(50) {
                    c.cmd(&call)
                } else {
                    c.cmd(&twin_line(sha, keys, &call))
                };
                assert!(
                    !reply.is_err(),
                    "seed {seed} step {step}: {call:?} -> {reply:?}"
                );
                let (native, twin) = both(&mut c, sha, keys, &peek, &names);
                assert!(
                    !native.is_err() && !twin.is_err(),
                    "seed {seed} step {step}: after {call:?} ({reply:?}) a peek gets {native:?} / {twin:?}"
                );
                assert_eq!(native, twin, "seed {seed} step {step}: peek after {call:?}");
            }
            for k in ["f", "{f}big", "g", "{m}a", "{m}b", "{s}a", "{s}b", "l"] {
                c.cmd(&["DEL", k]);
            }
        }
    }
}

/// The reproduction: `RL.FIXED user:3 10 1m AT 1732480000` (a time in seconds), twelve
/// times, was allowed twelve times against a limit of 10 and stored nothing: every
/// call was judged in 1970, where its window had long ended. Now AT below 10^12 ms is
/// refused with an error saying that AT takes milliseconds, by every command and twin.
#[test]
fn at_in_seconds_is_refused_by_every_command_and_twin() {
    let s = Server::start();
    let mut c = s.client();
    for t in Twins::both(&mut c) {
        c.cmd(&["FLUSHALL"]);
        let want = "ERR invalid AT '1732480000': AT takes a Unix time in milliseconds, from 1000000000000 (2001-09-09) to 4102444800000; this looks like seconds";
        let calls: Vec<(&Twin, Keys, Vec<String>)> = vec![
            (
                &t.fixed,
                Keys::First,
                strings(&["RL.FIXED", "user:3", "10", "1m"]),
            ),
            (
                &t.gcra,
                Keys::First,
                strings(&["RL.GCRA", "user:3", "9", "10", "1m"]),
            ),
            (
                &t.multi,
                Keys::NumKeys,
                strings(&["RL.MULTI", "1", "user:3", "LIMIT", "1m", "10"]),
            ),
            (
                &t.sliding,
                Keys::NumKeys,
                strings(&["RL.SLIDING", "1", "user:3", "LIMIT", "1m", "10"]),
            ),
            (
                &t.log,
                Keys::First,
                strings(&["RL.LOG", "user:3", "10", "1m"]),
            ),
            (
                &t.all,
                Keys::NumKeys,
                strings(&["RL.ALL", "1", "user:3", "FIXED", "1", "10", "1m"]),
            ),
        ];
        for (sha, keys, mut call) in calls {
            call.extend(strings(&["AT", "1732480000"]));
            for _ in 0..12 {
                let (native, twin) = both(&mut c, sha, keys, &call, &["user:3".to_string()]);
                assert_eq!(native.err(), Some(want), "{call:?}");
                assert_eq!(twin.err(), Some(want), "{} of {call:?}", sha.name());
            }
            assert_eq!(c.cmd(&["EXISTS", "user:3"]).int(), 0);
        }
    }
}

/// Hand-written states with times no call would write were once accepted: an RL.MULTI
/// window ending in the year ~287 000, a log entry in 2255 (the next call was recorded
/// in 2255). A time past the latest `AT` (2100) plus the longest window (10 years), or
/// a log entry or a bucket past the latest `AT` itself, is invalid state. On the
/// command and both forms of its twin, which must agree.
#[test]
fn states_with_times_past_the_latest_at_plus_the_longest_window_are_refused_as_invalid_state() {
    let server = Server::start();
    let mut c = server.client();
    const Y2255_US: u64 = 8_993_462_400_000_000;
    let checks: [(&str, &str, &str, &[&str], &str); 4] = [
        (
            "RL.MULTI",
            "multi:far",
            "60000:1:9007199254740991",
            &["LIMIT", "1m", "10"],
            "RL.MULTI",
        ),
        (
            "RL.MULTI",
            "multi:past-bound",
            "60000:1:4417804800001",
            &["LIMIT", "1m", "10"],
            "RL.MULTI",
        ),
        (
            "RL.SLIDING",
            "sliding:far",
            "1000:10:89934624000:1",
            &["LIMIT", "1s", "10"],
            "RL.SLIDING",
        ),
        ("RL.LOG", "log:far", "", &["10", "1m"], "RL.LOG"),
    ];
    for (command, key, value, args, state) in checks {
        for (name, argv) in every_side(&mut c, command, &[key], args) {
            c.cmd(&["DEL", key]);
            if command == "RL.LOG" {
                c.cmd(&["ZADD", key, &Y2255_US.to_string(), &log_member(1, 1, "x")]);
            } else {
                c.cmd(&["SET", key, value]);
            }
            let r = c.cmd(&argv);
            assert!(
                r.err()
                    .is_some_and(|e| e.contains(&format!("does not hold {state} state"))),
                "{command} {key}, {name}: {r:?}"
            );
        }
    }
    // The latest end a call writes is accepted: a window ending at 2100 plus 10 years.
    for (name, argv) in every_side(&mut c, "RL.MULTI", &["multi:bound"], &["LIMIT", "1m", "10"]) {
        c.cmd(&["SET", "multi:bound", "60000:1:4417804800000"]);
        assert_eq!(limited(&c.cmd(&argv)), 0, "{name}");
    }
}

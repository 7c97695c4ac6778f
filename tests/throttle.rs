//! CL.THROTTLE, redis-cell's command, against real servers: redis-cell's own test
//! table through CL.THROTTLE and through RL.GCRA, keys redis-cell wrote (nanosecond
//! TATs), the quantity above the capacity, bad inputs, the twin, mixing with RL.GCRA,
//! registration (a module that has the name first, the setting that turns it off, the
//! same command info as RL.GCRA), INFO, replicas, the AOF and Cluster routing.
//!
//! CL.THROTTLE has no `AT`: it reads the server clock. A test reads this machine's
//! clock (the server's) before and after each call, and checks that the reply and the
//! key's state are what the module's arithmetic (`ratelimit_core`) gives at one instant
//! between the two; and it pins a key's state relative to the clock by writing the TAT
//! itself. Nothing depends on how fast the calls are.

use crate::common;

use common::{
    at_base, info_fields, module_names, state, unix_us, wait_for_replicas, Client, Cluster, Rng,
    Server, Side, Twins, Value, HOUR, MINUTE,
};
use ratelimit_core::call::{memory, Call};
use ratelimit_core::limiters::gcra::{self, GcraParams};
use ratelimit_core::limiters::throttle::{self, Throttle};
use ratelimit_core::Decided;
use ratelimit_core::{Effect, Micros, Stored};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The native command or its Lua twin.
type Cl = Side;

/// The native command, its function and its script, loaded into the server behind `c`.
fn both(c: &mut Client) -> Vec<Cl> {
    let [tf, ts] = Twins::both(c);
    Side::all("CL.THROTTLE", [tf.throttle, ts.throttle])
}

/// RL.GCRA's judgement of CL.THROTTLE's request on a TAT, settled as the module
/// settles the call.
fn decide(stored: Option<Stored<Micros>>, now: Micros, p: &GcraParams) -> Decided<Micros> {
    let call = Call::one(gcra::Gcra::from(*p), p.cost());
    memory::run_on(&call, &[stored], now)
        .expect("a TAT")
        .decided()
}

/// A key's state: its value (`None`: missing) and `PEXPIRETIME`.
type KeyState = (Option<String>, i64);

fn parse(args: &[&str]) -> Throttle {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    throttle::parse_args(&args).expect("valid arguments")
}

/// The module's arithmetic: what CL.THROTTLE `args` replies at `now` (µs) on a key in
/// state `before`, and the key's state after.
fn model(before: &KeyState, now: u64, args: &[&str]) -> (Vec<i64>, KeyState) {
    let call = parse(args);
    let stored = before.0.as_deref().map(|v| Stored {
        state: gcra::parse_tat(v.as_bytes()).expect("a TAT"),
        expires_at: None,
    });
    let out = decide(stored, Micros(now), &call.params);
    let after = match out.effect {
        Effect::Set { state, expires_at } => (Some(state.0.to_string()), expires_at.0 as i64),
        _ => before.clone(),
    };
    (call.reply(&out.verdict).to_vec(), after)
}

/// Call `args` on `key` between two readings of the clock; check that the reply and
/// the key's state afterwards are the model's at one instant between them. The reply,
/// and the two readings.
fn judged(c: &mut Client, cl: &Cl, key: &str, args: &[&str]) -> (Vec<i64>, u64, u64) {
    let before = state(c, key);
    let t0 = unix_us();
    let reply = cl.call(c, key, args);
    let t1 = unix_us();
    let reply = match reply {
        Value::Array(_) => reply.ints(),
        other => panic!("{} CL.THROTTLE {key} {args:?}: {other:?}", cl.name()),
    };
    let after = state(c, key);
    let found = (t0..=t1).any(|now| model(&before, now, args) == (reply.clone(), after.clone()));
    assert!(
        found,
        "{} CL.THROTTLE {key} {args:?} on {before:?} between {t0} and {t1} µs: {reply:?}, then {after:?}; the model at {t0}: {:?}, at {t1}: {:?}",
        cl.name(),
        model(&before, t0, args),
        model(&before, t1, args)
    );
    (reply, t0, t1)
}

// ---- redis-cell's own test table --------------------------------------------------

/// One case of redis-cell's `it_rate_limits` test: 1 request per second, max_burst 4
/// (5 at once), one key; a request of `quantity` at `start + at_ms`, and what
/// redis-cell's limiter gives: limited, remaining, reset_after and retry_after in ms
/// (-1: none).
#[derive(Clone, Copy, Debug)]
struct Case {
    num: u32,
    at_ms: u64,
    quantity: i64,
    limited: i64,
    remaining: i64,
    reset_after_ms: i64,
    retry_after_ms: i64,
}

const fn case(
    num: u32,
    at_ms: u64,
    quantity: i64,
    remaining: i64,
    reset_after_ms: i64,
    retry_after_ms: i64,
    limited: bool,
) -> Case {
    Case {
        num,
        at_ms,
        quantity,
        limited: limited as i64,
        remaining,
        reset_after_ms,
        retry_after_ms,
    }
}

/// The table, in redis-cell's own order of fields: (case, now, volume, remaining,
/// reset_after, retry_after, limited). Our arithmetic gives every value exactly: T is
/// 1 s (no rounding), and every time is a whole number of ms.
const IT_RATE_LIMITS: [Case; 15] = [
    // You can never make a request larger than the maximum.
    case(0, 0, 6, 5, 0, -1, true),
    // Rate limit normal requests appropriately.
    case(1, 0, 1, 4, 1_000, -1, false),
    case(2, 0, 1, 3, 2_000, -1, false),
    case(3, 0, 1, 2, 3_000, -1, false),
    case(4, 0, 1, 1, 4_000, -1, false),
    case(5, 0, 1, 0, 5_000, -1, false),
    case(6, 0, 1, 0, 5_000, 1_000, true),
    case(7, 3_000, 1, 2, 3_000, -1, false),
    case(8, 3_100, 1, 1, 3_900, -1, false),
    case(9, 4_000, 1, 1, 4_000, -1, false),
    case(10, 8_000, 1, 4, 1_000, -1, false),
    case(11, 9_500, 1, 4, 1_000, -1, false),
    // Zero-volume request just peeks at the state.
    case(12, 9_500, 0, 4, 1_000, -1, false),
    // High-volume request uses up more of the limit.
    case(13, 9_500, 2, 2, 3_000, -1, false),
    // Large requests cannot exceed limits.
    case(14, 9_500, 5, 2, 3_000, 3_000, true),
];

/// Whole seconds, rounded up.
fn secs(ms: i64) -> i64 {
    (ms + 999).div_euclid(1000)
}

impl Case {
    /// CL.THROTTLE's arguments.
    fn args(&self) -> [String; 4] {
        [
            "4".into(),
            "1".into(),
            "1".into(),
            self.quantity.to_string(),
        ]
    }

    /// CL.THROTTLE's reply: the times in whole seconds, rounded up.
    fn reply(&self) -> Vec<i64> {
        let retry = match self.retry_after_ms {
            -1 => -1,
            ms => secs(ms),
        };
        vec![
            self.limited,
            5,
            self.remaining,
            retry,
            secs(self.reset_after_ms),
        ]
    }
}

#[test]
fn redis_cell_table_through_rl_gcra() {
    // RL.GCRA key 4 1 1s COST quantity AT start + at_ms: the same values in ms.
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let start = at_base(HOUR, MINUTE);
    for twin in [None, Some(tf.gcra), Some(ts.gcra)] {
        let key = format!("foo:{}", twin.as_ref().map_or("native", |t| t.name()));
        for k in IT_RATE_LIMITS {
            let at = (start + k.at_ms).to_string();
            let q = k.quantity.to_string();
            let args = ["4", "1", "1s", "COST", &q, "AT", &at];
            let mut argv: Vec<&str> = match &twin {
                None => vec!["RL.GCRA", &key],
                Some(t) => vec![t.call, &t.id, "1", &key],
            };
            argv.extend(args);
            let r = c.cmd(&argv);
            if k.quantity > 5 {
                // RL.GCRA refuses a cost above the capacity; a peek shows redis-cell's
                // remaining and reset, and CL.THROTTLE replies them (below).
                assert_eq!(
                    r.err(),
                    Some(
                        "ERR cost 6 exceeds the burst capacity 5: the request can never be allowed"
                    ),
                    "case {}",
                    k.num
                );
                let mut peek = argv.clone();
                let cost_at = peek.len() - 3;
                peek[cost_at] = "0";
                let r = c.cmd(&peek).ints();
                assert_eq!(
                    r,
                    [0, 5, k.remaining, -1, k.reset_after_ms],
                    "case {}",
                    k.num
                );
                continue;
            }
            assert_eq!(
                r.ints(),
                [
                    k.limited,
                    5,
                    k.remaining,
                    k.retry_after_ms,
                    k.reset_after_ms
                ],
                "case {} {:?}",
                k.num,
                twin.as_ref().map(|_| "twin")
            );
        }
    }
}

#[test]
fn redis_cell_table_through_cl_throttle() {
    // Each case on a key pinned at the table's state relative to the clock: the exact
    // TAT of the table's timeline at that case, written the way redis-cell writes it
    // (nanoseconds) in even cases and in the module's µs in odd ones.
    let s = Server::start();
    let mut c = s.client();
    const T0: u64 = 1_700_000_000_000_000;
    for cl in both(&mut c) {
        let key = format!("foo:{}", cl.name());
        let mut tat: Option<u64> = None; // the table's TAT, µs on the T0 timeline
        for k in IT_RATE_LIMITS {
            let args = k.args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let case_now = T0 + k.at_ms * 1000;
            let t = unix_us();
            let pinned = tat.map(|tat| t as i64 + (tat as i64 - case_now as i64));
            match pinned {
                None => {
                    c.cmd(&["DEL", &key]);
                }
                Some(us) if k.num % 2 == 0 => {
                    c.cmd(&["SET", &key, &(us * 1000).to_string()]);
                }
                Some(us) => {
                    c.cmd(&["SET", &key, &us.to_string()]);
                }
            }
            // At the pinned instant the module's arithmetic gives the table's values.
            let before = state(&mut c, &key);
            assert_eq!(model(&before, t, &args).0, k.reply(), "case {}", k.num);
            let (reply, _, t1) = judged(&mut c, &cl, &key, &args);
            // Every time in the table is a multiple of 100 ms: a reply made less than
            // 100 ms after the pinned instant is the table's, whole seconds rounded up.
            if t1 - t < 100_000 {
                assert_eq!(reply, k.reply(), "{} case {}", cl.name(), k.num);
            }
            // The table's timeline goes on from the exact state.
            let stored = tat.map(|state| Stored {
                state: Micros(state),
                expires_at: None,
            });
            let out = decide(stored, Micros(case_now), &parse(&args).params);
            if let Effect::Set { state, .. } = out.effect {
                tat = Some(state.0);
            }
        }
    }
}

// ---- keys redis-cell wrote --------------------------------------------------------

#[test]
fn a_nanosecond_tat_written_with_set_is_read_and_rewritten_in_microseconds() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let t = at_base(HOUR, MINUTE);
    for (name, sha) in [
        ("native", None),
        ("function", Some(tf.gcra)),
        ("script", Some(ts.gcra)),
    ] {
        let gcra = |c: &mut Client, key: &str, args: &[&str]| -> Value {
            let mut argv: Vec<&str> = match &sha {
                None => vec!["RL.GCRA", key],
                Some(t) => vec![t.call, &t.id, "1", key],
            };
            argv.extend(args);
            c.cmd(&argv)
        };
        let key = format!("user:{name}");
        // What redis-cell leaves after a request at `t` with a TAT 1 s and 1 ns ahead
        // (1 per second, max_burst 1): the TAT in ns and a relative TTL in whole ms.
        let ns = (t * 1000 + 1_000_000) * 1000 + 1;
        c.cmd(&["SET", &key, &ns.to_string(), "PX", "999"]);
        let at = t.to_string();
        // Read as the µs after it: 1.000001 s ahead, so the next request is denied
        // for 1 µs (as redis-cell would deny it for 1 ns), and a peek writes nothing.
        assert_eq!(
            gcra(&mut c, &key, &["1", "1", "1s", "AT", &at]).ints(),
            [1, 2, 0, 1, 1001]
        );
        assert_eq!(
            gcra(&mut c, &key, &["1", "1", "1s", "COST", "0", "AT", &at]).ints(),
            [0, 2, 0, -1, 1001]
        );
        assert_eq!(
            c.cmd(&["GET", &key]).text(),
            ns.to_string(),
            "{name}: a peek leaves the key as redis-cell wrote it"
        );
        // 1 ms later it fits; the first write stores µs, expiring at the TAT.
        let at = (t + 1).to_string();
        assert_eq!(
            gcra(&mut c, &key, &["1", "1", "1s", "AT", &at]).ints(),
            [0, 2, 0, -1, 2000]
        );
        let tat = t * 1000 + 2_000_001;
        assert_eq!(
            state(&mut c, &key),
            (Some(tat.to_string()), tat.div_ceil(1000) as i64),
            "{name}"
        );
    }
    // CL.THROTTLE, native and twin, on redis-cell's keys pinned ahead of the clock.
    for cl in both(&mut c) {
        for (i, ahead_ns) in [
            0u64,
            1,
            999,
            1_000,
            1_500_000_000,
            2_999_999_999,
            9_000_000_001,
        ]
        .into_iter()
        .enumerate()
        {
            let key = format!("cell:{}:{i}", cl.name());
            let ns = unix_us() * 1000 + ahead_ns;
            c.cmd(&["SET", &key, &ns.to_string(), "PX", "60000"]);
            let (r, _, _) = judged(&mut c, &cl, &key, &["2", "1", "1"]);
            assert_eq!(r[1], 3);
            let v = c.cmd(&["GET", &key]).text();
            if r[0] == 0 {
                assert_eq!(v.len(), 16, "{v}: rewritten in µs");
            } else {
                assert_eq!(v, ns.to_string(), "denied: redis-cell's key as it was");
            }
        }
    }
}

/// A stored value of each kind: µs, ns (with and without a part of a µs), and values
/// that are neither.
fn stored_value(rng: &mut Rng, base_us: u64) -> String {
    let near = base_us + rng.range(0, 40_000_000) - 10_000_000;
    match rng.range(0, 10) {
        0..=2 => near.to_string(),
        3..=6 => (near * 1000 + rng.range(0, 1000)).to_string(),
        7 => (near * 1000).to_string(),
        _ => rng
            .pick(&[
                "1000000000000000000",   // 10^18 ns: 2001, valid, long past
                "999999999999999999",    // 18 digits: neither
                "17000000000000000",     // 17 digits: neither
                "0999999999999999999",   // 19 digits below 10^18
                "5679244800000000000",   // MAX_TAT in ns: valid
                "5679244800000000001",   // past MAX_TAT once rounded up
                "17000000000000000000",  // 20 digits
                "18446744073709551616",  // 2^64
                "1700000000000000000.5", // not an integer
            ])
            .to_string(),
    }
}

#[test]
fn rl_gcra_native_and_twin_read_nanosecond_keys_alike() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    for seed in Rng::seeds(&[11, 12]) {
        let mut rng = Rng::new(seed);
        let base = at_base(HOUR, MINUTE);
        for i in 0..300 {
            // The function and the script in turn.
            let t = &forms[i % 2].gcra;
            let value = stored_value(&mut rng, base * 1000);
            let burst = rng.range(0, 6);
            let max_burst = burst.to_string();
            let count = rng.range(1, 8).to_string();
            let period = rng.pick(&["1s", "3s", "10s", "250ms", "7s"]).to_string();
            let cost = rng.range(0, burst.min(3) + 2).to_string();
            let at = (base + rng.range(0, 20_000)).to_string();
            let args = [
                max_burst.as_str(),
                &count,
                &period,
                "COST",
                &cost,
                "AT",
                &at,
            ];
            let (kn, kt) = (format!("n:{seed}:{i}"), format!("t:{seed}:{i}"));
            let expiry = (base + HOUR).to_string();
            for k in [&kn, &kt] {
                c.cmd(&["SET", k, &value, "PXAT", &expiry]);
            }
            let mut native = vec!["RL.GCRA", kn.as_str()];
            native.extend(args);
            let mut twin = vec![t.call, t.id.as_str(), "1", kt.as_str()];
            twin.extend(args);
            let (rn, rt) = (c.cmd(&native), c.cmd(&twin));
            assert_eq!(
                rn,
                rt,
                "seed {seed} case {i} ({}): {value} {args:?}",
                t.name()
            );
            assert_eq!(
                state(&mut c, &kn),
                state(&mut c, &kt),
                "seed {seed} case {i}: {value} {args:?}"
            );
            // What the module reads, it reads as gcra::parse_tat does.
            match gcra::parse_tat(value.as_bytes()) {
                Some(_) => assert!(matches!(rn, Value::Array(_)), "{value}: {rn:?}"),
                None => assert_eq!(
                    rn.err(),
                    Some("ERR the key does not hold RL.GCRA state (expected a theoretical arrival time in microseconds since the Unix epoch)"),
                    "{value}"
                ),
            }
        }
    }
}

#[test]
fn cl_throttle_native_and_twin_on_keys_of_both_formats() {
    let s = Server::start();
    let mut c = s.client();
    let sides = both(&mut c);
    for seed in Rng::seeds(&[21]) {
        let mut rng = Rng::new(seed);
        for i in 0..150 {
            let max_burst = rng.range(0, 6).to_string();
            let count = rng.range(1, 8).to_string();
            let period = rng.range(1, 20).to_string();
            let quantity = rng.range(0, 9).to_string();
            let args = [max_burst.as_str(), &count, &period, &quantity];
            let now = unix_us();
            let value = stored_value(&mut rng, now);
            for cl in &sides {
                let key = format!("{}:{seed}:{i}", cl.name());
                c.cmd(&["SET", &key, &value, "PX", "60000"]);
                if gcra::parse_tat(value.as_bytes()).is_some() {
                    judged(&mut c, cl, &key, &args);
                } else {
                    assert_eq!(
                        cl.call(&mut c, &key, &args).err(),
                        Some("ERR the key does not hold RL.GCRA state (expected a theoretical arrival time in microseconds since the Unix epoch)"),
                        "{} {value}",
                        cl.name()
                    );
                    assert_eq!(c.cmd(&["GET", &key]).text(), value);
                }
            }
        }
    }
}

// ---- the rules of the command ---------------------------------------------------

#[test]
fn replies_are_in_whole_seconds_rounded_up() {
    // 30 per minute, 16 at once (the redis-cell README's example): T = 2 s.
    let s = Server::start();
    let mut c = s.client();
    let args = ["15", "30", "60"];
    for cl in both(&mut c) {
        let key = format!("user123:{}", cl.name());
        // From a new key: each reply is the module's at the instant of the call.
        for _ in 0..17 {
            let (r, _, _) = judged(&mut c, &cl, &key, &args);
            assert_eq!(r[1], 16);
        }
        // Pinned states: a reply made soon after the pin is exactly this.
        for (ahead_us, want) in [
            // Full, 1.5 s to wait: 2; 31.5 s of reset: 32.
            (31_500_000, [1, 16, 0, 2, 32]),
            // 0.5 s to wait (1), the reset 30.5 s (31), 0 remaining.
            (30_500_000, [1, 16, 0, 1, 31]),
            // Room for one: allowed, 29.9 + 2 s of reset (32), none left.
            (29_900_000, [0, 16, 0, -1, 32]),
            // 3.7 s ahead: allowed, 14 more; reset 5.7 s (6).
            (3_700_000, [0, 16, 13, -1, 6]),
        ] {
            let t = unix_us();
            c.cmd(&["SET", &key, &(t + ahead_us).to_string()]);
            let (r, _, t1) = judged(&mut c, &cl, &key, &args);
            if t1 - t < 100_000 {
                assert_eq!(r, want, "{} {ahead_us}", cl.name());
            }
        }
    }
}

#[test]
fn a_quantity_above_the_capacity_is_limited_with_retry_minus_one_and_writes_nothing() {
    let s = Server::start();
    let mut c = s.client();
    for cl in both(&mut c) {
        let key = format!("k:{}", cl.name());
        // On no key: the full capacity, nothing created.
        assert_eq!(
            cl.call(&mut c, &key, &["4", "1", "1", "6"]).ints(),
            [1, 5, 5, -1, 0]
        );
        assert_eq!(c.cmd(&["EXISTS", &key]).int(), 0);
        // On a key in use (pinned 1 h ahead: 1 per hour, 100 at once): its current
        // remaining and reset; the key as it was.
        let tat = unix_us() + 3_600_000_000 * 40;
        c.cmd(&[
            "SET",
            &key,
            &tat.to_string(),
            "PXAT",
            &tat.div_ceil(1000).to_string(),
        ]);
        let before = state(&mut c, &key);
        for q in ["101", "1000", "9007199254740991"] {
            let (r, _, _) = judged(&mut c, &cl, &key, &["99", "1", "3600", q]);
            assert_eq!((r[0], r[1], r[3]), (1, 100, -1), "{q}");
            assert!(r[2] < 100 && r[4] > 0, "{q}: the key in use, {r:?}");
            assert_eq!(state(&mut c, &key), before, "{q}");
        }
        // A quantity of exactly the capacity is an ordinary (denied) request.
        let (r, _, _) = judged(&mut c, &cl, &key, &["99", "1", "3600", "100"]);
        assert_eq!(r[0], 1);
        assert!(r[3] > 0, "{r:?}");
        assert_eq!(state(&mut c, &key), before);
    }
}

#[test]
fn mixed_with_rl_gcra_on_one_key() {
    // A TAT pinned ahead of the clock moves by exactly T * quantity per allowed call,
    // whoever makes it: CL.THROTTLE, RL.GCRA or either twin.
    let s = Server::start();
    let mut c = s.client();
    let sides = both(&mut c);
    let (native, function, script) = (&sides[0], &sides[1], &sides[2]);
    let twins = Twins::load(&mut c);
    let gcra = Twins::functions(&mut c).gcra;
    // 10 per 10 s (T = 1 s), 10 000 at once; the TAT an hour ahead.
    let tat = unix_us() + 3_600_000_000;
    c.cmd(&["SET", "k", &tat.to_string()]);
    let t_us = 1_000_000;
    judged(&mut c, native, "k", &["9999", "10", "10"]);
    assert_eq!(c.cmd(&["GET", "k"]).text(), (tat + t_us).to_string());
    let r = c.cmd(&["RL.GCRA", "k", "9999", "10", "10s", "COST", "2"]);
    assert_eq!(r.ints()[0], 0);
    assert_eq!(c.cmd(&["GET", "k"]).text(), (tat + 3 * t_us).to_string());
    judged(&mut c, script, "k", &["9999", "10", "10", "3"]);
    assert_eq!(c.cmd(&["GET", "k"]).text(), (tat + 6 * t_us).to_string());
    let r = c.cmd(&twins.gcra.argv(&["k"], &["9999", "10", "10s"]));
    assert_eq!(r.ints()[0], 0);
    judged(&mut c, function, "k", &["9999", "10", "10", "2"]);
    let r = c.cmd(&gcra.argv(&["k"], &["9999", "10", "10s"]));
    assert_eq!(r.ints()[0], 0);
    let want = tat + 10 * t_us;
    assert_eq!(
        state(&mut c, "k"),
        (Some(want.to_string()), want.div_ceil(1000) as i64)
    );
}

#[test]
fn wrong_type_and_invalid_state_leave_the_key_untouched() {
    let s = Server::start();
    let mut c = s.client();
    let invalid = "ERR the key does not hold RL.GCRA state (expected a theoretical arrival time in microseconds since the Unix epoch)";
    c.cmd(&["RPUSH", "list", "a"]);
    for cl in both(&mut c) {
        assert_eq!(
            cl.call(&mut c, "list", &["5", "1", "1"]).err(),
            Some("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        for bad in [
            "abc",
            "",
            "-1",
            "17000000000000000",
            "170000000000000000",
            "0170000000000000000",
            "17000000000000000000",
            "5679244800000000001",
        ] {
            c.cmd(&["SET", "s", bad, "PX", "100000"]);
            let before = state(&mut c, "s");
            for q in ["1", "0", "7"] {
                assert_eq!(
                    cl.call(&mut c, "s", &["5", "1", "1", q]).err(),
                    Some(invalid),
                    "{} {bad:?} {q}",
                    cl.name()
                );
                assert_eq!(state(&mut c, "s"), before);
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let int = |what: &str, v: &str, min: i64| {
        format!("ERR invalid {what} '{v}': must be an integer from {min} to 9007199254740991")
    };
    let period =
        |v: &str| format!("ERR invalid period '{v}': must be an integer from 1 to 315360000");
    let arity = "ERR wrong number of arguments for 'CL.THROTTLE' command (syntax: CL.THROTTLE key max_burst count period [quantity])".to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec![], arity.clone()),
        (vec!["1"], arity.clone()),
        (vec!["1", "1"], arity.clone()),
        (vec!["1", "1", "1", "1", "1"], arity.clone()),
        (vec!["-1", "1", "1"], int("max_burst", "-1", 0)),
        (vec!["x", "1", "1"], int("max_burst", "x", 0)),
        (vec!["1.5", "1", "1"], int("max_burst", "1.5", 0)),
        (vec!["1", "0", "1"], int("count", "0", 1)),
        (vec!["1", "-2", "1"], int("count", "-2", 1)),
        (vec!["1", "1", "0"], period("0")),
        (vec!["1", "1", "-1"], period("-1")),
        (vec!["1", "1", "1s"], period("1s")),
        (vec!["1", "1", "60.5"], period("60.5")),
        (vec!["1", "1", "315360001"], period("315360001")),
        (vec!["1", "1", "1", "-1"], int("quantity", "-1", 0)),
        (vec!["1", "1", "1", "1e3"], int("quantity", "1e3", 0)),
        (vec!["1", "1", "1", ""], int("quantity", "", 0)),
        (
            vec!["0", "1000001", "1"],
            "ERR invalid rate: period / count must be at least 1 microsecond".into(),
        ),
        (
            vec!["18250", "1", "86400"],
            "ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)"
                .into(),
        ),
        (
            vec!["18250", "1", "86400", "99999"],
            "ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)"
                .into(),
        ),
    ];
    for cl in both(&mut c) {
        let tat = unix_us() + 3_600_000_000;
        c.cmd(&[
            "SET",
            "k",
            &tat.to_string(),
            "PXAT",
            &tat.div_ceil(1000).to_string(),
        ]);
        let before = state(&mut c, "k");
        for (args, want) in &cases {
            for key in ["k", "fresh"] {
                let r = cl.call(&mut c, key, args);
                assert_eq!(r.err(), Some(want.as_str()), "{} {args:?}", cl.name());
            }
            assert_eq!(state(&mut c, "k"), before, "{} {args:?}", cl.name());
            assert_eq!(c.cmd(&["EXISTS", "fresh"]).int(), 0, "{args:?}");
        }
    }
}

// ---- registration, command info, INFO -------------------------------------------

#[test]
fn command_info_key_spec_and_acl_categories_are_rl_gcra_s() {
    let s = Server::start();
    let mut c = s.client();
    let info = |c: &mut Client, name: &str| -> Vec<Value> {
        let v = c.cmd(&["COMMAND", "INFO", name]);
        v.array()[0].array()[1..].to_vec()
    };
    assert_eq!(info(&mut c, "CL.THROTTLE"), info(&mut c, "RL.GCRA"));
    assert_eq!(
        c.cmd(&["COMMAND", "INFO", "cl.throttle"]).array()[0].array()[0].text(),
        "CL.THROTTLE"
    );
    assert_eq!(
        c.cmd(&[
            "COMMAND",
            "GETKEYS",
            "CL.THROTTLE",
            "user:42",
            "15",
            "30",
            "60",
            "1"
        ]),
        Value::Array(vec![Value::Bulk(b"user:42".to_vec())])
    );
    // An ACL user limited to app:* keys may throttle only those.
    c.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all"]);
    let mut u = s.client();
    u.cmd(&["AUTH", "app", "pw"]);
    assert_eq!(u.cmd(&["CL.THROTTLE", "app:1", "1", "1", "1"]).ints()[0], 0);
    let denied = u.cmd(&["CL.THROTTLE", "other:1", "1", "1", "1"]);
    assert!(
        denied.err().unwrap_or("").starts_with("NOPERM"),
        "{denied:?}"
    );
    assert_eq!(c.cmd(&["EXISTS", "other:1"]).int(), 0);
    // A user who may not write is refused (by the server's categories, or on Redis 7.0
    // by the module's own check), and nothing is written.
    c.cmd(&[
        "ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@all", "-@write",
    ]);
    let mut r = s.client();
    r.cmd(&["AUTH", "reader", "pw"]);
    let denied = r.cmd(&["CL.THROTTLE", "app:2", "1", "1", "1"]);
    assert!(
        denied.err().unwrap_or("").starts_with("NOPERM"),
        "{denied:?}"
    );
    assert_eq!(c.cmd(&["EXISTS", "app:2"]).int(), 0);
}

#[test]
fn the_setting_turns_it_off() {
    let s = Server::builder()
        .config("ratelimit.cl-throttle", "no")
        .start();
    let mut c = s.client();
    let r = c.cmd(&["CL.THROTTLE", "k", "1", "1", "1"]);
    assert!(r.err().unwrap_or("").contains("unknown command"), "{r:?}");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.cl-throttle"]),
        Value::Array(vec![
            Value::Bulk(b"ratelimit.cl-throttle".to_vec()),
            Value::Bulk(b"no".to_vec())
        ])
    );
    // Set at load time only.
    assert!(c
        .cmd(&["CONFIG", "SET", "ratelimit.cl-throttle", "yes"])
        .err()
        .is_some());
    assert!(
        s.log()
            .contains("CL.THROTTLE not registered (ratelimit.cl-throttle is no)"),
        "{}",
        s.log()
    );
    assert_eq!(c.cmd(&["RL.GCRA", "k", "1", "1", "1s"]).ints()[0], 0);
    // The default: registered.
    let s = Server::start();
    assert_eq!(
        s.client()
            .cmd(&["CONFIG", "GET", "ratelimit.cl-throttle"])
            .array()[1]
            .text(),
        "yes"
    );
}

/// The directory of the `redismodule.h` in the sources of the redis-module crate the
/// module is built with (as `make bench` finds it for its floor module).
fn redismodule_h_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} metadata: {e}"));
    assert!(out.status.success(), "cargo metadata failed");
    let text = String::from_utf8_lossy(&out.stdout);
    for part in text.split("\"manifest_path\":\"").skip(1) {
        let Some(path) = part.split('"').next() else {
            continue;
        };
        let Some(dir) = Path::new(path).parent() else {
            continue;
        };
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let is_crate = name
            .strip_prefix("redis-module-")
            .is_some_and(|v| v.starts_with(|ch: char| ch.is_ascii_digit()));
        let inc = dir.join("src").join("include");
        if is_crate && inc.join("redismodule.h").is_file() {
            return inc;
        }
    }
    panic!("redismodule.h of the redis-module crate not found through cargo metadata");
}

/// Build tests/fixtures/cl_throttle_taken.c as a module named `name` into `dir`.
fn build_fixture(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cl_throttle_taken.c");
    let out = dir.join(format!("{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-I"])
        .arg(redismodule_h_dir())
        .arg(format!("-DMODULE_NAME=\"{name}\""))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "the fixture module did not build");
    out
}

#[test]
fn a_module_with_cl_throttle_loaded_first_keeps_it_and_ours_loads_without_it() {
    let dir = std::env::temp_dir().join(format!("rl-throttle-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("fixture dir");
    let why = [
        (
            "redis-cell",
            "CL.THROTTLE not registered: the redis-cell module, loaded before this one, has it",
        ),
        (
            "othermod",
            "CL.THROTTLE not registered: the name is taken (by another module, or by the server itself)",
        ),
    ];
    for (name, logged) in why {
        let fixture = build_fixture(&dir, name);
        let ours = common::server::module_path();
        let s = Server::builder()
            .module(false)
            .config("loadmodule", &fixture.display().to_string())
            .config("loadmodule", &ours.display().to_string())
            .start();
        let mut c = s.client();
        let modules = module_names(&mut c);
        assert!(modules.iter().any(|m| m == name), "{modules:?}");
        assert!(modules.iter().any(|m| m == "ratelimit"), "{modules:?}");
        assert!(s.log().contains(logged), "{name}:\n{}", s.log());
        // The first module's command is the one that runs.
        assert_eq!(
            c.cmd(&["CL.THROTTLE", "k", "1", "1", "1"]),
            Value::Status("FIXTURE".into())
        );
        // Ours serve, on the keys CL.THROTTLE would have used.
        assert_eq!(
            c.cmd(&["RL.GCRA", "k", "1", "1", "1s", "AT", "1900000000000"])
                .ints(),
            [0, 2, 1, -1, 1000]
        );
        assert_eq!(c.cmd(&["RL.FIXED", "f", "1", "1m"]).ints()[0], 0);
        let info = c.cmd(&["INFO", "ratelimit"]).text();
        assert!(info.contains("ratelimit_cl_throttle_calls:0"), "{info}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn info_counts_calls_allowed_denied_and_errors() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["CL.THROTTLE", "k", "1", "1", "60"]);
    c.cmd(&["CL.THROTTLE", "k", "1", "1", "60"]);
    c.cmd(&["CL.THROTTLE", "k", "1", "1", "60"]); // denied
    c.cmd(&["CL.THROTTLE", "k", "1", "1", "60", "5"]); // above the capacity: denied
    c.cmd(&["CL.THROTTLE", "k", "1", "1", "0"]); // error
    let fields = info_fields(&mut c);
    let get = |f: &str| {
        fields
            .iter()
            .find(|(k, _)| k == &format!("ratelimit_cl_throttle_{f}"))
            .map(|(_, v)| *v)
    };
    assert_eq!(
        ["calls", "allowed", "denied", "errors"].map(get),
        [Some(5), Some(2), Some(2), Some(1)],
        "{fields:?}"
    );
    // RL.GCRA's counters are its own.
    assert!(fields.contains(&("ratelimit_gcra_calls".to_string(), 0)));
}

// ---- replicas, AOF, Cluster -----------------------------------------------------

/// Calls of every kind: new keys, redis-cell's keys, peeks, denials, a quantity above
/// the capacity, the function and the script. The keys they touch.
fn traffic(c: &mut Client) -> Vec<String> {
    let sides = both(c);
    let mut keys = Vec::new();
    for (i, cl) in [&sides[0], &sides[1], &sides[0], &sides[2]]
        .into_iter()
        .enumerate()
    {
        let key = format!("user:{i}");
        for q in ["1", "1", "0", "3", "9", "2"] {
            cl.call(c, &key, &["2", "1", "60", q]);
        }
        let cell = format!("cell:{i}");
        let ns = (unix_us() + 30_000_000) * 1000 + 7;
        c.cmd(&["SET", &cell, &ns.to_string(), "PX", "29999"]);
        cl.call(c, &cell, &["3", "1", "60"]);
        cl.call(c, &cell, &["3", "1", "60", "0"]);
        keys.extend([key, cell]);
    }
    keys
}

#[test]
fn replicas_with_and_without_the_module_hold_the_primarys_state() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    let keys = traffic(&mut c);
    wait_for_replicas(&mut c, 2);
    let mut r1 = with_module.client();
    let mut r2 = without_module.client();
    for key in &keys {
        let want = state(&mut c, key);
        let v = want.0.clone().expect("a value");
        assert_eq!(v.len(), 16, "{key}: written in µs ({v})");
        assert_eq!(state(&mut r1, key), want, "replica with the module, {key}");
        assert_eq!(
            state(&mut r2, key),
            want,
            "replica without the module, {key}"
        );
    }
    assert!(
        !without_module.log().contains("unknown command"),
        "{}",
        without_module.log()
    );
}

#[test]
fn the_aof_holds_effects_never_the_command() {
    let s = Server::builder().aof(true).start();
    let mut c = s.client();
    traffic(&mut c);
    let mut aof = String::new();
    let dir = s.dir.join("appendonlydir");
    for entry in std::fs::read_dir(&dir).expect("appendonlydir") {
        let path = entry.expect("entry").path();
        aof.push_str(&String::from_utf8_lossy(
            &std::fs::read(&path).expect("aof file"),
        ));
    }
    // The library's FUNCTION LOAD is there, with its text (which names the command).
    let aof = aof.replace(&common::twins::library(), "");
    let upper = aof.to_uppercase();
    assert!(upper.contains("PXAT"), "{aof}");
    assert!(!upper.contains("CL.THROTTLE"), "{aof}");
    assert!(!upper.contains("EVALSHA"), "{aof}");
    assert!(!upper.contains("FCALL"), "{aof}");
}

#[test]
fn cluster_routes_by_the_key() {
    let cluster = Cluster::start(3);
    let mut c = cluster.client();
    for i in 0..30 {
        let key = format!("user:{i}");
        let r = c.cmd(&["CL.THROTTLE", &key, "1", "1", "60"]);
        assert_eq!(&r.ints()[..4], &[0, 2, 1, -1], "{key}");
        let r = c.cmd(&["CL.THROTTLE", &key, "1", "1", "60", "3"]);
        assert_eq!(&r.ints()[..4], &[1, 2, 1, -1], "{key}");
        // The key lives on the node that owns its slot, and only there.
        let holders = cluster
            .nodes
            .iter()
            .filter(|n| n.client().cmd(&["EXISTS", &key]) == Value::Int(1))
            .count();
        assert_eq!(holders, 1, "{key}");
    }
    assert!(c.moved > 0, "keys of 30 names spread over 3 nodes");
}

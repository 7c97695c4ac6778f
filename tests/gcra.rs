//! RL.GCRA against real servers: every rule, bad inputs, the differential test (native
//! command, Lua twin and the pure model on the same inputs), and concurrent clients on
//! one key. Its replicas and AOF restarts are in tests/replication.rs and
//! tests/persistence.rs.

use crate::common;

use common::{at_base, state, unix_us, Client, Rng, Server, Side, Twins, Value, HOUR, MINUTE};
use ratelimit_core::call::memory::{self, Key};
use ratelimit_core::limiters;
use ratelimit_core::Effect;
use ratelimit_core::UnixMillis;

/// The native command or its Lua twin.
type Limiter = Side;

/// The native command, its function and its script, loaded into the server behind `c`.
fn limiters(c: &mut Client) -> Vec<Limiter> {
    let [tf, ts] = Twins::both(c);
    Side::all("RL.GCRA", [tf.gcra, ts.gcra])
}

/// The state a TAT of `tat_us` is stored as.
fn tat_state(tat_us: u64) -> (Option<String>, i64) {
    (Some(tat_us.to_string()), tat_us.div_ceil(1000) as i64)
}

#[test]
fn redis_cell_readme_example() {
    // CL.THROTTLE user123 15 30 60: 30 per minute plus 15, so 16 at once, then one
    // every 2 s.
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = format!("user123:{}", rl.name());
        let at = t.to_string();
        for i in 0..16 {
            assert_eq!(
                rl.call(&mut c, &key, &["15", "30", "60", "AT", &at]).ints(),
                [0, 16, 15 - i, -1, 2_000 * (i + 1)],
                "{} request {i}",
                rl.name()
            );
        }
        assert_eq!(
            rl.call(&mut c, &key, &["15", "30", "60", "AT", &at]).ints(),
            [1, 16, 0, 2_000, 32_000],
            "{}",
            rl.name()
        );
        assert_eq!(state(&mut c, &key), tat_state((t + 32_000) * 1000));
        let at = (t + 2_000).to_string();
        assert_eq!(
            rl.call(&mut c, &key, &["15", "30", "60", "AT", &at]).ints(),
            [0, 16, 0, -1, 32_000]
        );
        assert_eq!(
            rl.call(&mut c, &key, &["15", "30", "60", "AT", &at]).ints(),
            [1, 16, 0, 2_000, 32_000]
        );
        assert_eq!(state(&mut c, &key), tat_state((t + 34_000) * 1000));
    }
}

#[test]
fn one_per_day() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    let day = 86_400_000;
    for rl in limiters(&mut c) {
        let key = rl.name();
        let call = |c: &mut Client, ms: u64| {
            rl.call(c, key, &["0", "1", "1d", "AT", &(t + ms).to_string()])
                .ints()
        };
        assert_eq!(call(&mut c, 0), [0, 1, 0, -1, day as i64]);
        assert_eq!(state(&mut c, key), tat_state((t + day) * 1000));
        assert_eq!(call(&mut c, 3_600_000), [1, 1, 0, 82_800_000, 82_800_000]);
        assert_eq!(call(&mut c, day - 1), [1, 1, 0, 1, 1]);
        assert_eq!(call(&mut c, day), [0, 1, 0, -1, day as i64]);
        assert_eq!(state(&mut c, key), tat_state((t + 2 * day) * 1000));
    }
}

#[test]
fn a_hundred_thousand_per_second_is_exact() {
    // T = 10 µs, capacity 100: each millisecond lets exactly 100 more through.
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = rl.name();
        let mut allowed = 0;
        for ms in 0..=50u64 {
            let at = (t + ms).to_string();
            let cmd: Vec<Vec<u8>> = rl
                .argv(key, &["99", "100000", "1s", "AT", &at])
                .into_iter()
                .map(String::into_bytes)
                .collect();
            let replies = c.pipeline(&vec![cmd; 120]);
            let now_allowed = replies.iter().filter(|r| r.ints()[0] == 0).count();
            assert_eq!(now_allowed, 100, "{} at ms {ms}", rl.name());
            allowed += now_allowed;
            // The first denial of each millisecond: 10 µs to wait, shown as 1 ms.
            assert_eq!(replies[100].ints(), [1, 100, 0, 1, 1]);
        }
        assert_eq!(allowed, 100 + 50 * 100);
        assert_eq!(state(&mut c, key), tat_state((t + 51) * 1000));
    }
}

#[test]
fn period_not_divisible_by_count() {
    // 3 per second: T = 333 333.3 µs is rounded up to 333 334 µs.
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = rl.name();
        let at = t.to_string();
        let replies: Vec<Vec<i64>> = (0..4)
            .map(|_| rl.call(&mut c, key, &["2", "3", "1s", "AT", &at]).ints())
            .collect();
        assert_eq!(
            replies,
            [
                vec![0, 3, 2, -1, 334],
                vec![0, 3, 1, -1, 667],
                vec![0, 3, 0, -1, 1_001],
                vec![1, 3, 0, 334, 1_001],
            ],
            "{}",
            rl.name()
        );
        assert_eq!(state(&mut c, key), tat_state(t * 1000 + 1_000_002));
    }
}

#[test]
fn server_clock_is_used_without_at() {
    let s = Server::start();
    let mut c = s.client();
    for rl in limiters(&mut c) {
        let key = rl.name();
        let before = unix_us();
        let r = rl.call(&mut c, key, &["0", "1", "1m"]).ints();
        let after = unix_us();
        assert_eq!(&r[..4], &[0, 1, 0, -1]);
        assert!(r[4] == 60_000 || r[4] == 60_001, "{r:?}");
        let (v, exp) = state(&mut c, key);
        let tat: u64 = v.expect("a TAT").parse().expect("an integer");
        assert!(
            tat >= before + 60_000_000 && tat <= after + 60_000_000,
            "{tat} not in [{before}, {after}] + 60 s"
        );
        assert_eq!(exp, tat.div_ceil(1000) as i64);
    }
}

#[test]
fn cost_and_peek() {
    // 10 per second, burst 9: T = 100 ms, capacity 10.
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = rl.name();
        let at0 = t.to_string();
        let at1 = (t + 100).to_string();
        // A peek on a missing key creates nothing.
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "COST", "0", "AT", &at0])
                .ints(),
            [0, 10, 10, -1, 0]
        );
        assert_eq!(c.cmd(&["EXISTS", key]).int(), 0);
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "COST", "4", "AT", &at0])
                .ints(),
            [0, 10, 6, -1, 400]
        );
        let before = state(&mut c, key);
        assert_eq!(before, tat_state((t + 400) * 1000));
        // A peek changes neither the value nor the TTL.
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "cost", "0", "at", &at1])
                .ints(),
            [0, 10, 7, -1, 300]
        );
        assert_eq!(state(&mut c, key), before);
        // A cost that does not fit is denied, with the room left as remaining.
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "COST", "8", "AT", &at1])
                .ints(),
            [1, 10, 7, 100, 300]
        );
        assert_eq!(state(&mut c, key), before);
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "AT", &at1, "COST", "7"])
                .ints(),
            [0, 10, 0, -1, 1_000]
        );
        assert_eq!(state(&mut c, key), tat_state((t + 1_100) * 1000));
        // The whole capacity at once is allowed on a full bucket.
        let later = (t + 5_000).to_string();
        assert_eq!(
            rl.call(&mut c, key, &["9", "10", "1s", "COST", "10", "AT", &later])
                .ints(),
            [0, 10, 0, -1, 1_000]
        );
    }
}

#[test]
fn denied_requests_consume_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = rl.name();
        for i in 0..2 {
            rl.call(&mut c, key, &["1", "2", "1m", "AT", &(t + i).to_string()]);
        }
        let full = state(&mut c, key);
        for i in 0..20 {
            let at = (t + 100 + i * 1000).to_string();
            let r = rl.call(&mut c, key, &["1", "2", "1m", "AT", &at]).ints();
            assert_eq!(r[0], 1);
            assert_eq!(state(&mut c, key), full, "{} denial {i}", rl.name());
        }
    }
}

#[test]
fn a_tat_in_the_past_counts_as_now() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for rl in limiters(&mut c) {
        let key = rl.name();
        // A TAT well before AT (the key still exists: AT runs ahead of the clock), and
        // without TTL: it counts as now, and the allowed request gives the key its TTL.
        c.cmd(&["SET", key, &((t - 5_000) * 1000).to_string()]);
        assert_eq!(
            rl.call(&mut c, key, &["0", "1", "1s", "AT", &t.to_string()])
                .ints(),
            [0, 1, 0, -1, 1_000]
        );
        assert_eq!(state(&mut c, key), tat_state((t + 1_000) * 1000));
        // A TAT of 0 (the epoch: how redis-cell's users reset a key) is long past.
        c.cmd(&["SET", key, "0"]);
        assert_eq!(
            rl.call(&mut c, key, &["0", "1", "1s", "AT", &t.to_string()])
                .ints(),
            [0, 1, 0, -1, 1_000]
        );
        // So is the earliest TAT RL.GCRA can write (at the earliest AT).
        c.cmd(&["SET", key, "1000000000000000"]);
        assert_eq!(
            rl.call(&mut c, key, &["0", "1", "1s", "AT", &t.to_string()])
                .ints(),
            [0, 1, 0, -1, 1_000]
        );
        // A sub-millisecond TAT expires at the next millisecond.
        c.cmd(&["SET", key, &(t * 1000 + 1).to_string()]);
        assert_eq!(
            rl.call(&mut c, key, &["1", "1000", "1s", "AT", &t.to_string()])
                .ints(),
            [0, 2, 0, -1, 2]
        );
        assert_eq!(state(&mut c, key), tat_state(t * 1000 + 1_001));
    }
}

#[test]
fn wrong_type_and_invalid_state_leave_the_key_untouched() {
    let s = Server::start();
    let mut c = s.client();
    let invalid = "ERR the key does not hold RL.GCRA state (expected a theoretical arrival time in microseconds since the Unix epoch)";
    c.cmd(&["RPUSH", "list", "a"]);
    for rl in limiters(&mut c) {
        assert_eq!(
            rl.call(&mut c, "list", &["5", "1", "1s"]).err(),
            Some("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        assert_eq!(
            c.cmd(&["LRANGE", "list", "0", "-1"]),
            Value::Array(vec![Value::Bulk(b"a".to_vec())])
        );
        for bad in [
            "abc",
            "-1",
            "1.5",
            "",
            " 1",
            "1e15",
            "5679244800000001",
            "9999999999999999",
            "00000000000000001",
            "99999999999999999999",
        ] {
            c.cmd(&["SET", "s", bad, "PX", "100000"]);
            let before = state(&mut c, "s");
            for args in [&["5", "1", "1s"][..], &["5", "1", "1s", "COST", "0"]] {
                assert_eq!(
                    rl.call(&mut c, "s", args).err(),
                    Some(invalid),
                    "{} {bad:?} {args:?}",
                    rl.name()
                );
                assert_eq!(state(&mut c, "s"), before);
            }
        }
        // The largest TAT the limiter can write is accepted.
        c.cmd(&["SET", "s", "5679244800000000"]);
        let r = rl.call(&mut c, "s", &["0", "1", "1s", "COST", "0"]).ints();
        assert_eq!(r[0], 1);
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "1", "PX", "100000"]);
    let before = state(&mut c, "k");
    let int_err = |what: &str, v: &str, min: i64| {
        format!("ERR invalid {what} '{v}': must be an integer from {min} to 9007199254740991")
    };
    let not_positive = |v: &str| {
        format!("ERR invalid period '{v}': must be a positive duration (an integer with an optional unit ms, s, m, h or d)")
    };
    let rate = "ERR invalid rate: period / count must be at least 1 microsecond".to_string();
    let burst =
        "ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)"
            .to_string();
    let arity = "ERR wrong number of arguments for 'RL.GCRA' command (syntax: RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay] [REFUND|FORCE|UPTO])".to_string();
    let cases: Vec<(&[&str], String)> = vec![
        (&["-1", "1", "1s"], int_err("max_burst", "-1", 0)),
        (&["x", "1", "1s"], int_err("max_burst", "x", 0)),
        (&["1.5", "1", "1s"], int_err("max_burst", "1.5", 0)),
        (&["", "1", "1s"], int_err("max_burst", "", 0)),
        (
            &["9223372036854775808", "1", "1s"],
            int_err("max_burst", "9223372036854775808", 0),
        ),
        (&["0", "0", "1s"], int_err("count", "0", 1)),
        (&["0", "-2", "1s"], int_err("count", "-2", 1)),
        (&["0", "2.5", "1s"], int_err("count", "2.5", 1)),
        (&["0", "1", "0"], not_positive("0")),
        (&["0", "1", "-1s"], not_positive("-1s")),
        (&["0", "1", "0.5s"], not_positive("0.5s")),
        (&["0", "1", ""], not_positive("")),
        (
            &["0", "1", "1y"],
            "ERR invalid period '1y': unknown unit (use ms, s, m, h or d)".into(),
        ),
        (
            &["0", "1", "3651d"],
            "ERR invalid period '3651d': must be at most 10 years (3650d)".into(),
        ),
        (&["0", "1001", "1ms"], rate.clone()),
        (&["0", "1000001", "1s"], rate.clone()),
        (&["0", "4000000000000", "1h"], rate.clone()),
        (&["18250", "1", "1d"], burst.clone()),
        (&["5", "1", "3650d"], burst.clone()),
        (&["999999999999999", "1", "1s"], burst.clone()),
        (
            &["15", "30", "60", "COST", "17"],
            "ERR cost 17 exceeds the burst capacity 16: the request can never be allowed".into(),
        ),
        (
            &["0", "1", "1s", "COST", "2"],
            "ERR cost 2 exceeds the burst capacity 1: the request can never be allowed".into(),
        ),
        (&["15", "30", "60", "COST", "-1"], int_err("cost", "-1", 0)),
        (&["15", "30", "60", "COST"], "ERR option COST needs a value".into()),
        (
            &["15", "30", "60", "COST", "1", "cost", "1"],
            "ERR option COST given more than once".into(),
        ),
        (
            &["15", "30", "60", "AT", "1900000000000", "AT", "1900000000000"],
            "ERR option AT given more than once".into(),
        ),
        (&["15", "30", "60", "AT"], "ERR option AT needs a value".into()),
        (
            &["15", "30", "60", "AT", "4102444800001"],
            "ERR invalid AT '4102444800001': must be a Unix time in milliseconds from 1000000000000 to 4102444800000".into(),
        ),
        (&["15", "30", "60", "ALIGN"], "ERR unknown option 'ALIGN' (options here: COST, AT, DELAY, REFUND, FORCE, UPTO)".into()),
        (&["15", "30", "60", "DELAY"], "ERR option DELAY needs a value".into()),
        (
            &["15", "30", "60", "DELAY", "1s", "delay", "1s"],
            "ERR option DELAY given more than once".into(),
        ),
        (
            &["15", "30", "60", "DELAY", "0"],
            "ERR invalid max_delay '0': must be a positive duration (an integer with an optional unit ms, s, m, h or d)".into(),
        ),
        (
            &["15", "30", "60", "DELAY", "3651d"],
            "ERR invalid max_delay '3651d': must be at most 10 years (3650d)".into(),
        ),
        (
            &["18249", "1", "1d", "DELAY", "1d"],
            "ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)".into(),
        ),
        (
            &["15", "30", "60", "DELAY", "1s", "COST", "17"],
            "ERR cost 17 exceeds the burst capacity 16: the request can never be allowed".into(),
        ),
        (&["15", "30", "60", "LIMIT", "1", "1"], "ERR unknown option 'LIMIT' (options here: COST, AT, DELAY, REFUND, FORCE, UPTO)".into()),
        (&["15", "30", "60", "COST", "1", "2"], "ERR unknown option '2' (options here: COST, AT, DELAY, REFUND, FORCE, UPTO)".into()),
        (
            &["15\r\n", "30", "60"],
            int_err("max_burst", "15\\x0d\\x0a", 0),
        ),
        (&["15", "30", "60\0"], not_positive("60\\x00")),
        (&["15", "30"], arity.clone()),
        (&["15"], arity.clone()),
        (&[], arity.clone()),
    ];
    for rl in limiters(&mut c) {
        for (args, want) in &cases {
            assert_eq!(
                rl.call(&mut c, "k", args).err(),
                Some(want.as_str()),
                "{} {args:?}",
                rl.name()
            );
            assert_eq!(state(&mut c, "k"), before, "{args:?} changed the key");
            assert_eq!(c.cmd(&["DBSIZE"]).int(), 1, "{args:?} created a key");
        }
    }
    // No key at all.
    assert_eq!(c.cmd(&["RL.GCRA"]).err(), Some(arity.as_str()));
    // A twin called with no key: the error names the function (or its script).
    for rl in &limiters(&mut c)[1..] {
        let twin = rl.twin.clone().expect("twin");
        assert_eq!(
            c.cmd(&twin.argv::<&str, &str>(&[], &["1", "1", "1s"]))
                .err(),
            Some("ERR wrong number of keys for 'rl_gcra': it takes exactly 1, got 0"),
            "{}",
            rl.name()
        );
        assert_eq!(
            c.cmd(&twin.argv(&["a", "b"], &["1", "1", "1s"])).err(),
            Some("ERR wrong number of keys for 'rl_gcra': it takes exactly 1, got 2"),
            "{}",
            rl.name()
        );
    }
}

#[test]
fn key_specs_name_exactly_the_key() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "RL.GCRA", "user:1", "1", "2", "1s", "COST", "1"]),
        Value::Array(vec![Value::Bulk(b"user:1".to_vec())])
    );
    let info = c.cmd(&["COMMAND", "INFO", "RL.GCRA"]);
    let entry = info.array()[0].array();
    assert_eq!(entry[1], Value::Int(-1));
}

// ---- differential: native, twin and model ---------------------------------------

/// One logical key in the model: what `GET` and `PEXPIRETIME` should show.
#[derive(Clone, Debug, PartialEq)]
enum Model {
    Missing,
    Stored(String, Option<UnixMillis>),
}

impl Model {
    fn observed(&self) -> (Option<String>, i64) {
        match self {
            Model::Missing => (None, -2),
            Model::Stored(v, e) => (Some(v.clone()), e.map_or(-1, |e| e.0 as i64)),
        }
    }
}

/// The reply the model predicts for one call, applying its effect to `m`.
fn model_call(m: &mut Model, args: &[String]) -> Value {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let raw: Vec<&[u8]> = std::iter::once(&b"key"[..]).chain(raw).collect();
    let call = match limiters::gcra::parse(&raw) {
        Ok(c) => c,
        Err(e) => return Value::Error(e.to_string()),
    };
    let now = call.at.expect("the differential test always passes AT");
    let mut keys = [match m {
        Model::Missing => None,
        Model::Stored(v, e) => Some(Key::String {
            value: v.clone().into_bytes(),
            expires_at: *e,
        }),
    }];
    let settled = match memory::run(&call, &mut keys, now) {
        Ok(s) => s,
        Err(e) => return Value::Error(e.to_string()),
    };
    let out = settled.decided();
    if let Effect::Set {
        state: tat,
        expires_at,
    } = out.effect
    {
        *m = Model::Stored(tat.as_u64().to_string(), Some(expires_at));
    }
    let mut fields: Vec<Value> = out
        .verdict
        .fields()
        .iter()
        .map(|&f| Value::Int(f))
        .collect();
    if let Some(ratelimit_core::call::limiter::Field::Int(delay)) = settled.field {
        fields.push(Value::Int(delay));
    }
    Value::Array(fields)
}

fn random_args(rng: &mut Rng, now_ms: u64) -> Vec<String> {
    let max_burst = *rng.pick(&[0i64, 0, 1, 2, 5, 15, 99, 18_249]);
    let count = *rng.pick(&[1i64, 1, 2, 3, 7, 30, 1_000, 100_000, 1_000_000]);
    let period = rng
        .pick(&[
            "1", "60", "1s", "250ms", "7ms", "1m", "1d", "1500ms", "1h", "3650d", "1ms",
        ])
        .to_string();
    let capacity = max_burst + 1;
    let mut args = vec![max_burst.to_string(), count.to_string(), period];
    if rng.chance(60) {
        let cost = if rng.chance(5) {
            capacity + 1
        } else {
            rng.irange(0, capacity.min(20) + 1)
        };
        let word = rng.pick(&["COST", "cost", "Cost"]).to_string();
        args.extend([word, cost.to_string()]);
    }
    if rng.chance(3) {
        // An occasional bad argument: both sides must word it the same way.
        let bad = rng.pick(&["0", "x", "-1", "1.5", ""]).to_string();
        let i = rng.range(0, 3) as usize;
        args[i] = bad;
    }
    if rng.chance(2) {
        args.push("ALIGN".into());
    }
    if rng.chance(40) {
        let word = rng.pick(&["DELAY", "delay"]).to_string();
        let max_delay = rng
            .pick(&["1ms", "1", "250ms", "3s", "1m", "1d", "3650d", "0", "x"])
            .to_string();
        args.extend([word, max_delay]);
    }
    args.extend(["AT".to_string(), now_ms.to_string()]);
    // Options in either order.
    if args.len() == 7 && rng.chance(50) {
        let opts = args.split_off(3);
        args.extend(opts[2..].iter().cloned());
        args.extend(opts[..2].iter().cloned());
    }
    args
}

/// A value written from outside: a TAT (some in the past, some ahead, padded or not),
/// or something that is not one.
fn outside_value(rng: &mut Rng, now_ms: u64) -> String {
    match rng.range(0, 6) {
        0 => ((now_ms + rng.range(0, 5_000)) * 1000 + rng.range(0, 1000)).to_string(),
        1 => ((now_ms - rng.range(0, 5_000)) * 1000).to_string(),
        2 => format!("{:016}", rng.range(0, 1_000_000)),
        3 => "junk".into(),
        4 => "5679244800000001".into(),
        _ => "-5".into(),
    }
}

#[test]
fn differential_native_twin_and_model() {
    let s = Server::start();
    let mut c = s.client();
    let sides = limiters(&mut c);
    let (native, function, script) = (&sides[0], &sides[1], &sides[2]);
    for seed in Rng::seeds(&[1, 2, 3, 4]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(HOUR, MINUTE);
        let names = ["a", "b", "c"];
        let mut models = vec![Model::Missing; names.len()];
        for step in 0..600 {
            now += *rng.pick(&[0u64, 0, 0, 1, 3, 50, 120, 400, 999, 1_000, 2_500, 61_000]);
            let k = rng.range(0, names.len() as u64) as usize;
            // Four physical keys share one history: native only, function only, script
            // only, and the three mixed.
            let keys = [
                format!("n:{seed}:{}", names[k]),
                format!("f:{seed}:{}", names[k]),
                format!("s:{seed}:{}", names[k]),
                format!("m:{seed}:{}", names[k]),
            ];
            if rng.chance(4) {
                let v = outside_value(&mut rng, now);
                let ttl = rng.chance(50).then(|| UnixMillis(now + 3_600_000));
                for key in &keys {
                    match ttl {
                        None => c.cmd(&["SET", key, &v]),
                        Some(e) => c.cmd(&["SET", key, &v, "PXAT", &e.0.to_string()]),
                    };
                }
                models[k] = Model::Stored(v, ttl);
                continue;
            }
            let args = random_args(&mut rng, now);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let want = model_call(&mut models[k], &args);
            let mixed = &sides[rng.range(0, 3) as usize];
            let ctx = format!("seed {seed} step {step} key {} args {args:?}", names[k]);
            assert_eq!(native.call(&mut c, &keys[0], &argv), want, "native, {ctx}");
            assert_eq!(
                function.call(&mut c, &keys[1], &argv),
                want,
                "function, {ctx}"
            );
            assert_eq!(script.call(&mut c, &keys[2], &argv), want, "script, {ctx}");
            assert_eq!(
                mixed.call(&mut c, &keys[3], &argv),
                want,
                "mixed ({}), {ctx}",
                mixed.name()
            );
            let expected = models[k].observed();
            for key in &keys {
                assert_eq!(state(&mut c, key), expected, "state of {key}, {ctx}");
            }
        }
    }
}

// ---- concurrency -------------------------------------------------------------------

#[test]
fn concurrent_clients_never_get_more_than_the_bound() {
    // 20 per second plus 9: T = 50 ms, capacity 10.
    const T_US: u64 = 50_000;
    const CAPACITY: u64 = 10;
    let s = Server::start();
    let mut c = s.client();
    let rls = limiters(&mut c);
    let start = unix_us();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let rl = rls[i % rls.len()].clone();
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = 0u64;
                for _ in 0..60 {
                    let r = rl.call(&mut c, "shared", &["9", "20", "1s"]).ints();
                    assert_eq!(r[1], CAPACITY as i64);
                    if r[0] == 0 {
                        allowed += 1;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                allowed
            })
        })
        .collect();
    let allowed: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .sum();
    let end = unix_us();
    let bound = CAPACITY + (end - start) / T_US;
    assert!(allowed >= CAPACITY, "{allowed} allowed");
    assert!(
        allowed <= bound,
        "{allowed} allowed in {} µs, bound {bound}",
        end - start
    );
    // Every allowed request moved the TAT by exactly T from the first one's time.
    let tat: u64 = state(&mut c, "shared")
        .0
        .expect("a TAT")
        .parse()
        .expect("integer");
    let first = tat - allowed * T_US;
    assert!(
        (start..=end).contains(&first),
        "TAT {tat} - {allowed} * T is outside [{start}, {end}]"
    );
}

// ---- DELAY -------------------------------------------------------------------------

#[test]
fn delay_books_requests_that_fit_within_max_delay() {
    let s = Server::start();
    let mut c = s.client();
    for rl in limiters(&mut c) {
        let key = format!("d:{}", rl.name());
        let t = at_base(HOUR, MINUTE);
        let at = t.to_string();
        // 30 per minute (T = 2 s), 16 at once, DELAY 10 s.
        let call = |c: &mut Client, args: &[&str]| rl.call(c, &key, args).ints();
        let args = ["15", "30", "60", "DELAY", "10s", "AT", &at];
        for i in 0..16i64 {
            assert_eq!(
                call(&mut c, &args),
                [0, 16, 15 - i, -1, 2_000 * (i + 1), 0],
                "{i}"
            );
        }
        for k in 1..=5i64 {
            assert_eq!(
                call(&mut c, &args),
                [0, 16, 0, -1, 2_000 * (16 + k), 2_000 * k],
                "{k}"
            );
        }
        // Beyond max_delay: denied, nothing booked, retry when it would be booked.
        let before = state(&mut c, &key);
        assert_eq!(call(&mut c, &args), [1, 16, 0, 2_000, 42_000, -1]);
        assert_eq!(
            state(&mut c, &key),
            before,
            "{}: a refusal writes nothing",
            rl.name()
        );
        // The TAT and its expiry cover the furthest booking.
        assert_eq!(before, tat_state((t + 42_000) * 1000));
        // A peek with DELAY books nothing and says when the queue drains into the
        // burst window.
        let peek = ["15", "30", "60", "COST", "0", "DELAY", "10s", "AT", &at];
        assert_eq!(call(&mut c, &peek), [0, 16, 0, -1, 42_000, 10_000]);
        assert_eq!(state(&mut c, &key), before);
        // Without DELAY the reply keeps its five fields, and the request is denied.
        assert_eq!(
            call(&mut c, &["15", "30", "60", "AT", &at]),
            [1, 16, 0, 12_000, 42_000]
        );
    }
}

#[test]
fn delay_at_high_and_low_rates_is_exact_to_the_millisecond() {
    let s = Server::start();
    let mut c = s.client();
    for rl in limiters(&mut c) {
        let t = at_base(HOUR, MINUTE).to_string();
        // 100 000 per second, no burst, DELAY 20 ms: bookings k * 10 µs ahead, rounded up.
        let key = format!("fast:{}", rl.name());
        for k in 0..=2_000i64 {
            let r = rl
                .call(
                    &mut c,
                    &key,
                    &["0", "100000", "1s", "DELAY", "20ms", "AT", &t],
                )
                .ints();
            assert_eq!(r[5], (k * 10 + 999) / 1000, "{} booking {k}", rl.name());
        }
        let r = rl
            .call(
                &mut c,
                &key,
                &["0", "100000", "1s", "DELAY", "20ms", "AT", &t],
            )
            .ints();
        assert_eq!((r[0], r[5]), (1, -1));
        // 1 per day, DELAY 2 days: now, in one day, in two days, then refused.
        let key = format!("slow:{}", rl.name());
        let delays: Vec<i64> = (0..4)
            .map(|_| {
                rl.call(&mut c, &key, &["0", "1", "1d", "DELAY", "2d", "AT", &t])
                    .ints()[5]
            })
            .collect();
        assert_eq!(delays, [0, 86_400_000, 172_800_000, -1], "{}", rl.name());
    }
}

#[test]
fn concurrent_workers_book_distinct_slots_spaced_by_the_interval() {
    // 8 workers × 25 bookings on one key, some through each form of the twin, all at the same
    // instant (AT): 10 per second, no burst (T = 100 ms), DELAY 1 hour. Every booking
    // gets a slot of its own: the 200 delays are exactly 0, T, 2T, ... 199 T.
    const T_MS: i64 = 100;
    let s = Server::start();
    let mut c = s.client();
    let rls = limiters(&mut c);
    let at = at_base(HOUR, MINUTE).to_string();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let rl = rls[i % rls.len()].clone();
            let port = s.port;
            let at = at.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                (0..25)
                    .map(|_| {
                        let r = rl
                            .call(
                                &mut c,
                                "quota",
                                &["0", "10", "1s", "DELAY", "1h", "AT", &at],
                            )
                            .ints();
                        assert_eq!(r[0], 0, "every request is booked: {r:?}");
                        r[5]
                    })
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut delays: Vec<i64> = Vec::new();
    for h in handles {
        delays.extend(h.join().expect("worker"));
    }
    delays.sort_unstable();
    let slots: Vec<i64> = (0..200).map(|k| k * T_MS).collect();
    assert_eq!(delays, slots, "each booking has a slot of its own");
    // The TAT covers the furthest booking.
    let t: u64 = at.parse().expect("AT");
    assert_eq!(
        state(&mut c, "quota"),
        tat_state((t + 200 * T_MS as u64) * 1000)
    );
}

/// One key, two algorithms: RL.GCRA read RL.FIXED's count as a TAT long past (allowed
/// everything and overwrote the count), RL.FIXED read RL.GCRA's TAT as a count far above
/// its limit (denied everything until the key expired). Both are now errors that say
/// what the key holds, from the command, its function and its script, alone and inside
/// RL.ALL (which names the key), and the key is left as it was. What cannot be told
/// apart stays undetected: a TAT read by RL.FIXED with a limit of 10^15 or more.
#[test]
fn same_key_two_algorithms_the_common_confusions_are_detected() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let t = at_base(HOUR, MINUTE).to_string();
    let gcra_sides = Side::all("RL.GCRA", [tf.gcra.clone(), ts.gcra.clone()]);
    let fixed_sides = Side::all("RL.FIXED", [tf.fixed.clone(), ts.fixed.clone()]);
    let count_read_by_gcra = "ERR the key holds a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes), not RL.GCRA state: each algorithm needs keys of its own";
    let tat_read_by_fixed = "ERR the key holds what can only be RL.GCRA's state (a time in microseconds, above the limit), not RL.FIXED state: each algorithm needs keys of its own";
    for (g, f) in gcra_sides.iter().zip(&fixed_sides) {
        // RL.FIXED's count, then RL.GCRA on the same key.
        c.cmd(&["DEL", "shared"]);
        assert_eq!(
            f.call(&mut c, "shared", &["100", "1h", "AT", &t]).ints(),
            [0, 100, 99, -1, 3_600_000]
        );
        let before = state(&mut c, "shared");
        assert_eq!(
            g.call(&mut c, "shared", &["5", "10", "1s", "AT", &t]).err(),
            Some(count_read_by_gcra),
            "{}",
            g.name()
        );
        assert_eq!(state(&mut c, "shared"), before);
        // RL.GCRA's TAT, then RL.FIXED on the same key.
        c.cmd(&["DEL", "shared"]);
        assert_eq!(
            g.call(&mut c, "shared", &["5", "10", "1s", "AT", &t])
                .ints()[0],
            0
        );
        let before = state(&mut c, "shared");
        assert_eq!(
            f.call(&mut c, "shared", &["100", "1h", "AT", &t]).err(),
            Some(tat_read_by_fixed),
            "{}",
            f.name()
        );
        assert_eq!(state(&mut c, "shared"), before);
        // 0 is a TAT long past (a reset), and 1 a counter.
        c.cmd(&["SET", "shared", "1"]);
        assert_eq!(
            g.call(&mut c, "shared", &["5", "10", "1s", "AT", &t]).err(),
            Some(count_read_by_gcra)
        );
        c.cmd(&["SET", "shared", "0"]);
        assert_eq!(
            g.call(&mut c, "shared", &["5", "10", "1s", "COST", "0", "AT", &t])
                .ints()[..3],
            [0, 6, 6]
        );
        c.cmd(&["SET", "shared", &(1_000_000_000_000_000u64 + 1).to_string()]);
        // A limit that a TAT could be a count of: not told apart (and documented so).
        assert_eq!(
            f.call(
                &mut c,
                "shared",
                &["9007199254740991", "1h", "COST", "0", "AT", &t]
            )
            .ints()[0],
            0
        );
    }
    // Inside RL.ALL the error names the key, as every state error there does.
    c.cmd(&["DEL", "shared"]);
    c.cmd(&["INCR", "shared"]);
    let named = "ERR rule 1 (GCRA): the key 'shared' holds a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes), not RL.GCRA state: each algorithm needs keys of its own";
    let args = ["1", "shared", "GCRA", "1", "5", "10", "1s", "AT", &t];
    let mut native = vec!["RL.ALL"];
    native.extend_from_slice(&args);
    assert_eq!(c.cmd(&native).err(), Some(named));
    for tw in [&tf.all, &ts.all] {
        let mut v = vec![tw.call, tw.id.as_str()];
        v.extend_from_slice(&args);
        assert_eq!(c.cmd(&v).err(), Some(named), "{}", tw.name());
    }
    assert_eq!(c.cmd(&["GET", "shared"]), Value::Bulk(b"1".to_vec()));
}

/// `RL.GCRA key 2 10 60 5` (redis-cell's quantity as a fifth argument) was "unknown
/// option '5'"; the error now says to write COST 5, from the command and its twins.
#[test]
fn a_fifth_argument_says_cost() {
    let s = Server::start();
    let mut c = s.client();
    let want = "ERR unknown option '5': RL.GCRA takes redis-cell's quantity as COST 5 (or call CL.THROTTLE, which takes it fifth)";
    for rl in limiters(&mut c) {
        assert_eq!(
            rl.call(&mut c, "k", &["2", "10", "60", "5"]).err(),
            Some(want),
            "{}",
            rl.name()
        );
        // A word that is no number stays an unknown option.
        assert!(rl
            .call(&mut c, "k", &["2", "10", "60", "FIVE"])
            .err()
            .is_some_and(|e| e.starts_with("ERR unknown option 'FIVE' (options here:")));
        assert_eq!(
            rl.call(&mut c, "k", &["2", "10", "60", "COST", "3"]).ints()[..3],
            [0, 3, 0]
        );
        c.cmd(&["DEL", "k"]);
    }
}

//! RL.FIXED against a real server: every rule, bad inputs, concurrent
//! clients on one key, and the differential test (native command, Lua twin and the
//! pure model on the same inputs).

use crate::common;

use common::{at_base, state, unix_ms, Client, Rng, Server, Twins, Value, HOUR, MINUTE};
use ratelimit_core::call::memory::{self, Key};
use ratelimit_core::limiters;
use ratelimit_core::UnixMillis;
use ratelimit_core::{Effect, Stored};

fn fixed(c: &mut Client, args: &[&str]) -> Value {
    let mut v = vec!["RL.FIXED"];
    v.extend_from_slice(args);
    c.cmd(&v)
}

#[test]
fn first_hit_window_counts_and_denies() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    let at = |ms: u64| (t + ms).to_string();
    assert_eq!(
        fixed(&mut c, &["k", "3", "10s", "AT", &at(0)]).ints(),
        [0, 3, 2, -1, 10_000]
    );
    assert_eq!(
        fixed(&mut c, &["k", "3", "10s", "AT", &at(1_000)]).ints(),
        [0, 3, 1, -1, 9_000]
    );
    assert_eq!(
        fixed(&mut c, &["k", "3", "10s", "AT", &at(2_500)]).ints(),
        [0, 3, 0, -1, 7_500]
    );
    assert_eq!(
        fixed(&mut c, &["k", "3", "10s", "AT", &at(3_000)]).ints(),
        [1, 3, 0, 7_000, 7_000]
    );
    assert_eq!(state(&mut c, "k"), (Some("3".into()), (t + 10_000) as i64));
    // The window ends at t + 10 s: a new one starts there.
    assert_eq!(
        fixed(&mut c, &["k", "3", "10s", "AT", &at(10_000)]).ints(),
        [0, 3, 2, -1, 10_000]
    );
    assert_eq!(state(&mut c, "k"), (Some("1".into()), (t + 20_000) as i64));
}

#[test]
fn server_clock_is_used_without_at() {
    let s = Server::start();
    let mut c = s.client();
    let before = unix_ms() as i64;
    let r = fixed(&mut c, &["k", "5", "1m"]).ints();
    let after = unix_ms() as i64;
    assert_eq!(&r[..4], &[0, 5, 4, -1]);
    assert!(r[4] <= 60_000 && r[4] > 59_000, "{r:?}");
    let (v, exp) = state(&mut c, "k");
    assert_eq!(v.as_deref(), Some("1"));
    assert!(
        exp >= before + 60_000 && exp <= after + 60_000,
        "{exp} not in [{before}, {after}] + 60 s"
    );
}

#[test]
fn aligned_windows_end_on_multiples_of_the_window() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE); // a multiple of one minute
    let r = fixed(
        &mut c,
        &["k", "10", "1m", "ALIGN", "AT", &(t + 15_250).to_string()],
    )
    .ints();
    assert_eq!(r, [0, 10, 9, -1, 44_750]);
    assert_eq!(state(&mut c, "k").1, (t + 60_000) as i64);
    let r = fixed(&mut c, &["k2", "10", "1m", "align", "AT", &t.to_string()]).ints();
    assert_eq!(r, [0, 10, 9, -1, 60_000]);
}

#[test]
fn cost_and_peek() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE).to_string();
    // A peek on a missing key creates nothing.
    assert_eq!(
        fixed(&mut c, &["k", "10", "1m", "COST", "0", "AT", &t]).ints(),
        [0, 10, 10, -1, 0]
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]).int(), 0);
    assert_eq!(
        fixed(&mut c, &["k", "10", "1m", "COST", "4", "AT", &t]).ints(),
        [0, 10, 6, -1, 60_000]
    );
    let before = state(&mut c, "k");
    // A peek changes neither the value nor the TTL.
    let later = (at_base(HOUR, MINUTE) + 30_000).to_string();
    assert_eq!(
        fixed(&mut c, &["k", "10", "1m", "cost", "0", "AT", &later]).ints(),
        [0, 10, 6, -1, 30_000]
    );
    assert_eq!(state(&mut c, "k"), before);
    // A cost that does not fit is denied, with the room left as remaining.
    assert_eq!(
        fixed(&mut c, &["k", "10", "1m", "COST", "7", "AT", &later]).ints(),
        [1, 10, 6, 30_000, 30_000]
    );
    assert_eq!(
        fixed(&mut c, &["k", "10", "1m", "COST", "6", "AT", &later]).ints(),
        [0, 10, 0, -1, 30_000]
    );
}

#[test]
fn denied_requests_consume_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    for i in 0..2 {
        fixed(&mut c, &["k", "2", "1m", "AT", &(t + i).to_string()]);
    }
    let full = state(&mut c, "k");
    for i in 0..20 {
        let r = fixed(
            &mut c,
            &["k", "2", "1m", "AT", &(t + 100 + i * 1000).to_string()],
        )
        .ints();
        assert_eq!(r[0], 1);
        assert_eq!(state(&mut c, "k"), full, "denial {i} changed the key");
    }
}

#[test]
fn counter_without_ttl_gets_one() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    // A counter made by a plain INCR has no TTL.
    c.cmd(&["INCRBY", "k", "2"]);
    assert_eq!(
        fixed(&mut c, &["k", "5", "30s", "AT", &t.to_string()]).ints(),
        [0, 5, 2, -1, 30_000]
    );
    assert_eq!(state(&mut c, "k"), (Some("3".into()), (t + 30_000) as i64));
    // A full one without TTL is denied, and still gets its TTL (else it would stay full).
    c.cmd(&["SET", "full", "5"]);
    assert_eq!(
        fixed(&mut c, &["full", "5", "30s", "AT", &t.to_string()]).ints(),
        [1, 5, 0, 30_000, 30_000]
    );
    assert_eq!(
        state(&mut c, "full"),
        (Some("5".into()), (t + 30_000) as i64)
    );
    // A peek never writes, not even the missing TTL.
    c.cmd(&["SET", "peek", "1"]);
    fixed(
        &mut c,
        &["peek", "5", "30s", "COST", "0", "AT", &t.to_string()],
    );
    assert_eq!(state(&mut c, "peek"), (Some("1".into()), -1));
}

#[test]
fn ended_window_counts_as_empty_while_the_key_exists() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    fixed(&mut c, &["k", "1", "1s", "AT", &t.to_string()]);
    // AT runs ahead of the server clock: the key still exists, its window has ended.
    let r = fixed(&mut c, &["k", "1", "1s", "AT", &(t + 1_000).to_string()]).ints();
    assert_eq!(r, [0, 1, 0, -1, 1_000]);
}

#[test]
fn wrong_type_and_invalid_state_leave_the_key_untouched() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["RPUSH", "list", "a"]);
    assert_eq!(
        fixed(&mut c, &["list", "5", "1s"]).err(),
        Some("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(
        c.cmd(&["LRANGE", "list", "0", "-1"]),
        Value::Array(vec![Value::Bulk(b"a".to_vec())])
    );
    for bad in ["abc", "-1", "1.5", "", " 1", "99999999999999999999"] {
        c.cmd(&["SET", "s", bad, "PX", "100000"]);
        let exp = c.cmd(&["PEXPIRETIME", "s"]).int();
        assert_eq!(
            fixed(&mut c, &["s", "5", "1s"]).err(),
            Some("ERR the key does not hold RL.FIXED state (expected a non-negative integer counter)"),
            "{bad:?}"
        );
        assert_eq!(state(&mut c, "s"), (Some(bad.to_string()), exp));
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "1", "PX", "100000"]);
    let before = state(&mut c, "k");
    let cases: &[(&[&str], &str)] = &[
        (&["k", "0", "1s"], "ERR invalid limit '0': must be an integer from 1 to 9007199254740991"),
        (&["k", "-3", "1s"], "ERR invalid limit '-3': must be an integer from 1 to 9007199254740991"),
        (&["k", "1.5", "1s"], "ERR invalid limit '1.5': must be an integer from 1 to 9007199254740991"),
        (
            &["k", "9223372036854775808", "1s"],
            "ERR invalid limit '9223372036854775808': must be an integer from 1 to 9007199254740991",
        ),
        (&["k", "", "1s"], "ERR invalid limit '': must be an integer from 1 to 9007199254740991"),
        (
            &["k", "5", "0s"],
            "ERR invalid window '0s': must be a positive duration (an integer with an optional unit ms, s, m, h or d)",
        ),
        (
            &["k", "5", "-1"],
            "ERR invalid window '-1': must be a positive duration (an integer with an optional unit ms, s, m, h or d)",
        ),
        (
            &["k", "5", "1.5s"],
            "ERR invalid window '1.5s': must be a positive duration (an integer with an optional unit ms, s, m, h or d)",
        ),
        (
            &["k", "5", ""],
            "ERR invalid window '': must be a positive duration (an integer with an optional unit ms, s, m, h or d)",
        ),
        (&["k", "5", "10y"], "ERR invalid window '10y': unknown unit (use ms, s, m, h or d)"),
        (&["k", "5", "3651d"], "ERR invalid window '3651d': must be at most 10 years (3650d)"),
        (&["k", "5", "1s", "COST"], "ERR option COST needs a value"),
        (&["k", "5", "1s", "COST", "-1"], "ERR invalid cost '-1': must be an integer from 0 to 9007199254740991"),
        (&["k", "5", "1s", "COST", "6"], "ERR cost 6 exceeds the limit 5: the request can never be allowed"),
        (&["k", "5", "1s", "COST", "1", "COST", "1"], "ERR option COST given more than once"),
        (&["k", "5", "1s", "ALIGN", "align"], "ERR option ALIGN given more than once"),
        (&["k", "5", "1s", "AT"], "ERR option AT needs a value"),
        (
            &["k", "5", "1s", "AT", "-5"],
            "ERR invalid AT '-5': must be a Unix time in milliseconds from 1000000000000 to 4102444800000",
        ),
        (
            &["k", "5", "1s", "AT", "4102444800001"],
            "ERR invalid AT '4102444800001': must be a Unix time in milliseconds from 1000000000000 to 4102444800000",
        ),
        (&["k", "5", "1s", "LIMIT"], "ERR unknown option 'LIMIT' (options here: COST, AT, ALIGN, REFUND, FORCE, UPTO)"),
        (&["k", "5", "1s", "COST", "1", "extra"], "ERR unknown option 'extra' (options here: COST, AT, ALIGN, REFUND, FORCE, UPTO)"),
        (&["k", "5\r\n", "1s"], "ERR invalid limit '5\\x0d\\x0a': must be an integer from 1 to 9007199254740991"),
        (&["k", "5", "1s\0"], "ERR invalid window '1s\\x00': must be a positive duration (an integer with an optional unit ms, s, m, h or d)"),
        (&["k"], "ERR wrong number of arguments for 'RL.FIXED' command (syntax: RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO])"),
        (&["k", "5"], "ERR wrong number of arguments for 'RL.FIXED' command (syntax: RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO])"),
    ];
    for (args, want) in cases {
        assert_eq!(fixed(&mut c, args).err(), Some(*want), "{args:?}");
        assert_eq!(state(&mut c, "k"), before, "{args:?} changed the key");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1, "{args:?} created a key");
    }
    // No arguments at all.
    assert!(c
        .cmd(&["RL.FIXED"])
        .err()
        .unwrap()
        .contains("wrong number of arguments"));
}

#[test]
fn binary_keys_and_long_garbage_do_not_hurt() {
    let s = Server::start();
    let mut c = s.client();
    let key = b"k\0\r\n\xff".to_vec();
    let r = c.cmd(&[
        b"RL.FIXED".to_vec(),
        key.clone(),
        b"2".to_vec(),
        b"1m".to_vec(),
    ]);
    assert_eq!(r.ints()[..3], [0, 2, 1]);
    assert_eq!(c.cmd(&[b"GET".to_vec(), key]), Value::Bulk(b"1".to_vec()));
    let garbage = vec![0xffu8; 100_000];
    let r = c.cmd(&[
        b"RL.FIXED".to_vec(),
        b"k".to_vec(),
        garbage.clone(),
        garbage,
    ]);
    let e = r.err().expect("error");
    assert!(
        e.starts_with("ERR invalid limit '\\xff") && e.len() < 400,
        "{e}"
    );
    assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()));
}

// ---- concurrency -------------------------------------------------------------------

#[test]
fn concurrent_clients_get_exactly_the_limit() {
    let s = Server::start();
    let forms = Twins::both(&mut s.client());
    let limit = 1_000;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let port = s.port;
            let twin = forms[(t / 2) % 2].fixed.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = 0;
                for i in 0..300 {
                    // Half the clients use the twin (its function or its script), on the
                    // same key.
                    let r = if t % 2 == 0 {
                        c.cmd(&["RL.FIXED", "hot", "1000", "1h"])
                    } else {
                        c.cmd(&twin.argv(&["hot"], &["1000", "1h"]))
                    };
                    let f = r.ints();
                    assert_eq!(f.len(), 5, "client {t} call {i}: {r:?}");
                    if f[0] == 0 {
                        allowed += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let total: i64 = threads
        .into_iter()
        .map(|t| t.join().expect("client thread"))
        .sum();
    assert_eq!(
        total, limit,
        "8 clients x 300 requests against a limit of {limit}"
    );
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "hot"]).text(), limit.to_string());
}

// ---- differential: native, twin and model ---------------------------------------

/// One logical key's state in the model: what `GET` and `PEXPIRETIME` should show.
#[derive(Clone, Debug, PartialEq)]
enum Model {
    Missing,
    Counter(Stored<i64>),
    /// Something that is not a counter (set from outside).
    Garbage(String, Option<UnixMillis>),
}

impl Model {
    fn observed(&self) -> (Option<String>, i64) {
        match self {
            Model::Missing => (None, -2),
            Model::Counter(c) => (
                Some(c.state.to_string()),
                c.expires_at.map_or(-1, |e| e.0 as i64),
            ),
            Model::Garbage(v, e) => (Some(v.clone()), e.map_or(-1, |e| e.0 as i64)),
        }
    }
}

/// The reply the model predicts for one call, applying its effect to `m`.
fn model_call(m: &mut Model, args: &[String]) -> Value {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let raw: Vec<&[u8]> = std::iter::once(&b"key"[..]).chain(raw).collect();
    let call = match limiters::fixed::parse(&raw) {
        Ok(c) => c,
        Err(e) => return Value::Error(e.to_string()),
    };
    let now = call.at.expect("the differential test always passes AT");
    let (value, expires_at) = match m {
        Model::Missing => (None, None),
        Model::Counter(c) => (Some(c.state.to_string()), c.expires_at),
        Model::Garbage(v, e) => (Some(v.clone()), *e),
    };
    let mut keys = [value.map(|v| Key::String {
        value: v.into_bytes(),
        expires_at,
    })];
    let out = match memory::run(&call, &mut keys, now) {
        Ok(s) => s.decided(),
        Err(e) => return Value::Error(e.to_string()),
    };
    match out.effect {
        Effect::None => {}
        Effect::Delete => *m = Model::Missing,
        Effect::Set { state, expires_at } => {
            *m = Model::Counter(Stored {
                state,
                expires_at: Some(expires_at),
            })
        }
        Effect::ExpireAt(e) => {
            if let Model::Counter(c) = m {
                c.expires_at = Some(e);
            }
        }
    }
    Value::Array(
        out.verdict
            .fields()
            .iter()
            .map(|&f| Value::Int(f))
            .collect(),
    )
}

fn random_args(rng: &mut Rng, now_ms: u64) -> Vec<String> {
    let limit = *rng.pick(&[1i64, 2, 3, 5, 10, 100]);
    let window = rng
        .pick(&["1", "2s", "250ms", "1500ms", "1m", "7", "1ms"])
        .to_string();
    let mut args = vec![limit.to_string(), window];
    if rng.chance(60) {
        let cost = if rng.chance(5) {
            limit + 1
        } else {
            rng.irange(0, limit + 1)
        };
        args.extend(["COST".to_string(), cost.to_string()]);
    }
    if rng.chance(40) {
        args.push(rng.pick(&["ALIGN", "align"]).to_string());
    }
    if rng.chance(3) {
        // An occasional bad argument: both sides must word it the same way.
        let bad = rng.pick(&["0", "x", "-1", "1.5"]).to_string();
        let i = rng.range(0, 2) as usize;
        args[i] = bad;
    }
    args.extend(["AT".to_string(), now_ms.to_string()]);
    // Options in any order.
    if args.len() > 4 && rng.chance(50) {
        let opts = args.split_off(2);
        let mut pairs: Vec<Vec<String>> = Vec::new();
        let mut i = 0;
        while i < opts.len() {
            let n = if opts[i].eq_ignore_ascii_case("ALIGN") {
                1
            } else {
                2
            };
            pairs.push(opts[i..i + n].to_vec());
            i += n;
        }
        pairs.reverse();
        args.extend(pairs.into_iter().flatten());
    }
    args
}

#[test]
fn differential_native_twin_and_model() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    for seed in Rng::seeds(&[1, 2, 3, 4]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(HOUR, MINUTE);
        let names = ["a", "b", "c"];
        let mut models = vec![Model::Missing; names.len()];
        for step in 0..600 {
            now += *rng.pick(&[0u64, 0, 1, 3, 50, 120, 400, 999, 1_000, 2_500, 61_000]);
            let k = rng.range(0, names.len() as u64) as usize;
            // Four physical keys share one history: native only, function only, script
            // only, and the three mixed.
            let keys = [
                format!("n:{seed}:{}", names[k]),
                format!("f:{seed}:{}", names[k]),
                format!("s:{seed}:{}", names[k]),
                format!("m:{seed}:{}", names[k]),
            ];
            if rng.chance(3) {
                // A write from outside: a plain counter without TTL, or garbage.
                let (v, model) = if rng.chance(50) {
                    let n = rng.irange(0, 4);
                    (
                        n.to_string(),
                        Model::Counter(Stored {
                            state: n,
                            expires_at: None,
                        }),
                    )
                } else {
                    ("junk".to_string(), Model::Garbage("junk".into(), None))
                };
                for key in &keys {
                    c.cmd(&["SET", key, &v]);
                }
                models[k] = model;
                continue;
            }
            let args = random_args(&mut rng, now);
            let want = model_call(&mut models[k], &args);
            let mut native = vec!["RL.FIXED".to_string(), keys[0].clone()];
            native.extend(args.iter().cloned());
            let function = tf.fixed.argv(&keys[1..2], &args);
            let script = ts.fixed.argv(&keys[2..3], &args);
            let mut mixed = match rng.range(0, 3) {
                0 => native.clone(),
                1 => function.clone(),
                _ => script.clone(),
            };
            let i = if mixed[0] == "RL.FIXED" { 1 } else { 3 };
            mixed[i] = keys[3].clone();
            let ctx = format!("seed {seed} step {step} key {} args {args:?}", names[k]);
            assert_eq!(c.cmd(&native), want, "native, {ctx}");
            assert_eq!(c.cmd(&function), want, "function, {ctx}");
            assert_eq!(c.cmd(&script), want, "script, {ctx}");
            assert_eq!(c.cmd(&mixed), want, "mixed ({}), {ctx}", mixed[0]);
            let expected = models[k].observed();
            for key in &keys {
                assert_eq!(state(&mut c, key), expected, "state of {key}, {ctx}");
            }
        }
    }
}

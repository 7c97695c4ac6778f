//! RL.SLIDING against real servers: the article's 1 s / 10 s / 15 s example, no double
//! burst around a boundary, all or nothing, peeks, the state format, bad inputs, the
//! differential test (native command, Lua twin and the pure model on the same inputs),
//! concurrency, key specs and a three-primary Cluster. Its replicas and AOF restarts
//! are in tests/replication.rs and tests/persistence.rs (the shared workload).

use crate::common;

use common::model::{self, KeyModel};
use common::{
    at_base, every_side, limited, state, Client, Cluster, Rng, Server, Twin, Twins, Value, HOUR,
};
use ratelimit_core::call::memory::{Counted, InMemory, Key};
use ratelimit_core::limiters::sliding::{self, State};
use ratelimit_core::Effect;

fn sliding(c: &mut Client, args: &[&str]) -> Value {
    let mut v = vec!["RL.SLIDING"];
    v.extend_from_slice(args);
    c.cmd(&v)
}

/// A twin's call (FCALL or EVALSHA) with the command's arguments, numkeys first.
fn twin(c: &mut Client, t: &Twin, args: &[&str]) -> Value {
    let mut v = vec![t.call, t.id.as_str()];
    v.extend_from_slice(args);
    c.cmd(&v)
}

/// A reply split into its five integers, the binding key and its window.
fn split(v: &Value) -> ([i64; 5], String, i64) {
    let items = v.array();
    assert_eq!(items.len(), 7, "{v:?}");
    let mut f = [0; 5];
    for (i, x) in items.iter().take(5).enumerate() {
        f[i] = x.int();
    }
    (f, items[5].text(), items[6].int())
}

/// The sides: `None` the command, `Some(twin)` its function, then its script.
fn sides(c: &mut Client) -> [Option<Twin>; 3] {
    let [f, s] = Twins::both(c);
    [None, Some(f.sliding), Some(s.sliding)]
}

/// "native", "function" or "script".
fn side_name(side: &Option<Twin>) -> &'static str {
    side.as_ref().map_or("native", Twin::name)
}

fn call(c: &mut Client, side: &Option<Twin>, args: &[&str]) -> Value {
    match side {
        None => sliding(c, args),
        Some(t) => twin(c, t, args),
    }
}

const ARTICLE: [&str; 9] = [
    "LIMIT", "1s", "1000", "LIMIT", "10s", "5000", "LIMIT", "15s", "7000",
];

#[test]
fn the_article_example_bursts_pass_a_sustained_flood_does_not() {
    // 1000 per second, 5000 per 10 s, 7000 per 15 s for one address: a burst of 1000
    // passes, five of them in five seconds too, the sixth second is refused by the
    // 10-second window; the state is one key.
    let s = Server::start();
    let mut c = s.client();
    for side in sides(&mut c) {
        let key = format!("{{ip}}:1.2.3.4:{}", side_name(&side));
        let t = at_base(2 * HOUR, HOUR);
        let burst = |c: &mut Client, ms: u64| {
            let at = (t + ms).to_string();
            let mut a = vec!["1", key.as_str()];
            a.extend(ARTICLE);
            a.extend(["COST", "1000", "AT", &at]);
            split(&call(c, &side, &a))
        };
        for s in 0..5u64 {
            let (f, k, w) = burst(&mut c, s * 1_100);
            assert_eq!(
                (f[0], f[2], k.as_str(), w),
                (0, 0, key.as_str(), 1_000),
                "burst {s}"
            );
        }
        let (f, _, w) = burst(&mut c, 5_500);
        assert_eq!((f, w), ([1, 5_000, 0, 5_500, 9_500], 10_000));
        assert_eq!(
            c.cmd(&["DBSIZE"]).int() as usize,
            1 + usize::from(side.is_some()) + usize::from(side_name(&side) == "script")
        );
        let v = c.cmd(&["GET", &key]).text();
        assert_eq!(v.split(',').count(), 3, "{v}");
        assert!(v.starts_with("1000:10:"), "{v}");
        let bytes = c.cmd(&["MEMORY", "USAGE", &key]).int();
        assert!(bytes < 300, "{bytes} bytes for one address");
    }
}

#[test]
fn no_double_burst_around_a_window_boundary() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    for side in sides(&mut c) {
        let key = format!("b:{}", side_name(&side));
        let at = |ms: u64| (t + ms).to_string();
        for _ in 0..3 {
            let r = call(
                &mut c,
                &side,
                &["1", &key, "LIMIT", "1s", "3", "AT", &at(900)],
            );
            assert_eq!(split(&r).0[0], 0);
        }
        // A fixed window would start again at 1000 ms; the sliding window waits for the
        // bucket [900, 1000) ms to leave: at 2000 ms, exactly.
        let r = call(
            &mut c,
            &side,
            &["1", &key, "LIMIT", "1s", "3", "AT", &at(1_000)],
        );
        assert_eq!(split(&r), ([1, 3, 0, 1_000, 1_000], key.clone(), 1_000));
        let r = call(
            &mut c,
            &side,
            &["1", &key, "LIMIT", "1s", "3", "AT", &at(1_999)],
        );
        assert_eq!(split(&r).0, [1, 3, 0, 1, 1]);
        let r = call(
            &mut c,
            &side,
            &["1", &key, "LIMIT", "1s", "3", "AT", &at(2_000)],
        );
        assert_eq!(split(&r).0, [0, 3, 2, -1, 1_100]);
        // The stored buckets: window 1000 ms in 10 buckets, bucket number (t+2000)/100.
        let want = format!("1000:10:{}:1", (t + 2_000) / 100);
        assert_eq!(state(&mut c, &key), (Some(want), (t + 3_100) as i64));
    }
}

#[test]
fn all_or_nothing_peeks_and_windows_not_named() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    for side in sides(&mut c) {
        let (a, b) = (
            format!("{{u}}a:{}", side_name(&side)),
            format!("{{u}}b:{}", side_name(&side)),
        );
        let at = |ms: u64| (t + ms).to_string();
        let two = |c: &mut Client, rest: &[&str]| {
            let mut v = vec!["2", a.as_str(), b.as_str()];
            v.extend_from_slice(rest);
            call(c, &side, &v)
        };
        // b has a minute window of its own, from another call.
        call(
            &mut c,
            &side,
            &["1", &b, "LIMIT", "1m", "2", "BUCKETS", "6", "AT", &at(0)],
        );
        call(
            &mut c,
            &side,
            &["1", &b, "LIMIT", "1m", "2", "BUCKETS", "6", "AT", &at(0)],
        );
        let before = (state(&mut c, &a), state(&mut c, &b));
        // b's minute is full: the call is refused as a whole, a is not counted.
        let r = two(&mut c, &["LIMIT", "1m", "2", "BUCKETS", "6", "AT", &at(10)]);
        assert_eq!(split(&r), ([1, 2, 0, 69_990, 69_990], b.clone(), 60_000));
        assert_eq!((state(&mut c, &a), state(&mut c, &b)), before);
        // A peek writes nothing.
        let r = two(&mut c, &["LIMIT", "1s", "5", "COST", "0", "AT", &at(10)]);
        assert_eq!(split(&r), ([0, 5, 5, -1, 0], a.clone(), 1_000));
        assert_eq!((state(&mut c, &a), state(&mut c, &b)), before);
        // A call naming only the second's window keeps b's minute window.
        let r = two(&mut c, &["LIMIT", "1s", "5", "AT", &at(20)]);
        assert_eq!(split(&r).0[0], 0);
        let v = state(&mut c, &b).0.unwrap_or_default();
        assert!(v.starts_with("1000:10:") && v.contains(",60000:6:"), "{v}");
        // Its expiry follows the minute window's bucket.
        assert_eq!(state(&mut c, &b).1, (t + 70_000) as i64);
    }
}

#[test]
fn wrong_type_invalid_state_and_ttl_repair() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR).to_string();
    for side in sides(&mut c) {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["LPUSH", "l", "x"]);
        let r = call(&mut c, &side, &["1", "l", "LIMIT", "1s", "5", "AT", &t]);
        assert_eq!(
            r.err(),
            Some("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        for junk in [
            "junk",
            "3",
            "1000:2:1700000000000",
            "1000:7:1:1",
            "1000:10:1:1,1000:10:1:1",
        ] {
            c.cmd(&["SET", "j", junk]);
            let r = call(
                &mut c,
                &side,
                &["2", "k", "j", "LIMIT", "1s", "5", "AT", &t],
            );
            assert_eq!(
                r.err(),
                Some("ERR the key 'j' does not hold RL.SLIDING state (expected window_ms:buckets:first:counts entries separated by commas)"),
                "{junk}"
            );
            assert_eq!(c.cmd(&["GET", "j"]).text(), junk);
            assert_eq!(c.cmd(&["EXISTS", "k"]).int(), 0);
        }
        // A key that lost its TTL gets it back on a denied call, not on a peek.
        call(&mut c, &side, &["1", "p", "LIMIT", "1m", "1", "AT", &t]);
        let ttl = state(&mut c, "p").1;
        c.cmd(&["PERSIST", "p"]);
        call(
            &mut c,
            &side,
            &["1", "p", "LIMIT", "1m", "1", "COST", "0", "AT", &t],
        );
        assert_eq!(state(&mut c, "p").1, -1);
        let r = call(&mut c, &side, &["1", "p", "LIMIT", "1m", "1", "AT", &t]);
        assert_eq!(split(&r).0[0], 1);
        assert_eq!(state(&mut c, "p").1, ttl);
    }
}

/// RL.SLIDING at its bounds (64 keys of 32 windows of 100 buckets) once read and wrote
/// 204 800 buckets in one call. A key keeps at most 1 000 buckets now: a write that
/// would keep more is refused, and so is a stored state that holds more. On the
/// command and both forms of its twin, which must agree.
#[test]
fn rl_sliding_keys_keep_at_most_1000_buckets_so_a_call_at_the_bounds_stays_short() {
    let server = Server::start();
    let mut c = server.client();
    let mut args: Vec<String> = Vec::new();
    for s in 1..=16 {
        args.extend(["LIMIT".to_string(), format!("{s}s"), "10".to_string()]);
    }
    args.extend(["BUCKETS", "100"].map(String::from));
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    for (name, argv) in every_side(&mut c, "RL.SLIDING", &["sl:many"], &arg_refs) {
        let r = c.cmd(&argv);
        assert_eq!(
            r.err(),
            Some("ERR the key 'sl:many' would hold more than 32 windows or 1000 buckets: RL.SLIDING keeps at most 32 windows per key, their BUCKETS adding up to at most 1000 (use fewer distinct windows or buckets, or other keys)"),
            "{name}"
        );
        assert_eq!(c.cmd(&["EXISTS", "sl:many"]).int(), 0, "{name}");
    }
    // Ten windows of 100 buckets fit; an eleventh does not.
    let ten: Vec<&str> = arg_refs[..30]
        .iter()
        .chain(&["BUCKETS", "100"])
        .copied()
        .collect();
    for (name, argv) in every_side(&mut c, "RL.SLIDING", &["sl:ten"], &ten) {
        assert_eq!(limited(&c.cmd(&argv)), 0, "{name}");
    }
    // A stored key of 11 windows of 100 buckets was not written by RL.SLIDING.
    let now_bucket = common::unix_ms() / 10;
    let state: Vec<String> = (1..=11)
        .map(|s| format!("{}:100:{}:1", s * 1000, now_bucket / s))
        .collect();
    c.cmd(&["SET", "sl:eleven", &state.join(","), "PX", "60000"]);
    for (name, argv) in every_side(
        &mut c,
        "RL.SLIDING",
        &["sl:eleven"],
        &["LIMIT", "1s", "10", "BUCKETS", "100"],
    ) {
        let r = c.cmd(&argv);
        assert!(
            r.err()
                .is_some_and(|e| e.contains("does not hold RL.SLIDING state")),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR).to_string();
    sliding(&mut c, &["1", "k", "LIMIT", "1m", "5", "AT", &t]);
    let before = state(&mut c, "k");
    let numkeys = |v: &str| format!("ERR invalid numkeys '{v}': must be an integer from 1 to 64");
    let buckets = |v: &str| format!("ERR invalid BUCKETS '{v}': must be an integer from 1 to 100");
    let cases: Vec<(Vec<&str>, String, bool)> = vec![
        (vec!["0", "k", "LIMIT", "1s", "10"], numkeys("0"), false),
        (vec!["x", "k", "LIMIT", "1s", "10"], numkeys("x"), false),
        (vec!["1", "k", "LIMIT", "1s"], "ERR wrong number of arguments for 'RL.SLIDING' command (syntax: RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO])".into(), true),
        (vec!["1", "k", "COST", "1", "AT", &t], "ERR at least one LIMIT window limit is needed".into(), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "LIMIT", "1m"], "ERR LIMIT needs a window and a limit".into(), true),
        (
            vec!["1", "k", "LIMIT", "1m", "5", "LIMIT", "60s", "6"],
            "ERR window '60s' given more than once (60000 ms)".into(),
            true,
        ),
        (vec!["2", "k", "k", "LIMIT", "1s", "10"], "ERR key 'k' given more than once".into(), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS", "0"], buckets("0"), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS", "101"], buckets("101"), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS", "x"], buckets("x"), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS", "-2"], buckets("-2"), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS"], "ERR option BUCKETS needs a value".into(), true),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "BUCKETS", "5", "buckets", "5"],
            "ERR option BUCKETS given more than once".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "LIMIT", "7ms", "10", "BUCKETS", "3"],
            "ERR a window of 1000 ms does not split into 3 buckets of whole microseconds (choose BUCKETS dividing 1000000)".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1ms", "10", "BUCKETS", "3"],
            "ERR a window of 1 ms does not split into 3 buckets of whole microseconds (choose BUCKETS dividing 1000)".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "LIMIT", "1m", "3", "COST", "4"],
            "ERR cost 4 exceeds the limit 3: the request can never be allowed".into(),
            true,
        ),
        (vec!["1", "k", "LIMIT", "1s", "10", "ALIGN"], "ERR unknown option 'ALIGN' (options here: COST, AT, BUCKETS, LIMIT, REFUND, FORCE, UPTO)".into(), true),
        (vec!["1", "k", "LIMIT", "1s", "10", "DELAY", "1s"], "ERR unknown option 'DELAY' (options here: COST, AT, BUCKETS, LIMIT, REFUND, FORCE, UPTO)".into(), true),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "AT", "-5"],
            "ERR invalid AT '-5': must be a Unix time in milliseconds from 1000000000000 to 4102444800000".into(),
            true,
        ),
    ];
    for (args, want, same_in_twin) in &cases {
        assert_eq!(
            sliding(&mut c, args).err(),
            Some(want.as_str()),
            "native {args:?}"
        );
        for twins in &forms {
            let r = twin(&mut c, &twins.sliding, args);
            if *same_in_twin {
                assert_eq!(
                    r.err(),
                    Some(want.as_str()),
                    "{} {args:?}",
                    twins.sliding.name()
                );
            } else {
                assert!(r.is_err(), "{} {args:?}", twins.sliding.name());
            }
        }
        assert_eq!(state(&mut c, "k"), before, "{args:?} changed the key");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1, "{args:?} created a key");
    }
}

#[test]
fn concurrent_clients_never_get_more_than_the_limit_between_them() {
    // 8 clients, half through the twin, on two shared keys: 1000 per hour on the
    // shared key binds; exactly 1000 are allowed in all.
    let s = Server::start();
    let mut c = s.client();
    let sides = sides(&mut c);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let side = sides[i % 3].clone();
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let own = format!("{{t}}own:{i}");
                (0..300)
                    .filter(|_| {
                        let r = call(
                            &mut c,
                            &side,
                            &[
                                "2",
                                &own,
                                "{t}shared",
                                "LIMIT",
                                "1h",
                                "1000",
                                "LIMIT",
                                "1m",
                                "2000",
                            ],
                        );
                        split(&r).0[0] == 0
                    })
                    .count()
            })
        })
        .collect();
    let allowed: usize = threads.into_iter().map(|t| t.join().expect("client")).sum();
    assert_eq!(allowed, 1_000);
}

// ---- the differential test -----------------------------------------------------

fn predict(
    models: &[Option<KeyModel>],
    idx: &[usize],
    names: &[String],
    rest: &[String],
) -> (Value, Vec<(usize, Effect<State>)>) {
    let n = names.len().to_string();
    let mut args: Vec<&[u8]> = vec![n.as_bytes()];
    args.extend(names.iter().map(|s| s.as_bytes()));
    args.extend(rest.iter().map(|s| s.as_bytes()));
    let call = match sliding::parse(&args) {
        Ok(r) => r,
        Err(e) => return (Value::Error(e.to_string()), vec![]),
    };
    let now = call.at.expect("the differential test always passes AT");
    // The call as the module runs it, on a copy of the keys it names.
    let mut keys: Vec<Option<Key>> = idx.iter().map(|&k| model::key(&models[k])).collect();
    let key_names: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    let mut in_memory = InMemory::named(&call, &mut keys, &key_names);
    let out = match call.run(&mut in_memory, now, &Counted::default()) {
        Ok(out) => out,
        Err(e) => return (Value::Error(e.to_string()), vec![]),
    };
    let mut reply: Vec<Value> = out
        .verdict
        .fields()
        .iter()
        .map(|&f| Value::Int(f))
        .collect();
    reply.push(Value::Bulk(names[out.binding].clone().into_bytes()));
    reply.push(Value::Int(out.window_ms as i64));
    let effects = out.writes.into_iter().map(|(i, e)| (idx[i], e)).collect();
    (Value::Array(reply), effects)
}

/// The arguments after the keys: 1 to 4 LIMITs, maybe BUCKETS and COST (sometimes
/// bad), options in any order, AT last or anywhere.
fn random_rest(rng: &mut Rng, now_ms: u64) -> Vec<String> {
    const WINDOWS: [&str; 9] = ["100ms", "1", "1s", "1500ms", "2s", "1m", "60s", "7", "10s"];
    let nwin = *rng.pick(&[1usize, 1, 2, 2, 3, 4]);
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut smallest = i64::MAX;
    for _ in 0..nwin {
        let limit = *rng.pick(&[1i64, 2, 3, 5, 10, 100]);
        smallest = smallest.min(limit);
        groups.push(vec![
            rng.pick(&["LIMIT", "limit"]).to_string(),
            rng.pick(&WINDOWS).to_string(),
            limit.to_string(),
        ]);
    }
    if rng.chance(50) {
        let n = *rng.pick(&["1", "2", "4", "5", "10", "20", "3", "100", "0"]);
        groups.push(vec![
            rng.pick(&["BUCKETS", "buckets"]).to_string(),
            n.to_string(),
        ]);
    }
    if rng.chance(60) {
        let cost = if rng.chance(5) {
            smallest + 1
        } else if rng.chance(25) {
            0
        } else {
            rng.irange(0, smallest + 1)
        };
        groups.push(vec!["COST".into(), cost.to_string()]);
    }
    if rng.chance(2) {
        groups[0][rng.range(1, 3) as usize] = rng.pick(&["0", "x", "-1", "1.5"]).to_string();
    }
    groups.push(vec!["AT".into(), now_ms.to_string()]);
    rng.shuffle(&mut groups);
    groups.into_iter().flatten().collect()
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[test]
fn differential_native_twin_and_model() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let mut calls = [0usize; 3]; // allowed, denied, errors
    for seed in Rng::seeds(&[1, 2, 3, 4]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(2 * HOUR, HOUR);
        let mut models: Vec<Option<KeyModel>> = vec![None; NAMES.len()];
        let physical = |ns: &str, k: usize| format!("{ns}:{seed}:{}", NAMES[k]);
        for step in 0..500 {
            now += *rng.pick(&[0u64, 0, 1, 3, 50, 120, 400, 999, 1_000, 2_500, 61_000]);
            if rng.chance(5) {
                // A write from outside.
                let k = rng.range(0, NAMES.len() as u64) as usize;
                let keys = ["n", "f", "s", "m"].map(|ns| physical(ns, k));
                let value: Option<String> = match rng.range(0, 6) {
                    0 => Some("junk".into()),
                    1 => Some(format!("1000:3:{}", now + 500)), // an RL.MULTI value
                    2 | 3 => {
                        // Valid state without a TTL, sometimes with another BUCKETS.
                        let first = (now - 300) / 100;
                        Some(format!(
                            "1000:10:{first}:{}.0.{},60000:6:{}:1",
                            rng.range(0, 5),
                            rng.range(0, 5),
                            now / 10_000
                        ))
                    }
                    4 => {
                        for key in &keys {
                            c.cmd(&["PERSIST", key]);
                        }
                        if let Some(m) = models[k].as_mut() {
                            m.expires = None;
                        }
                        None
                    }
                    _ => {
                        for key in &keys {
                            c.cmd(&["DEL", key]);
                        }
                        models[k] = None;
                        None
                    }
                };
                if let Some(v) = value {
                    for key in &keys {
                        c.cmd(&["SET", key, &v]);
                    }
                    models[k] = Some(KeyModel {
                        value: v.into_bytes(),
                        expires: None,
                    });
                }
                continue;
            }
            let nkeys = *rng.pick(&[1usize, 1, 2, 2, 2, 3, 4]);
            let mut idx: Vec<usize> = (0..NAMES.len()).collect();
            rng.shuffle(&mut idx);
            idx.truncate(nkeys);
            let rest = random_rest(&mut rng, now);
            let ctx = format!("seed {seed} step {step} keys {idx:?} args {rest:?}");
            let mixed = rng.range(0, 3);
            let mut effects = None;
            for ns in ["n", "f", "s", "m"] {
                let names: Vec<String> = idx.iter().map(|&k| physical(ns, k)).collect();
                let (want, eff) = predict(&models, &idx, &names, &rest);
                effects.get_or_insert(eff);
                let side = match ns {
                    "n" => 0,
                    "f" => 1,
                    "s" => 2,
                    _ => mixed,
                };
                let mut args: Vec<String> = match side {
                    0 => vec!["RL.SLIDING".into()],
                    1 => vec![tf.sliding.call.into(), tf.sliding.id.clone()],
                    _ => vec![ts.sliding.call.into(), ts.sliding.id.clone()],
                };
                args.push(names.len().to_string());
                args.extend(names.iter().cloned());
                args.extend(rest.iter().cloned());
                let got = c.cmd(&args);
                assert_eq!(got, want, "{ns} ({}), {ctx}", args[0]);
                if ns == "n" {
                    let i = match &got {
                        Value::Array(v) if v[0] == Value::Int(0) => 0,
                        Value::Array(_) => 1,
                        _ => 2,
                    };
                    calls[i] += 1;
                }
            }
            model::apply(&mut models, effects.unwrap_or_default());
            for (k, m) in models.iter().enumerate() {
                let want = model::observed(m);
                for ns in ["n", "f", "s", "m"] {
                    let key = physical(ns, k);
                    assert_eq!(state(&mut c, &key), want, "state of {key}, {ctx}");
                }
            }
        }
    }
    assert!(
        calls.iter().all(|&n| n > 50),
        "allowed/denied/errors: {calls:?}"
    );
}

// ---- key specs, Cluster -----------------------------------------------------------

#[test]
fn command_info_and_getkeys() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&[
            "COMMAND",
            "GETKEYS",
            "RL.SLIDING",
            "2",
            "a",
            "b",
            "LIMIT",
            "1",
            "10"
        ]),
        Value::Array(vec![Value::Bulk(b"a".to_vec()), Value::Bulk(b"b".to_vec())])
    );
    let info = c.cmd(&["COMMAND", "INFO", "RL.SLIDING"]);
    let entry = info.array()[0].array();
    assert_eq!(entry[0].text(), "RL.SLIDING");
    assert_eq!(
        entry[1],
        Value::Int(-1),
        "arity: at least the name; the command checks its arguments itself"
    );
    let flags = format!("{:?}", entry[2]);
    assert!(
        flags.contains("write") && !flags.contains("denyoom") && flags.contains("movablekeys"),
        "{flags}"
    );
}

#[test]
fn cluster_routes_hash_tagged_calls_and_refuses_cross_slot_ones() {
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    let mut shas = Vec::new();
    for (_, c) in cc.nodes.iter_mut() {
        shas.push(Twins::load(c).sliding.id);
        Twins::functions(c);
    }
    let t = at_base(2 * HOUR, HOUR).to_string();
    for user in 0..8 {
        let ip = format!("{{user{user}}}:ip");
        let id = format!("{{user{user}}}:id");
        let r = cc.cmd(&[
            "RL.SLIDING",
            "2",
            &ip,
            &id,
            "LIMIT",
            "1s",
            "10",
            "LIMIT",
            "1m",
            "120",
            "AT",
            &t,
        ]);
        assert_eq!(
            split(&r),
            ([0, 10, 9, -1, 1_100], ip.clone(), 1_000),
            "user {user}"
        );
        let r = cc.cmd(&[
            "EVALSHA", &shas[0], "2", &ip, &id, "LIMIT", "1s", "10", "AT", &t,
        ]);
        assert_eq!(
            split(&r),
            ([0, 10, 8, -1, 1_100], ip.clone(), 1_000),
            "user {user}"
        );
    }
    assert!(cc.moved > 0, "some calls were redirected");
    for ((_, c), sha) in cc.nodes.iter_mut().zip(&shas) {
        let r = c.cmd(&["RL.SLIDING", "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10"]);
        assert!(r.err().unwrap_or("").starts_with("CROSSSLOT"), "{r:?}");
        let r = c.cmd(&["EVALSHA", sha, "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10"]);
        assert!(r.err().unwrap_or("").starts_with("CROSSSLOT"), "{r:?}");
    }
    let total: i64 = cc
        .nodes
        .iter_mut()
        .map(|(_, c)| c.cmd(&["DBSIZE"]).int())
        .sum();
    assert_eq!(total, 16);
}

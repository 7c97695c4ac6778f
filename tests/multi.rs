//! RL.MULTI against real servers: the article's example, all or nothing, peeks, state
//! format, bad inputs, the differential test (native command, Lua twin and the pure
//! model on the same inputs), a three-primary Cluster, key specs and ACLs. Its replicas
//! and AOF restarts are in tests/replication.rs and tests/persistence.rs.

use crate::common;

use common::model::{self, KeyModel};
use common::{
    at_base, state, unix_ms, workload, Client, Cluster, Rng, Server, Twin, Twins, Value, HOUR,
};
use ratelimit_core::call::memory::{Counted, InMemory, Key};
use ratelimit_core::limiters::multi::{self, State};
use ratelimit_core::Effect;

fn multi(c: &mut Client, args: &[&str]) -> Value {
    let mut v = vec!["RL.MULTI"];
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

/// `window_ms:count:end_ms` entries, ends given relative to `t`.
fn entries(t: u64, e: &[(u64, i64, u64)]) -> String {
    e.iter()
        .map(|(w, c, end)| format!("{w}:{c}:{}", t + end))
        .collect::<Vec<_>>()
        .join(",")
}

const ARTICLE_LIMITS: [&str; 9] = [
    "LIMIT", "1", "10", "LIMIT", "60", "120", "LIMIT", "3600", "240",
];

#[test]
fn article_example_ip_and_user_at_10_per_second_120_per_minute_240_per_hour() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    let call = |c: &mut Client, ms: u64, keys: &[&str]| {
        let at = (t + ms).to_string();
        let n = keys.len().to_string();
        let mut args = vec![n.as_str()];
        args.extend_from_slice(keys);
        args.extend_from_slice(&ARTICLE_LIMITS);
        args.extend(["AT", at.as_str()]);
        split(&multi(c, &args))
    };
    let actor = ["ip:1.2.3.4", "user:42"];
    // Ten in the first second; the 1 s window of the first key binds (least remaining).
    for i in 0..10 {
        let r = call(&mut c, i * 10, &actor);
        assert_eq!(
            r,
            (
                [0, 10, 9 - i as i64, -1, 1_000 - i as i64 * 10],
                "ip:1.2.3.4".into(),
                1_000
            )
        );
    }
    let full = entries(
        t,
        &[
            (1_000, 10, 1_000),
            (60_000, 10, 60_000),
            (3_600_000, 10, 3_600_000),
        ],
    );
    assert_eq!(
        state(&mut c, "ip:1.2.3.4"),
        (Some(full.clone()), (t + 3_600_000) as i64)
    );
    assert_eq!(
        state(&mut c, "user:42"),
        (Some(full.clone()), (t + 3_600_000) as i64)
    );
    // The eleventh is denied by both 1 s windows: the first key binds the tie.
    assert_eq!(
        call(&mut c, 500, &actor),
        ([1, 10, 0, 500, 500], "ip:1.2.3.4".into(), 1_000)
    );
    assert_eq!(state(&mut c, "user:42").0, Some(full));
    // Ten a second for 11 more seconds: 120 in the minute.
    for sec in 1..12 {
        for i in 0..10 {
            assert_eq!(call(&mut c, sec * 1_000 + i, &actor).0[0], 0, "{sec}.{i}");
        }
    }
    // The 121st in the minute is denied by the minute, until it ends.
    assert_eq!(
        call(&mut c, 12_000, &actor),
        ([1, 120, 0, 48_000, 48_000], "ip:1.2.3.4".into(), 60_000)
    );
    // Another address, the same user: the user's minute denies.
    assert_eq!(
        call(&mut c, 12_000, &["ip:5.6.7.8", "user:42"]),
        ([1, 120, 0, 48_000, 48_000], "user:42".into(), 60_000)
    );
    assert_eq!(c.cmd(&["EXISTS", "ip:5.6.7.8"]).int(), 0);
    // Anonymous: only the address, which has room.
    assert_eq!(
        call(&mut c, 12_000, &["ip:5.6.7.8"]),
        ([0, 10, 9, -1, 1_000], "ip:5.6.7.8".into(), 1_000)
    );
    // A second minute of 120: the hour is full at 240.
    for sec in 60..72 {
        for i in 0..10 {
            assert_eq!(call(&mut c, sec * 1_000 + i, &actor).0[0], 0, "{sec}.{i}");
        }
    }
    let now = 72_000;
    assert_eq!(
        call(&mut c, now, &actor),
        (
            [1, 240, 0, 3_600_000 - now as i64, 3_600_000 - now as i64],
            "ip:1.2.3.4".into(),
            3_600_000
        )
    );
    assert_eq!(
        state(&mut c, "ip:1.2.3.4").0,
        Some(entries(
            t,
            &[
                (1_000, 10, 72_000),
                (60_000, 120, 120_000),
                (3_600_000, 240, 3_600_000)
            ]
        ))
    );
}

#[test]
fn a_denied_call_leaves_every_counter_of_every_key_as_it_was() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    for (ns, side) in [("n", None), ("f", Some(&tf.multi)), ("s", Some(&ts.multi))] {
        let [a, b, cc, d] = ["a", "b", "c", "d"].map(|k| format!("{ns}:{k}"));
        let mut run = |args: &[&str]| match side {
            None => multi(&mut c, args),
            Some(t) => twin(&mut c, t, args),
        };
        let r = run(&[
            "3",
            &a,
            &b,
            &cc,
            "LIMIT",
            "1m",
            "5",
            "LIMIT",
            "1h",
            "100",
            "COST",
            "3",
            "AT",
            &at(0),
        ]);
        assert_eq!(split(&r).0, [0, 5, 2, -1, 60_000]);
        assert_eq!(
            split(&run(&[
                "1",
                &b,
                "LIMIT",
                "1m",
                "5",
                "COST",
                "2",
                "AT",
                &at(1)
            ]))
            .0[2],
            0
        );
        assert_eq!(
            split(&run(&["1", &a, "LIMIT", "10s", "50", "AT", &at(2)])).0[2],
            49
        );
        let keys = [&a, &b, &cc, &d];
        let before: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
        let mut run = |args: &[&str]| match side {
            None => multi(&mut c, args),
            Some(t) => twin(&mut c, t, args),
        };
        // b's minute is full: nothing else may change, d is not created.
        for (i, cost) in ["1", "2"].iter().enumerate() {
            let r = run(&[
                "4",
                &a,
                &b,
                &cc,
                &d,
                "LIMIT",
                "1s",
                "10",
                "LIMIT",
                "1m",
                "5",
                "LIMIT",
                "1h",
                "100",
                "LIMIT",
                "10s",
                "50",
                "COST",
                cost,
                "AT",
                &at(100 + i as u64),
            ]);
            assert_eq!(
                split(&r),
                (
                    [1, 5, 0, 59_900 - i as i64, 59_900 - i as i64],
                    b.clone(),
                    60_000
                ),
                "{ns}"
            );
        }
        let after: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
        assert_eq!(after, before, "{ns}: a denied call changed a key");
        assert_eq!(after[3], (None, -2));
        assert_eq!(
            before[1].0,
            Some(entries(
                t,
                &[(60_000, 5, 60_000), (3_600_000, 3, 3_600_000)]
            ))
        );
    }
    // The published multi-window script, by contrast, counts a request it then refuses.
    let published = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/published/over_limit_multi.lua"),
    )
    .expect("lua/published/over_limit_multi.lua");
    let now_s = (t / 1000).to_string();
    for _ in 0..2 {
        c.cmd(&["EVAL", &published, "2", "s:a", "s:b", "[[60,2]]", &now_s]);
    }
    c.cmd(&["SET", &format!("s:b:60:{}", t / 60_000), "2"]);
    let r = c.cmd(&["EVAL", &published, "2", "s:a", "s:b", "[[60,2]]", &now_s]);
    assert_eq!(r, Value::Int(1));
    let a_key = format!("s:a:60:{}", t / 60_000);
    assert_eq!(
        c.cmd(&["GET", &a_key]).text(),
        "3",
        "the published script consumes on denial"
    );
}

#[test]
fn cost_zero_is_a_peek_that_writes_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    let peek = |c: &mut Client, ms: u64, limit_1s: &str| {
        split(&multi(
            c,
            &[
                "2",
                "a",
                "b",
                "LIMIT",
                "1s",
                limit_1s,
                "LIMIT",
                "1m",
                "20",
                "COST",
                "0",
                "AT",
                &at(ms),
            ],
        ))
    };
    // On missing keys: full capacity, nothing to reset, the first pair binds.
    assert_eq!(
        peek(&mut c, 0, "10"),
        ([0, 10, 10, -1, 0], "a".into(), 1_000)
    );
    assert_eq!(c.cmd(&["DBSIZE"]).int(), 0);
    multi(
        &mut c,
        &["1", "b", "LIMIT", "1s", "10", "COST", "4", "AT", &at(0)],
    );
    let before = (state(&mut c, "a"), state(&mut c, "b"));
    assert_eq!(
        peek(&mut c, 200, "10"),
        ([0, 10, 6, -1, 800], "b".into(), 1_000)
    );
    // A count above a lowered limit denies even a peek.
    assert_eq!(
        peek(&mut c, 300, "3"),
        ([1, 3, 0, 700, 700], "b".into(), 1_000)
    );
    assert_eq!((state(&mut c, "a"), state(&mut c, "b")), before);
}

#[test]
fn windows_not_named_are_kept_until_they_end() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    multi(
        &mut c,
        &[
            "1",
            "k",
            "LIMIT",
            "1s",
            "10",
            "LIMIT",
            "1h",
            "100",
            "AT",
            &at(0),
        ],
    );
    multi(&mut c, &["1", "k", "LIMIT", "10s", "10", "AT", &at(500)]);
    assert_eq!(
        state(&mut c, "k"),
        (
            Some(entries(
                t,
                &[
                    (1_000, 1, 1_000),
                    (10_000, 1, 10_500),
                    (3_600_000, 1, 3_600_000)
                ]
            )),
            (t + 3_600_000) as i64
        )
    );
    // At 2 s the 1 s window has ended: dropped at this write. The hour stays.
    let r = multi(&mut c, &["1", "k", "LIMIT", "1m", "10", "AT", &at(2_000)]);
    assert_eq!(split(&r), ([0, 10, 9, -1, 60_000], "k".into(), 60_000));
    assert_eq!(
        state(&mut c, "k"),
        (
            Some(entries(
                t,
                &[
                    (10_000, 1, 10_500),
                    (60_000, 1, 62_000),
                    (3_600_000, 1, 3_600_000)
                ]
            )),
            (t + 3_600_000) as i64
        )
    );
    // The key expires at its latest end, even when that window is not named.
    multi(&mut c, &["1", "j", "LIMIT", "1h", "1", "AT", &at(0)]);
    multi(
        &mut c,
        &["1", "j", "LIMIT", "1s", "1", "ALIGN", "AT", &at(100)],
    );
    assert_eq!(state(&mut c, "j").1, (t + 3_600_000) as i64);
    assert_eq!(
        state(&mut c, "j").0,
        Some(entries(t, &[(1_000, 1, 1_000), (3_600_000, 1, 3_600_000)]))
    );
}

#[test]
fn server_clock_is_used_without_at() {
    let s = Server::start();
    let mut c = s.client();
    let before = unix_ms() as i64;
    let r = split(&multi(
        &mut c,
        &["2", "a", "b", "LIMIT", "1m", "5", "LIMIT", "1h", "50"],
    ));
    let after = unix_ms() as i64;
    assert_eq!(&r.0[..4], &[0, 5, 4, -1]);
    assert!(r.0[4] <= 60_000 && r.0[4] > 59_000, "{r:?}");
    let exp = state(&mut c, "b").1;
    assert!(
        exp >= before + 3_600_000 && exp <= after + 3_600_000,
        "{exp} not in [{before}, {after}] + 1 h"
    );
}

#[test]
fn wrong_type_and_invalid_state_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    let t = at_base(2 * HOUR, HOUR).to_string();
    multi(&mut c, &["1", "ok", "LIMIT", "1m", "5", "AT", &t]);
    c.cmd(&["RPUSH", "list", "x"]);
    // A counter written by RL.FIXED is not RL.MULTI state.
    c.cmd(&["RL.FIXED", "fixed", "5", "1m"]);
    let bad_values = [
        "junk",
        "",
        "7",
        "1000:1",
        "1000:1:5,",
        "0:1:5",
        "1000:1:5,1000:2:6",
        "1000:-1:5",
        "1000:1:9007199254740992",
    ];
    for (i, v) in bad_values.iter().enumerate() {
        c.cmd(&["SET", &format!("bad{i}"), v, "PX", "10000000"]);
    }
    let snapshot = |c: &mut Client| -> Vec<_> {
        let mut keys = vec!["ok".to_string(), "fixed".to_string()];
        keys.extend((0..bad_values.len()).map(|i| format!("bad{i}")));
        keys.iter().map(|k| state(c, k)).collect()
    };
    let before = snapshot(&mut c);
    let mut bad_keys: Vec<String> = (0..bad_values.len()).map(|i| format!("bad{i}")).collect();
    bad_keys.push("fixed".into());
    let functions = Twins::functions(&mut c);
    for sha in [None, Some(&twins.multi), Some(&functions.multi)] {
        for key in &bad_keys {
            let args = ["2", "ok", key, "LIMIT", "1m", "5", "AT", &t];
            let r = match sha {
                None => multi(&mut c, &args),
                Some(sha) => twin(&mut c, sha, &args),
            };
            assert_eq!(
                r.err(),
                Some(format!("ERR the key '{key}' does not hold RL.MULTI state (expected window_ms:count:end_ms entries separated by commas)").as_str()),
                "{key} ({:?})", sha.map(Twin::name)
            );
        }
        let args = ["2", "ok", "list", "LIMIT", "1m", "5"];
        let r = match sha {
            None => multi(&mut c, &args),
            Some(sha) => twin(&mut c, sha, &args),
        };
        assert_eq!(
            r.err(),
            Some("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
    assert_eq!(snapshot(&mut c), before);
    assert_eq!(c.cmd(&["LRANGE", "list", "0", "-1"]).array().len(), 1);
}

#[test]
fn a_key_that_lost_its_ttl_gets_it_back_on_a_denied_request() {
    let s = Server::start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    let t = at_base(2 * HOUR, HOUR);
    let value = entries(t, &[(500, 1, 50), (1_000, 10, 600), (60_000, 3, 20_000)]);
    for key in ["n", "tw", "peek"] {
        c.cmd(&["SET", key, &value]);
    }
    let args = |key: &'static str, cost: &'static str| {
        vec!["1", key, "LIMIT", "1s", "10", "COST", cost, "AT"]
    };
    let at = (t + 100).to_string();
    let mut a = args("n", "1");
    a.push(&at);
    assert_eq!(
        split(&multi(&mut c, &a)),
        ([1, 10, 0, 500, 500], "n".into(), 1_000)
    );
    let mut a = args("tw", "1");
    a.push(&at);
    assert_eq!(
        split(&twin(&mut c, &twins.multi, &a)),
        ([1, 10, 0, 500, 500], "tw".into(), 1_000)
    );
    let mut a = args("peek", "0");
    a.push(&at);
    assert_eq!(split(&multi(&mut c, &a)).0, [0, 10, 0, -1, 500]);
    for key in ["n", "tw"] {
        assert_eq!(
            state(&mut c, key),
            (Some(value.clone()), (t + 20_000) as i64),
            "{key}"
        );
    }
    assert_eq!(state(&mut c, "peek"), (Some(value), -1));
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR).to_string();
    multi(&mut c, &["1", "k", "LIMIT", "1m", "5", "AT", &t]);
    let before = state(&mut c, "k");
    let keys65: Vec<String> = (0..65).map(|i| format!("k{i}")).collect();
    let mut many_keys: Vec<&str> = vec!["65"];
    many_keys.extend(keys65.iter().map(String::as_str));
    many_keys.extend(["LIMIT", "1s", "1"]);
    let windows: Vec<String> = (1..=17).map(|w| format!("{w}s")).collect();
    let mut many_windows: Vec<&str> = vec!["1", "k"];
    for w in &windows {
        many_windows.extend(["LIMIT", w.as_str(), "5"]);
    }
    let arity = "ERR wrong number of arguments for 'RL.MULTI' command (syntax: RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO])";
    let numkeys = |v: &str| format!("ERR invalid numkeys '{v}': must be an integer from 1 to 64");
    // (arguments, error, whether the twin gives the same error: FCALL and EVALSHA word
    // the errors about their own numkeys argument themselves, and a twin's error for a
    // number of keys it does not take names it)
    let cases: Vec<(Vec<&str>, String, bool)> = vec![
        (vec!["0", "k", "LIMIT", "1s", "10"], numkeys("0"), false),
        (vec!["-1", "k", "LIMIT", "1s", "10"], numkeys("-1"), false),
        (vec!["x", "k", "LIMIT", "1s", "10"], numkeys("x"), false),
        (vec!["1.5", "k", "LIMIT", "1s", "10"], numkeys("1.5"), false),
        (many_keys.clone(), numkeys("65"), false),
        (
            vec!["9", "k", "LIMIT", "1s", "10"],
            "ERR invalid numkeys '9': only 4 arguments follow it".into(),
            false,
        ),
        (
            vec!["3", "k", "j", "LIMIT", "1s", "10"],
            "ERR numkeys is 3 but 'LIMIT' starts the arguments after 2 keys: did you mean numkeys 2?".into(),
            true,
        ),
        (
            vec!["1", "k", "COST", "1", "AT", &t],
            "ERR at least one LIMIT window limit is needed".into(),
            true,
        ),
        (
            vec!["4", "k", "a", "b", "c"],
            "ERR at least one LIMIT window limit is needed".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "LIMIT", "1m"],
            "ERR LIMIT needs a window and a limit".into(),
            true,
        ),
        (
            vec!["2", "k", "j", "LIMIT", "1s"],
            "ERR LIMIT needs a window and a limit".into(),
            true,
        ),
        (vec!["1", "k", "LIMIT", "1s"], arity.into(), true),
        (vec!["1", "k"], arity.into(), true),
        (
            vec!["1", "k", "LIMIT", "1m", "5", "LIMIT", "60s", "6"],
            "ERR window '60s' given more than once (60000 ms)".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1000ms", "5", "limit", "1", "6"],
            "ERR window '1' given more than once (1000 ms)".into(),
            true,
        ),
        (many_windows.clone(), "ERR too many LIMITs: at most 16 windows".into(), true),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "LIMIT", "1m", "3", "COST", "4"],
            "ERR cost 4 exceeds the limit 3: the request can never be allowed".into(),
            true,
        ),
        (
            vec!["2", "k", "k", "LIMIT", "1s", "10"],
            "ERR key 'k' given more than once".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "0s", "10"],
            "ERR invalid window '0s': must be a positive duration (an integer with an optional unit ms, s, m, h or d)".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "10y", "10"],
            "ERR invalid window '10y': unknown unit (use ms, s, m, h or d)".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "0"],
            "ERR invalid limit '0': must be an integer from 1 to 9007199254740991".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "COST", "1"],
            "ERR invalid limit 'COST': must be an integer from 1 to 9007199254740991".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "COST", "-1"],
            "ERR invalid cost '-1': must be an integer from 0 to 9007199254740991".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "ALIGN", "align"],
            "ERR option ALIGN given more than once".into(),
            true,
        ),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "AT", "-5"],
            "ERR invalid AT '-5': must be a Unix time in milliseconds from 1000000000000 to 4102444800000".into(),
            true,
        ),
        (vec!["1", "k", "LIMIT", "1s", "10", "AT"], "ERR option AT needs a value".into(), true),
        (
            vec!["1", "k", "LIMIT", "1s", "10", "LIMITS", "1s", "10"],
            "ERR unknown option 'LIMITS' (options here: COST, AT, ALIGN, LIMIT, REFUND, FORCE, UPTO)".into(),
            true,
        ),
    ];
    for (args, want, same_in_twin) in &cases {
        assert_eq!(
            multi(&mut c, args).err(),
            Some(want.as_str()),
            "native {args:?}"
        );
        for twins in &forms {
            let t = &twins.multi;
            if *same_in_twin {
                assert_eq!(
                    twin(&mut c, t, args).err(),
                    Some(want.as_str()),
                    "{} {args:?}",
                    t.name()
                );
            } else {
                assert!(twin(&mut c, t, args).is_err(), "{} {args:?}", t.name());
            }
        }
        assert_eq!(state(&mut c, "k"), before, "{args:?} changed the key");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1, "{args:?} created a key");
    }
    // A twin given no key, or more than 64, names itself and what it takes.
    for twins in &forms {
        for (args, got) in [
            (&["0", "k", "LIMIT", "1s", "10"][..], 0),
            (&many_keys[..], 65),
        ] {
            assert_eq!(
                twin(&mut c, &twins.multi, args).err(),
                Some(
                    format!("ERR wrong number of keys for 'rl_multi': it takes 1 to 64, got {got}")
                        .as_str()
                ),
                "{}",
                twins.multi.name()
            );
        }
    }
    assert!(c
        .cmd(&["RL.MULTI"])
        .err()
        .unwrap()
        .contains("wrong number of arguments"));
}

#[test]
fn concurrent_clients_never_get_more_than_the_limit_between_them() {
    let s = Server::start();
    let port = s.port;
    let at = at_base(2 * HOUR, HOUR).to_string();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let at = at.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = 0;
                for _ in 0..40 {
                    // Half of the clients share only the user key.
                    let ip = format!("ip:{}", i % 2);
                    let args = [
                        "2",
                        ip.as_str(),
                        "user:1",
                        "LIMIT",
                        "1h",
                        "100",
                        "LIMIT",
                        "1d",
                        "1000",
                        "AT",
                        &at,
                    ];
                    let r = multi(&mut c, &args);
                    if split(&r).0[0] == 0 {
                        allowed += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let allowed: i64 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    assert_eq!(allowed, 100);
    let mut c = s.client();
    let user = state(&mut c, "user:1").0.expect("user:1");
    assert!(user.starts_with("3600000:100:"), "{user}");
    let ips: i64 = ["ip:0", "ip:1"]
        .iter()
        .map(|k| {
            let v = state(&mut c, k).0.expect("ip key");
            v.split(':')
                .nth(1)
                .and_then(|n| n.parse::<i64>().ok())
                .expect("count")
        })
        .sum();
    assert_eq!(ips, 100);
}

#[test]
fn the_largest_call_and_binary_keys() {
    let s = Server::start();
    let mut c = s.client();
    let [tf, ts] = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR).to_string();
    let keys: Vec<Vec<u8>> = (0..64u8)
        .map(|i| vec![b'k', 0, b'\r', b'\n', 0xff, i])
        .collect();
    let windows: Vec<String> = (1..=16).map(|w| format!("{w}m")).collect();
    for (cmd, name) in [
        (vec![b"RL.MULTI".to_vec()], "native"),
        (
            vec![b"FCALL".to_vec(), tf.multi.id.clone().into_bytes()],
            "function",
        ),
        (
            vec![b"EVALSHA".to_vec(), ts.multi.id.clone().into_bytes()],
            "script",
        ),
    ] {
        let mut args = cmd;
        args.push(b"64".to_vec());
        args.extend(keys.iter().cloned());
        for (i, w) in windows.iter().enumerate() {
            args.extend([
                b"LIMIT".to_vec(),
                w.clone().into_bytes(),
                (100 - i).to_string().into_bytes(),
            ]);
        }
        args.extend([b"AT".to_vec(), t.clone().into_bytes()]);
        let r = c.cmd(&args);
        let items = r.array();
        // The function's call is the second on the same keys, the script's the third.
        let remaining = match name {
            "native" => 84,
            "function" => 83,
            _ => 82,
        };
        // The smallest limit (85, the 16th window) binds, on the first key.
        assert_eq!(
            items[..5].iter().map(Value::int).collect::<Vec<_>>(),
            [0, 85, remaining, -1, 960_000],
            "{name}"
        );
        assert_eq!(items[5], Value::Bulk(keys[0].clone()), "{name}");
        assert_eq!(items[6], Value::Int(960_000), "{name}");
    }
    let v = c.cmd(&[b"GET".to_vec(), keys[63].clone()]).text();
    assert_eq!(v.split(',').count(), 16);
    assert!(v.starts_with("60000:3:"), "{v}");
    // A binary key in an error is quoted on one line.
    c.cmd(&[b"SET".to_vec(), b"bad\r\n".to_vec(), b"x".to_vec()]);
    let r = c.cmd(&[&b"RL.MULTI"[..], b"1", b"bad\r\n", b"LIMIT", b"1s", b"1"]);
    assert_eq!(
        r.err(),
        Some("ERR the key 'bad\\x0d\\x0a' does not hold RL.MULTI state (expected window_ms:count:end_ms entries separated by commas)")
    );
}

// ---- differential: native, twin and model -------------------------------------

/// What the model predicts for `RL.MULTI numkeys names... rest...`, where `names[i]`
/// is the physical name of logical key `idx[i]`, and the writes it implies.
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
    let call = match multi::parse(&args) {
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
        // Four physical keys share each logical key's history: native only, function
        // only, script only, and the three mixed.
        let physical = |ns: &str, k: usize| format!("{ns}:{seed}:{}", NAMES[k]);
        for step in 0..500 {
            now += *rng.pick(&[0u64, 0, 1, 3, 50, 120, 400, 999, 1_000, 2_500, 61_000]);
            if rng.chance(5) {
                // A write from outside.
                let k = rng.range(0, NAMES.len() as u64) as usize;
                let keys = ["n", "f", "s", "m"].map(|ns| physical(ns, k));
                match rng.range(0, 6) {
                    0 => {
                        for key in &keys {
                            c.cmd(&["SET", key, "junk"]);
                        }
                        models[k] = Some(KeyModel {
                            value: b"junk".to_vec(),
                            expires: None,
                        });
                    }
                    1 => {
                        // An RL.FIXED counter.
                        for key in &keys {
                            c.cmd(&["SET", key, "3"]);
                        }
                        models[k] = Some(KeyModel {
                            value: b"3".to_vec(),
                            expires: None,
                        });
                    }
                    2 | 3 => {
                        // Valid state without a TTL.
                        let (a, b) = (rng.irange(0, 13), rng.irange(0, 130));
                        let v = format!("1000:{a}:{},60000:{b}:{}", now + 500, now + 30_000);
                        for key in &keys {
                            c.cmd(&["SET", key, &v]);
                        }
                        models[k] = Some(KeyModel {
                            value: v.into_bytes(),
                            expires: None,
                        });
                    }
                    4 => {
                        for key in &keys {
                            c.cmd(&["PERSIST", key]);
                        }
                        if let Some(m) = models[k].as_mut() {
                            m.expires = None;
                        }
                    }
                    _ => {
                        for key in &keys {
                            c.cmd(&["DEL", key]);
                        }
                        models[k] = None;
                    }
                }
                continue;
            }
            let nkeys = *rng.pick(&[1usize, 1, 2, 2, 2, 3, 4]);
            let mut idx: Vec<usize> = (0..NAMES.len()).collect();
            rng.shuffle(&mut idx);
            idx.truncate(nkeys);
            if rng.chance(2) {
                idx.push(idx[0]);
            }
            let rest = workload::random_multi_rest(&mut rng, now);
            let names =
                |ns: &str| -> Vec<String> { idx.iter().map(|&k| physical(ns, k)).collect() };
            let ctx = format!("seed {seed} step {step} keys {idx:?} args {rest:?}");
            let mixed = rng.range(0, 3);
            let mut effects = None;
            for ns in ["n", "f", "s", "m"] {
                let names = names(ns);
                let (want, eff) = predict(&models, &idx, &names, &rest);
                effects.get_or_insert(eff);
                let side = match ns {
                    "n" => 0,
                    "f" => 1,
                    "s" => 2,
                    _ => mixed,
                };
                let mut args: Vec<String> = match side {
                    0 => vec!["RL.MULTI".into()],
                    1 => vec![tf.multi.call.into(), tf.multi.id.clone()],
                    _ => vec![ts.multi.call.into(), ts.multi.id.clone()],
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
    // The random walk must reach every kind of outcome.
    assert!(
        calls.iter().all(|&n| n > 50),
        "allowed/denied/errors: {calls:?}"
    );
}

// ---- key specs, ACL, Cluster --------------------------------------------------

#[test]
fn command_info_getkeys_and_acl() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "RL.MULTI", "2", "a", "b", "LIMIT", "1", "10"]),
        Value::Array(vec![Value::Bulk(b"a".to_vec()), Value::Bulk(b"b".to_vec())])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "RL.MULTI", "1", "LIMIT", "LIMIT", "1", "10", "COST", "1"]),
        Value::Array(vec![Value::Bulk(b"LIMIT".to_vec())])
    );
    let info = c.cmd(&["COMMAND", "INFO", "RL.MULTI"]);
    let entry = info.array()[0].array();
    assert_eq!(entry[0].text(), "RL.MULTI");
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
    assert_eq!(&entry[3..6], &[Value::Int(0), Value::Int(0), Value::Int(0)]);

    c.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all"]);
    let mut u = s.client();
    assert_eq!(u.cmd(&["AUTH", "app", "pw"]), Value::Status("OK".into()));
    let r = u.cmd(&["RL.MULTI", "2", "app:ip", "app:user", "LIMIT", "1m", "5"]);
    assert_eq!(split(&r).0[0], 0);
    let denied = u.cmd(&["RL.MULTI", "2", "app:ip", "other:user", "LIMIT", "1m", "5"]);
    assert!(denied.err().unwrap().starts_with("NOPERM"), "{denied:?}");
    assert_eq!(c.cmd(&["EXISTS", "other:user"]).int(), 0);
    assert!(c.cmd(&["GET", "app:ip"]).text().starts_with("60000:1:"));
}

#[test]
fn cluster_routes_hash_tagged_calls_and_refuses_cross_slot_ones() {
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    let mut shas = Vec::new();
    for (_, c) in cc.nodes.iter_mut() {
        shas.push(Twins::load(c).multi.id);
        // The library, on every primary.
        Twins::functions(c);
    }
    let t = at_base(2 * HOUR, HOUR).to_string();
    let mut owners = std::collections::BTreeSet::new();
    for user in 0..12 {
        let ip = format!("{{user{user}}}:ip");
        let id = format!("{{user{user}}}:id");
        let r = cc.cmd(&[
            "RL.MULTI", "2", &ip, &id, "LIMIT", "1s", "10", "LIMIT", "1m", "120", "AT", &t,
        ]);
        assert_eq!(
            split(&r),
            ([0, 10, 9, -1, 1_000], ip.clone(), 1_000),
            "user {user}"
        );
        // The twin, routed the same way, reads the state the command wrote.
        let r = cc.cmd(&[
            "EVALSHA", &shas[0], "2", &ip, &id, "LIMIT", "1s", "10", "LIMIT", "1m", "120", "AT", &t,
        ]);
        assert_eq!(
            split(&r),
            ([0, 10, 8, -1, 1_000], ip.clone(), 1_000),
            "user {user}"
        );
        // And the function.
        let r = cc.cmd(&[
            "FCALL", "rl_multi", "2", &ip, &id, "LIMIT", "1s", "10", "LIMIT", "1m", "120", "AT", &t,
        ]);
        assert_eq!(
            split(&r),
            ([0, 10, 7, -1, 1_000], ip.clone(), 1_000),
            "user {user}"
        );
        // The key lives on the node that owns its slot.
        let slot = cc.nodes[0].1.cmd(&["CLUSTER", "KEYSLOT", &ip]).int();
        let owner = cc
            .nodes
            .iter_mut()
            .position(|(_, c)| {
                c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
                    .int()
                    == 2
            })
            .expect("a node holds the keys");
        owners.insert(owner);
        // Any other node redirects the native call to the owner of the slot.
        for (i, (_, c)) in cc.nodes.iter_mut().enumerate().filter(|(i, _)| *i != owner) {
            let r = c.cmd(&["RL.MULTI", "2", &ip, &id, "LIMIT", "1s", "10", "COST", "0"]);
            let e = r.err().unwrap_or_default().to_string();
            assert!(e.starts_with(&format!("MOVED {slot} ")), "node {i}: {r:?}");
        }
        let r = cc.nodes[owner].1.cmd(&["GET", &id]);
        assert!(r.text().starts_with("1000:3:"), "{r:?}");
    }
    assert!(owners.len() >= 2, "keys spread over the nodes: {owners:?}");
    assert!(cc.moved > 0, "some calls were redirected");
    // Keys in different slots.
    for ((_, c), sha) in cc.nodes.iter_mut().zip(&shas) {
        let r = c.cmd(&["RL.MULTI", "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10"]);
        assert!(r.err().unwrap_or("").starts_with("CROSSSLOT"), "{r:?}");
        let r = c.cmd(&["EVALSHA", sha, "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10"]);
        assert!(r.err().unwrap_or("").starts_with("CROSSSLOT"), "{r:?}");
        let r = c.cmd(&[
            "FCALL", "rl_multi", "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10",
        ]);
        assert!(r.err().unwrap_or("").starts_with("CROSSSLOT"), "{r:?}");
        assert_eq!(
            c.cmd(&[
                "COMMAND", "GETKEYS", "RL.MULTI", "2", "{a}:ip", "{b}:id", "LIMIT", "1s", "10"
            ]),
            Value::Array(vec![
                Value::Bulk(b"{a}:ip".to_vec()),
                Value::Bulk(b"{b}:id".to_vec())
            ])
        );
    }
    let total: i64 = cc
        .nodes
        .iter_mut()
        .map(|(_, c)| c.cmd(&["DBSIZE"]).int())
        .sum();
    assert_eq!(total, 24);
}

/// A numkeys one off was an unknown option ('1m', 'acct:1') or an unknown rule ('1'):
/// the error now says which numkeys the arguments read with, the same from the
/// command and from its twins (whose numkeys is FCALL's or EVALSHA's), and nothing is
/// written. An error no numkeys explains stays as it was.
#[test]
fn numkeys_mistakes_say_what_was_meant() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "RL.MULTI",
            &["2", "ip:1", "LIMIT", "1m", "10"],
            "ERR numkeys is 2 but 'LIMIT' starts the arguments after 1 key: did you mean numkeys 1?",
        ),
        (
            "RL.MULTI",
            &["1", "ip:1", "acct:1", "LIMIT", "1m", "10"],
            "ERR numkeys is 1 but 'acct:1' reads as a key: did you mean numkeys 2?",
        ),
        (
            "RL.SLIDING",
            &["3", "ip:1", "acct:1", "LIMIT", "1m", "10", "BUCKETS", "4"],
            "ERR numkeys is 3 but 'LIMIT' starts the arguments after 2 keys: did you mean numkeys 2?",
        ),
        (
            "RL.ALL",
            &["2", "a", "FIXED", "1", "5", "1m"],
            "ERR numkeys is 2 but 'FIXED' starts the arguments after 1 key: did you mean numkeys 1?",
        ),
        (
            "RL.ALL",
            &["1", "a", "b", "FIXED", "1", "5", "1m", "GCRA", "2", "1", "1", "1s"],
            "ERR numkeys is 1 but 'b' reads as a key: did you mean numkeys 2?",
        ),
        // No numkeys explains these: the errors they always had.
        (
            "RL.MULTI",
            &["1", "ip:1", "LIMIT", "1m", "10", "LIMITS", "1s", "10"],
            "ERR unknown option 'LIMITS' (options here: COST, AT, ALIGN, LIMIT, REFUND, FORCE, UPTO)",
        ),
        (
            "RL.ALL",
            &["1", "a", "FIXD", "1", "5", "1m"],
            "ERR unknown rule 'FIXD': a rule is BAN, FIXED, GCRA, LEASE, LOG, MULTI or SLIDING followed by its key's position (COST and AT come after the rules)",
        ),
    ];
    for (command, args, want) in cases {
        let mut v = vec![*command];
        v.extend_from_slice(args);
        assert_eq!(c.cmd(&v).err(), Some(*want), "{command} {args:?}");
        for twins in &forms {
            let t = match *command {
                "RL.MULTI" => &twins.multi,
                "RL.SLIDING" => &twins.sliding,
                _ => &twins.all,
            };
            assert_eq!(
                twin(&mut c, t, args).err(),
                Some(*want),
                "{} of {command} {args:?}",
                t.name()
            );
        }
    }
    assert_eq!(c.cmd(&["DBSIZE"]).int(), 0, "an error wrote something");
    // The meant numkeys works as such.
    let ok = multi(&mut c, &["1", "ip:1", "LIMIT", "1m", "10"]);
    assert_eq!(split(&ok).0, [0, 10, 9, -1, 60000]);
}

//! Regression tests of five findings of a review, each named after what it found: a
//! command run inside the module on RL.LOG's write path (a write that could fail half
//! done), calls whose work was not bounded (RL.ALL of full logs leaving at once,
//! RL.SLIDING at its bounds), logs whose members contradict each other, and hand-written
//! states with times no call would write. Each runs on the command and on both forms of
//! its twin (function and script), which must agree.

mod common;

use common::{at_base, Client, Server, Twins, Value, HOUR};

/// The command, then its function, then its script: `(name, argv)` of a call of
/// `command` on `keys` with `args` (the keys as the command takes them: RL.LOG's one
/// key, RL.MULTI's, RL.SLIDING's and RL.ALL's after numkeys).
fn sides(
    c: &mut Client,
    command: &str,
    keys: &[&str],
    args: &[&str],
) -> Vec<(String, Vec<String>)> {
    let [functions, scripts] = Twins::both(c);
    let mut native = vec![command.to_string()];
    if command != "RL.LOG" {
        native.push(keys.len().to_string());
    }
    native.extend(keys.iter().map(|k| k.to_string()));
    native.extend(args.iter().map(|a| a.to_string()));
    let twin = |t: &Twins| match command {
        "RL.LOG" => t.log.argv(keys, args),
        "RL.MULTI" => t.multi.argv(keys, args),
        "RL.SLIDING" => t.sliding.argv(keys, args),
        "RL.ALL" => t.all.argv(keys, args),
        other => panic!("no twin for {other}"),
    };
    vec![
        ("native".to_string(), native),
        ("function".to_string(), twin(&functions)),
        ("script".to_string(), twin(&scripts)),
    ]
}

/// A log's member, as RL.LOG writes it: `seq:cost:meta`.
fn member(seq: u64, cost: u64, meta: &str) -> String {
    format!("{seq:016}:{cost}:{meta}")
}

/// A limiter reply's first field: 0 allowed, 1 denied (an error reply panics).
fn limited(v: &Value) -> i64 {
    match v {
        Value::Array(fields) => fields[0].int(),
        other => panic!("not a limiter reply: {other:?}"),
    }
}

fn cmdstat(c: &mut Client, command: &str) -> i64 {
    c.cmd(&["INFO", "commandstats"])
        .text()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Finding 1: RL.LOG removed a burst of leaving entries by running `ZREMRANGEBYSCORE`
/// inside the module, after its new entry was added and replicated; with that command
/// renamed away the call failed half done (the entry kept, the expiry not moved, an
/// RL.ALL rule of the same call counted). No command runs on the write path now: the
/// same calls succeed whole on such a server, and the server counts no command they ran.
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
            let argv = &sides(
                &mut c,
                "RL.LOG",
                &[&log],
                &["200", "1s", "AT", &t.to_string()],
            )[key];
            assert_eq!(limited(&c.cmd(&argv.1)), 0, "{side}: the burst");
        }
        // A second later the burst has left: the call that finds it, alone and in RL.ALL.
        let argv = &sides(&mut c, "RL.LOG", &[&log], &["200", "1s", "AT", &later])[key];
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
        let argv = &sides(&mut c, "RL.ALL", &[&fixed, &log], &rules)[key];
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
            assert_eq!(cmdstat(&mut c, "zremrangebyscore"), 0);
            assert_eq!(cmdstat(&mut c, "zrem"), 0);
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

/// Finding 2: one RL.ALL call of 16 full LOG rules whose entries all left at once
/// removed 160 000 entries (28 to 44 ms of the server). A write removes at most 64
/// leaving entries a key now: the call leaves the rest to later writes.
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
                zadd.push(member(seq, 1, "a-long-enough-meta"));
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
        let argv = &sides(&mut c, "RL.ALL", &key_refs, &arg_refs)[n];
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

/// Finding 3: RL.SLIDING at its bounds (64 keys of 32 windows of 100 buckets) read and
/// wrote 204 800 buckets in one call. A key keeps at most 1 000 buckets now: a write
/// that would keep more is refused, and so is a stored state that holds more.
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
    for (name, argv) in sides(&mut c, "RL.SLIDING", &["sl:many"], &arg_refs) {
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
    for (name, argv) in sides(&mut c, "RL.SLIDING", &["sl:ten"], &ten) {
        assert_eq!(limited(&c.cmd(&argv)), 0, "{name}");
    }
    // A stored key of 11 windows of 100 buckets was not written by RL.SLIDING.
    let now_bucket = common::unix_ms() / 10;
    let state: Vec<String> = (1..=11)
        .map(|s| format!("{}:100:{}:1", s * 1000, now_bucket / s))
        .collect();
    c.cmd(&["SET", "sl:eleven", &state.join(","), "PX", "60000"]);
    for (name, argv) in sides(
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

/// Finding 4: a log whose members repeat or reverse their sequence numbers (three
/// members numbered 1, limit 3) was read as one request and let two more through. The
/// members a call reads must follow each other, and the set may hold no more members
/// than the units its numbers span: otherwise the key is invalid state.
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
                (t, member(1, 1, "a")),
                (t, member(1, 1, "b")),
                (t, member(1, 1, "c")),
            ],
        ),
        (
            "numbers reversed",
            vec![
                (t, member(3, 1, "a")),
                (t + 1, member(2, 1, "b")),
                (t + 2, member(1, 1, "c")),
            ],
        ),
        (
            "a number repeated in the middle",
            vec![
                (t, member(1, 1, "a")),
                (t + 1, member(2, 1, "b")),
                (t + 2, member(2, 1, "c")),
                (t + 3, member(3, 1, "d")),
            ],
        ),
        (
            "a gap after the first counted member",
            vec![
                (t, member(1, 1, "a")),
                (t + 1, member(5, 1, "b")),
                (t + 2, member(6, 1, "c")),
            ],
        ),
    ];
    let at = (t + 10).to_string();
    for (what, members) in &bad_logs {
        for (name, argv) in sides(&mut c, "RL.LOG", &["log:bad"], &["3", "1h", "AT", &at]) {
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
    for (name, argv) in sides(&mut c, "RL.LOG", &["log:good"], &["3", "1h", "AT", &at]) {
        c.cmd(&["DEL", "log:good"]);
        c.cmd(&[
            "ZADD",
            "log:good",
            &us(t),
            &member(1, 1, "a"),
            &us(t + 1),
            &member(2, 1, "b"),
        ]);
        assert_eq!(c.cmd(&argv).ints()[..3], [0, 3, 0], "{name}");
        assert_eq!(limited(&c.cmd(&argv)), 1, "{name}");
    }
}

/// Finding 5: hand-written states with times no call would write were accepted: an
/// RL.MULTI window ending in the year ~287 000, a log entry in 2255 (the next call was
/// recorded in 2255). A time past the latest `AT` (2100) plus the longest window (10
/// years), or a log entry or a bucket past the latest `AT` itself, is invalid state.
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
        for (name, argv) in sides(&mut c, command, &[key], args) {
            c.cmd(&["DEL", key]);
            if command == "RL.LOG" {
                c.cmd(&["ZADD", key, &Y2255_US.to_string(), &member(1, 1, "x")]);
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
    for (name, argv) in sides(&mut c, "RL.MULTI", &["multi:bound"], &["LIMIT", "1m", "10"]) {
        c.cmd(&["SET", "multi:bound", "60000:1:4417804800000"]);
        assert_eq!(limited(&c.cmd(&argv)), 0, "{name}");
    }
}

//! `UPTO` against real servers: on every rate limiter (RL.FIXED, RL.GCRA, RL.MULTI,
//! RL.SLIDING, RL.LOG, RL.ALL) a call `COST n UPTO` takes the largest `k` up to `n` that a
//! `COST k` call would be allowed (checked by trying every cost on copies of the keys),
//! replies and writes exactly as that call with `k` last, and the command, its function
//! and its script agree call by call, mixed on one key; replicas (with and without the
//! module) get the effects of the call it became; its errors.

use crate::common::{self, at_base, on_every_side, twins::show, Client, Rng, Server, HOUR, MINUTE};

/// The three sides agree on `lines`; the command's replies.
fn agreed(c: &mut Client, lines: &[&str]) -> Vec<String> {
    let [native, function, script] = on_every_side(c, lines);
    assert_eq!(function, native, "function");
    assert_eq!(script, native, "script");
    native
}

/// What a line replied, after its `=>`.
fn replied(line: &str) -> &str {
    line.split_once(" => ").map_or("", |(_, r)| r)
}

/// The limiters' calls the random walks make, on keys of their own (`@` is the side's
/// prefix), without COST and AT.
const CALLS: &[&str] = &[
    "RL.FIXED @f 9 2s",
    "RL.FIXED @fa 9 2s ALIGN",
    "RL.GCRA @g 5 3 1s",
    "RL.MULTI 2 @m1 @m2 LIMIT 1s 4 LIMIT 10s 12",
    "RL.SLIDING 1 @s LIMIT 2s 8 BUCKETS 4",
    "RL.LOG @l 7 2s META who",
    "RL.ALL 3 @a1 @a2 @a3 FIXED 1 9 2s GCRA 2 4 3 1s SLIDING 3 LIMIT 2s 10 BUCKETS 4",
];

/// A call's line with `COST cost`, the flags, at `ms` after `base`.
fn line(call: &str, cost: i64, flags: &str, base: u64, ms: u64) -> String {
    format!("{call} COST {cost}{flags} AT {}", base + ms)
}

/// On every limiter, in random walks of takes, refunds, forced requests and calls with
/// `UPTO`: each `UPTO` call takes the largest cost a plain call of that cost would be
/// allowed (found by trying each cost on a copy of the keys, a copy per side), and
/// replies and writes as that call; the command, the function and the script agree.
#[test]
fn upto_takes_what_a_call_of_that_cost_would_be_allowed_on_every_side() {
    let s = Server::start();
    let mut c = s.client();
    for seed in common::Rng::seeds(&[11, 12]) {
        let mut rng = Rng::new(seed);
        let base = at_base(HOUR, MINUTE);
        let mut ms = 0;
        for step in 0..120 {
            ms += rng.range(0, 700);
            let call = *rng.pick(CALLS);
            let call = call.replace('@', &format!("{{u{seed}}}@"));
            let cost = rng.range(1, 14) as i64;
            let flags = *rng.pick(&["", " UPTO", " UPTO", " REFUND", " FORCE"]);
            let this = line(&call, cost, flags, base, ms);
            let ctx = format!("seed {seed} step {step}: {this}");
            if flags == " UPTO" {
                // The largest cost that fits, tried on copies of the native side's keys.
                let keys: Vec<String> = this
                    .split_whitespace()
                    .filter(|w| w.starts_with(&format!("{{u{seed}}}@")))
                    .map(|w| w.replace('@', "{n}"))
                    .collect();
                let fits = |c: &mut Client, k: i64| {
                    for key in &keys {
                        copy_key(c, key, &key.replace("{n}", "{t}"));
                    }
                    let trial = line(&call, k, "", base, ms).replace('@', "{t}");
                    let words: Vec<&str> = trial.split_whitespace().collect();
                    // A cost the rule can never take (above its capacity) is an error.
                    let reply = c.cmd(&words);
                    !reply.is_err() && reply.array().first().map(|f| f.int()) == Some(0)
                };
                let want = (1..=cost).rev().find(|&k| fits(&mut c, k)).unwrap_or(0);
                let got = agreed(&mut c, &[&this]);
                let last = replied(&got[0])
                    .trim_end_matches(']')
                    .rsplit(", ")
                    .next()
                    .unwrap_or("")
                    .to_string();
                assert_eq!(last, want.to_string(), "{ctx}: {}", got[0]);
            } else {
                agreed(&mut c, &[&this]);
            }
        }
    }
}

/// Copy `from` to `to` (value and absolute expiry), or delete `to` when `from` is missing.
fn copy_key(c: &mut Client, from: &str, to: &str) {
    c.cmd(&["DEL", to]);
    if let common::Value::Bulk(dump) = c.cmd(&["DUMP", from]) {
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
        assert_eq!(c.cmd(&restore), common::Value::Status("OK".into()));
    }
}

/// A call with `UPTO` is the call of the cost it took: the same reply (but its last
/// field) and the same writes as that call made on a copy of the keys; the replication
/// stream and a replica without the module hold what the plain call would have written
/// (the replica never sees UPTO).
#[test]
fn an_upto_call_writes_and_replicates_as_the_call_it_became() {
    let primary = Server::start();
    let without = primary.start_replica(false);
    let mut c = primary.client();
    let t = at_base(HOUR, MINUTE);
    let got = agreed(
        &mut c,
        &[
            &format!("RL.FIXED @f 100 1m COST 60 AT {t}"),
            &format!("RL.FIXED @f 100 1m COST 90 UPTO AT {}", t + 1_000),
            "GET @f",
            &format!("RL.LOG @l 10 1m META x COST 8 UPTO AT {t}"),
            &format!("RL.LOG @l 10 1m META y COST 8 UPTO AT {}", t + 1),
            "ZRANGE @l 0 -1",
            &format!("RL.GCRA @g 9 10 1s COST 25 UPTO AT {t}"),
            "GET @g",
        ],
    );
    assert!(replied(&got[1]).ends_with(", 40]"), "{}", got[1]);
    assert_eq!(replied(&got[2]), r#""100""#);
    assert!(replied(&got[3]).ends_with(", 8]"), "{}", got[3]);
    assert!(replied(&got[4]).ends_with(", 2]"), "{}", got[4]);
    assert_eq!(
        replied(&got[5]),
        r#"["0000000000000008:8:x", "0000000000000010:2:y"]"#
    );
    assert!(replied(&got[6]).ends_with(", 10]"), "{}", got[6]);
    assert_eq!(
        replied(&got[7]),
        format!("{:?}", (t * 1_000 + 1_000_000).to_string())
    );
    common::wait_for_replicas(&mut c, 1);
    let mut r = without.client();
    for key in ["{n}f", "{f}f", "{s}f", "{n}g", "{s}g"] {
        assert_eq!(
            show(&r.cmd(&["GET", key])),
            show(&c.cmd(&["GET", key])),
            "{key}"
        );
        assert_eq!(
            r.cmd(&["PEXPIRETIME", key]),
            c.cmd(&["PEXPIRETIME", key]),
            "{key}"
        );
    }
    assert_eq!(
        show(&r.cmd(&["ZRANGE", "{n}l", "0", "-1", "WITHSCORES"])),
        show(&c.cmd(&["ZRANGE", "{n}l", "0", "-1", "WITHSCORES"]))
    );
}

/// The errors of `UPTO`, the same from the command, the function and the script, and
/// nothing written.
#[test]
fn upto_errors_are_the_same_on_every_side_and_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(HOUR, MINUTE);
    let lines = [
        format!("RL.FIXED @f 5 1m COST 0 UPTO AT {t}"),
        format!("RL.FIXED @f 5 1m COST 3 UPTO REFUND AT {t}"),
        format!("RL.LOG @l 5 1m COST 3 FORCE UPTO AT {t}"),
        format!("RL.GCRA @g 1 1 1s COST 2 UPTO DELAY 1s AT {t}"),
        format!("RL.ALL 2 @l @f LEASE 1 2 10s FIXED 2 5 1m COST 3 UPTO ID a AT {t}"),
        format!("RL.LEASE @l 2 10s COST 1 UPTO AT {t}"),
        "EXISTS @f @l @g".to_string(),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let got = agreed(&mut c, &lines);
    assert_eq!(
        replied(&got[0]),
        "error ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)"
    );
    for (i, flag) in [(1, "REFUND"), (2, "FORCE"), (3, "DELAY")] {
        assert_eq!(
            replied(&got[i]),
            format!("error ERR UPTO cannot be given with {flag}: UPTO takes as much of COST as fits now")
        );
    }
    assert_eq!(
        replied(&got[4]),
        "error ERR rule 1 (LEASE): invalid cost 3: a lease takes COST 1 (the default) or COST 0 to peek"
    );
    assert!(
        replied(&got[5]).starts_with("error ERR unknown option 'UPTO'"),
        "{}",
        got[5]
    );
    assert_eq!(replied(&got[6]), "0");
}

//! The workloads of the replication, persistence and failover tests: a random one of
//! every command and every twin, and one per command, each reproducible from its seed;
//! and a snapshot of a whole (small) dataset to compare servers.

use super::keyspace::{every_type, expiries, sweep_all};
use super::{at_base, state, Client, Rng, Twin, Twins, Value, HOUR, MINUTE};
use std::collections::BTreeMap;

/// One key as a snapshot sees it: type, value (GET for strings, DUMP payload for other
/// types) and absolute expiry.
pub type KeyState = (String, Value, i64);

/// Every key of the dataset (small datasets only: it uses KEYS).
pub fn snapshot(c: &mut Client) -> BTreeMap<Vec<u8>, KeyState> {
    let Value::Array(keys) = c.cmd(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut out = BTreeMap::new();
    for k in keys {
        let Value::Bulk(k) = k else {
            panic!("key {k:?}")
        };
        let t = c.cmd(&[b"TYPE".to_vec(), k.clone()]).text();
        let v = if t == "string" {
            c.cmd(&[b"GET".to_vec(), k.clone()])
        } else {
            c.cmd(&[b"DUMP".to_vec(), k.clone()])
        };
        let exp = c.cmd(&[b"PEXPIRETIME".to_vec(), k.clone()]).int();
        out.insert(k, (t, v, exp));
    }
    out
}

/// `calls` random calls of every command and twin (a twin in one of `forms`, picked at
/// random: the functions, the scripts, or both). `at_base`: the `AT` used by the
/// limiter calls that pass one (an hour ahead keeps their keys alive); with
/// `server_clock`, about half of them use the server clock instead. Every reply must be
/// a success: the workload has no bad input.
pub fn run(
    c: &mut Client,
    forms: &[Twins],
    seed: u64,
    calls: usize,
    at_base: u64,
    server_clock: bool,
) -> Vec<Value> {
    let mut rng = Rng::new(seed);
    let mut replies = Vec::with_capacity(calls);
    for i in 0..calls {
        let id = rng.range(0, 8);
        let at = (at_base + i as u64 * 7).to_string();
        let with_at = !server_clock || rng.chance(50);
        let form = if rng.chance(40) {
            Some(rng.pick(forms))
        } else {
            None
        };
        let mut opts: Vec<String> = Vec::new();
        if rng.chance(20) {
            opts.extend(["COST".into(), rng.range(0, 2).to_string()]);
        }
        if with_at {
            opts.extend(["AT".into(), at.clone()]);
        }
        let call: Vec<String> = match rng.range(0, 7) {
            0 | 1 => {
                if rng.chance(40) {
                    // A request log, with the user behind the request.
                    let key = format!("log:{id}");
                    let limit = rng.range(1, 6).to_string();
                    let window = rng.pick(&["1m", "90", "1h"]).to_string();
                    let mut opts = opts.clone();
                    opts.extend(["META".to_string(), format!("user:{}", rng.range(0, 4))]);
                    limiter(
                        form.map(|t| &t.log),
                        "RL.LOG",
                        &[key],
                        &[limit, window],
                        &opts,
                    )
                } else if rng.chance(25) {
                    // A lease of one of a few holders, or its release.
                    let key = format!("lease:{id}");
                    let holder = format!("holder:{}", rng.range(0, 4));
                    if rng.chance(30) {
                        let at_only: Vec<String> = opts
                            .iter()
                            .skip_while(|o| *o != "AT")
                            .take(2)
                            .cloned()
                            .collect();
                        limiter(
                            form.map(|t| &t.release),
                            "RL.RELEASE",
                            &[key],
                            &[holder],
                            &at_only,
                        )
                    } else {
                        let limit = rng.range(1, 4).to_string();
                        let ttl = rng.pick(&["1m", "90", "1h"]).to_string();
                        let mut opts = opts.clone();
                        opts.extend(["ID".to_string(), holder]);
                        limiter(
                            form.map(|t| &t.lease),
                            "RL.LEASE",
                            &[key],
                            &[limit, ttl],
                            &opts,
                        )
                    }
                } else {
                    let key = format!("fixed:{id}");
                    let limit = rng.range(1, 5).to_string();
                    let window = rng.pick(&["1m", "90", "1h"]).to_string();
                    if rng.chance(30) {
                        opts.push("ALIGN".into());
                    }
                    settle_flag(&mut rng, &mut opts);
                    limiter(
                        form.map(|t| &t.fixed),
                        "RL.FIXED",
                        &[key],
                        &[limit, window],
                        &opts,
                    )
                }
            }
            2 | 3 if server_clock && !with_at && rng.chance(30) => {
                // redis-cell's command on RL.GCRA's keys (it has no AT: server clock only).
                let key = format!("gcra:{id}");
                let mut args = vec![
                    rng.range(0, 4).to_string(),
                    rng.range(1, 10).to_string(),
                    rng.pick(&["60", "3600", "86400"]).to_string(),
                ];
                if rng.chance(30) {
                    args.push(rng.range(0, 3).to_string());
                }
                limiter(form.map(|t| &t.throttle), "CL.THROTTLE", &[key], &args, &[])
            }
            2 | 3 => {
                let key = format!("gcra:{id}");
                let burst = rng.range(0, 4).to_string();
                let count = rng.range(1, 10).to_string();
                let period = rng.pick(&["1m", "1h", "1d"]).to_string();
                if rng.chance(30) {
                    opts.extend(["DELAY".to_string(), rng.pick(&["1m", "1h"]).to_string()]);
                } else {
                    settle_flag(&mut rng, &mut opts);
                }
                limiter(
                    form.map(|t| &t.gcra),
                    "RL.GCRA",
                    &[key],
                    &[burst, count, period],
                    &opts,
                )
            }
            4 | 5 => {
                let keys = vec![format!("{{u{id}}}ip"), format!("{{u{id}}}id")];
                let mut args = Vec::new();
                for w in ["1m", "1h"].iter().take(rng.range(1, 3) as usize) {
                    args.extend([
                        "LIMIT".to_string(),
                        w.to_string(),
                        rng.range(1, 6).to_string(),
                    ]);
                }
                if rng.chance(25) {
                    // Several kinds at once on the keys the single commands use.
                    all_call(&mut rng, form, id, &opts)
                } else {
                    settle_flag(&mut rng, &mut opts);
                    if rng.chance(50) {
                        // The same shape with sliding windows (on keys of their own).
                        let keys: Vec<String> = keys.iter().map(|k| format!("{k}:s")).collect();
                        if rng.chance(50) {
                            args.extend([
                                "BUCKETS".to_string(),
                                rng.pick(&["4", "10", "60"]).to_string(),
                            ]);
                        }
                        limiter(form.map(|t| &t.sliding), "RL.SLIDING", &keys, &args, &opts)
                    } else {
                        limiter(form.map(|t| &t.multi), "RL.MULTI", &keys, &args, &opts)
                    }
                }
            }
            _ => {
                // Persistent keys of several types, then a bulk TTL over some of them.
                let key = format!("data:{}", rng.range(0, 12));
                match rng.range(0, 3) {
                    0 => c.cmd(&["SET", &key, "v"]),
                    1 => c.cmd(&["RPUSH", &key, "a"]),
                    _ => c.cmd(&["HSET", &key, "f", "v"]),
                };
                if rng.chance(50) {
                    let keys: Vec<String> = (0..3)
                        .map(|_| format!("data:{}", rng.range(0, 12)))
                        .collect();
                    if let Some(t) = form {
                        t.bulkexpire.argv(&keys, &["1h"])
                    } else {
                        let mut v = vec!["RL.BULKEXPIRE".to_string(), "1h".into()];
                        v.extend(keys);
                        v
                    }
                } else {
                    ["RL.SWEEP", "0", "2h", "MATCH", "data:*", "COUNT", "1000"]
                        .map(String::from)
                        .to_vec()
                }
            }
        };
        let r = c.cmd(&call);
        assert!(!r.is_err(), "{call:?}: {r:?}");
        replies.push(r);
    }
    replies
}

/// Sometimes a settle flag (`REFUND` or `FORCE`) among the options: whether one was
/// added. (Not on RL.LOG, whose `FORCE` beyond twice its limit is an error.)
fn settle_flag(rng: &mut Rng, opts: &mut Vec<String>) -> bool {
    if !rng.chance(15) {
        return false;
    }
    opts.push(rng.pick(&["REFUND", "FORCE"]).to_string());
    true
}

/// An RL.ALL call (or its twin) with two to four rules on the keys of identifier
/// `id` that RL.FIXED, RL.GCRA, RL.SLIDING and RL.LOG also write.
fn all_call(rng: &mut Rng, form: Option<&Twins>, id: u64, opts: &[String]) -> Vec<String> {
    let rules: [(&str, String, Vec<String>); 4] = [
        (
            "FIXED",
            format!("fixed:{id}"),
            vec![rng.range(1, 5).to_string(), "1m".into()],
        ),
        (
            "GCRA",
            format!("gcra:{id}"),
            vec![
                rng.range(0, 4).to_string(),
                rng.range(1, 10).to_string(),
                "1h".into(),
            ],
        ),
        (
            "SLIDING",
            format!("{{u{id}}}ip:s"),
            vec!["LIMIT".into(), "1m".into(), rng.range(1, 6).to_string()],
        ),
        (
            "LOG",
            format!("log:{id}"),
            vec![
                rng.range(1, 6).to_string(),
                "1h".into(),
                "META".into(),
                "all".into(),
            ],
        ),
    ];
    let mut chosen: Vec<usize> = (0..4).collect();
    rng.shuffle(&mut chosen);
    chosen.truncate(rng.range(2, 5) as usize);
    let keys: Vec<String> = chosen.iter().map(|&i| rules[i].1.clone()).collect();
    let mut args = Vec::new();
    for (pos, &i) in chosen.iter().enumerate() {
        args.push(rules[i].0.to_string());
        args.push((pos + 1).to_string());
        args.extend(rules[i].2.iter().cloned());
    }
    limiter(form.map(|t| &t.all), "RL.ALL", &keys, &args, opts)
}

/// The native call or its twin's (FCALL or EVALSHA), with the same arguments.
fn limiter(
    twin: Option<&Twin>,
    command: &str,
    keys: &[String],
    args: &[String],
    opts: &[String],
) -> Vec<String> {
    let mut v: Vec<String> = if let Some(t) = twin {
        vec![t.call.into(), t.id.clone(), keys.len().to_string()]
    } else if command == "RL.MULTI" || command == "RL.SLIDING" || command == "RL.ALL" {
        vec![command.into(), keys.len().to_string()]
    } else {
        vec![command.into()]
    };
    v.extend(keys.iter().cloned());
    v.extend(args.iter().cloned());
    v.extend(opts.iter().cloned());
    v
}

// ---- RL.FIXED ------------------------------------------------------------------

/// RL.FIXED writes of every kind a string written in place meets: a new key, the same
/// window, a value that grows by a digit and one that shrinks back in a new window, a
/// key the twin wrote, a counter a plain INCR made (allowed: a write; denied: only a
/// TTL), and a peek that writes nothing. Returns the five keys (the peeked one missing).
pub fn fixed_in_place_writes(c: &mut Client) -> [&'static str; 5] {
    let twins = Twins::load(c);
    let t = at_base(HOUR, MINUTE);
    let at = |ms: u64| (t + ms).to_string();
    let fixed = |c: &mut Client, key: &str, args: &[&str]| {
        let mut v = vec!["RL.FIXED", key];
        v.extend_from_slice(args);
        c.cmd(&v)
    };

    // 1 → 12 in one window: the value grows from one digit to two in place.
    for i in 0..12 {
        let r = fixed(c, "grow", &["100", "1h", "AT", &at(i)]);
        assert_eq!(r.ints()[..3], [0, 100, 99 - i as i64]);
    }
    // A new window on the same key: back to one digit, a new expiry.
    fixed(c, "grow", &["100", "1h", "AT", &at(3_600_000)]);
    assert_eq!(state(c, "grow"), (Some("1".into()), (t + 7_200_000) as i64));

    // Written by the twin (stored as an integer), then by the command.
    c.cmd(&twins.fixed.argv(&["mixed"], &["10", "1m", "AT", &at(0)]));
    fixed(c, "mixed", &["10", "1m", "COST", "9", "AT", &at(5)]);
    assert_eq!(state(c, "mixed"), (Some("10".into()), (t + 60_000) as i64));

    // A counter without TTL made by INCR: allowed (a write) and denied (only a TTL).
    c.cmd(&["SET", "plain", "7"]);
    fixed(c, "plain", &["10", "10s", "AT", &at(0)]);
    c.cmd(&["SET", "full", "10"]);
    let r = fixed(c, "full", &["10", "10s", "AT", &at(0)]);
    assert_eq!(r.ints()[0], 1);
    assert_eq!(state(c, "full"), (Some("10".into()), (t + 10_000) as i64));

    // Peeks and denials write nothing.
    fixed(c, "peek", &["5", "1m", "COST", "0", "AT", &at(0)]);
    assert_eq!(state(c, "peek"), (None, -2));

    ["grow", "mixed", "plain", "full", "peek"]
}

// ---- RL.GCRA -------------------------------------------------------------------

/// Configurations whose TATs stay minutes ahead of the clock, so nothing expires while
/// the states are compared. (max_burst, count, period)
const GCRA_SLOW: &[[&str; 3]] = &[["4", "1", "1m"], ["2", "7", "1m"], ["999", "1000", "1h"]];

/// `n` RL.GCRA requests with the server clock on `keys`, alternating native and twin
/// (the forms of `forms` in turn).
pub fn gcra_traffic(c: &mut Client, forms: &[Twins], keys: &[String], n: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let key = rng.pick(keys);
        let [b, cnt, p] = *rng.pick(GCRA_SLOW);
        let cost = rng.range(0, 3).to_string();
        let call = limiter(
            (i % 2 == 1).then(|| &forms[(i / 2) % forms.len()].gcra),
            "RL.GCRA",
            std::slice::from_ref(key),
            &[b.into(), cnt.into(), p.into()],
            &["COST".into(), cost],
        );
        let r = c.cmd(&call);
        assert!(!r.is_err(), "{r:?}");
    }
}

// ---- RL.MULTI ------------------------------------------------------------------

/// Random RL.MULTI LIMIT triples and options (in any order, options between LIMITs
/// too), always with `AT now_ms`: the arguments after the keys.
pub fn random_multi_rest(rng: &mut Rng, now_ms: u64) -> Vec<String> {
    const WINDOWS: [&str; 11] = [
        "250ms", "1", "1s", "1500ms", "2s", "1m", "60s", "7", "1ms", "90s", "1h",
    ];
    let nwin = *rng.pick(&[1usize, 1, 2, 2, 3, 3, 4]);
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
    if rng.chance(40) {
        groups.push(vec![rng.pick(&["ALIGN", "align"]).to_string()]);
    }
    if rng.chance(2) {
        // An occasional bad window or limit: both sides must word it the same way.
        groups[0][rng.range(1, 3) as usize] = rng.pick(&["0", "x", "-1", "1.5"]).to_string();
    }
    groups.push(vec!["AT".into(), now_ms.to_string()]);
    rng.shuffle(&mut groups);
    groups.into_iter().flatten().collect()
}

/// A reproducible batch of 300 RL.MULTI calls (native and twin) on keys `r:0..r:5`,
/// some with `AT` ahead of the clock (from `at_base(2 * HOUR, HOUR)`) and some on the
/// server's clock. Returns the keys named, sorted.
pub fn multi_calls(c: &mut Client, twin: &Twin, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut now = at_base(2 * HOUR, HOUR);
    let mut keys = Vec::new();
    for _ in 0..300 {
        now += *rng.pick(&[0u64, 1, 50, 400, 1_000, 61_000]);
        let mut idx: Vec<usize> = (0..6).collect();
        rng.shuffle(&mut idx);
        idx.truncate(rng.range(1, 4) as usize);
        let mut rest = random_multi_rest(&mut rng, now);
        if rng.chance(30) {
            // On the server's clock.
            let i = rest.iter().position(|a| a == "AT").expect("AT");
            rest.drain(i..i + 2);
        }
        let mut args: Vec<String> = if rng.chance(50) {
            vec!["RL.MULTI".into()]
        } else {
            vec![twin.call.into(), twin.id.clone()]
        };
        args.push(idx.len().to_string());
        for &k in &idx {
            let key = format!("r:{k}");
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            args.push(key);
        }
        args.extend(rest);
        c.cmd(&args);
    }
    keys.sort();
    keys
}

// ---- RL.BULKEXPIRE and RL.SWEEP --------------------------------------------------

/// 4 000 plain strings (written one by one: DEBUG POPULATE is not replicated), a key of
/// every type, a key with a TTL, then TTLs given by RL.BULKEXPIRE, its twin and two
/// sweeps. Returns every key's expiry (more than 1 000 with a TTL, some without).
pub fn bulk_ttls(c: &mut Client) -> BTreeMap<String, i64> {
    let cmds: Vec<Vec<Vec<u8>>> = (0..4_000)
        .map(|i| crate::args!["SET", format!("k:{i}"), i])
        .collect();
    c.pipeline(&cmds);
    every_type(c, "t:");
    c.cmd(&["SET", "ttl", "v", "PX", "800000"]);
    let twins = Twins::load(c);
    c.cmd(&["RL.BULKEXPIRE", "2h", "k:1", "k:2", "t:hash", "ttl", "nope"]);
    c.cmd(&twins.bulkexpire.argv(&["k:3", "t:list"], &["3h"]));
    let functions = Twins::functions(c);
    c.cmd(&functions.bulkexpire.argv(&["k:4", "t:set"], &["4h"]));
    sweep_all(c, "1h", &["MATCH", "k:1*", "COUNT", "300"]);
    sweep_all(c, "30m", &["TYPE", "zset"]);
    let want = expiries(c);
    assert!(want.values().filter(|&&e| e > 0).count() > 1_000);
    assert!(want.values().any(|&e| e == -1));
    want
}

//! Random argument vectors against every command and every twin: each call gets an
//! error or a well-formed reply, the server stays up, and a call that errors writes
//! nothing.

use crate::common;

use common::{Client, Rng, Server, Twins, Value};

/// Tokens that probe parsers: numbers at and beyond the i64 limits, durations,
/// keywords in odd cases, empty and binary strings.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"2",
    b"10",
    b"-1",
    b"-0",
    b"+1",
    b"007",
    b"1.5",
    b"1e3",
    b"0x10",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"9007199254740993",
    b"99999999999999999999999999999",
    b"4102444800000",
    b"4102444800001",
    b"1ms",
    b"1s",
    b"1m",
    b"1h",
    b"1d",
    b"3650d",
    b"3651d",
    b"0s",
    b"1500ms",
    b"1S",
    b"1y",
    b"COST",
    b"cost",
    b"CoSt",
    b"AT",
    b"at",
    b"ALIGN",
    b"align",
    b"LIMIT",
    b"limit",
    b"MATCH",
    b"COUNT",
    b"TYPE",
    b"",
    b" ",
    b"\0",
    b"\r\n",
    b"\xff\xfe",
    b"k",
    b"key",
];

fn token(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(5) {
        // A long or random binary blob.
        let n = rng.range(0, 300) as usize;
        (0..n).map(|_| rng.range(0, 256) as u8).collect()
    } else {
        rng.pick(TOKENS).to_vec()
    }
}

/// One command under fuzz: how to build its call and what a good reply is.
struct Target {
    name: &'static str,
    /// The call: command words, then the fuzzed arguments.
    prefix: fn(&Twins) -> Vec<Vec<u8>>,
    /// A valid argument vector, to be mutated.
    valid: fn(&mut Rng) -> Vec<Vec<u8>>,
    well_formed: fn(&Value) -> bool,
}

fn s(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

/// Random trailing options of a limiter call: COST (0 to 2), ALIGN (fixed windows
/// only) and AT.
fn limiter_options(rng: &mut Rng, v: &mut Vec<Vec<u8>>, align: bool) {
    if rng.chance(50) {
        v.extend([s("COST"), rng.range(0, 3).to_string().into_bytes()]);
    }
    if align && rng.chance(30) {
        v.push(s("ALIGN"));
    }
    if rng.chance(30) {
        v.extend([
            s("AT"),
            rng.range(0, 4_102_444_800_000).to_string().into_bytes(),
        ]);
    }
}

fn valid_fixed(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["k", "key"])),
        rng.range(1, 20).to_string().into_bytes(),
        s(rng.pick::<&str>(&["1s", "1ms", "10", "1h"])),
    ];
    limiter_options(rng, &mut v, true);
    v
}

fn five_ints(v: &Value) -> bool {
    match v {
        Value::Array(items) => {
            items.len() == 5
                && items.iter().all(|i| matches!(i, Value::Int(_)))
                && matches!(items[0], Value::Int(0 | 1))
        }
        _ => false,
    }
}

fn valid_gcra(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["k", "key"])),
        rng.range(0, 20).to_string().into_bytes(),
        rng.range(1, 1000).to_string().into_bytes(),
        s(rng.pick::<&str>(&["1s", "1ms", "10", "1h", "1d"])),
    ];
    limiter_options(rng, &mut v, false);
    if rng.chance(40) {
        v.extend([
            s("DELAY"),
            s(rng.pick::<&str>(&["1ms", "1s", "1h", "3650d"])),
        ]);
    }
    v
}

/// CL.THROTTLE: redis-cell's arguments, on RL.GCRA's keys.
fn valid_throttle(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["k", "key"])),
        rng.range(0, 20).to_string().into_bytes(),
        rng.range(1, 1000).to_string().into_bytes(),
        rng.range(1, 100_000).to_string().into_bytes(),
    ];
    if rng.chance(50) {
        v.push(rng.range(0, 30).to_string().into_bytes());
    }
    v
}

/// RL.GCRA's reply: the five fields, and with DELAY a sixth, the delay in ms (-1 when
/// denied, 0 or more when allowed).
fn gcra_reply(v: &Value) -> bool {
    match v {
        Value::Array(items) if items.len() == 6 => {
            five_ints(&Value::Array(items[..5].to_vec()))
                && match (&items[0], &items[5]) {
                    (Value::Int(0), Value::Int(d)) => *d >= 0,
                    (Value::Int(1), Value::Int(d)) => *d == -1,
                    _ => false,
                }
        }
        _ => five_ints(v),
    }
}

fn valid_multi(rng: &mut Rng) -> Vec<Vec<u8>> {
    let n = rng.range(1, 3);
    let mut v = vec![n.to_string().into_bytes()];
    v.extend((0..n).map(|i| format!("{{m}}{i}").into_bytes()));
    for w in ["1s", "1m", "1h"].iter().take(rng.range(1, 4) as usize) {
        v.extend([s("LIMIT"), s(w), rng.range(1, 20).to_string().into_bytes()]);
    }
    limiter_options(rng, &mut v, true);
    v
}

fn valid_log(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["log", "log2"])),
        rng.range(1, 20).to_string().into_bytes(),
        s(rng.pick::<&str>(&["1s", "1ms", "10", "1h"])),
    ];
    if rng.chance(60) {
        let meta: Vec<u8> = (0..rng.range(0, 20))
            .map(|_| rng.range(0, 256) as u8)
            .collect();
        v.extend([s("META"), meta]);
    }
    limiter_options(rng, &mut v, false);
    v
}

fn valid_lease(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["lease", "lease2"])),
        rng.range(1, 20).to_string().into_bytes(),
        s(rng.pick::<&str>(&["1s", "1ms", "10", "1h"])),
    ];
    if rng.chance(60) {
        let id: Vec<u8> = (0..rng.range(1, 20))
            .map(|_| rng.range(0, 256) as u8)
            .collect();
        v.extend([s("ID"), id]);
    }
    limiter_options(rng, &mut v, false);
    v
}

/// The five integers, then the lease id or nil.
fn lease_reply(v: &Value) -> bool {
    match v {
        Value::Array(items) if items.len() == 6 => {
            five_ints(&Value::Array(items[..5].to_vec()))
                && matches!(&items[5], Value::Nil | Value::Bulk(_))
        }
        _ => false,
    }
}

fn valid_release(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![
        s(rng.pick::<&str>(&["lease", "lease2"])),
        (0..rng.range(1, 20))
            .map(|_| rng.range(0, 256) as u8)
            .collect(),
    ];
    if rng.chance(30) {
        v.extend([
            s("AT"),
            rng.range(0, 4_102_444_800_000).to_string().into_bytes(),
        ]);
    }
    v
}

fn zero_or_one(v: &Value) -> bool {
    matches!(v, Value::Int(0 | 1))
}

fn valid_sliding(rng: &mut Rng) -> Vec<Vec<u8>> {
    let n = rng.range(1, 3);
    let mut v = vec![n.to_string().into_bytes()];
    v.extend((0..n).map(|i| format!("{{s}}{i}").into_bytes()));
    for w in ["1s", "1m", "1h"].iter().take(rng.range(1, 4) as usize) {
        v.extend([s("LIMIT"), s(w), rng.range(1, 20).to_string().into_bytes()]);
    }
    if rng.chance(40) {
        v.extend([s("BUCKETS"), rng.range(1, 101).to_string().into_bytes()]);
    }
    limiter_options(rng, &mut v, false);
    v
}

/// RL.ALL: one to four rules of random kinds on keys of one slot, in random order.
fn valid_all(rng: &mut Rng) -> Vec<Vec<u8>> {
    let kinds = ["FIXED", "GCRA", "MULTI", "SLIDING", "LOG"];
    let n = rng.range(1, 5) as usize;
    let mut v = vec![n.to_string().into_bytes()];
    // Keys of their own per kind, so that a rule meets its own state or none.
    let mut chosen: Vec<usize> = (0..kinds.len()).collect();
    rng.shuffle(&mut chosen);
    chosen.truncate(n);
    v.extend(
        chosen
            .iter()
            .map(|&k| format!("{{a}}{}", kinds[k]).into_bytes()),
    );
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    for pos in order {
        let kind = kinds[chosen[pos]];
        v.extend([s(kind), (pos + 1).to_string().into_bytes()]);
        match kind {
            "FIXED" => {
                v.extend([rng.range(1, 20).to_string().into_bytes(), s("1m")]);
                if rng.chance(30) {
                    v.push(s("ALIGN"));
                }
            }
            "GCRA" => v.extend([
                rng.range(0, 5).to_string().into_bytes(),
                rng.range(1, 10).to_string().into_bytes(),
                s("1s"),
            ]),
            "MULTI" | "SLIDING" => {
                for w in ["1s", "1m"].iter().take(rng.range(1, 3) as usize) {
                    v.extend([s("LIMIT"), s(w), rng.range(1, 20).to_string().into_bytes()]);
                }
            }
            _ => {
                v.extend([rng.range(1, 20).to_string().into_bytes(), s("10s")]);
                if rng.chance(50) {
                    v.extend([s("META"), s("u")]);
                }
            }
        }
    }
    limiter_options(rng, &mut v, false);
    v
}

/// RL.ALL's reply: the five integers, then the binding rule's place and its key.
fn all_reply(v: &Value) -> bool {
    match v {
        Value::Array(items) if items.len() == 7 => {
            five_ints(&Value::Array(items[..5].to_vec()))
                && matches!(items[5], Value::Int(p) if p >= 1)
                && matches!(items[6], Value::Bulk(_))
        }
        _ => false,
    }
}

/// The five integers, then the binding key and its window in ms.
fn multi_reply(v: &Value) -> bool {
    match v {
        Value::Array(items) if items.len() == 7 => {
            five_ints(&Value::Array(items[..5].to_vec()))
                && matches!(items[5], Value::Bulk(_))
                && matches!(items[6], Value::Int(w) if w > 0)
        }
        _ => false,
    }
}

fn valid_bulkexpire(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![s(rng.pick::<&str>(&["1h", "90", "1500ms", "1d"]))];
    v.extend((0..rng.range(1, 4)).map(|_| s(rng.pick::<&str>(&["k", "key", "{m}0"]))));
    v
}

/// The twin takes the keys as KEYS and the duration last, as the published script did.
fn valid_bulkexpire_twin(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = valid_bulkexpire(rng);
    let ttl = v.remove(0);
    v.insert(0, v.len().to_string().into_bytes());
    v.push(ttl);
    v
}

fn valid_sweep(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = vec![s("0"), s(rng.pick::<&str>(&["1h", "90", "1d"]))];
    if rng.chance(40) {
        v.extend([
            s("MATCH"),
            s(rng.pick::<&str>(&["k*", "*", "[a-z]ey", "\\*"])),
        ]);
    }
    if rng.chance(40) {
        v.extend([s("COUNT"), rng.range(1, 6_000).to_string().into_bytes()]);
    }
    if rng.chance(30) {
        v.extend([
            s("TYPE"),
            s(rng.pick::<&str>(&["string", "list", "hash", "nosuchtype"])),
        ]);
    }
    if rng.chance(30) {
        v.push(s("DRYRUN"));
    }
    v
}

fn bulk_strings(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.iter().all(|i| matches!(i, Value::Bulk(_))))
}

fn sweep_reply(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.len() == 3
        && matches!(&items[0], Value::Bulk(c) if !c.is_empty() && c.iter().all(u8::is_ascii_digit))
        && matches!(items[1], Value::Int(n) if n >= 0)
        && matches!(items[2], Value::Int(n) if n >= 0))
}

const TARGETS: &[Target] = &[
    Target {
        name: "RL.FIXED",
        prefix: |_| vec![s("RL.FIXED")],
        valid: valid_fixed,
        well_formed: five_ints,
    },
    Target {
        name: "RL.FIXED twin",
        prefix: |t| vec![s(t.fixed.call), t.fixed.id.clone().into_bytes(), s("1")],
        valid: valid_fixed,
        well_formed: five_ints,
    },
    Target {
        name: "RL.GCRA",
        prefix: |_| vec![s("RL.GCRA")],
        valid: valid_gcra,
        well_formed: gcra_reply,
    },
    Target {
        name: "RL.GCRA twin",
        prefix: |t| vec![s(t.gcra.call), t.gcra.id.clone().into_bytes(), s("1")],
        valid: valid_gcra,
        well_formed: gcra_reply,
    },
    // numkeys is the first fuzzed argument of the command; the twin gets it from EVALSHA.
    Target {
        name: "RL.MULTI",
        prefix: |_| vec![s("RL.MULTI")],
        valid: valid_multi,
        well_formed: multi_reply,
    },
    Target {
        name: "RL.MULTI twin",
        prefix: |t| vec![s(t.multi.call), t.multi.id.clone().into_bytes()],
        valid: valid_multi,
        well_formed: multi_reply,
    },
    Target {
        name: "RL.LOG",
        prefix: |_| vec![s("RL.LOG")],
        valid: valid_log,
        well_formed: five_ints,
    },
    Target {
        name: "RL.LOG twin",
        prefix: |t| vec![s(t.log.call), t.log.id.clone().into_bytes(), s("1")],
        valid: valid_log,
        well_formed: five_ints,
    },
    Target {
        name: "RL.LEASE",
        prefix: |_| vec![s("RL.LEASE")],
        valid: valid_lease,
        well_formed: lease_reply,
    },
    Target {
        name: "RL.LEASE twin",
        prefix: |t| vec![s(t.lease.call), t.lease.id.clone().into_bytes(), s("1")],
        valid: valid_lease,
        well_formed: lease_reply,
    },
    Target {
        name: "RL.RELEASE",
        prefix: |_| vec![s("RL.RELEASE")],
        valid: valid_release,
        well_formed: zero_or_one,
    },
    Target {
        name: "RL.RELEASE twin",
        prefix: |t| vec![s(t.release.call), t.release.id.clone().into_bytes(), s("1")],
        valid: valid_release,
        well_formed: zero_or_one,
    },
    Target {
        name: "RL.SLIDING",
        prefix: |_| vec![s("RL.SLIDING")],
        valid: valid_sliding,
        well_formed: multi_reply,
    },
    Target {
        name: "RL.SLIDING twin",
        prefix: |t| vec![s(t.sliding.call), t.sliding.id.clone().into_bytes()],
        valid: valid_sliding,
        well_formed: multi_reply,
    },
    Target {
        name: "RL.ALL",
        prefix: |_| vec![s("RL.ALL")],
        valid: valid_all,
        well_formed: all_reply,
    },
    Target {
        name: "RL.ALL twin",
        prefix: |t| vec![s(t.all.call), t.all.id.clone().into_bytes()],
        valid: valid_all,
        well_formed: all_reply,
    },
    Target {
        name: "CL.THROTTLE",
        prefix: |_| vec![s("CL.THROTTLE")],
        valid: valid_throttle,
        well_formed: five_ints,
    },
    Target {
        name: "CL.THROTTLE twin",
        prefix: |t| {
            vec![
                s(t.throttle.call),
                t.throttle.id.clone().into_bytes(),
                s("1"),
            ]
        },
        valid: valid_throttle,
        well_formed: five_ints,
    },
    Target {
        name: "RL.BULKEXPIRE",
        prefix: |_| vec![s("RL.BULKEXPIRE")],
        valid: valid_bulkexpire,
        well_formed: bulk_strings,
    },
    Target {
        name: "RL.BULKEXPIRE twin",
        prefix: |t| vec![s(t.bulkexpire.call), t.bulkexpire.id.clone().into_bytes()],
        valid: valid_bulkexpire_twin,
        well_formed: bulk_strings,
    },
    Target {
        name: "RL.SWEEP",
        prefix: |_| vec![s("RL.SWEEP")],
        valid: valid_sweep,
        well_formed: sweep_reply,
    },
];

fn digest(c: &mut Client) -> Value {
    c.cmd(&["DEBUG", "DIGEST"])
}

/// `expired_keys` of `INFO stats`: a key whose time has passed is deleted when any
/// command opens it, an erroring one included; that is the server's doing, not a write.
fn expired_keys(c: &mut Client) -> i64 {
    c.cmd(&["INFO", "stats"])
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

#[test]
fn random_argument_vectors() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    // Keys with millisecond windows would expire between two digests: only writes
    // (and the lazy expiry of a key a call opens, counted in INFO) may change the
    // dataset here.
    assert_eq!(
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        Value::Status("OK".into())
    );
    for seed in Rng::seeds(&[101, 202]) {
        let mut rng = Rng::new(seed);
        for target in TARGETS {
            let (mut errors, mut replies) = (0, 0);
            for i in 0..1_500 {
                // Keep a few keys in play, some holding values of other shapes.
                if rng.chance(2) {
                    let key = rng.pick(&["k", "key"]).to_string();
                    match rng.range(0, 3) {
                        0 => c.cmd(&["SET", &key, "3"]),
                        1 => c.cmd(&["DEL", &key]),
                        _ => c.cmd(&["SET", &key, "junk", "PX", "100000"]),
                    };
                }
                // A twin target calls the function and the script in turn.
                let mut call = (target.prefix)(&forms[i % 2]);
                if rng.chance(50) {
                    // A valid call with up to three tokens replaced, inserted or dropped.
                    let mut args = (target.valid)(&mut rng);
                    for _ in 0..rng.range(0, 4) {
                        let at = rng.range(0, args.len() as u64 + 1) as usize;
                        match rng.range(0, 3) {
                            0 if at < args.len() => args[at] = token(&mut rng),
                            1 => args.insert(at, token(&mut rng)),
                            _ if at < args.len() => {
                                args.remove(at);
                            }
                            _ => {}
                        }
                    }
                    call.extend(args);
                } else {
                    let n = rng.range(0, 9);
                    call.extend((0..n).map(|_| token(&mut rng)));
                }
                let before = (digest(&mut c), expired_keys(&mut c));
                let reply = c.cmd(&call);
                let ctx = format!(
                    "{} seed {seed} call {i}: {call:?} -> {reply:?}",
                    target.name
                );
                if reply.is_err() {
                    errors += 1;
                    let text = reply.err().unwrap_or_default();
                    assert!(!text.contains('\n') && !text.contains('\r'), "{ctx}");
                    if expired_keys(&mut c) == before.1 {
                        assert_eq!(digest(&mut c), before.0, "an error wrote something: {ctx}");
                    }
                } else {
                    replies += 1;
                    assert!((target.well_formed)(&reply), "malformed reply: {ctx}");
                }
                assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()), "{ctx}");
            }
            // The generator must reach both outcomes, or it tests nothing.
            assert!(
                errors > 100 && replies > 10,
                "{}: {errors} errors, {replies} replies",
                target.name
            );
        }
    }
}

/// Calls built to grow state and work: RL.MULTI (native and twin) naming many distinct
/// windows on the same two keys, and RL.SWEEP with long, star-heavy MATCH patterns.
/// State stays within its bound (at most 32 windows a key), the only errors are the
/// bounds' own, and the server keeps answering.
#[test]
fn calls_that_try_to_grow_state_and_work_stay_bounded() {
    let s = Server::start();
    let mut c = s.client();
    let forms = Twins::both(&mut c);
    c.cmd(&["DEBUG", "POPULATE", "2000", "pop", "8"]);
    let at = (common::unix_ms() + 3_600_000).to_string();
    for seed in Rng::seeds(&[303, 404]) {
        let mut rng = Rng::new(seed);
        let (mut allowed, mut full) = (0, 0);
        for i in 0..600 {
            let twin = rng.chance(50);
            let mut call: Vec<String> = if twin {
                let t = &forms[i % 2].multi;
                vec![t.call.into(), t.id.clone()]
            } else {
                vec!["RL.MULTI".into()]
            };
            call.extend(["2".into(), "{g}a".into(), "{g}b".into()]);
            let mut windows: Vec<u64> = (0..rng.range(1, 17)).map(|_| rng.range(1, 400)).collect();
            windows.sort_unstable();
            windows.dedup();
            for w in windows {
                call.extend(["LIMIT".into(), format!("{}s", 600 + w), "1000000".into()]);
            }
            call.extend(["AT".into(), at.clone()]);
            let reply = c.cmd(&call);
            let ctx = format!("seed {seed} call {i}: {reply:?}");
            match reply.err() {
                None => allowed += 1,
                Some(e) if e.contains("would hold more than 32 windows") => full += 1,
                Some(e) => panic!("unexpected error {e}: {ctx}"),
            }
            for key in ["{g}a", "{g}b"] {
                let v = c.cmd(&["GET", key]);
                if let Value::Bulk(v) = v {
                    let windows = v.split(|&b| b == b',').count();
                    assert!(windows <= 32, "{key} holds {windows} windows: {ctx}");
                }
            }
            if rng.chance(20) {
                c.cmd(&["DEL", "{g}a", "{g}b"]);
            }
            // A long pattern of stars and letters: matched, or refused for its length.
            let mut pattern = Vec::new();
            for _ in 0..rng.range(1, 400) {
                let run = rng.range(1, 50) as usize;
                pattern.extend(std::iter::repeat_n(b'*', run));
                pattern.push(*rng.pick(b"ap?["));
            }
            let reply = c.cmd(&[
                b"RL.SWEEP".to_vec(),
                b"0".to_vec(),
                b"1h".to_vec(),
                b"MATCH".to_vec(),
                pattern,
                b"COUNT".to_vec(),
                b"2000".to_vec(),
                b"DRYRUN".to_vec(),
            ]);
            match reply.err() {
                None => assert!(sweep_reply(&reply), "{reply:?}"),
                Some(e) => assert!(e.starts_with("ERR invalid MATCH pattern of "), "{e}"),
            }
            assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()));
        }
        assert!(
            allowed > 50 && full > 50,
            "seed {seed}: {allowed} allowed, {full} refused"
        );
    }
}

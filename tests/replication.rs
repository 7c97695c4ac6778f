//! Replication: the primary sends its replicas the effects of each command (plain
//! `SET ... PXAT` and `PEXPIREAT`), never the command itself, so replicas with and
//! without the module hold the primary's values and absolute expiry times, for every
//! command and twin.

use crate::common;

use common::keyspace::expiries;
use common::workload::{self, snapshot};
use common::{
    at_base, state, states, wait_for_replicas, Client, Rng, Server, Twin, Twins, Value, HOUR,
    SECOND,
};

#[test]
fn every_command_replicas_with_and_without_the_module_hold_the_primarys_state() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::both(&mut c);
    let at = at_base(HOUR, SECOND);
    workload::run(&mut c, &twins, 21, 800, at, true);
    wait_for_replicas(&mut c, 2);
    let want = snapshot(&mut c);
    assert!(
        want.len() > 20,
        "the workload wrote too little: {}",
        want.len()
    );
    // Every key a limiter wrote expires by itself (data:* are the bulk commands' input).
    for (k, (_, _, exp)) in &want {
        if !k.starts_with(b"data:") {
            assert!(*exp > 0, "{:?} has no TTL", String::from_utf8_lossy(k));
        }
    }
    assert_eq!(
        snapshot(&mut with_module.client()),
        want,
        "replica with the module"
    );
    assert_eq!(
        snapshot(&mut without_module.client()),
        want,
        "replica without the module"
    );
}

// ---- RL.FIXED ------------------------------------------------------------------

#[test]
fn fixed_replication_stream_holds_effects_not_commands() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    // The replica has no module: had the primary sent RL.FIXED itself, the replica
    // would fail on it and hold nothing. It holds the counter with the same expiry.
    let r = c.cmd(&["RL.FIXED", "k", "3", "1h"]).ints();
    assert_eq!(r[..3], [0, 3, 2]);
    c.cmd(&["SET", "bare", "3"]);
    let r = c.cmd(&["RL.FIXED", "bare", "3", "1h"]).ints();
    assert_eq!(
        r[0], 1,
        "denied, and the missing TTL is repaired with PEXPIREAT"
    );
    wait_for_replicas(&mut c, 1);
    let mut rc = replica.client();
    for key in ["k", "bare"] {
        assert_eq!(rc.cmd(&["GET", key]), c.cmd(&["GET", key]), "{key}");
        let exp = c.cmd(&["PEXPIRETIME", key]).int();
        assert!(exp > 0);
        assert_eq!(rc.cmd(&["PEXPIRETIME", key]).int(), exp, "{key}");
    }
    assert!(
        !replica.log().contains("unknown command"),
        "{}",
        replica.log()
    );
}

/// Every kind of in-place string write reaches a replica without the module with the
/// primary's value and absolute expiry.
#[test]
fn fixed_in_place_writes_reach_a_replica_without_the_module() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let keys = workload::fixed_in_place_writes(&mut c);
    let on_primary = states(&mut c, &keys);
    wait_for_replicas(&mut c, 1);
    let on_replica = states(&mut replica.client(), &keys);
    assert_eq!(on_replica, on_primary, "replica holds the primary's state");
}

// ---- RL.GCRA -------------------------------------------------------------------

#[test]
fn gcra_replicas_hold_the_primarys_tat_and_expiry() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::both(&mut c);
    let keys: Vec<String> = (0..12).map(|i| format!("user:{i}")).collect();
    workload::gcra_traffic(&mut c, &twins, &keys, 300, 7);
    wait_for_replicas(&mut c, 2);
    let mut r1 = with_module.client();
    let mut r2 = without_module.client();
    // Valkey 9 lists its Lua engine as a module: only ours must be absent.
    let modules = r2.cmd(&["MODULE", "LIST"]);
    let names: Vec<String> = modules
        .array()
        .iter()
        .map(|m| m.array()[1].text())
        .collect();
    assert!(!names.iter().any(|n| n == "ratelimit"), "{names:?}");
    for key in &keys {
        let want = state(&mut c, key);
        let tat: u64 = want.0.as_deref().expect("a TAT").parse().expect("integer");
        assert_eq!(want.1, tat.div_ceil(1000) as i64, "{key}");
        assert_eq!(state(&mut r1, key), want, "replica with the module, {key}");
        assert_eq!(
            state(&mut r2, key),
            want,
            "replica without the module, {key}"
        );
    }
}

// ---- RL.MULTI ------------------------------------------------------------------

#[test]
fn multi_replicas_with_and_without_the_module_hold_the_same_state() {
    let primary = Server::start();
    let with = primary.start_replica(true);
    let without = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::functions(&mut c);
    let keys = workload::multi_calls(&mut c, &twins.multi, 7);
    wait_for_replicas(&mut c, 2);
    let want = states(&mut c, &keys);
    assert!(
        want.iter().filter(|(v, _)| v.is_some()).count() >= 3,
        "{want:?}"
    );
    for (name, replica) in [("with the module", &with), ("without the module", &without)] {
        let mut r = replica.client();
        assert_eq!(states(&mut r, &keys), want, "replica {name}");
        assert_eq!(r.cmd(&["DBSIZE"]), c.cmd(&["DBSIZE"]), "replica {name}");
    }
}

// ---- RL.SLIDING ----------------------------------------------------------------

/// 300 RL.SLIDING calls, native and twin, on 1 to 3 of the keys `s:0..s:5`: random
/// windows (every call also names a 1 h window, so that no key expires while the test
/// runs), `BUCKETS` that change between calls (so stored buckets are moved), costs, peeks
/// and errors, `AT` ahead of the clock (now and then going back) or the server's clock.
/// Returns the keys named, sorted.
fn sliding_calls(c: &mut Client, twin: &Twin, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut now = at_base(2 * HOUR, HOUR);
    let mut keys = Vec::new();
    for _ in 0..300 {
        now += *rng.pick(&[0u64, 1, 90, 700, 1_000, 9_000, 61_000]);
        let at = if rng.chance(10) { now - 5_000 } else { now };
        let mut idx: Vec<usize> = (0..6).collect();
        rng.shuffle(&mut idx);
        idx.truncate(rng.range(1, 4) as usize);
        let mut args: Vec<String> = if rng.chance(50) {
            vec!["RL.SLIDING".into()]
        } else {
            vec![twin.call.into(), twin.id.clone()]
        };
        args.push(idx.len().to_string());
        for &k in &idx {
            let key = format!("s:{k}");
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            args.push(key);
        }
        args.extend(["LIMIT".into(), "1h".into(), "1000".into()]);
        for window in ["1s", "10s", "15s", "1m"] {
            if rng.chance(40) {
                let limit = rng.pick(&["1", "3", "10", "50"]);
                args.extend(["LIMIT".into(), window.into(), limit.to_string()]);
            }
        }
        if rng.chance(50) {
            let buckets = rng.pick(&["1", "4", "5", "10", "20", "100"]);
            args.extend(["BUCKETS".into(), buckets.to_string()]);
        }
        if rng.chance(50) {
            args.extend(["COST".into(), rng.range(0, 5).to_string()]);
        }
        if rng.chance(70) {
            args.extend(["AT".into(), at.to_string()]);
        }
        // Denials and errors write nothing, and nothing reaches the replicas.
        c.cmd(&args);
    }
    keys.sort();
    keys
}

#[test]
fn sliding_replicas_with_and_without_the_module_hold_the_same_state() {
    let primary = Server::start();
    let with = primary.start_replica(true);
    let without = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::load(&mut c);
    let keys = sliding_calls(&mut c, &twins.sliding, 11);
    wait_for_replicas(&mut c, 2);
    let want = states(&mut c, &keys);
    assert!(
        want.iter()
            .filter(|(v, exp)| v.is_some() && *exp > 0)
            .count()
            >= 5,
        "the calls wrote too little: {want:?}"
    );
    for (name, replica) in [("with the module", &with), ("without the module", &without)] {
        let mut r = replica.client();
        assert_eq!(states(&mut r, &keys), want, "replica {name}");
        assert_eq!(r.cmd(&["DBSIZE"]), c.cmd(&["DBSIZE"]), "replica {name}");
    }
    assert!(
        !without.log().contains("unknown command"),
        "{}",
        without.log()
    );
}

// ---- RL.LOG --------------------------------------------------------------------

/// A log key as any client reads it: its type, its members with their scores in
/// order, and its absolute expiry.
fn log_state(c: &mut Client, key: &str) -> (String, Vec<Value>, i64) {
    let kind = c.cmd(&["TYPE", key]).text();
    let entries = match c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]) {
        Value::Array(entries) => entries,
        other => panic!("ZRANGE {key}: {other:?}"),
    };
    (kind, entries, c.cmd(&["PEXPIRETIME", key]).int())
}

/// 300 RL.LOG calls, native and twin, on `log:0..log:4`: random limits and windows of
/// an hour or more (so that no entry leaves while the test runs), `META` values of any
/// bytes, costs, peeks and errors, `AT` ahead of the clock (now and then earlier than
/// entries already recorded) or the server's clock. Returns the keys.
fn log_calls(c: &mut Client, twin: &Twin, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut now = at_base(2 * HOUR, HOUR);
    let keys: Vec<String> = (0..5).map(|i| format!("log:{i}")).collect();
    for _ in 0..300 {
        now += *rng.pick(&[0u64, 1, 250, 1_000, 30_000, 600_000]);
        let at = if rng.chance(10) { now - 60_000 } else { now };
        let key = rng.pick(&keys).clone();
        let mut args: Vec<Vec<u8>> = if rng.chance(50) {
            vec![b"RL.LOG".to_vec(), key.into_bytes()]
        } else {
            vec![
                twin.call.as_bytes().to_vec(),
                twin.id.as_bytes().to_vec(),
                b"1".to_vec(),
                key.into_bytes(),
            ]
        };
        args.push(rng.pick(&["1", "3", "5", "20"]).as_bytes().to_vec());
        args.push(rng.pick(&["1h", "90m", "1d"]).as_bytes().to_vec());
        if rng.chance(80) {
            let meta: Vec<u8> = match rng.range(0, 3) {
                0 => format!("user:{}", rng.range(0, 4)).into_bytes(),
                1 => vec![0, 0xff, b':', b' ', rng.range(0, 256) as u8],
                _ => Vec::new(),
            };
            args.extend([b"META".to_vec(), meta]);
        }
        if rng.chance(50) {
            args.extend([b"COST".to_vec(), rng.range(0, 4).to_string().into_bytes()]);
        }
        if rng.chance(70) {
            args.extend([b"AT".to_vec(), at.to_string().into_bytes()]);
        }
        // Denials and errors write nothing, and nothing reaches the replicas.
        c.cmd(&args);
    }
    keys
}

#[test]
fn log_replicas_with_and_without_the_module_hold_the_same_entries_and_expiry() {
    let primary = Server::start();
    let with = primary.start_replica(true);
    let without = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::functions(&mut c);
    let keys = log_calls(&mut c, &twins.log, 5);
    wait_for_replicas(&mut c, 2);
    let want: Vec<_> = keys.iter().map(|k| log_state(&mut c, k)).collect();
    let entries: usize = want.iter().map(|(_, e, _)| e.len() / 2).sum();
    assert!(
        want.iter()
            .all(|(kind, e, exp)| kind == "zset" && !e.is_empty() && *exp > 0),
        "every log holds entries and expires: {want:?}"
    );
    assert!(entries >= 20, "the calls recorded {entries} entries");
    for (name, replica) in [("with the module", &with), ("without the module", &without)] {
        let mut r = replica.client();
        let got: Vec<_> = keys.iter().map(|k| log_state(&mut r, k)).collect();
        assert_eq!(got, want, "replica {name}");
        assert_eq!(r.cmd(&["DBSIZE"]), c.cmd(&["DBSIZE"]), "replica {name}");
    }
    assert!(
        !without.log().contains("unknown command"),
        "{}",
        without.log()
    );
}

// ---- RL.BULKEXPIRE and RL.SWEEP --------------------------------------------------

#[test]
fn bulk_ttls_reach_replicas_with_and_without_the_module() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    let want = workload::bulk_ttls(&mut c);
    wait_for_replicas(&mut c, 2);
    for (name, r) in [
        ("with module", &with_module),
        ("without module", &without_module),
    ] {
        let mut rc = r.client();
        assert_eq!(expiries(&mut rc), want, "replica {name}");
        let e = rc.cmd(&["RL.BULKEXPIRE", "60", "k:9"]);
        if name == "with module" {
            assert!(e.err().is_some_and(|e| e.starts_with("READONLY")), "{e:?}");
        }
    }
}

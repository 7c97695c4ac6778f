//! Replication, persistence and concurrency: replicas and restarts (AOF after a crash,
//! RDB) hold exactly the primary's values and absolute expiry times, for a workload of
//! every command; concurrent clients never get more than the limit between them.

mod common;

use common::{unix_ms, workload, Client, Rng, Server, Twins, Value};
use std::collections::BTreeMap;

/// Every key with its value and PEXPIRETIME (small keyspaces only).
fn snapshot(c: &mut Client) -> BTreeMap<Vec<u8>, (Value, i64)> {
    let keys = match c.cmd(&["KEYS", "*"]) {
        Value::Array(keys) => keys,
        other => panic!("KEYS: {other:?}"),
    };
    let mut out = BTreeMap::new();
    for k in keys {
        let Value::Bulk(k) = k else {
            panic!("key {k:?}")
        };
        let v = c.cmd(&[b"GET".to_vec(), k.clone()]);
        let exp = c.cmd(&[b"PEXPIRETIME".to_vec(), k.clone()]).int();
        out.insert(k, (v, exp));
    }
    out
}

/// A mixed RL.FIXED workload: server clock and AT, native and twin, allowed, denied,
/// peeks, aligned windows, and counters made without a TTL.
fn workload(c: &mut Client, seed: u64, calls: usize) {
    let twins = Twins::load(c);
    let mut rng = Rng::new(seed);
    let at_base = unix_ms() + 3_600_000;
    for i in 0..calls {
        let key = format!("k{}", rng.range(0, 20));
        if rng.chance(3) {
            // A counter made without a TTL: the next limiter call must give it one.
            c.cmd(&["SET", &key, "1"]);
            let r = c.cmd(&["RL.FIXED", &key, "1", "1m"]).ints();
            assert_eq!(r[0], 1, "a full counter is denied");
            continue;
        }
        let limit = rng.range(1, 6).to_string();
        let window = rng.pick(&["1m", "90", "1h", "2500ms"]).to_string();
        let mut args = vec![limit, window];
        if rng.chance(30) {
            args.extend(["COST".to_string(), rng.range(0, 2).to_string()]);
        }
        if rng.chance(30) {
            args.push("ALIGN".into());
        }
        if rng.chance(50) {
            args.extend(["AT".to_string(), (at_base + i as u64 * 10).to_string()]);
        }
        let mut cmd = if rng.chance(50) {
            vec!["RL.FIXED".to_string(), key]
        } else {
            vec!["EVALSHA".to_string(), twins.fixed.clone(), "1".into(), key]
        };
        cmd.extend(args);
        let r = c.cmd(&cmd);
        assert!(!r.is_err(), "{cmd:?}: {r:?}");
    }
}

fn wait_replicas(c: &mut Client, n: usize) {
    let acked = c.cmd(&["WAIT", &n.to_string(), "10000"]).int();
    assert_eq!(acked, n as i64, "replicas did not acknowledge");
}

#[test]
fn replicas_hold_the_primarys_values_and_expiry_times() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    workload(&mut c, 7, 600);
    wait_replicas(&mut c, 2);
    let want = snapshot(&mut c);
    assert!(want.len() >= 10, "workload wrote too little: {want:?}");
    assert!(
        want.values().all(|(_, exp)| *exp > 0),
        "a limiter key without TTL: {want:?}"
    );
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

#[test]
fn the_replication_stream_holds_effects_not_commands() {
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
    wait_replicas(&mut c, 1);
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

#[test]
fn state_survives_an_aof_restart_after_a_crash() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    workload::run(&mut c, &twins, 11, 600, workload::at_base(), true);
    let before = workload::snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    drop(c);
    s.restart(true); // SIGKILL: only what appendfsync always wrote survives
    let mut c = s.client();
    assert_eq!(workload::snapshot(&mut c), before);
    // And limiting carries on from the restored counters.
    let r = c.cmd(&["RL.FIXED", "fresh", "2", "1h"]).ints();
    assert_eq!(r[..3], [0, 2, 1]);
}

#[test]
fn state_survives_an_rdb_restart() {
    let mut s = Server::builder().config("save", "3600 1").start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    workload::run(&mut c, &twins, 13, 600, workload::at_base(), true);
    let before = workload::snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    drop(c);
    s.restart(true);
    assert_eq!(workload::snapshot(&mut s.client()), before);
}

#[test]
fn concurrent_clients_get_exactly_the_limit() {
    let s = Server::start();
    let twins = Twins::load(&mut s.client());
    let limit = 1_000;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let port = s.port;
            let sha = twins.fixed.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = 0;
                for i in 0..300 {
                    // Half the clients use the twin, on the same key.
                    let r = if t % 2 == 0 {
                        c.cmd(&["RL.FIXED", "hot", "1000", "1h"])
                    } else {
                        c.cmd(&["EVALSHA", &sha, "1", "hot", "1000", "1h"])
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

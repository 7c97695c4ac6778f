//! Replication: the primary sends its replicas the effects of each command (plain
//! `SET ... PXAT` and `PEXPIREAT`), never the command itself, so replicas with and
//! without the module hold the primary's values and absolute expiry times, for every
//! command and twin.

mod common;

use common::keyspace::expiries;
use common::workload::{self, snapshot};
use common::{at_base, state, states, wait_for_replicas, Server, Twins, HOUR, SECOND};

#[test]
fn every_command_replicas_with_and_without_the_module_hold_the_primarys_state() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let without_module = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::load(&mut c);
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
    let twins = Twins::load(&mut c);
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
    let twins = Twins::load(&mut c);
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

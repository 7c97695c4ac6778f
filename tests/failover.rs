//! Failover: after a random workload of every command, a replica promoted with
//! `REPLICAOF NO ONE` keeps limiting from where the primary left off: it answers the
//! same calls with the same replies the primary gives. That replicas hold the
//! primary's state is checked in tests/replication.rs.

mod common;

use common::workload::{self, snapshot};
use common::{at_base, wait_for_replicas, Server, Twins, Value, HOUR, SECOND};

#[test]
fn a_promoted_replica_continues_where_the_primary_left_off() {
    let primary = Server::start();
    let with_module = primary.start_replica(true);
    let mut c = primary.client();
    let twins = Twins::both(&mut c);
    let at = at_base(HOUR, SECOND);
    workload::run(&mut c, &twins, 21, 800, at, true);
    wait_for_replicas(&mut c, 1);
    assert_eq!(
        snapshot(&mut with_module.client()),
        snapshot(&mut c),
        "the replica before its promotion"
    );

    // Promote the replica with the module; the old primary is cut off from it.
    let mut r = with_module.client();
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Value::Status("OK".into())
    );
    // The replica has the library (FUNCTION LOAD is replicated) but not the scripts
    // (SCRIPT LOAD is not): the workload's twins work on it once the scripts are loaded.
    let library = r.cmd(&["FCALL", "rl_fixed", "1", "f", "1", "1h", "COST", "0"]);
    assert_eq!(library.ints()[..3], [0, 1, 1], "{library:?}");
    let scripts = Twins::load(&mut r);
    assert_eq!(scripts.fixed, twins[1].fixed);
    let twins_r = [Twins::functions(&mut r), scripts];
    // The same continuation (every call with AT, so both judge at the same times) on
    // the old primary and on the promoted replica: same replies, same state.
    let later = at + 60_000;
    let on_primary = workload::run(&mut c, &twins, 22, 400, later, false);
    let on_replica = workload::run(&mut r, &twins_r, 22, 400, later, false);
    let limiter_replies = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .filter(|r| matches!(r, Value::Array(a) if a.len() >= 5))
            .cloned()
            .collect()
    };
    assert_eq!(limiter_replies(&on_replica), limiter_replies(&on_primary));
    assert!(
        limiter_replies(&on_primary)
            .iter()
            .any(|r| r.array()[0] == Value::Int(1)),
        "no denial in the continuation"
    );
    drop(primary);
    let promoted = snapshot(&mut r);
    assert!(promoted.len() > 20);
}

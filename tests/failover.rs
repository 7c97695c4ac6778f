//! Failover: after a random workload of every command, a replica promoted with
//! `REPLICAOF NO ONE` keeps limiting from where the primary left off: it answers the
//! same calls with the same replies the primary gives. That replicas hold the
//! primary's state is checked in tests/replication.rs.

use crate::common;

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

/// The limit of the strictness tests: one RL.FIXED key, every call with the same `AT`
/// (nothing refills during a test).
const STRICT_LIMIT: i64 = 400;
const STRICT_CLIENTS: usize = 4;

fn strict_call(at: u64) -> Vec<String> {
    [
        "RL.FIXED",
        "rl:strict",
        &STRICT_LIMIT.to_string(),
        "1h",
        "AT",
        &at.to_string(),
    ]
    .map(str::to_string)
    .to_vec()
}

/// `STRICT_CLIENTS` threads call the limit on `port` until their server stops answering
/// (or the limit is spent); a request counts as granted when its caller got an allowed
/// reply and, with `wait`, a `WAIT 1` on the same connection acknowledged by a replica.
fn strict_clients(
    port: u16,
    at: u64,
    wait: bool,
    granted: &std::sync::Arc<std::sync::atomic::AtomicI64>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..STRICT_CLIENTS)
        .map(|_| {
            let granted = std::sync::Arc::clone(granted);
            std::thread::spawn(move || {
                let Ok(mut c) = common::Client::connect(port) else {
                    return;
                };
                for _ in 0..STRICT_LIMIT {
                    let Ok(reply) = c.try_cmd(&strict_call(at)) else {
                        return; // the server is gone: an unanswered call is no grant
                    };
                    let Value::Array(fields) = reply else {
                        return;
                    };
                    if fields[0] != Value::Int(0) {
                        continue;
                    }
                    if wait {
                        match c.try_cmd(&["WAIT", "1", "10000"]) {
                            Ok(Value::Int(n)) if n >= 1 => {}
                            _ => return, // not acknowledged: not a grant (fail-closed)
                        }
                    }
                    granted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect()
}

/// Wait until `granted` reaches `n` or every client has ended.
fn wait_for_grants(
    granted: &std::sync::atomic::AtomicI64,
    n: i64,
    clients: &[std::thread::JoinHandle<()>],
) {
    common::wait_for_clients(
        || granted.load(std::sync::atomic::Ordering::SeqCst) >= n,
        clients,
    );
}

/// After a primary's death: its stand-in counts at least every grant its callers were
/// given, and lets through only what is left of the limit.
fn check_no_grant_lost(c: &mut common::Client, at: u64, granted: i64) {
    let mut peek = strict_call(at);
    peek.extend(["COST".to_string(), "0".to_string()]);
    let remaining = c.cmd(&peek).array()[2].int();
    assert!(
        STRICT_LIMIT - remaining >= granted,
        "the stand-in counts {} requests, the callers were given {granted}",
        STRICT_LIMIT - remaining
    );
    let mut after = 0;
    for _ in 0..STRICT_LIMIT {
        if c.cmd(&strict_call(at)).array()[0] == Value::Int(0) {
            after += 1;
        }
    }
    assert!(
        granted + after <= STRICT_LIMIT,
        "{granted} grants before the failure and {after} after, limit {STRICT_LIMIT}"
    );
}

#[test]
fn no_grant_acknowledged_by_wait_1_is_given_again_after_the_primary_is_killed() {
    let mut primary = Server::start();
    let replica = primary.start_replica(true);
    let at = at_base(HOUR, SECOND);
    let granted = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let clients = strict_clients(primary.port, at, true, &granted);
    wait_for_grants(&granted, STRICT_LIMIT / 2, &clients);
    primary.stop(true); // kill -9 while the clients call
    for c in clients {
        c.join().expect("a client panicked");
    }
    let granted = granted.load(std::sync::atomic::Ordering::SeqCst);
    assert!(granted > 0);
    let mut r = replica.client();
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Value::Status("OK".into())
    );
    check_no_grant_lost(&mut r, at, granted);
}

#[test]
fn no_grant_answered_with_appendfsync_always_is_given_again_after_a_kill_and_restart() {
    let mut server = Server::builder().aof(true).start();
    let at = at_base(HOUR, SECOND);
    let granted = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let clients = strict_clients(server.port, at, false, &granted);
    wait_for_grants(&granted, STRICT_LIMIT / 2, &clients);
    server.restart(true); // kill -9 while the clients call, then start on the same files
    for c in clients {
        c.join().expect("a client panicked");
    }
    let granted = granted.load(std::sync::atomic::Ordering::SeqCst);
    assert!(granted > 0);
    check_no_grant_lost(&mut server.client(), at, granted);
}

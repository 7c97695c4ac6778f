//! Persistence: an AOF reload (after a crash with `appendfsync always`, or after a
//! shutdown) and an RDB reload restore exactly the values and absolute expiry times
//! the server held, for every command and twin, and limiting carries on from them.

use crate::common;

use common::keyspace::expiries;
use common::workload::{self, snapshot};
use common::{at_base, states, Server, Twins, Value, HOUR, SECOND};

#[test]
fn every_command_survives_an_aof_restart_after_a_crash() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let twins = Twins::both(&mut c);
    workload::run(&mut c, &twins, 11, 600, at_base(HOUR, SECOND), true);
    let before = snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    drop(c);
    s.restart(true); // SIGKILL: only what appendfsync always wrote survives
    let mut c = s.client();
    assert_eq!(snapshot(&mut c), before);
    // And limiting carries on from the restored counters.
    let r = c.cmd(&["RL.FIXED", "fresh", "2", "1h"]).ints();
    assert_eq!(r[..3], [0, 2, 1]);
}

#[test]
fn every_command_survives_an_rdb_restart() {
    let mut s = Server::builder().config("save", "3600 1").start();
    let mut c = s.client();
    let twins = Twins::both(&mut c);
    workload::run(&mut c, &twins, 13, 600, at_base(HOUR, SECOND), true);
    let before = snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    drop(c);
    s.restart(true);
    assert_eq!(snapshot(&mut s.client()), before);
}

// ---- RL.FIXED ------------------------------------------------------------------

/// Every kind of in-place string write survives an RDB reload with its value and
/// absolute expiry.
#[test]
fn fixed_in_place_writes_survive_an_rdb_reload() {
    let s = Server::start();
    let mut c = s.client();
    let keys = workload::fixed_in_place_writes(&mut c);
    let on_primary = states(&mut c, &keys);
    c.cmd(&["DEBUG", "RELOAD"]);
    let reloaded = states(&mut c, &keys);
    assert_eq!(reloaded, on_primary, "an RDB reload holds the same state");
}

// ---- RL.GCRA -------------------------------------------------------------------

#[test]
fn gcra_aof_restart_after_a_crash_keeps_tat_and_expiry() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let twins = Twins::both(&mut c);
    let keys: Vec<String> = (0..8).map(|i| format!("user:{i}")).collect();
    workload::gcra_traffic(&mut c, &twins, &keys, 100, 11);
    let before = states(&mut c, &keys);
    drop(c);
    s.restart(true);
    let after = states(&mut s.client(), &keys);
    assert_eq!(after, before);
}

// ---- RL.MULTI ------------------------------------------------------------------

#[test]
fn multi_aof_restart_after_a_crash_restores_values_and_expiry_times() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let twins = Twins::functions(&mut c);
    let keys = workload::multi_calls(&mut c, &twins.multi, 11);
    let want = states(&mut c, &keys);
    drop(c);
    s.restart(true);
    let mut c = s.client();
    assert_eq!(states(&mut c, &keys), want);
    // And the limiter goes on from the restored state.
    let t = (at_base(2 * HOUR, HOUR) + 10).to_string();
    let r = c.cmd(&["RL.MULTI", "1", "r:0", "LIMIT", "1h", "1000", "AT", &t]);
    let items = r.array();
    assert_eq!(items.len(), 7, "{r:?}");
    assert_eq!(items[0].int(), 0, "{r:?}");
}

// ---- RL.BULKEXPIRE and RL.SWEEP --------------------------------------------------

#[test]
fn bulk_ttls_survive_an_aof_reload() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let want = workload::bulk_ttls(&mut c);
    drop(c);
    s.restart(false);
    let mut c = s.client();
    assert_eq!(expiries(&mut c), want, "after an AOF reload");
}

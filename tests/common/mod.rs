//! Test harness shared by the integration tests: real servers on loopback ports (alone,
//! as replicas, or as a Cluster), a small RESP client, the Lua twins, the clock and `AT`
//! bases, a seeded random generator, the workloads of the replication, persistence and
//! failover tests, and readers of a server's keys.
// Each test binary uses a part of the harness.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod keyspace;
pub mod resp;
pub mod rng;
pub mod server;
pub mod side;
pub mod time;
pub mod twins;
pub mod workload;

pub use cluster::{Cluster, ClusterClient};
pub use resp::{Client, Value};
pub use rng::Rng;
pub use server::{sweep_tool_path, Server};
pub use side::Side;
pub use time::{at_base, unix_ms, unix_us, HOUR, MINUTE, SECOND};
pub use twins::{on_every_side, Form, Twin, Twins};

/// A string key's value (`None`: missing) and its `PEXPIRETIME`.
pub fn state(c: &mut Client, key: &str) -> (Option<String>, i64) {
    let v = match c.cmd(&["GET", key]) {
        Value::Nil => None,
        v => Some(v.text()),
    };
    (v, c.cmd(&["PEXPIRETIME", key]).int())
}

/// [`state`] of each key, in order.
pub fn states<K: AsRef<str>>(c: &mut Client, keys: &[K]) -> Vec<(Option<String>, i64)> {
    keys.iter().map(|k| state(c, k.as_ref())).collect()
}

/// `WAIT` until `n` replicas have acknowledged every write sent on `c` (at most 10 s).
pub fn wait_for_replicas(c: &mut Client, n: usize) {
    let acked = c.cmd(&["WAIT", &n.to_string(), "10000"]).int();
    assert_eq!(acked, n as i64, "replicas did not acknowledge");
}

/// `INFO ratelimit` fields as (name, value).
pub fn info_fields(c: &mut Client) -> Vec<(String, i64)> {
    c.cmd(&["INFO", "ratelimit"])
        .text()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

/// The names of the modules a server has loaded (`MODULE LIST`).
pub fn module_names(c: &mut Client) -> Vec<String> {
    c.cmd(&["MODULE", "LIST"])
        .array()
        .iter()
        .map(|m| m.array()[1].text())
        .collect()
}

/// Wait until `reached()` holds or every client thread has ended (each is bounded in
/// requests, and a stalled one fails through its client's read timeout): whether it
/// was reached. No clock is read: how long it takes is the machine's business.
pub fn wait_for_clients<T>(
    reached: impl Fn() -> bool,
    clients: &[std::thread::JoinHandle<T>],
) -> bool {
    loop {
        if reached() {
            return true;
        }
        if clients.iter().all(|c| c.is_finished()) {
            return reached();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

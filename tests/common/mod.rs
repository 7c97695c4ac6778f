//! Test harness shared by the integration tests: real servers on loopback ports (alone,
//! as replicas, or as a Cluster), a small RESP client, the Lua twins, the clock and `AT`
//! bases, a seeded random generator, the workloads of the replication, persistence and
//! failover tests, a model of string keys for the differential tests, and readers of a
//! server's keys. Compiled once, in the one test binary (`tests/main.rs`), whose files
//! take it with `use crate::common;`.

pub mod cluster;
pub mod keyspace;
pub mod model;
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
pub use twins::{every_side, on_every_side, Twin, Twins};

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

/// How many calls of `command` (lower case: `zadd`, `rl.lease`) a server has executed,
/// from `INFO commandstats` (0: none).
pub fn command_calls(c: &mut Client, command: &str) -> i64 {
    c.cmd(&["INFO", "commandstats"])
        .text()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A limiter reply's first field: 0 allowed, 1 denied (an error reply panics).
pub fn limited(v: &Value) -> i64 {
    match v {
        Value::Array(fields) => fields[0].int(),
        other => panic!("not a limiter reply: {other:?}"),
    }
}

/// A member of an RL.LOG key, as the command writes it: `seq:cost:meta`.
pub fn log_member(seq: u64, cost: u64, meta: &str) -> String {
    format!("{seq:016}:{cost}:{meta}")
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

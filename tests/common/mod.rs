//! Test harness shared by the integration tests: real servers on loopback ports (alone,
//! as replicas, or as a Cluster), a small RESP client, the Lua twins, and a seeded
//! random generator.
// Each test binary uses a part of the harness.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod resp;
pub mod rng;
pub mod server;
pub mod time;
pub mod twins;
pub mod workload;

pub use cluster::{Cluster, ClusterClient};
pub use resp::{Client, Value};
pub use rng::Rng;
pub use server::{sweep_tool_path, Server};
pub use time::{at_base, unix_ms, unix_us, HOUR, MINUTE, SECOND};
pub use twins::Twins;

/// A string key's value (`None`: missing) and its `PEXPIRETIME`.
pub fn state(c: &mut Client, key: &str) -> (Option<String>, i64) {
    let v = match c.cmd(&["GET", key]) {
        Value::Nil => None,
        v => Some(v.text()),
    };
    (v, c.cmd(&["PEXPIRETIME", key]).int())
}

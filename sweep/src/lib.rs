//! `ratelimit-sweep`: the seed 001 job (give a TTL to every key that has none) done
//! with RL.SWEEP, one bounded server-side chunk per call, on one server or on every
//! primary of a Cluster, with a progress display, a rate limit of its own and a dry
//! run. The binary is `src/main.rs`; the parts here are unit-tested.

pub mod cli;
pub mod cluster;
pub mod node;
pub mod progress;
pub mod run;
pub mod terminal;
pub mod url;

//! `ratelimit-sweep`: the bulk-TTL job (give a TTL to every key that has none) done
//! with RL.SWEEP, one bounded server-side chunk per call, in every database that has
//! keys, on one server or on every primary of a Cluster, with a progress display, a
//! rate limit of its own, a dry run, and a summary of what was done even when Ctrl-C
//! stops it. Passwords come from the URL, `REDISCLI_AUTH` or a file, and are never
//! printed. The binary is `src/main.rs`; the parts here are unit-tested; the user
//! reference is `docs/sweep-tool.md`.

pub mod cli;
pub mod cluster;
pub mod node;
pub mod progress;
pub mod run;
pub mod signal;
pub mod terminal;
pub mod url;

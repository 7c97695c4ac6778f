//! The integration tests of the module: one test binary, one module per file of
//! `tests/`, each starting the real servers it talks to through the harness
//! (`tests/common/`), which is compiled once for all of them.
//!
//! The tests of every file run in parallel threads of this one process: a test sets
//! no environment variable, changes no working directory, and names whatever it creates
//! (temporary directories, keys of a shared server) so that no other test can take it.
//! `cargo test -p redis-ratelimit --test it gcra::` runs one file's tests.

mod common;

mod all;
mod bounds;
mod bulk;
mod cluster_ops;
mod command_docs;
mod contributing;
mod docs;
mod failover;
mod fixed;
mod fuzz;
mod gcra;
mod harness;
mod lease;
mod load;
mod log;
mod memory;
mod module;
mod multi;
mod persistence;
mod replication;
mod security;
mod server_log;
mod settle;
mod setup;
mod sliding;
mod sweep_tool;
mod throttle;
mod twins;
mod upto;

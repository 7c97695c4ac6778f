//! The pure part of redis-ratelimit: argument parsing, units, errors and the limiter
//! algorithms. Nothing here talks to Redis or reads a clock: callers pass the stored
//! state and the time in, and get a decision and the state to write back.
//!
//! ```text
//! parse/      reading arguments: integers, options, durations; the error type
//! call/       the interface every limiter implements, a call and the one loop that
//!             settles it (judge every key, decide all or nothing, write)
//! limiters/   one file per algorithm, listed once in limiters/mod.rs with each
//!             command's parser
//! commands.rs every command's entry: name, syntax, docs, keys, flags, ACL, INFO
//! bulk/       the bulk TTL commands (RL.BULKEXPIRE, RL.SWEEP) and their patterns
//! limits.rs   every numeric bound, in one place (the twins mirror it)
//! units.rs    microseconds and Unix milliseconds
//! ```

// An `Error` has drop glue (some variants own bytes): `ok_or(Error::...)` builds one
// and drops it on every call that succeeds, measurably so on the command path, so the
// error is built only when needed (`ok_or_else`), whatever clippy takes it for.
#![allow(clippy::unnecessary_lazy_evaluations)]
pub mod bulk;
pub mod call;
pub mod commands;
pub mod error;
pub mod limiters;
pub mod limits;
pub mod parse;
pub mod units;

pub use call::state::{Decided, Effect, StateName, Stored};
pub use call::verdict::{Decision, Verdict};
pub use error::{Error, Result};
pub use units::{Micros, UnixMillis};

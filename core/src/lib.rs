//! The pure part of redis-ratelimit: argument parsing, units, errors and the limiter
//! algorithms. Nothing here talks to Redis or reads a clock: callers pass the stored
//! state and the time in, and get a decision and the state to write back.

pub mod args;
pub mod bulk;
pub mod call;
pub mod commands;
pub mod duration;
pub mod error;
pub mod fixed;
pub mod gcra;
pub mod glob;
pub mod limiter;
pub mod limits;
pub mod log;
pub mod multi;
pub mod multikey;
pub mod sliding;
pub mod state;
pub mod throttle;
pub mod units;
pub mod verdict;

pub use error::{Error, Result};
pub use state::{Effect, Outcome, StateKind, Stored};
pub use units::{Micros, UnixMillis};
pub use verdict::{Decision, Verdict};

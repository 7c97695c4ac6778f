//! One file per command, each the same steps: parse the arguments (pure, in core),
//! read the state of its keys, decide (pure, in core), write the effects, reply.
//! A body returns what to count in `INFO ratelimit`, or the error to reply with.

pub mod bulkexpire;
pub mod fixed;
pub mod gcra;
pub mod log;
pub mod multi;
mod multikey;
pub mod sliding;
pub mod sweep;
pub mod throttle;

//! The commands' bodies. Every limiter command takes one path (`limit.rs`): parse the
//! call (pure, in core), read its keys, judge each with its rule (pure, in core),
//! decide, write, reply. The bulk TTL commands and RL.RELEASE have their own. A body returns what to
//! count in `INFO ratelimit`, or the error to reply with.

pub mod bulkexpire;
pub mod limit;
pub mod release;
pub mod sweep;

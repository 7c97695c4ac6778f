//! One file per command: parse (pure), load state, decide (pure), write effects, reply.

pub mod bulkexpire;
pub mod fixed;
pub mod gcra;
pub mod multi;
pub mod sweep;

//! One file per command: parse (pure), load state, decide (pure), write effects, reply.

pub mod fixed;
pub mod gcra;
pub mod multi;

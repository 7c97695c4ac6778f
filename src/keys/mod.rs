//! Opening, reading and writing keys: a limiter's key as its state is kept
//! (`limiter.rs`: a string, `string.rs`, or a sorted set, `sorted_set.rs`), keys of any
//! type for the bulk TTL commands (`any.rs`), and the open-key handle they share
//! (`open.rs`).

pub mod any;
pub mod limiter;
pub mod open;
pub mod sorted_set;
pub mod string;

//! Reading a command's arguments: integers and options (`args`), their keywords
//! (`keyword`) and durations (`duration`). Their errors are the crate's
//! ([`crate::error`]).

pub mod args;
pub mod duration;
pub mod keyword;

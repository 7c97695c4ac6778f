//! Reading a command's arguments: integers and options (`args`), their keywords
//! (`keyword`), durations (`duration`), and the one error type whose text is the error
//! reply (`error`).

pub mod args;
pub mod duration;
pub mod error;
pub mod keyword;

//! The RESP client of the tests: the workspace's `ratelimit-resp` crate (shared with
//! the `ratelimit-sweep` tool), plus the `args!` helper.

pub use ratelimit_resp::{Client, Value};

/// Build an argument vector from anything printable: `args!["RL.FIXED", key, 10, "1s"]`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        vec![$(format!("{}", $a).into_bytes()),*] as Vec<Vec<u8>>
    };
}

//! The Lua twins, loaded as the README says: `lua/prelude.lua` followed by the
//! command's file.

use super::{Client, Value};
use std::path::Path;

pub struct Twins {
    pub fixed: String,
    pub gcra: String,
    pub multi: String,
    pub sliding: String,
    pub log: String,
    pub all: String,
    pub bulkexpire: String,
    pub throttle: String,
}

/// The full text of a twin script.
pub fn script(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let prelude = std::fs::read_to_string(dir.join("prelude.lua")).expect("lua/prelude.lua");
    let body =
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("lua/{name}: {e}"));
    format!("{prelude}\n{body}")
}

impl Twins {
    /// Load every twin into the server behind `c`, keeping their SHA1s.
    pub fn load(c: &mut Client) -> Twins {
        let mut load = |name: &str| match c.cmd(&["SCRIPT", "LOAD", &script(name)]) {
            Value::Bulk(sha) => String::from_utf8(sha).expect("sha"),
            other => panic!("SCRIPT LOAD {name}: {other:?}"),
        };
        Twins {
            fixed: load("fixed.lua"),
            gcra: load("gcra.lua"),
            multi: load("multi.lua"),
            sliding: load("sliding.lua"),
            log: load("log.lua"),
            all: load("all.lua"),
            bulkexpire: load("bulkexpire.lua"),
            throttle: load("throttle.lua"),
        }
    }
}

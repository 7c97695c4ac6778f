//! The Lua twins in both their forms: the Functions library `lua/ratelimit.lua`
//! (`FCALL rl_fixed ...`) and the self-contained scripts `lua/scripts/<function>.lua`
//! (`EVALSHA sha ...`). A call of either is `<call> <id> numkeys key [key ...] arg ...`.

use super::{Client, Value};
use std::path::Path;

/// The form of a twin: how it is loaded and called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A function of the library, `FCALL name`.
    Function,
    /// A script of its own, `EVALSHA sha`.
    Script,
}

/// One command's twin in one form: `call` (`FCALL` or `EVALSHA`) and `id` (the
/// function's name or the script's SHA1) start its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Twin {
    pub call: &'static str,
    pub id: String,
}

impl Twin {
    pub fn form(&self) -> Form {
        if self.call == "FCALL" {
            Form::Function
        } else {
            Form::Script
        }
    }

    /// "function" or "script", for messages.
    pub fn name(&self) -> &'static str {
        match self.form() {
            Form::Function => "function",
            Form::Script => "script",
        }
    }

    /// The call: `<call> <id> numkeys keys... args...`.
    pub fn argv<K: AsRef<str>, A: AsRef<str>>(&self, keys: &[K], args: &[A]) -> Vec<String> {
        let mut v = vec![
            self.call.to_string(),
            self.id.clone(),
            keys.len().to_string(),
        ];
        v.extend(keys.iter().map(|k| k.as_ref().to_string()));
        v.extend(args.iter().map(|a| a.as_ref().to_string()));
        v
    }
}

pub struct Twins {
    pub form: Form,
    pub fixed: Twin,
    pub gcra: Twin,
    pub multi: Twin,
    pub sliding: Twin,
    pub log: Twin,
    pub lease: Twin,
    pub release: Twin,
    pub all: Twin,
    pub bulkexpire: Twin,
    pub throttle: Twin,
}

/// The functions, in the order of the fields of `Twins`.
pub const FUNCTIONS: [&str; 10] = [
    "rl_fixed",
    "rl_gcra",
    "rl_multi",
    "rl_sliding",
    "rl_log",
    "rl_lease",
    "rl_release",
    "rl_all",
    "rl_bulkexpire",
    "cl_throttle",
];

/// The text of the library.
pub fn library() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/ratelimit.lua");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of a function's script (`rl_fixed`...).
pub fn script(function: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("lua/scripts")
        .join(format!("{function}.lua"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Load (or replace) the library on the server behind `c`.
pub fn load_library(c: &mut Client) {
    match c.cmd(&["FUNCTION", "LOAD", "REPLACE", &library()]) {
        Value::Bulk(name) if name == b"ratelimit" => {}
        other => panic!("FUNCTION LOAD REPLACE lua/ratelimit.lua: {other:?}"),
    }
}

impl Twins {
    /// Every twin as a script (`SCRIPT LOAD`, called with `EVALSHA`).
    pub fn load(c: &mut Client) -> Twins {
        Twins::load_form(c, Form::Script)
    }

    /// Every twin as a function of the library (`FUNCTION LOAD REPLACE`, `FCALL`).
    pub fn functions(c: &mut Client) -> Twins {
        Twins::load_form(c, Form::Function)
    }

    /// Both forms: the functions, then the scripts.
    pub fn both(c: &mut Client) -> [Twins; 2] {
        [Twins::functions(c), Twins::load(c)]
    }

    pub fn load_form(c: &mut Client, form: Form) -> Twins {
        if form == Form::Function {
            load_library(c);
        }
        let mut load = |function: &str| match form {
            Form::Function => Twin {
                call: "FCALL",
                id: function.to_string(),
            },
            Form::Script => match c.cmd(&["SCRIPT", "LOAD", &script(function)]) {
                Value::Bulk(sha) => Twin {
                    call: "EVALSHA",
                    id: String::from_utf8(sha).expect("sha"),
                },
                other => panic!("SCRIPT LOAD {function}: {other:?}"),
            },
        };
        Twins {
            form,
            fixed: load("rl_fixed"),
            gcra: load("rl_gcra"),
            multi: load("rl_multi"),
            sliding: load("rl_sliding"),
            log: load("rl_log"),
            lease: load("rl_lease"),
            release: load("rl_release"),
            all: load("rl_all"),
            bulkexpire: load("rl_bulkexpire"),
            throttle: load("cl_throttle"),
        }
    }
}

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

/// How many keys a command line names, and where they start: `(first, count)`.
fn keys_of(words: &[&str]) -> (usize, usize) {
    let numkeys = |w: &[&str]| w.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    match words.first().map(|c| c.to_ascii_uppercase()).as_deref() {
        Some("RL.MULTI" | "RL.SLIDING" | "RL.ALL") => (2, numkeys(words)),
        _ => (1, 1),
    }
}

/// A limiter command line (`RL.ALL 2 a b ...`, `RL.LEASE k ...`) as the call of its
/// twin in `twins`' form, with the same keys and arguments.
pub fn twin_line(twins: &Twins, words: &[&str]) -> Vec<String> {
    let command = words
        .first()
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or_default();
    let twin = match command.as_str() {
        "RL.FIXED" => &twins.fixed,
        "RL.GCRA" => &twins.gcra,
        "RL.MULTI" => &twins.multi,
        "RL.SLIDING" => &twins.sliding,
        "RL.LOG" => &twins.log,
        "RL.LEASE" => &twins.lease,
        "RL.RELEASE" => &twins.release,
        "RL.ALL" => &twins.all,
        "CL.THROTTLE" => &twins.throttle,
        other => panic!("no twin of {other}"),
    };
    let (first, count) = keys_of(words);
    let keys = &words[first..first + count];
    twin.argv(keys, &words[first + count..])
}

/// The command, then its function, then its script: `(name, argv)` of a call of
/// `command` on `keys` with `args` (the keys as the command takes them: RL.LOG's one
/// key, RL.MULTI's, RL.SLIDING's and RL.ALL's after numkeys).
pub fn every_side(
    c: &mut Client,
    command: &str,
    keys: &[&str],
    args: &[&str],
) -> Vec<(String, Vec<String>)> {
    let [functions, scripts] = Twins::both(c);
    let mut native = vec![command.to_string()];
    if command != "RL.LOG" {
        native.push(keys.len().to_string());
    }
    native.extend(keys.iter().map(|k| k.to_string()));
    native.extend(args.iter().map(|a| a.to_string()));
    let twin = |t: &Twins| match command {
        "RL.LOG" => t.log.argv(keys, args),
        "RL.MULTI" => t.multi.argv(keys, args),
        "RL.SLIDING" => t.sliding.argv(keys, args),
        "RL.ALL" => t.all.argv(keys, args),
        other => panic!("no twin for {other}"),
    };
    vec![
        ("native".to_string(), native),
        ("function".to_string(), twin(&functions)),
        ("script".to_string(), twin(&scripts)),
    ]
}

/// Run `lines` (commands whose key names start with `@`) on the command, on its
/// function and on its script, each side on keys of its own (`@` becomes `{n}`, `{f}`
/// or `{s}`), and return each side's replies with the side's prefix put back to `@`:
/// the three lists must be equal. Lines that are not limiters (`ZADD`, `DEL`) run as
/// they are on each side's keys.
pub fn on_every_side(c: &mut Client, lines: &[&str]) -> [Vec<String>; 3] {
    let [functions, scripts] = Twins::both(c);
    let mut sides: [Vec<String>; 3] = Default::default();
    for (n, (side, prefix)) in [
        (None, "{n}"),
        (Some(&functions), "{f}"),
        (Some(&scripts), "{s}"),
    ]
    .into_iter()
    .enumerate()
    {
        for line in lines {
            let line = line.replace('@', prefix);
            let words: Vec<&str> = line.split_whitespace().collect();
            let limiter = words.first().is_some_and(|c| {
                c.to_ascii_uppercase().starts_with("RL.") || c.eq_ignore_ascii_case("CL.THROTTLE")
            });
            let argv = match side {
                Some(twins) if limiter => twin_line(twins, &words),
                _ => words.iter().map(|w| w.to_string()).collect(),
            };
            let reply = show(&c.cmd(&argv)).replace(prefix, "@");
            sides[n].push(format!("{} => {reply}", line.replace(prefix, "@")));
        }
    }
    sides
}

/// A reply as text: integers, strings, nil, `error ...`, `[a, b]`.
pub fn show(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Status(s) => s.clone(),
        Value::Error(e) => format!("error {e}"),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
    }
}

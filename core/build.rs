//! Finds the limiters: every file of `src/limiters/` that declares its kind
//! (`pub static KIND: Kind = Kind { keyword: "...", ..., syntax: "...", ... }`) is a
//! limiter, whose rule type is named after the file (`fixed.rs`: `Fixed`), with a
//! lifetime when the file declares `pub struct Name<'a>`, and whose command entry is
//! its `pub const COMMAND: Command` when it has one (a rule of RL.ALL alone, as `BAN`,
//! has none). From them it writes, into `OUT_DIR`:
//!
//! - `limiters.rs` (included by `src/limiters/mod.rs`): each limiter's module and the
//!   one list of limiters, `limiters! { Fixed(fixed::Fixed), ... }`, in file-name order;
//!   and `limiter_commands!`, the limiters that have a command, for the module's glue;
//! - `commands.rs` (included by `src/commands.rs`): the command `Id`s and `TABLE`, the
//!   limiters' commands first, then the others; `RULES`, each rule's keyword and syntax
//!   line, read from the files (a unit test checks them against the kinds).
//!
//! So a new limiter is one file: nothing lists it by hand.

use std::fmt::Write as _;
use std::path::Path;

/// The commands that are not a limiter's, after the limiters' in `TABLE`: (their
/// `Id`, the const of `src/commands.rs` that holds their entry).
const OTHERS: [(&str, &str); 5] = [
    ("All", "ALL"),
    ("BulkExpire", "BULK_EXPIRE"),
    ("Sweep", "SWEEP"),
    ("Throttle", "THROTTLE"),
    ("Release", "RELEASE"),
];

struct Limiter {
    module: String,
    variant: String,
    lifetime: bool,
    command: bool,
    keyword: String,
    syntax: String,
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/limiters");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let mut limiters = Vec::new();
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let Some(kind) = text.split("pub static KIND: Kind = Kind {").nth(1) else {
            continue;
        };
        let kind = kind.split("};").next().unwrap_or("");
        let module = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let variant = camel(&module);
        let field = |name: &str| -> String {
            kind.split(&format!("{name}: \""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("{}: its KIND has no {name}", path.display()))
                .to_string()
        };
        limiters.push(Limiter {
            lifetime: text.contains(&format!("pub struct {variant}<'a>")),
            command: text.contains("pub const COMMAND: Command"),
            keyword: field("keyword"),
            syntax: field("syntax"),
            module,
            variant,
        });
    }
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let out = Path::new(&out);
    write(&out.join("limiters.rs"), &limiters_rs(&dir, &limiters));
    write(&out.join("commands.rs"), &commands_rs(&limiters));
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// `token_bucket` -> `TokenBucket`.
fn camel(module: &str) -> String {
    module
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn limiters_rs(dir: &Path, limiters: &[Limiter]) -> String {
    let mut s = String::from("// Written by core/build.rs from the files of src/limiters/.\n\n");
    for l in limiters {
        let path = dir.join(format!("{}.rs", l.module));
        let _ = writeln!(
            s,
            "#[path = {:?}]\npub mod {};",
            path.display().to_string(),
            l.module
        );
    }
    s.push_str("\nlimiters! {\n");
    for l in limiters {
        let life = if l.lifetime { "<'a>" } else { "" };
        let _ = writeln!(s, "    {}({}::{}{}),", l.variant, l.module, l.variant, life);
    }
    s.push_str("}\n\n");
    s.push_str(
        "/// Calls `$m! { Variant module, ... }` with every limiter that has a command of its\n\
         /// own, in the order of `TABLE`.\n#[macro_export]\nmacro_rules! limiter_commands {\n    ($m:ident) => {\n        $m! {",
    );
    let commands: Vec<String> = limiters
        .iter()
        .filter(|l| l.command)
        .map(|l| format!("{} {}", l.variant, l.module))
        .collect();
    s.push_str(&commands.join(", "));
    s.push_str("}\n    };\n}\n");
    s
}

fn commands_rs(limiters: &[Limiter]) -> String {
    let mut s = String::from("// Written by core/build.rs from the files of src/limiters/.\n\n");
    let with_command: Vec<&Limiter> = limiters.iter().filter(|l| l.command).collect();
    s.push_str("/// Each command, by its place in [`TABLE`].\n");
    s.push_str("#[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub enum Id {\n");
    for l in &with_command {
        let _ = writeln!(s, "    {},", l.variant);
    }
    for (id, _) in OTHERS {
        let _ = writeln!(s, "    {id},");
    }
    s.push_str("}\n\n");
    let n = with_command.len() + OTHERS.len();
    let _ = writeln!(
        s,
        "/// Every command: the limiters' (each declared in its own file), then the others.\npub const TABLE: [Command; {n}] = ["
    );
    for l in &with_command {
        let _ = writeln!(s, "    crate::limiters::{}::COMMAND,", l.module);
    }
    for (_, name) in OTHERS {
        let _ = writeln!(s, "    {name},");
    }
    s.push_str("];\n\n");
    s.push_str("/// RL.ALL's rules: each limiter's keyword and its rule's syntax line.\npub const RULES: &[(&str, &str)] = &[\n");
    for l in limiters {
        let _ = writeln!(s, "    ({:?}, {:?}),", l.keyword, l.syntax);
    }
    s.push_str("];\n\n");
    let summary: Vec<&str> = limiters.iter().map(|l| l.syntax.as_str()).collect();
    let _ = writeln!(
        s,
        "/// What COMMAND DOCS says of RL.ALL's rules: every rule's syntax.\npub const RULE_SUMMARY: &str = {:?};",
        format!("{}; i: the key's position, from 1", summary.join(" | "))
    );
    s
}

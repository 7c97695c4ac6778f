//! `COMMAND DOCS`: every command of the module has a summary, a complexity, the version
//! that added it and its arguments; the arguments, rendered as `redis-cli` renders them
//! for its hints and `HELP`, are exactly the syntax line of the command's page in docs/;
//! and the real `redis-cli` shows that line.

use crate::common;

use common::{Server, Value};
use std::path::Path;
use std::process::Command;

/// A RESP2 map reply (a flat array of names and values) as pairs.
fn pairs(v: &Value) -> Vec<(String, &Value)> {
    v.array()
        .chunks(2)
        .map(|kv| (kv[0].text(), &kv[1]))
        .collect()
}

fn field<'a>(map: &[(String, &'a Value)], name: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
}

/// The module's commands, as the server lists them.
fn module_commands(c: &mut common::Client) -> Vec<String> {
    let mut names: Vec<String> = c
        .cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"])
        .array()
        .iter()
        .map(Value::text)
        .collect();
    names.sort();
    names
}

/// `COMMAND DOCS name`: its fields.
fn docs_of(c: &mut common::Client, name: &str) -> Vec<(String, Value)> {
    let reply = c.cmd(&["COMMAND", "DOCS", name]);
    let entries = reply.array();
    assert_eq!(entries.len(), 2, "COMMAND DOCS {name}: {reply:?}");
    pairs(&entries[1])
        .into_iter()
        .map(|(k, v)| (k, v.clone()))
        .collect()
}

/// One argument as `redis-cli` writes it in its hints and `HELP` (`cliAddArgument`):
/// `[` `]` around optional parts, the token before the value, `x [x ...]` for repeated
/// ones (with the token again when each repetition takes it), `a|b` for one-ofs.
fn render_arg(arg: &Value) -> String {
    let map = pairs(arg);
    let text = |name: &str| field(&map, name).map(Value::text);
    let name = text("name").unwrap_or_default();
    let kind = text("type").unwrap_or_default();
    let flags: Vec<String> = field(&map, "flags")
        .map(|f| f.array().iter().map(Value::text).collect())
        .unwrap_or_default();
    let has = |flag: &str| flags.iter().any(|f| f == flag);
    let repeat = match kind.as_str() {
        "oneof" => render_args(field(&map, "arguments").expect("oneof arguments"), "|"),
        "block" => render_args(field(&map, "arguments").expect("block arguments"), " "),
        "pure-token" => String::new(),
        _ => name,
    };
    let mut token = text("token").unwrap_or_default();
    if !token.is_empty() && kind != "pure-token" {
        token.push(' ');
    }
    let mut out = String::new();
    if has("optional") {
        out.push('[');
    }
    out.push_str(&token);
    out.push_str(&repeat);
    if has("multiple") {
        out.push_str(" [");
        if has("multiple_token") {
            out.push_str(&token);
        }
        out.push_str(&repeat);
        out.push_str(" ...]");
    }
    if has("optional") {
        out.push(']');
    }
    out
}

fn render_args(args: &Value, separator: &str) -> String {
    args.array()
        .iter()
        .map(render_arg)
        .collect::<Vec<_>>()
        .join(separator)
}

/// Every line of a ```text block in docs/*.md that starts with `name ` (the syntax line
/// each command page opens with), with where it is.
fn syntax_lines(name: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a page");
        let mut in_text = false;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start();
            if let Some(info) = fence.strip_prefix("```") {
                in_text = !in_text && info.trim() == "text";
                continue;
            }
            if in_text && line.starts_with(&format!("{name} ")) {
                let at = format!(
                    "{}:{}",
                    path.strip_prefix(root).unwrap_or(&path).display(),
                    i + 1
                );
                found.push((at, line.trim_end().to_string()));
            }
        }
    }
    found
}

#[test]
fn every_command_has_a_summary_and_its_arguments() {
    let server = Server::start();
    let mut c = server.client();
    let names = module_commands(&mut c);
    assert!(
        names.len() >= 7 && names.iter().any(|n| n.eq_ignore_ascii_case("rl.gcra")),
        "the module's commands: {names:?}"
    );
    let mut problems = Vec::new();
    for name in &names {
        let docs = docs_of(&mut c, name);
        let text = |f: &str| {
            docs.iter()
                .find(|(k, _)| k == f)
                .map(|(_, v)| v.text())
                .unwrap_or_default()
        };
        for required in ["summary", "since", "complexity"] {
            if text(required).trim().is_empty() {
                problems.push(format!("{name}: no {required} in COMMAND DOCS"));
            }
        }
        if text("group") != "module" || text("module") != "ratelimit" {
            problems.push(format!(
                "{name}: group {:?}, module {:?}",
                text("group"),
                text("module")
            ));
        }
        let Some((_, args)) = docs.iter().find(|(k, _)| k == "arguments") else {
            problems.push(format!("{name}: no arguments in COMMAND DOCS"));
            continue;
        };
        // Every argument, at every depth, says what it is for; every key argument
        // points at the command's key spec, which COMMAND INFO has.
        fn walk(name: &str, args: &Value, keys: &mut usize, problems: &mut Vec<String>) {
            for arg in args.array() {
                let map = pairs(arg);
                let arg_name = field(&map, "name").map(Value::text).unwrap_or_default();
                if field(&map, "summary").is_none_or(|s| s.text().trim().is_empty()) {
                    problems.push(format!("{name}: argument {arg_name:?} has no summary"));
                }
                if field(&map, "type").map(Value::text).as_deref() == Some("key") {
                    *keys += 1;
                    if field(&map, "key_spec_index") != Some(&Value::Int(0)) {
                        problems.push(format!("{name}: key argument without key spec 0"));
                    }
                }
                if let Some(sub) = field(&map, "arguments") {
                    walk(name, sub, keys, problems);
                }
            }
        }
        let mut keys = 0;
        walk(name, args, &mut keys, &mut problems);
        let info = c.cmd(&["COMMAND", "INFO", name]);
        let key_specs = info.array()[0].array()[8].array().len();
        if (keys > 0) != (key_specs > 0) {
            problems.push(format!(
                "{name}: {keys} key argument(s) but {key_specs} key spec(s)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_arguments_are_the_syntax_of_each_command_page() {
    let server = Server::start();
    let mut c = server.client();
    let mut problems = Vec::new();
    for name in module_commands(&mut c) {
        let docs = docs_of(&mut c, &name);
        let Some((_, args)) = docs.iter().find(|(k, _)| k == "arguments") else {
            problems.push(format!("{name}: no arguments"));
            continue;
        };
        let upper = name.to_uppercase();
        let rendered = format!("{upper} {}", render_args(args, " "));
        let lines = syntax_lines(&upper);
        if lines.is_empty() {
            problems.push(format!(
                "{upper}: no syntax line in docs/*.md (a ```text block whose line starts with `{upper} `)"
            ));
        } else if !lines.iter().any(|(_, l)| *l == rendered) {
            problems.push(format!(
                "{upper}: COMMAND DOCS renders\n    {rendered}\nbut the docs say\n{}",
                lines
                    .iter()
                    .map(|(at, l)| format!("    {l}    ({at})"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What a terminal shows without its colours.
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// `redis-cli HELP RL.GCRA` prints the line its hints are made of (the command's
/// arguments from COMMAND DOCS) and the summary.
#[test]
fn redis_cli_shows_the_syntax_and_summary() {
    let server = Server::start();
    let mut c = server.client();
    let mut problems = Vec::new();
    for name in module_commands(&mut c) {
        let docs = docs_of(&mut c, &name);
        let field_text = |f: &str| {
            docs.iter()
                .find(|(k, _)| k == f)
                .map(|(_, v)| v.text())
                .unwrap_or_default()
        };
        let Some((_, args)) = docs.iter().find(|(k, _)| k == "arguments") else {
            problems.push(format!("{name}: no arguments"));
            continue;
        };
        let upper = name.to_uppercase();
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
            .args(["HELP", &upper])
            .output()
            .expect("run redis-cli");
        let shown = strip_ansi(&String::from_utf8_lossy(&out.stdout));
        let syntax = format!("{upper} {}", render_args(args, " "));
        let summary = format!("summary: {}", field_text("summary"));
        let lines: Vec<&str> = shown.lines().map(str::trim).collect();
        if !lines.contains(&syntax.as_str()) || !lines.contains(&summary.as_str()) {
            problems.push(format!(
                "redis-cli HELP {upper} does not show\n    {syntax}\n    {summary}\nit shows:\n{shown}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn rendering_follows_redis_cli() {
    let s = |t: &str| Value::Bulk(t.as_bytes().to_vec());
    let flags = |f: &[&str]| Value::Array(f.iter().map(|x| Value::Status(x.to_string())).collect());
    let arg = |fields: Vec<(&str, Value)>| {
        Value::Array(fields.into_iter().flat_map(|(k, v)| [s(k), v]).collect())
    };
    let window = arg(vec![("name", s("window")), ("type", s("string"))]);
    let limit = arg(vec![("name", s("limit")), ("type", s("integer"))]);
    let limits = arg(vec![
        ("name", s("limits")),
        ("type", s("block")),
        ("token", s("LIMIT")),
        ("flags", flags(&["multiple", "multiple_token"])),
        (
            "arguments",
            Value::Array(vec![window.clone(), limit.clone()]),
        ),
    ]);
    let align = arg(vec![
        ("name", s("align")),
        ("type", s("pure-token")),
        ("token", s("ALIGN")),
        ("flags", flags(&["optional"])),
    ]);
    let cost = arg(vec![
        ("name", s("n")),
        ("type", s("integer")),
        ("token", s("COST")),
        ("flags", flags(&["optional"])),
    ]);
    let keys = arg(vec![
        ("name", s("key")),
        ("type", s("key")),
        ("flags", flags(&["multiple"])),
    ]);
    let all = Value::Array(vec![keys, limits, cost, align]);
    assert_eq!(
        render_args(&all, " "),
        "key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN]"
    );
    let either = arg(vec![
        ("name", s("either")),
        ("type", s("oneof")),
        ("arguments", Value::Array(vec![window, limit])),
    ]);
    assert_eq!(render_arg(&either), "window|limit");
    assert_eq!(strip_ansi("\u{1b}[1mRL.FIXED\u{1b}[0m x"), "RL.FIXED x");
}

/// The Lua twins' files that repeat the command table's metadata: every `*.lua` directly
/// in these folders (the published scripts in `lua/published/` are kept as they were
/// written and are not twins).
const TWIN_FOLDERS: &[&str] = &["lua"];

/// Every string literal of a Lua source, comments skipped (a `--` outside a string runs
/// to the end of its line).
fn lua_strings(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = source.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '-' if chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\'' | '"' => {
                let mut text = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                text.push('\\');
                                text.push(escaped);
                            }
                        }
                        c if c == ch => break,
                        c => text.push(c),
                    }
                }
                found.push(text);
            }
            _ => {}
        }
    }
    found
}

/// What a literal that reads as a syntax line (a command's name or an RL.ALL rule's
/// `KIND i`, then only argument names, keywords, brackets, `...` and `|`) should be, per
/// the command table: `Some((what it claims to be, the table's line))`.
fn claimed_syntax(literal: &str) -> Option<(String, &'static str)> {
    use ratelimit_core::commands::{RULES, TABLE};
    let syntax_like = |rest: &str| {
        rest.chars()
            .all(|c| c.is_ascii_alphanumeric() || " _[].|".contains(c))
    };
    for command in &TABLE {
        if let Some(rest) = literal.strip_prefix(&format!("{} ", command.name)) {
            return syntax_like(rest).then(|| (command.name.to_string(), command.syntax));
        }
    }
    for &(kind, line) in RULES {
        if let Some(rest) = literal.strip_prefix(&format!("{kind} i ")) {
            return syntax_like(rest).then(|| (format!("the {kind} rule"), line));
        }
    }
    None
}

/// Each literal of `source` that reads as a syntax line and is not the table's.
fn syntax_problems(at: &str, source: &str) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut problems = Vec::new();
    for literal in lua_strings(source) {
        if let Some((what, line)) = claimed_syntax(&literal) {
            checked += 1;
            if literal != line {
                problems.push(format!(
                    "{at}: the syntax of {what} is\n    {literal}\nbut the command table (core/src/commands.rs) says\n    {line}"
                ));
            }
        }
    }
    (checked, problems)
}

/// The twins quote each command's syntax in their arity errors and each RL.ALL rule's in
/// its own: every such string in `lua/` is the line of the command table, which the
/// module's errors quote and `COMMAND DOCS` renders.
#[test]
fn the_twins_quote_the_syntax_lines_of_the_command_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    let mut problems = Vec::new();
    for folder in TWIN_FOLDERS {
        let mut files: Vec<_> = std::fs::read_dir(root.join(folder))
            .expect("the twins' folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "lua"))
            .collect();
        files.sort();
        for path in files {
            let source = std::fs::read_to_string(&path).expect("read a twin");
            let at = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let (n, found) = syntax_problems(&at, &source);
            checked += n;
            problems.extend(found);
        }
    }
    assert!(checked > 0, "no syntax line found in {TWIN_FOLDERS:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_twin_syntax_line_that_differs_from_the_table_is_found() {
    let source = "-- 'RL.FIXED key limit' in a comment\n\
        arity_error('RL.FIXED', 'RL.FIXED key limit window [COST n] [AT unix_ms]')\n\
        local order = 'RL.FIXED key limit window: the limit comes first'\n\
        local L = { rule_syntax = \"LOG i limit window [META value]\", s = 'x' }\n\
        fail('GCRA i max_burst count')";
    let (checked, problems) = syntax_problems("sample.lua", source);
    assert_eq!(checked, 3, "{problems:?}");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("the syntax of RL.FIXED"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("the syntax of the GCRA rule"),
        "{problems:?}"
    );
}

//! The user documentation is checked, so that a changed reply, error text or make
//! target breaks the build rather than the reader:
//!
//! - every ```console block of README.md and docs/ is a session that is replayed with
//!   the real `redis-cli` and must print exactly what the block shows (trailing `# ...`
//!   notes on output lines excepted): each page's sessions top to bottom on one server
//!   with the module, then all of them again on the same server, without flushing, so
//!   that a reader who runs a page twice, or on a server that already holds its keys,
//!   sees what it shows;
//! - every example in examples/ runs its self-check against a fresh server;
//! - every ```python block of README.md and docs/ is an excerpt of a file in examples/
//!   (but those of docs/clients.md, which clients/python/tests/test_docs_page.py runs)
//!   (the docs show the tested files, never copies);
//! - README.md, docs/, CONTRIBUTING.md and examples/ use the users' words;
//! - the README's table of make targets lists exactly the Makefile's targets;
//! - relative links and their anchors resolve, the README stays a front page that
//!   links to the Python page from its first screen.

use crate::common;

use common::server::{free_port, module_path, server_binary};
use common::{sweep_tool_path, Client, Server, Value};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// Files under `dir` (relative to the root), recursively, sorted, relative paths.
fn files_under(dir: &str) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                // What Python and npm install write (`npm install` in examples/node).
                if path
                    .file_name()
                    .is_some_and(|n| n == "__pycache__" || n == "node_modules")
                {
                    continue;
                }
                walk(root, &path, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(root(), &root().join(dir), &mut out);
    out.sort();
    out
}

/// README.md and every Markdown page under docs/.
fn user_docs() -> Vec<String> {
    let mut docs = vec!["README.md".to_string()];
    docs.extend(
        files_under("docs")
            .into_iter()
            .filter(|f| f.ends_with(".md")),
    );
    docs
}

/// A fenced code block: its language and its lines with their 1-based line numbers
/// (without the fence's own indentation, for blocks inside list items).
struct Block {
    file: String,
    lang: String,
    /// The words after the language on the opening fence (`console fresh-server`).
    attributes: Vec<String>,
    fence_line: usize,
    indent: usize,
    lines: Vec<(usize, String)>,
}

fn fenced_blocks(file: &str, text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let fence = line.trim_start().starts_with("```");
        match open.take() {
            None if fence => {
                let info = line.trim_start().trim_start_matches('`').trim();
                let mut words = info.split_whitespace().map(str::to_string);
                open = Some(Block {
                    file: file.to_string(),
                    lang: words.next().unwrap_or_default(),
                    attributes: words.collect(),
                    fence_line: n,
                    indent: line.len() - line.trim_start().len(),
                    lines: Vec::new(),
                });
            }
            None => {}
            Some(block) if fence => blocks.push(block),
            Some(mut block) => {
                let spaces = line.len() - line.trim_start_matches(' ').len();
                let content = &line[spaces.min(block.indent)..];
                block.lines.push((n, content.to_string()));
                open = Some(block);
            }
        }
    }
    if let Some(block) = open {
        panic!("{file}:{}: code block never closed", block.fence_line);
    }
    blocks
}

/// Run a prepared command with a time limit, reading its output as it comes.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let mut pipes = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    let readers: Vec<_> = pipes
        .iter_mut()
        .map(|p| {
            let mut pipe = p.take();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(p) = pipe.as_mut() {
                    let _ = p.read_to_end(&mut buf);
                }
                buf
            })
        })
        .collect();
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?} did not finish within {limit:?}"));
            }
            Err(e) => return Err(format!("waiting for {cmd:?}: {e}")),
        }
    };
    let mut outputs = readers.into_iter().map(|r| r.join().unwrap_or_default());
    Ok(Output {
        status,
        stdout: outputs.next().unwrap_or_default(),
        stderr: outputs.next().unwrap_or_default(),
    })
}

// ---------------------------------------------------------------------------------
// Console sessions

/// One `$ command` of a session and the output the page shows for it.
struct Step {
    line: usize,
    command: String,
    expected: Vec<(usize, String)>,
}

/// An output line without its trailing note: whitespace, then `#` and anything after
/// it, where the `#` is outside a double-quoted string (redis-cli quotes strings with
/// backslash escapes). A line that starts with `#` (INFO section headers) is output.
fn strip_note(line: &str) -> &str {
    let bytes = line.as_bytes();
    let (mut quoted, mut escaped) = (false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if quoted {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b'#' if i > 0 && bytes[i - 1].is_ascii_whitespace() => {
                return line[..i].trim_end();
            }
            _ => {}
        }
    }
    line.trim_end()
}

/// The commands a checked session may run, each line in bash: redis-cli (the harness
/// adds the host, the port and `--no-raw`, so the output is what redis-cli prints on a
/// terminal), `NAME=$(redis-cli ...)` (raw output, as in the reader's shell), and the
/// sweep tool.
fn check_command(cmd: &str) -> Result<(), String> {
    let cli_args = if let Some(rest) = cmd.strip_prefix("redis-cli ") {
        Some(rest)
    } else if let Some((name, rest)) = cmd.split_once("=$(redis-cli ") {
        let ok_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok_name {
            return Err(format!("`{name}` is not a shell variable name"));
        }
        Some(rest)
    } else if cmd == "ratelimit-sweep" || cmd.starts_with("ratelimit-sweep ") {
        None
    } else {
        return Err(
            "a checked session runs only `redis-cli ...`, `NAME=$(redis-cli ...)` and \
             `ratelimit-sweep ...`; show anything else in a ```text or ```sh block"
                .to_string(),
        );
    };
    if cli_args.is_some_and(|a| a.trim_start().starts_with('-')) {
        return Err("redis-cli options (-p, -h, ...) are set by the check; leave them out".into());
    }
    Ok(())
}

fn parse_session(block: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for (n, line) in &block.lines {
        if let Some(cmd) = line.strip_prefix("$ ") {
            let command = cmd.trim().to_string();
            check_command(&command).map_err(|e| format!("{}:{n}: {e}", block.file))?;
            steps.push(Step {
                line: *n,
                command,
                expected: Vec::new(),
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push((*n, strip_note(line).to_string()));
        } else {
            return Err(format!(
                "{}:{n}: a console block starts with a `$ redis-cli ...` line (found {line:?})",
                block.file
            ));
        }
    }
    if steps.is_empty() {
        return Err(format!(
            "{}:{}: an empty console block",
            block.file, block.fence_line
        ));
    }
    Ok(steps)
}

fn marker(i: usize) -> String {
    format!("@@docs-step-{i}@@")
}

/// Run the session's commands in one bash, from the repository root (so `lua/...`
/// paths work), and return each command's output lines.
fn replay(server: &Server, steps: &[Step]) -> Result<Vec<Vec<String>>, String> {
    let mut script = format!(
        "exec 2>&1\ncd '{}'\n\
         redis-cli() {{ command redis-cli -h 127.0.0.1 -p {} --no-raw \"$@\"; }}\n\
         ratelimit-sweep() {{ '{}' \"$@\"; }}\n",
        root().display(),
        server.port,
        sweep_tool_path().display()
    );
    for (i, step) in steps.iter().enumerate() {
        // Inside `$(...)` redis-cli's output is not a terminal: it prints raw replies
        // (a bare SHA1 for SCRIPT LOAD), as it does in the reader's shell.
        let command = match step.command.split_once("=$(redis-cli ") {
            Some((name, rest)) => format!(
                "{name}=$(command redis-cli -h 127.0.0.1 -p {} {rest}",
                server.port
            ),
            None => step.command.clone(),
        };
        script.push_str(&format!("printf '\\n{}\\n'\n{command}\n", marker(i)));
    }
    script.push_str(&format!("printf '\\n{}\\n'\n", marker(steps.len())));
    let out = run_bounded(
        Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script])
            .env("LC_ALL", "C"),
        Duration::from_secs(60),
    )?;
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let mut outputs = Vec::new();
    for i in 0..steps.len() {
        let start = format!("{}\n", marker(i));
        let end = format!("\n{}", marker(i + 1));
        let from = text
            .find(&start)
            .map(|p| p + start.len())
            .ok_or_else(|| format!("no output marker {i} in:\n{text}"))?;
        let to = text[from..]
            .find(&end)
            .map(|p| p + from)
            .ok_or_else(|| format!("no output marker {} in:\n{text}", i + 1))?;
        let chunk = &text[from..to];
        let chunk = chunk.strip_suffix('\n').unwrap_or(chunk);
        outputs.push(if chunk.is_empty() {
            Vec::new()
        } else {
            chunk
                .split('\n')
                .map(|l| l.trim_end().to_string())
                .collect()
        });
    }
    Ok(outputs)
}

fn show(lines: &[String]) -> String {
    if lines.is_empty() {
        return "      (nothing)\n".to_string();
    }
    lines.iter().map(|l| format!("      {l}\n")).collect()
}

/// Which replay of a page: the first runs on a server that has never seen the page's
/// keys, the second on the same server right after it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Round {
    First,
    Again,
}

/// The attribute that marks a session whose output depends on more of the server's
/// history than its keys (`INFO ratelimit` counts every call since the module loaded):
/// it is replayed once, on a server of its own that has served nothing else, and the
/// page says so.
const FRESH_SERVER: &str = "fresh-server";

/// How many keys a `redis-cli DEL k ...` (or `UNLINK`) step names; `None` for any other
/// step. A session that starts by deleting its keys replays the same whatever ran
/// before, except for that first reply: the number of keys that were there.
fn deleted_keys(command: &str) -> Option<usize> {
    let mut words = command.split_whitespace();
    if words.next() != Some("redis-cli") {
        return None;
    }
    let verb = words.next()?;
    if !verb.eq_ignore_ascii_case("DEL") && !verb.eq_ignore_ascii_case("UNLINK") {
        return None;
    }
    let keys = words.count();
    (keys > 0).then_some(keys)
}

/// Whether `got` is what `step` may print. Exactly the page's lines, except that when
/// the page is replayed again, a `DEL` of `n` keys may count any number from 0 to `n`
/// (the page shows the count of a first run, and says so).
fn step_matches(step: &Step, expected: &[String], got: &[String], round: Round) -> bool {
    if expected == got {
        return true;
    }
    let Some(keys) = deleted_keys(&step.command) else {
        return false;
    };
    let is_count = |lines: &[String]| -> Option<usize> {
        match lines {
            [line] => line
                .strip_prefix("(integer) ")
                .and_then(|n| n.parse::<usize>().ok()),
            _ => None,
        }
    };
    round == Round::Again
        && is_count(expected).is_some()
        && is_count(got).is_some_and(|n| n <= keys)
}

/// Compare one session's output with the page; a description of every difference.
fn compare(block: &Block, steps: &[Step], outputs: &[Vec<String>], round: Round) -> Vec<String> {
    let mut failures = Vec::new();
    for (step, got) in steps.iter().zip(outputs) {
        let expected: Vec<String> = step.expected.iter().map(|(_, l)| l.clone()).collect();
        if step_matches(step, &expected, got, round) {
            continue;
        }
        let first = expected
            .iter()
            .zip(got)
            .position(|(e, g)| e != g)
            .unwrap_or(expected.len().min(got.len()));
        let at = step.expected.get(first).map_or(step.line, |(n, _)| *n);
        let when = match round {
            Round::First => "",
            Round::Again => {
                " when the page is replayed a second time on the same server (a session \
                 must delete the keys it writes first, or use keys no other session of the \
                 page uses)"
            }
        };
        failures.push(format!(
            "{}:{at}: `{}` (line {}) prints something else{when} (first difference at output line {})\n    expected:\n{}    got:\n{}",
            block.file,
            step.command,
            step.line,
            first + 1,
            show(&expected),
            show(got)
        ));
    }
    failures
}

/// A page's console sessions, parsed; parse errors go to `failures`.
fn page_sessions(file: &str, failures: &mut Vec<String>) -> Vec<(Block, Vec<Step>)> {
    let mut sessions = Vec::new();
    for block in fenced_blocks(file, &read(file)) {
        if block.lang != "console" {
            continue;
        }
        if let Some(unknown) = block.attributes.iter().find(|a| *a != FRESH_SERVER) {
            failures.push(format!(
                "{file}:{}: unknown console block attribute `{unknown}` (only `{FRESH_SERVER}`)",
                block.fence_line
            ));
            continue;
        }
        match parse_session(&block) {
            Ok(steps) => sessions.push((block, steps)),
            Err(e) => failures.push(e),
        }
    }
    sessions
}

/// Replay `sessions` in order on `server`, comparing each with its page.
fn replay_all(
    server: &Server,
    sessions: &[&(Block, Vec<Step>)],
    round: Round,
    failures: &mut Vec<String>,
) {
    for (block, steps) in sessions {
        match replay(server, steps) {
            Ok(outputs) => failures.extend(compare(block, steps, &outputs, round)),
            Err(e) => failures.push(format!("{}:{}: {e}", block.file, block.fence_line)),
        }
    }
}

#[test]
fn console_sessions_print_what_the_docs_show() {
    let mut failures = Vec::new();
    let mut count = 0;
    for file in user_docs() {
        let sessions = page_sessions(&file, &mut failures);
        count += sessions.len();
        let (fresh, shared): (Vec<_>, Vec<_>) = sessions
            .iter()
            .partition(|(block, _)| block.attributes.iter().any(|a| a == FRESH_SERVER));
        if !shared.is_empty() {
            // The whole page, then the whole page again: no flush, no restart.
            let server = Server::start();
            replay_all(&server, &shared, Round::First, &mut failures);
            replay_all(&server, &shared, Round::Again, &mut failures);
        }
        for session in fresh {
            let server = Server::start();
            replay_all(&server, &[session], Round::First, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} console session step(s) differ from the docs:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        count >= 10,
        "only {count} console sessions found in README.md and docs/"
    );
}

#[test]
fn session_parsing_and_notes() {
    assert_eq!(
        strip_note("1) (integer) 0        # allowed"),
        "1) (integer) 0"
    );
    assert_eq!(strip_note("1) \"a # b\"  # note"), "1) \"a # b\"");
    assert_eq!(strip_note("1) \"a \\\" # b\""), "1) \"a \\\" # b\"");
    assert_eq!(strip_note("# ratelimit_stats"), "# ratelimit_stats");
    assert_eq!(
        strip_note("ERR unknown option '#x'"),
        "ERR unknown option '#x'"
    );
    assert!(check_command("redis-cli RL.FIXED k 1 1s").is_ok());
    assert!(check_command("SHA=$(redis-cli SCRIPT LOAD x)").is_ok());
    assert!(check_command("ratelimit-sweep --help").is_ok());
    assert!(check_command("redis-cli -p 6380 PING").is_err());
    assert!(check_command("rm -rf /tmp/x").is_err());
    assert!(check_command("x=$(redis-cli PING)").is_err());
    let block = Block {
        file: "t.md".into(),
        lang: "console".into(),
        attributes: Vec::new(),
        fence_line: 1,
        indent: 0,
        lines: vec![(2, "1) (integer) 0".into())],
    };
    match parse_session(&block) {
        Err(e) => assert!(e.contains("t.md:2"), "{e}"),
        Ok(_) => panic!("output before any command was accepted"),
    }
}

/// A session parsed from the lines of a console block.
fn session_of(text: &str) -> (Block, Vec<Step>) {
    let blocks = fenced_blocks("t.md", &format!("```console\n{text}```\n"));
    let block = blocks.into_iter().next().expect("one block");
    let steps = parse_session(&block).expect("a valid session");
    (block, steps)
}

#[test]
fn delete_counts_may_differ_only_when_replayed_again() {
    assert_eq!(deleted_keys("redis-cli DEL a b"), Some(2));
    assert_eq!(deleted_keys("redis-cli unlink '{u}:a'"), Some(1));
    assert_eq!(deleted_keys("redis-cli DEL"), None);
    assert_eq!(deleted_keys("redis-cli GET a"), None);
    let (_, steps) = session_of("$ redis-cli DEL a b\n(integer) 0\n$ redis-cli GET a\n(nil)\n");
    let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let zero = lines(&["(integer) 0"]);
    for (n, round, ok) in [
        ("0", Round::First, true),
        ("1", Round::First, false),
        ("2", Round::Again, true),
        ("3", Round::Again, false),
    ] {
        let got = lines(&[&format!("(integer) {n}")]);
        assert_eq!(
            step_matches(&steps[0], &zero, &got, round),
            ok,
            "{n} {round:?}"
        );
    }
    let nil = lines(&["(nil)"]);
    assert!(!step_matches(
        &steps[1],
        &nil,
        &lines(&["\"x\""]),
        Round::Again
    ));
}

/// The check itself: a session that writes a key without deleting it first passes on
/// a fresh server and fails when the page is replayed again; deleting it first makes
/// it pass both times.
#[test]
fn replaying_a_page_twice_catches_sessions_that_reuse_their_keys() {
    let server = Server::start();
    let careless = session_of("$ redis-cli INCR docs:probe\n(integer) 1\n");
    let careful = session_of(
        "$ redis-cli DEL docs:probe2\n(integer) 0\n$ redis-cli INCR docs:probe2\n(integer) 1\n",
    );
    for (session, fails_again) in [(&careless, true), (&careful, false)] {
        let mut failures = Vec::new();
        replay_all(&server, &[session], Round::First, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        replay_all(&server, &[session], Round::Again, &mut failures);
        assert_eq!(!failures.is_empty(), fails_again, "{failures:?}");
    }
}

// ---------------------------------------------------------------------------------
// redis.conf.example

/// A server process of this test, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `redis-server redis.conf.example --port N`, as the file says to start it, from a
/// directory laid out as the repository is after `make build`: the module under test
/// where the file's `loadmodule` line says (a path relative to the repository root).
/// The server starts and has the module, with the settings' defaults.
#[test]
fn redis_conf_example_starts_a_server_with_the_module() {
    let conf = read("redis.conf.example");
    let module_lines: Vec<&str> = conf
        .lines()
        .filter_map(|l| l.trim().strip_prefix("loadmodule "))
        .collect();
    let [module] = module_lines[..] else {
        panic!("redis.conf.example: expected one loadmodule line, found {module_lines:?}");
    };
    let module = Path::new(module.trim());
    assert!(
        module.is_relative() && module.ends_with("target/release/libredis_ratelimit.so"),
        "redis.conf.example: `loadmodule {}` must be the path `make build` gives, relative to \
         the repository root, so that the file starts as written",
        module.display()
    );
    let root_like = std::env::temp_dir().join(format!("rl-conf-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root_like);
    let placed = root_like.join(module);
    std::fs::create_dir_all(placed.parent().expect("a directory")).expect("create the layout");
    std::os::unix::fs::symlink(module_path(), &placed).expect("place the module");
    let port = free_port();
    let log = std::fs::File::create(root_like.join("server.out")).expect("log file");
    let server = Child(
        Command::new(server_binary())
            .arg(root().join("redis.conf.example"))
            .args(["--port", &port.to_string()])
            .current_dir(&root_like)
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("run the server"),
    );
    let output = || std::fs::read_to_string(root_like.join("server.out")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut c = loop {
        if let Ok(mut c) = Client::connect(port) {
            if c.try_cmd(&["PING"])
                .is_ok_and(|v| v == Value::Status("PONG".into()))
            {
                break c;
            }
        }
        assert!(
            Instant::now() < deadline,
            "redis-server redis.conf.example did not start:\n{}",
            output()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let modules = common::module_names(&mut c);
    assert!(
        modules.iter().any(|m| m == "ratelimit"),
        "{modules:?}\n{}",
        output()
    );
    assert_eq!(c.cmd(&["RL.FIXED", "k", "1", "1m"]).ints()[..3], [0, 1, 0]);
    for (name, value) in [("at-tolerance", "0"), ("acl-write-check", "yes")] {
        assert!(
            conf.contains(&format!("# ratelimit.{name} {value}\n")),
            "redis.conf.example shows ratelimit.{name}'s default"
        );
        let setting = format!("ratelimit.{name}");
        let got: Vec<String> = c
            .cmd(&["CONFIG", "GET", &setting])
            .array()
            .iter()
            .map(Value::text)
            .collect();
        assert_eq!(got, [setting, value.to_string()]);
    }
    let _ = c.try_cmd(&["SHUTDOWN", "NOSAVE"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&root_like);
}

// ---------------------------------------------------------------------------------
// What Cargo.toml says, the files and the README say too

/// The value of `name = "..."` in Cargo.toml's `[section]`.
fn cargo_field(section: &str, name: &str) -> Option<String> {
    let toml = read("Cargo.toml");
    let mut in_section = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == format!("[{section}]");
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            if key.trim() == name {
                return Some(value.trim().trim_matches('"').to_string());
            }
        }
    }
    None
}

#[test]
fn the_license_is_the_one_cargo_toml_names() {
    let license = cargo_field("workspace.package", "license").expect("a license in Cargo.toml");
    assert_eq!(license, "MIT");
    let text = std::fs::read_to_string(root().join("LICENSE")).expect("a LICENSE file");
    assert!(
        text.starts_with("MIT License\n") && text.contains("Permission is hereby granted"),
        "LICENSE is not the MIT license that Cargo.toml names"
    );
}

#[test]
fn the_readme_states_the_rust_version_of_cargo_toml() {
    let rust = cargo_field("workspace.package", "rust-version").expect("rust-version");
    let readme = read("README.md");
    for wanted in [
        format!("Rust {rust} or later installed"),
        format!("It needs Rust {rust} or later (`rust-version` in `Cargo.toml`"),
    ] {
        assert!(
            readme.contains(&wanted),
            "README.md must say \"{wanted}\" (Cargo.toml's rust-version is {rust})"
        );
    }
}

// ---------------------------------------------------------------------------------
// Examples

/// The project virtualenv's python with the examples' requirements installed.
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = run_bounded(
                Command::new(root().join("scripts/venv.sh"))
                    .arg("examples/requirements.txt")
                    .current_dir(root()),
                Duration::from_secs(300),
            )
            .unwrap_or_else(|e| panic!("scripts/venv.sh examples/requirements.txt: {e}"));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "scripts/venv.sh examples/requirements.txt failed:\n{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            PathBuf::from(stdout.lines().last().unwrap_or("").trim())
        })
        .clone()
}

#[test]
fn every_example_passes_its_self_check() {
    let examples: Vec<String> = files_under("examples")
        .into_iter()
        .filter(|f| f.ends_with(".py"))
        .collect();
    assert!(!examples.is_empty(), "no examples/*.py found");
    let python = python();
    let mut failures = Vec::new();
    for example in &examples {
        let server = Server::start();
        let result = run_bounded(
            Command::new(&python)
                .arg(example)
                .arg("--check")
                .env("REDIS_URL", format!("redis://127.0.0.1:{}", server.port))
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .current_dir(root()),
            Duration::from_secs(120),
        );
        match result {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() || !stdout.contains("self-check passed") {
                    failures.push(format!(
                        "`python {example} --check` failed ({}); stdout:\n{stdout}\nstderr:\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            Err(e) => failures.push(format!("`python {example} --check`: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn python_in_the_docs_is_taken_from_the_examples() {
    let sources: Vec<(String, Vec<String>)> = files_under("examples")
        .into_iter()
        .filter(|f| f.ends_with(".py"))
        .map(|f| {
            let lines = read(&f).lines().map(str::to_string).collect();
            (f, lines)
        })
        .collect();
    let mut failures = Vec::new();
    let mut blocks = 0;
    // docs/clients.md is different: its blocks are whole code that runs as written, top
    // to bottom (clients/python/tests/test_docs_page.py runs them), not excerpts.
    for file in user_docs().into_iter().filter(|f| f != "docs/clients.md") {
        for block in fenced_blocks(&file, &read(&file)) {
            if block.lang != "python" && block.lang != "py" {
                continue;
            }
            blocks += 1;
            let wanted: Vec<&str> = block.lines.iter().map(|(_, l)| l.as_str()).collect();
            let block_indent = wanted
                .first()
                .map_or(0, |l| l.len() - l.trim_start_matches(' ').len());
            // The longest run of the block's first lines found in one example, the
            // block being dedented by the indentation of its first line there.
            let mut best = (0, "");
            for (name, lines) in &sources {
                for start in 0..lines.len() {
                    let line = &lines[start];
                    let file_indent = line.len() - line.trim_start_matches(' ').len();
                    let Some(indent) = file_indent.checked_sub(block_indent) else {
                        continue;
                    };
                    let same = |w: &str, l: &str| {
                        if w.is_empty() {
                            l.trim().is_empty()
                        } else {
                            l.get(..indent).is_some_and(|i| i.trim().is_empty())
                                && l.get(indent..) == Some(w)
                        }
                    };
                    let run = wanted
                        .iter()
                        .zip(&lines[start..])
                        .take_while(|(w, l)| same(w, l))
                        .count();
                    if run > best.0 {
                        best = (run, name.as_str());
                    }
                }
            }
            if best.0 < wanted.len() || wanted.is_empty() {
                let (n, line) = block
                    .lines
                    .get(best.0)
                    .map_or((block.fence_line, ""), |(n, l)| (*n, l.as_str()));
                failures.push(format!(
                    "{file}:{n}: this python block is not an excerpt of a file in examples/ \
                     (the docs show the tested files, not copies); {} of its {} lines match {}, \
                     then {line:?} does not",
                    best.0,
                    wanted.len(),
                    if best.1.is_empty() {
                        "no example"
                    } else {
                        best.1
                    }
                ));
            }
        }
    }
    assert!(blocks > 0, "no python block found in README.md or docs/");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------
// Words

/// A word the user docs must not use, at `line:column`.
fn vocabulary_problems(file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    // The word before, across line breaks ("key" at the end of a line, "spec" next).
    let mut last_word = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut words: Vec<(usize, &str)> = Vec::new();
        let mut start = None;
        for (j, c) in line
            .char_indices()
            .chain(std::iter::once((line.len(), ' ')))
        {
            let word_char = c.is_alphanumeric() || c == '_';
            match (start, word_char) {
                (None, true) => start = Some(j),
                (Some(s), false) => {
                    words.push((s, &line[s..j]));
                    start = None;
                }
                _ => {}
            }
        }
        for (k, &(col, word)) in words.iter().enumerate() {
            let lower = word.to_lowercase();
            let prev = k
                .checked_sub(1)
                .and_then(|p| words.get(p))
                .map_or_else(|| last_word.clone(), |(_, w)| w.to_lowercase());
            let why = if lower.starts_with("seed") && prev != "random" {
                Some("\"seed\" (only a random seed of the tests, as TEST_SEED, may be named)")
            } else if lower.starts_with("contract") {
                Some("\"contract\"")
            } else if (lower == "spec" || lower == "specs" || lower.starts_with("specification"))
                && prev != "key"
            {
                Some("\"spec\" (only the Redis term \"key spec\" may be used)")
            } else {
                None
            };
            if let Some(why) = why {
                problems.push(format!(
                    "{file}:{}:{}: {why}: name published material by what it is\n    {line}",
                    i + 1,
                    col + 1
                ));
            }
        }
        if let Some((_, w)) = words.last() {
            last_word = w.to_lowercase();
        }
    }
    problems
}

#[test]
fn user_docs_use_the_users_words() {
    let mut files = user_docs();
    files.push("CONTRIBUTING.md".to_string());
    files.push("Makefile".to_string());
    files.push("redis.conf.example".to_string());
    // What users read besides the docs: the examples, the twins and published scripts,
    // the benchmark (its scripts and the results it writes) and the set-up scripts.
    for dir in ["examples", "lua", "bench", "scripts"] {
        files.extend(
            files_under(dir)
                .into_iter()
                .filter(|f| !f.starts_with("bench/out/")),
        );
    }
    let mut problems = Vec::new();
    for dir in [
        "", "bench", "docs", "examples", "lua", "scripts", "src", "core", "tests",
    ] {
        let names = if dir.is_empty() {
            std::fs::read_dir(root())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        } else {
            files_under(dir)
        };
        for name in names {
            if name.to_lowercase().contains("seed") {
                problems.push(format!("{name}: a file name with \"seed\""));
            }
        }
    }
    for file in &files {
        let Ok(text) = std::fs::read_to_string(root().join(file)) else {
            continue; // not text
        };
        problems.extend(vocabulary_problems(file, &text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn vocabulary_rules() {
    let bad = |t: &str| !vocabulary_problems("t", t).is_empty();
    assert!(bad("the seed script"));
    assert!(bad("Seeds 000 and 001"));
    assert!(bad("SEED=0 skips it"));
    assert!(bad("as the contract says"));
    assert!(bad("an extension of the spec"));
    assert!(bad("the specification"));
    assert!(!bad("replay it with TEST_SEED=7, a random seed"));
    assert!(!bad("its key spec and key specs"));
    assert!(!bad("its key\nspec"));
    assert!(bad("its\nspec"));
    assert!(!bad("a specific window; inspect it; respect it"));
}

// ---------------------------------------------------------------------------------
// The README's make targets

/// Targets the Makefile documents with a `## ` comment (what `make help` lists).
fn makefile_targets() -> BTreeSet<String> {
    read("Makefile")
        .lines()
        .filter(|l| l.contains("## "))
        .filter_map(|l| {
            let (name, _) = l.split_once(':')?;
            let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-');
            ok.then(|| name.to_string())
        })
        .collect()
}

/// Targets listed in the README's table: rows whose first cell is `make NAME`.
fn readme_targets(readme: &str) -> Vec<(usize, String)> {
    readme
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let rest = l.strip_prefix("| `make ")?;
            let name = rest.split(['`', ' ']).next()?;
            Some((i + 1, name.to_string()))
        })
        .collect()
}

#[test]
fn readme_lists_the_makefile_targets() {
    let make = makefile_targets();
    assert!(make.len() >= 5, "Makefile targets not found: {make:?}");
    let listed = readme_targets(&read("README.md"));
    let names: BTreeSet<String> = listed.iter().map(|(_, n)| n.clone()).collect();
    let mut problems = Vec::new();
    for missing in make.difference(&names) {
        problems.push(format!(
            "README.md: the table of make targets lacks `make {missing}` (in the Makefile's `make help`)"
        ));
    }
    for (n, name) in &listed {
        if !make.contains(name) {
            problems.push(format!(
                "README.md:{n}: `make {name}` is not a documented Makefile target (targets: {make:?})"
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (n, name) in &listed {
        if !seen.insert(name) {
            problems.push(format!("README.md:{n}: `make {name}` is listed twice"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------
// Links and the front page

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a Markdown file defines: its headings and `<a id="...">` tags.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
        let mut rest = line;
        while let Some(p) = rest.find("id=\"") {
            rest = &rest[p + 4..];
            if let Some(end) = rest.find('"') {
                out.insert(rest[..end].to_string());
            }
        }
    }
    out
}

/// Relative link targets `](target)` outside code blocks, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(p) = rest.find("](") {
            rest = &rest[p + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_string()));
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn relative_links_resolve() {
    let mut files = user_docs();
    files.push("CONTRIBUTING.md".to_string());
    let mut problems = Vec::new();
    let mut count = 0;
    for file in &files {
        let text = read(file);
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        for (n, target) in links(&text) {
            count += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                PathBuf::from(file)
            } else {
                dir.join(path)
            };
            let full = root().join(&resolved);
            if !full.exists() {
                problems.push(format!(
                    "{file}:{n}: link to {target}: {} does not exist",
                    resolved.display()
                ));
                continue;
            }
            if !anchor.is_empty() {
                let ok = full.extension().is_some_and(|e| e == "md")
                    && std::fs::read_to_string(&full).is_ok_and(|t| anchors(&t).contains(anchor));
                if !ok {
                    problems.push(format!(
                        "{file}:{n}: link to {target}: no heading or id \"{anchor}\" in {}",
                        resolved.display()
                    ));
                }
            }
        }
    }
    assert!(count > 20, "only {count} relative links found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_is_a_front_page() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines: the front page stays under 250; put reference text in docs/"
    );
    let first_screen: Vec<&str> = readme.lines().take(25).collect();
    assert!(
        first_screen.iter().any(|l| l.contains("](docs/clients.md)")),
        "README.md: the first 25 lines must link to docs/clients.md (calling the commands from Python)"
    );
}

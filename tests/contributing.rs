//! CONTRIBUTING.md promises that a limiter is one file in the core, one file of twin,
//! its tests, its page and the packages' typed calls: every limiter the core finds is
//! checked in each of those places, and every path the page names exists. A limiter that is only a rule of
//! RL.ALL (its state named after RL.ALL, as the BAN rule) has no command of its own:
//! its tests are in `tests/all.rs`, its documentation a section of `docs/all.md`, and
//! RL.ALL's table entry and row are its. Every file of `tests/` is a module of the one
//! test binary, `tests/main.rs`: a file it does not name would never be compiled.

use ratelimit_core::commands;
use ratelimit_core::limiters;
use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The places a limiter of kind `kind` (its own command `command`) is missing from.
fn missing(kind: &str, command: &str) -> Vec<String> {
    let lower = kind.to_ascii_lowercase();
    let rule_only = command == "RL.ALL";
    let mut missing = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            missing.push(what);
        }
    };
    need(
        root()
            .join(format!("core/src/limiters/{lower}.rs"))
            .is_file(),
        format!("core/src/limiters/{lower}.rs"),
    );
    if rule_only {
        need(
            read("tests/all.rs").contains(&format!("\"{kind}\"")),
            format!("its tests in tests/all.rs (calls with a {kind} rule)"),
        );
        need(
            read("docs/all.md").contains(&format!("\n## The {kind} rule")),
            format!("its section in docs/all.md (## The {kind} rule)"),
        );
    } else {
        for file in [format!("tests/{lower}.rs"), format!("docs/{lower}.md")] {
            need(root().join(&file).is_file(), file);
        }
        need(
            test_modules().contains(&lower),
            format!("`mod {lower};` in tests/main.rs (its tests in the test binary)"),
        );
    }
    need(
        std::fs::read_to_string(root().join(format!("core/src/limiters/{lower}.rs")))
            .unwrap_or_default()
            .contains("pub static KIND: Kind = Kind {"),
        format!("its kind (pub static KIND) in core/src/limiters/{lower}.rs"),
    );
    need(
        commands::TABLE.iter().any(|c| c.name == command),
        format!("{command}'s entry in TABLE of core/src/commands.rs"),
    );
    need(
        commands::rule(kind).is_some(),
        "its rule's line in RULES of core/src/commands.rs".to_string(),
    );
    need(
        rule_only
            || std::fs::read_to_string(root().join(format!("core/src/limiters/{lower}.rs")))
                .unwrap_or_default()
                .contains("pub const COMMAND: Command = Command {"),
        format!("its command's entry (pub const COMMAND) in core/src/limiters/{lower}.rs"),
    );
    need(
        twin_function(kind, command),
        format!("its twin function ({kind} in the twins' source)"),
    );
    need(
        read("README.md").contains(if rule_only { kind } else { command }),
        "its row in the README".to_string(),
    );
    need(
        read("docs/all.md").contains(&format!("`{kind} i")),
        "its rule in the rule table of docs/all.md".to_string(),
    );
    // Each package's typed call: its command in the package's client, or a rule of
    // RL.ALL alone among the package's policies.
    let packages = if rule_only {
        [
            "clients/python/src/redis_native_ratelimit/policies.py",
            "clients/node/src/policies.ts",
            "clients/go/policies.go",
        ]
    } else {
        [
            "clients/python/src/redis_native_ratelimit/client.py",
            "clients/node/src/client.ts",
            "clients/go/limiter.go",
        ]
    };
    for file in packages {
        let named = if rule_only {
            format!("\"{kind}\"")
        } else {
            command.to_string()
        };
        need(
            read(file).contains(&named),
            format!("its typed call in {file} ({named})"),
        );
    }
    missing
}

/// Whether the twins' library defines the limiter of kind `kind` (its table), lists it
/// among its rules, and registers the function of its command `command`, and the build
/// wrote its script.
fn twin_function(kind: &str, command: &str) -> bool {
    let library = read("lua/ratelimit.lua");
    let function = command.to_ascii_lowercase().replace('.', "_");
    library.contains(&format!("local {kind} = (function()"))
        && library.contains(&format!("kind = '{kind}'"))
        && library.contains(&format!("{kind} = {kind}"))
        && library.contains(&format!(
            "redis.register_function('{function}', {function})"
        ))
        && root().join(format!("lua/scripts/{function}.lua")).is_file()
}

/// The modules `tests/main.rs` declares (`mod fixed;`): the files of the test binary.
fn test_modules() -> BTreeSet<String> {
    read("tests/main.rs")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect()
}

#[test]
fn every_limiter_is_in_every_place_a_limiter_takes() {
    let kinds = limiters::keywords();
    assert!(kinds.len() >= 5, "{kinds:?}");
    let gaps: Vec<String> = kinds
        .iter()
        .flat_map(|(kind, command)| {
            missing(kind, command)
                .into_iter()
                .map(move |m| format!("{kind} ({command}): {m}"))
        })
        .collect();
    assert!(gaps.is_empty(), "missing: {gaps:#?}");
}

#[test]
fn a_missing_limiter_is_found() {
    let gaps = missing("NOSUCH", "RL.NOSUCH");
    assert!(gaps.len() >= 11, "{gaps:#?}");
    let rule = missing("NOSUCH", "RL.ALL");
    assert!(
        rule.iter().any(|m| m.contains("clients/go/policies.go")),
        "{rule:#?}"
    );
}

#[test]
fn every_path_contributing_names_exists() {
    let page = read("CONTRIBUTING.md");
    let mut named = 0;
    for word in page.split('`') {
        let path = word.trim_end_matches('/');
        let looks_like_a_path = path.contains('/')
            && !path.contains(' ')
            && !path.contains('<')
            && !path.contains('*')
            && !path.contains("::")
            && !path.starts_with("http")
            && !path.starts_with('/')
            && !path.contains('(')
            && !path.contains('=')
            // What a build writes is not in the repository.
            && !path.starts_with("dist/")
            && !path.starts_with("target/");
        if looks_like_a_path {
            named += 1;
            // A row of the layout table names paths inside its folder.
            let exists = [
                "",
                "src",
                "core/src",
                "core",
                "tests",
                "clients/python",
                "clients/python/src",
                "clients/node",
                "bench",
            ]
            .iter()
            .any(|base| root().join(base).join(path).exists());
            assert!(
                exists,
                "CONTRIBUTING.md names `{path}`, which does not exist"
            );
        }
    }
    assert!(named > 20, "{named} paths");
}

/// Cargo.toml turns off the discovery of test targets (`autotests = false`) for the one
/// binary `tests/main.rs`, so a file of `tests/` that it does not declare as a module
/// (`tests/x.rs` or `tests/x/mod.rs`) would be neither compiled nor run.
#[test]
fn every_file_of_tests_is_a_module_of_the_test_binary() {
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("tests")).expect("tests/") {
        let path = entry.expect("an entry of tests/").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "main" {
                files.insert(module.to_string());
            }
        } else if path.join("mod.rs").is_file() {
            files.insert(name.to_string());
        }
    }
    assert!(files.len() > 20, "{files:?}");
    let declared = test_modules();
    let undeclared: Vec<&String> = files.difference(&declared).collect();
    assert!(
        undeclared.is_empty(),
        "files of tests/ that tests/main.rs does not declare (add `mod <name>;` there): {undeclared:?}"
    );
}

//! What the module writes to the server's log: the load line about ACL categories says
//! what this server did with them, and a clean shutdown is quiet (Valkey 9 unloads
//! every module as it shuts down, while `MODULE UNLOAD` stays refused).

use crate::common;

use common::{Client, Server, Value};

/// The log level of a server log line (`#` warning, `*` notice, `-` verbose, `.`
/// debug): the word after the time, in `pid:role day month year time level message`.
fn level(line: &str) -> Option<&str> {
    line.split_whitespace().nth(5)
}

/// The lines of `log` that warn about the module or its unloading.
fn module_warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| level(l) == Some("#"))
        .filter(|l| {
            let lower = l.to_lowercase();
            lower.contains("ratelimit") || lower.contains("unload")
        })
        .collect()
}

#[test]
fn a_clean_shutdown_logs_no_warning_from_the_module() {
    let mut server = Server::start();
    let mut c = server.client();
    assert_eq!(c.cmd(&["RL.FIXED", "rl:k", "1", "1m"]).ints()[0], 0);
    // MODULE UNLOAD is still refused, and says why.
    let refused = c.cmd(&["MODULE", "UNLOAD", "ratelimit"]);
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(c.cmd(&["RL.FIXED", "rl:k", "1", "1m"]).ints()[0], 1);
    let before = server.log();
    assert!(
        module_warnings(&before)
            .iter()
            .any(|l| l.contains("MODULE UNLOAD is refused")),
        "MODULE UNLOAD left no warning:\n{before}"
    );
    drop(c);
    server.stop(false);
    let log = server.log();
    assert!(
        log.contains("ready to exit"),
        "the server did not shut down cleanly:\n{log}"
    );
    let shutdown = log.get(before.len()..).unwrap_or_default();
    let warnings = module_warnings(shutdown);
    assert!(
        warnings.is_empty(),
        "a clean SHUTDOWN logged warnings about the module:\n{}\n\nthe log:\n{log}",
        warnings.join("\n")
    );
}

/// The categories `COMMAND INFO` gives `command`.
fn categories(c: &mut Client, command: &str) -> Vec<String> {
    let info = c.cmd(&["COMMAND", "INFO", command]);
    match &info.array()[0].array()[6] {
        Value::Array(cats) => cats.iter().map(Value::text).collect(),
        other => panic!("categories of {command}: {other:?}"),
    }
}

/// What the load line must say, from what the server did: nothing when the commands
/// have every category and `@ratelimit`; that `@ratelimit` is missing when only the
/// server's categories are there; and with no categories at all, that the module checks
/// writes itself, or that it does not (`ratelimit.acl-write-check no`).
#[test]
fn the_load_log_says_what_the_server_did_with_acl_categories() {
    for check in ["yes", "no"] {
        let server = Server::builder()
            .config("ratelimit.acl-write-check", check)
            .start();
        let mut c = server.client();
        let cats = categories(&mut c, "RL.FIXED");
        let log = server.log();
        let says = |text: &str| log.contains(text);
        let no_categories = "cannot put module commands in ACL categories";
        let no_own = [
            "cannot add module ACL categories",
            "refused to add the ACL category",
        ];
        if cats.iter().any(|c| c == "@ratelimit") {
            assert!(cats.iter().any(|c| c == "@write"), "{cats:?}");
            assert!(
                !says(no_categories) && !no_own.iter().any(|t| says(t)),
                "categories {cats:?}, yet the log says otherwise:\n{log}"
            );
        } else if cats.iter().any(|c| c == "@write") {
            assert!(
                !says(no_categories) && no_own.iter().any(|t| says(t)),
                "categories {cats:?} without @ratelimit; the log:\n{log}"
            );
        } else {
            assert!(cats.is_empty(), "{cats:?}");
            assert!(says(no_categories), "{log}");
            let checks = "The module refuses its commands to users who may not run SET";
            let off = "own write check is off (ratelimit.acl-write-check no)";
            if check == "yes" {
                assert!(says(checks) && !says(off), "{log}");
            } else {
                assert!(says(off) && !says(checks), "{log}");
            }
        }
    }
}

#[test]
fn log_levels_are_read_from_the_line() {
    let line = "20507:M 24 Nov 2026 22:56:46.048 # Module ratelimit OnUnload failed.";
    assert_eq!(level(line), Some("#"));
    assert_eq!(module_warnings(line), vec![line]);
    let notice = "20507:M 24 Nov 2026 22:56:46.057 * Module ratelimit unloaded";
    assert!(module_warnings(notice).is_empty());
    let other = "20507:M 24 Nov 2026 22:56:46.057 # Redis is now ready to exit, bye bye...";
    assert!(module_warnings(other).is_empty());
}

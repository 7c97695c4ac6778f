//! The test harness itself: a failed start is retried on a new port and directory, a
//! start that never succeeds names every attempt's cause with the server's log, and a
//! missing module file is reported before any server is started.

use crate::common;

use common::server::{Server, START_ATTEMPTS};
use std::net::TcpListener;

#[test]
fn a_start_whose_port_is_taken_is_retried_on_another_port() {
    // The first attempt's port is held by this test, so that server cannot bind it.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let s = Server::builder()
        .first_port(port)
        .try_start()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(s.port, port);
    assert_eq!(s.failed_attempts.len(), 1, "{:?}", s.failed_attempts);
    let first = &s.failed_attempts[0];
    assert_eq!(first.port, port);
    assert!(
        first.log.contains("Address already in use"),
        "the first attempt's log names its cause:\n{}",
        first.log
    );
    // The retried server is a working server with the module.
    let mut c = s.client();
    assert_eq!(c.cmd(&["RL.FIXED", "k", "1", "1s"]).ints()[0], 0);
    // The failed attempt's directory was its own: the server's directory is intact.
    assert!(s.dir.join("redis.conf").is_file());
}

#[test]
fn a_start_that_never_succeeds_names_every_attempts_cause() {
    let err = match Server::builder()
        .config("no-such-directive", "1")
        .try_start()
    {
        Ok(_) => panic!("a server with a bad directive started"),
        Err(e) => e,
    };
    assert!(err.before_start.is_none(), "{err}");
    assert_eq!(err.attempts.len(), START_ATTEMPTS, "{err}");
    for a in &err.attempts {
        assert!(a.reason.contains("exited"), "{err}");
        assert!(
            a.log.contains("no-such-directive"),
            "each attempt keeps its own log:\n{err}"
        );
    }
    let text = err.to_string();
    assert!(text.contains("attempt 5 on port"), "{text}");
    assert!(!text.contains("write config"), "{text}");
}

#[test]
fn a_missing_module_file_is_reported_before_any_server_starts() {
    let missing = std::env::temp_dir().join("rl-no-such-module.so");
    let err = match Server::builder().module_file(&missing).try_start() {
        Ok(_) => panic!("a server started with a missing module"),
        Err(e) => e,
    };
    assert!(err.attempts.is_empty(), "{err}");
    let text = err.to_string();
    assert_eq!(
        text,
        format!(
            "no server started: module file {} does not exist",
            missing.display()
        )
    );
}

/// A start whose port is held by another test's server is not that server: the
/// attempt fails (its process_id is not ours) and the next port is tried. The harness
/// once took the other server's PONG as its own and ran a test against a read-only
/// replica.
#[test]
fn a_start_on_a_port_another_server_answers_is_retried_elsewhere() {
    let other = Server::start();
    let s = Server::builder()
        .first_port(other.port)
        .try_start()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(s.port, other.port);
    assert_eq!(s.failed_attempts.len(), 1, "{:?}", s.failed_attempts);
    let mut c = s.client();
    let info = c.cmd(&["INFO", "server"]).text();
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().parse::<u32>().expect("a pid"));
    assert_eq!(pid, s.pid());
    assert_ne!(pid, other.pid());
}

//! Memory: limiter keys expire by themselves and the server's memory returns to its
//! baseline once they have.

use crate::common;

use common::{Client, Server};
use std::time::{Duration, Instant};

fn used_memory(c: &mut Client) -> i64 {
    let info = c.cmd(&["INFO", "memory"]).text();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// Whether the server deletes expired keys in the background (`DEBUG
/// SET-ACTIVE-EXPIRE`).
fn active_expire(c: &mut Client, on: bool) {
    let r = c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", if on { "1" } else { "0" }]);
    assert!(!r.is_err(), "DEBUG SET-ACTIVE-EXPIRE: {r:?}");
}

/// Write 20 000 limiter keys with short windows (`call(i)` builds the i-th call,
/// pipelined 1 000 at a time), wait until they have all expired by themselves, and
/// check that memory is back near where it started. The server deletes no expired key
/// in the background while they are written and counted, so that the keys a slow (or
/// busy) machine writes after the first have expired are still there to be counted.
fn returns_to_baseline(call: fn(usize) -> Vec<Vec<u8>>) {
    let s = Server::start();
    let mut c = s.client();
    // Warm up the server's own structures (client buffers, dict sizes) first.
    for round in 0..2 {
        let baseline = used_memory(&mut c);
        active_expire(&mut c, false);
        for batch in 0..20 {
            let calls: Vec<_> = (batch * 1_000..(batch + 1) * 1_000).map(call).collect();
            for (r, call) in c.pipeline(&calls).iter().zip(&calls) {
                assert!(!r.is_err(), "{call:?}: {r:?}");
            }
        }
        assert!(
            c.cmd(&["DBSIZE"]).int() > 10_000,
            "the workload wrote too little"
        );
        let grown = used_memory(&mut c);
        assert!(
            grown > baseline + 500_000,
            "keys took no memory? {baseline} -> {grown}"
        );
        active_expire(&mut c, true);
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.cmd(&["DBSIZE"]).int() > 0 {
            assert!(
                Instant::now() < deadline,
                "limiter keys did not expire by themselves"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let after = used_memory(&mut c);
        if round == 1 {
            // Within 256 KiB of the baseline: no per-key leak (20 000 keys would be MBs).
            assert!(
                (after - baseline).abs() < 256 * 1024,
                "baseline {baseline}, grown {grown}, after {after}"
            );
        }
    }
}

#[test]
fn fixed_window_keys_expire_and_memory_returns_to_baseline() {
    returns_to_baseline(|i| crate::args!["RL.FIXED", format!("user:{i}"), 10, "2s"]);
}

#[test]
fn gcra_keys_expire_and_memory_returns_to_baseline() {
    // One request per 2 s: each key lives 2 s, as the other rows' keys do (with 10 per
    // 2 s a key lived 200 ms, less than writing 20 000 of them takes on a busy machine).
    returns_to_baseline(|i| crate::args!["RL.GCRA", format!("user:{i}"), 5, 1, "2s"]);
}

#[test]
fn cl_throttle_keys_expire_and_memory_returns_to_baseline() {
    // RL.GCRA's row in redis-cell's arguments: one request per 2 seconds.
    returns_to_baseline(|i| crate::args!["CL.THROTTLE", format!("user:{i}"), 5, 1, 2]);
}

#[test]
fn log_keys_expire_and_memory_returns_to_baseline() {
    returns_to_baseline(|i| crate::args!["RL.LOG", format!("ip:{i}"), 10, "2s", "META", "user:42"]);
}

#[test]
fn lease_keys_expire_and_memory_returns_to_baseline() {
    // A lease with a made id per key, never released: the key expires with it.
    returns_to_baseline(|i| crate::args!["RL.LEASE", format!("pool:{i}"), 10, "2s"]);
}

#[test]
fn all_keys_expire_and_memory_returns_to_baseline() {
    returns_to_baseline(|i| {
        crate::args![
            "RL.ALL",
            3,
            format!("{{{i}}}g"),
            format!("{{{i}}}f"),
            format!("{{{i}}}l"),
            "GCRA",
            1,
            0,
            1,
            "2s",
            "FIXED",
            2,
            5,
            "2s",
            "LOG",
            3,
            5,
            "2s",
            "META",
            "u"
        ]
    });
}

#[test]
fn sliding_keys_expire_and_memory_returns_to_baseline() {
    returns_to_baseline(|i| {
        crate::args![
            "RL.SLIDING",
            2,
            format!("{{u{i}}}ip"),
            format!("{{u{i}}}id"),
            "LIMIT",
            "1s",
            10,
            "LIMIT",
            "2s",
            20
        ]
    });
}

#[test]
fn multi_keys_expire_and_memory_returns_to_baseline() {
    returns_to_baseline(|i| {
        crate::args![
            "RL.MULTI",
            2,
            format!("{{u{i}}}ip"),
            format!("{{u{i}}}id"),
            "LIMIT",
            "1s",
            10,
            "LIMIT",
            "2s",
            20
        ]
    });
}

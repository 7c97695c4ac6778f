//! Readers and writers of a whole keyspace: every key's expiry (by SCAN), one key of
//! every type, a whole RL.SWEEP, and the keyspace events of database 0.

use super::{Client, Value};
use std::collections::BTreeMap;

/// Every key of the node with its `PEXPIRETIME` (-1: no TTL).
pub fn expiries(c: &mut Client) -> BTreeMap<String, i64> {
    let mut keys = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let r = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
        cursor = r.array()[0].text();
        keys.extend(r.array()[1].array().iter().map(Value::text));
        if cursor == "0" {
            break;
        }
    }
    let cmds: Vec<Vec<Vec<u8>>> = keys
        .iter()
        .map(|k| crate::args!["PEXPIRETIME", k])
        .collect();
    let exps = c.pipeline(&cmds);
    keys.into_iter().zip(exps.iter().map(Value::int)).collect()
}

/// One key of every type, all without TTL, under `prefix`.
pub fn every_type(c: &mut Client, prefix: &str) -> Vec<String> {
    let k = |s: &str| format!("{prefix}{s}");
    c.cmd(&["SET", &k("string"), "v"]);
    c.cmd(&["RPUSH", &k("list"), "a"]);
    c.cmd(&["HSET", &k("hash"), "f", "v"]);
    c.cmd(&["SADD", &k("set"), "m"]);
    c.cmd(&["ZADD", &k("zset"), "1", "m"]);
    c.cmd(&["XADD", &k("stream"), "*", "f", "v"]);
    ["string", "list", "hash", "set", "zset", "stream"]
        .iter()
        .map(|s| k(s))
        .collect()
}

/// Run a whole sweep (`RL.SWEEP` from cursor 0 until it returns 0); returns (calls,
/// scanned, expired).
pub fn sweep_all(c: &mut Client, ttl: &str, opts: &[&str]) -> (u64, u64, u64) {
    let mut cursor = "0".to_string();
    let (mut calls, mut scanned, mut expired) = (0, 0, 0);
    loop {
        let mut cmd = vec!["RL.SWEEP", cursor.as_str(), ttl];
        cmd.extend(opts);
        let r = c.cmd(&cmd);
        let items = r.array();
        assert_eq!(items.len(), 3, "{r:?}");
        calls += 1;
        scanned += items[1].int() as u64;
        expired += items[2].int() as u64;
        cursor = items[0].text();
        if cursor == "0" {
            return (calls, scanned, expired);
        }
        assert!(calls < 100_000, "the sweep never ended");
    }
}

/// The next keyspace event of database 0 that a connection `PSUBSCRIBE`d to
/// `__keyspace@0__:*` (or a narrower pattern) receives, as (key, event).
pub fn next_event(sub: &mut Client) -> (String, String) {
    let m = sub.read().expect("a keyspace event");
    let parts = m.array();
    let channel = parts[2].text();
    let key = channel.trim_start_matches("__keyspace@0__:").to_string();
    (key, parts[3].text())
}

//! Loading the module and what the server knows about its commands.

use crate::common;

use common::server::module_path;
use common::{info_fields, Server, Value};

#[test]
fn loads_from_the_config_file() {
    let s = Server::start();
    let mut c = s.client();
    let modules = c.cmd(&["MODULE", "LIST"]);
    let names: Vec<String> = modules
        .array()
        .iter()
        .map(|m| m.array()[1].text())
        .collect();
    // Valkey 9 also lists its Lua engine as a module.
    assert!(names.iter().any(|n| n == "ratelimit"), "{names:?}");
    assert_eq!(c.cmd(&["RL.FIXED", "k", "1", "1s"]).ints()[0], 0);
}

#[test]
fn loads_with_module_load_at_runtime() {
    let s = Server::builder().module(false).start();
    let mut c = s.client();
    assert!(c
        .cmd(&["RL.FIXED", "k", "1", "1s"])
        .err()
        .unwrap()
        .contains("unknown command"));
    let path = module_path().display().to_string();
    assert_eq!(
        c.cmd(&["MODULE", "LOAD", &path]),
        Value::Status("OK".into())
    );
    assert_eq!(c.cmd(&["RL.FIXED", "k", "1", "1s"]).ints()[..3], [0, 1, 0]);
}

#[test]
fn command_getkeys_and_info() {
    let s = Server::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "RL.FIXED", "user:1", "10", "1m", "COST", "2"]),
        Value::Array(vec![Value::Bulk(b"user:1".to_vec())])
    );
    let info = c.cmd(&["COMMAND", "INFO", "RL.FIXED"]);
    let entry = info.array()[0].array();
    assert_eq!(entry[0].text(), "RL.FIXED");
    assert_eq!(
        entry[1],
        Value::Int(-1),
        "arity: at least the name; the command checks its arguments itself"
    );
    let flags = format!("{:?}", entry[2]);
    // Not deny-oom: denials and peeks answer at OOM; the module refuses only writes.
    assert!(
        flags.contains("write") && !flags.contains("denyoom"),
        "{flags}"
    );
    assert_eq!(
        &entry[3..6],
        &[Value::Int(1), Value::Int(1), Value::Int(1)],
        "first/last/step"
    );
    // Arity is enforced by the server itself.
    assert!(c
        .cmd(&["RL.FIXED", "k", "1"])
        .err()
        .unwrap()
        .contains("wrong number of arguments"));
}

#[test]
fn acl_key_patterns_apply() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all"]);
    let mut u = s.client();
    assert_eq!(u.cmd(&["AUTH", "app", "pw"]), Value::Status("OK".into()));
    assert_eq!(u.cmd(&["RL.FIXED", "app:1", "5", "1m"]).ints()[0], 0);
    let denied = u.cmd(&["RL.FIXED", "other:1", "5", "1m"]);
    assert!(denied.err().unwrap().starts_with("NOPERM"), "{denied:?}");
    assert_eq!(c.cmd(&["EXISTS", "other:1"]).int(), 0);
}

#[test]
fn info_section_counts_calls_allowed_denied_and_errors() {
    let s = Server::start();
    let mut c = s.client();
    for _ in 0..3 {
        c.cmd(&["RL.FIXED", "k", "2", "1m"]);
    }
    c.cmd(&["RL.FIXED", "k", "2", "0s"]);
    c.cmd(&["RL.FIXED", "k", "2", "1m", "COST", "0"]);
    let fields = info_fields(&mut c);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    assert_eq!(get("ratelimit_fixed_calls"), Some(5), "{fields:?}");
    assert_eq!(get("ratelimit_fixed_allowed"), Some(3), "{fields:?}");
    assert_eq!(get("ratelimit_fixed_denied"), Some(1), "{fields:?}");
    assert_eq!(get("ratelimit_fixed_errors"), Some(1), "{fields:?}");
    c.cmd(&["RL.SLIDING", "1", "s", "LIMIT", "1m", "1"]);
    c.cmd(&["RL.SLIDING", "1", "s", "LIMIT", "1m", "1"]);
    c.cmd(&["RL.SLIDING", "1", "s", "LIMIT", "1m", "1", "BUCKETS", "7"]);
    let fields = info_fields(&mut c);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    assert_eq!(
        ["calls", "allowed", "denied", "errors"].map(|f| get(&format!("ratelimit_sliding_{f}"))),
        [Some(3), Some(1), Some(1), Some(1)],
        "{fields:?}"
    );
    // RL.ALL counts as one call, whatever its rules.
    c.cmd(&[
        "RL.ALL", "2", "{a}1", "{a}2", "FIXED", "1", "1", "1m", "LOG", "2", "5", "1m",
    ]);
    c.cmd(&[
        "RL.ALL", "2", "{a}1", "{a}2", "FIXED", "1", "1", "1m", "LOG", "2", "5", "1m",
    ]);
    c.cmd(&["RL.ALL", "1", "{a}1", "FIXED", "1", "1", "1m", "COST", "2"]);
    let fields = info_fields(&mut c);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    assert_eq!(
        ["calls", "allowed", "denied", "errors"].map(|f| get(&format!("ratelimit_all_{f}"))),
        [Some(3), Some(1), Some(1), Some(1)],
        "{fields:?}"
    );
    // The bulk TTL commands count the keys they gave a TTL (a dry run gives none).
    c.cmd(&["SET", "p1", "x"]);
    c.cmd(&["SET", "p2", "x"]);
    c.cmd(&["RL.BULKEXPIRE", "1h", "p1", "missing"]);
    c.cmd(&["RL.SWEEP", "0", "1h", "DRYRUN"]);
    c.cmd(&["RL.SWEEP", "0", "1h", "COUNT", "1000"]);
    let fields = info_fields(&mut c);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    assert_eq!(get("ratelimit_bulkexpire_calls"), Some(1), "{fields:?}");
    assert_eq!(
        get("ratelimit_bulkexpire_keys_expired"),
        Some(1),
        "{fields:?}"
    );
    assert_eq!(get("ratelimit_sweep_calls"), Some(2), "{fields:?}");
    assert_eq!(get("ratelimit_sweep_keys_expired"), Some(1), "{fields:?}");
    assert_eq!(get("ratelimit_sweep_errors"), Some(0), "{fields:?}");
}

/// The keyspace events of a `SUBSCRIBE`d connection, as (key, event), until `n` came.
fn events(sub: &mut common::Client, n: usize) -> Vec<(String, String)> {
    (0..n).map(|_| common::keyspace::next_event(sub)).collect()
}

#[test]
fn limiter_writes_send_the_same_keyspace_events_as_their_twins() {
    let s = Server::start();
    let mut c = s.client();
    let [functions, scripts] = common::Twins::both(&mut c);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = s.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    // For each side: a write in a new window, a write in the same window, a denial
    // that gives a counter without TTL its TTL, and a denial that writes nothing.
    let call = |twin: Option<&common::Twin>, k: &str, args: &[&str]| -> Vec<String> {
        match twin {
            None => [&["RL.FIXED", k], args]
                .concat()
                .iter()
                .map(|a| a.to_string())
                .collect(),
            Some(t) => t.argv(&[k], args),
        }
    };
    for (twin, k) in [
        (None, "n"),
        (Some(&functions.fixed), "f"),
        (Some(&scripts.fixed), "s"),
    ] {
        for _ in 0..3 {
            c.cmd(&call(twin, k, &["2", "1h"]));
        }
        let bare = format!("{k}:bare");
        c.cmd(&["SET", &bare, "2"]);
        assert_eq!(c.cmd(&call(twin, &bare, &["2", "1h"])).ints()[0], 1);
    }
    c.cmd(&["SET", "end", "x"]);
    let mut got = events(&mut sub, 19);
    assert_eq!(got.pop(), Some(("end".to_string(), "set".to_string())));
    let side = |p: char| -> Vec<(String, String)> {
        got.iter()
            .filter(|(k, _)| k.starts_with(p))
            .map(|(k, e)| (k[1..].to_string(), e.clone()))
            .collect()
    };
    let (native, function, script) = (side('n'), side('f'), side('s'));
    assert_eq!(native, function, "the function");
    assert_eq!(native, script, "the script");
    let expected: Vec<(String, String)> = [
        ("", "set"),
        ("", "expire"),
        ("", "set"),
        ("", "expire"),
        (":bare", "set"),
        (":bare", "expire"),
    ]
    .iter()
    .map(|(k, e)| (k.to_string(), e.to_string()))
    .collect();
    assert_eq!(native, expected);
}

/// Regression: a denial or a peek opened the key for writing and the server signalled
/// it as modified on close, aborting other clients' `WATCH`ed transactions (and client
/// side caches) although nothing changed; the twins' denials do not. Only writes signal.
#[test]
fn denials_and_peeks_leave_watched_keys_alone() {
    let s = Server::start();
    let mut c = s.client();
    let mut watcher = s.client();
    let twins = common::Twins::load(&mut c);
    let functions = common::Twins::functions(&mut c);
    c.cmd(&["RL.FIXED", "f", "1", "1h"]);
    c.cmd(&["RL.GCRA", "g", "0", "1", "1h"]);
    c.cmd(&["RL.MULTI", "1", "m", "LIMIT", "1h", "1"]);
    c.cmd(&["RL.SLIDING", "1", "s", "LIMIT", "1h", "1"]);
    c.cmd(&["RL.LOG", "l", "1", "1h"]);
    c.cmd(&["RL.LEASE", "ls", "1", "1h", "ID", "a"]);
    c.cmd(&[
        "RL.ALL", "2", "{a}f", "{a}l", "FIXED", "1", "1", "1h", "LOG", "2", "5", "1h",
    ]);
    c.cmd(&["SET", "ttl", "x", "EX", "100"]);
    // (call, key watched, whether it writes)
    let cases: Vec<(Vec<&str>, &str, bool)> = vec![
        (vec!["RL.FIXED", "f", "1", "1h"], "f", false),
        (vec!["RL.FIXED", "f", "1", "1h", "COST", "0"], "f", false),
        (
            vec!["EVALSHA", &twins.fixed.id, "1", "f", "1", "1h"],
            "f",
            false,
        ),
        (vec!["FCALL", "rl_fixed", "1", "f", "1", "1h"], "f", false),
        (vec!["RL.GCRA", "g", "0", "1", "1h"], "g", false),
        (
            vec!["RL.GCRA", "g", "5", "1", "1h", "COST", "0"],
            "g",
            false,
        ),
        (vec!["RL.MULTI", "1", "m", "LIMIT", "1h", "1"], "m", false),
        (
            vec!["RL.MULTI", "1", "m", "LIMIT", "1h", "9", "COST", "0"],
            "m",
            false,
        ),
        (vec!["RL.SLIDING", "1", "s", "LIMIT", "1h", "1"], "s", false),
        (
            vec!["RL.SLIDING", "1", "s", "LIMIT", "1h", "9", "COST", "0"],
            "s",
            false,
        ),
        (vec!["RL.LOG", "l", "1", "1h"], "l", false),
        (vec!["RL.LOG", "l", "9", "1h", "COST", "0"], "l", false),
        (vec!["RL.LEASE", "ls", "1", "1h", "ID", "b"], "ls", false),
        (
            vec!["RL.LEASE", "ls", "9", "1h", "ID", "a", "COST", "0"],
            "ls",
            false,
        ),
        (vec!["RL.RELEASE", "ls", "unknown"], "ls", false),
        (
            vec!["FCALL", "rl_lease", "1", "ls", "1", "1h", "ID", "b"],
            "ls",
            false,
        ),
        (
            vec!["FCALL", "rl_release", "1", "ls", "unknown"],
            "ls",
            false,
        ),
        (vec!["RL.BULKEXPIRE", "1h", "ttl"], "ttl", false),
        // RL.ALL denied by its first rule: the second key is not touched either.
        (
            vec![
                "RL.ALL", "2", "{a}f", "{a}l", "FIXED", "1", "1", "1h", "LOG", "2", "5", "1h",
            ],
            "{a}l",
            false,
        ),
        (
            vec![
                "RL.ALL", "2", "{a}f", "{a}l", "FIXED", "1", "9", "1h", "LOG", "2", "9", "1h",
                "COST", "0",
            ],
            "{a}f",
            false,
        ),
        (
            vec![
                "EVALSHA",
                &twins.all.id,
                "2",
                "{a}f",
                "{a}l",
                "FIXED",
                "1",
                "1",
                "1h",
                "LOG",
                "2",
                "5",
                "1h",
            ],
            "{a}l",
            false,
        ),
        (
            vec![
                "FCALL",
                &functions.all.id,
                "2",
                "{a}f",
                "{a}l",
                "FIXED",
                "1",
                "1",
                "1h",
                "LOG",
                "2",
                "5",
                "1h",
            ],
            "{a}l",
            false,
        ),
        (
            vec![
                "RL.ALL", "2", "{a}f2", "{a}l2", "FIXED", "1", "9", "1h", "LOG", "2", "9", "1h",
            ],
            "{a}l2",
            true,
        ),
        (vec!["RL.FIXED", "f2", "5", "1h"], "f2", true),
        (vec!["RL.GCRA", "g2", "5", "1", "1h"], "g2", true),
        (vec!["RL.MULTI", "1", "m2", "LIMIT", "1h", "9"], "m2", true),
        (
            vec!["RL.SLIDING", "1", "s2", "LIMIT", "1h", "9"],
            "s2",
            true,
        ),
        (vec!["RL.LOG", "l2", "9", "1h"], "l2", true),
        (vec!["RL.LEASE", "ls", "9", "1h", "ID", "b"], "ls", true),
        (vec!["RL.RELEASE", "ls", "b"], "ls", true),
        (vec!["RL.BULKEXPIRE", "1h", "p"], "p", true),
    ];
    c.cmd(&["SET", "p", "x"]);
    for (call, key, writes) in cases {
        watcher.cmd(&["WATCH", key]);
        watcher.cmd(&["MULTI"]);
        watcher.cmd(&["PING"]);
        let r = c.cmd(&call);
        assert!(!r.is_err(), "{call:?}: {r:?}");
        let exec = watcher.cmd(&["EXEC"]);
        assert_eq!(exec == Value::Nil, writes, "{call:?}: EXEC gave {exec:?}");
    }
}

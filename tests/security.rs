//! Security and pressure: ACL rules on the commands, limiting under maxmemory, bounded
//! state and work, trusted time, MODULE UNLOAD and a second MODULE LOAD. Each test
//! runs on whatever server the suite runs on (Redis 7.0 and Valkey 9 in `make test`)
//! and checks what that server can do: ACL categories where it can set them, the
//! module's own write check where it cannot.

use crate::common;

use common::server::module_path;
use common::{unix_ms, Client, Server, Twins, Value};
use std::time::Duration;

/// A connection authenticated as `user` (password `pw`).
fn login(s: &Server, user: &str) -> Client {
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", user, "pw"]), Value::Status("OK".into()));
    c
}

/// Whether this server put the commands in ACL categories (Redis 7.2+, Valkey 8+).
fn has_categories(c: &mut Client) -> bool {
    let info = c.cmd(&["COMMAND", "INFO", "RL.FIXED"]);
    let entry = info.array()[0].array();
    format!("{:?}", entry[6]).contains("@write")
}

/// One call of every command, each naming a key of its own that starts with `p`
/// (RL.SWEEP names none).
fn every_command(p: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        v(&["RL.FIXED", &format!("{p}:fixed"), "5", "1m"]),
        v(&["RL.GCRA", &format!("{p}:gcra"), "4", "10", "1s"]),
        v(&["RL.MULTI", "1", &format!("{p}:multi"), "LIMIT", "1s", "5"]),
        v(&[
            "RL.SLIDING",
            "1",
            &format!("{p}:sliding"),
            "LIMIT",
            "1s",
            "5",
        ]),
        v(&["RL.LOG", &format!("{p}:log"), "5", "1m", "META", "u"]),
        v(&["RL.LEASE", &format!("{p}:lease"), "5", "1m", "ID", "w"]),
        v(&["RL.RELEASE", &format!("{p}:lease"), "w"]),
        v(&[
            "RL.ALL",
            "2",
            &format!("{p}:all:f"),
            &format!("{p}:all:l"),
            "FIXED",
            "1",
            "5",
            "1m",
            "LOG",
            "2",
            "5",
            "1m",
        ]),
        v(&["CL.THROTTLE", &format!("{p}:cell"), "4", "10", "60"]),
        v(&["RL.BULKEXPIRE", "1h", &format!("{p}:bulk")]),
        v(&["RL.SWEEP", "0", "1h"]),
    ]
}

/// The number of refusals `ACL LOG` counts for `user` (entries of the same kind are
/// merged into one with a count; `ACL LOG` alone lists only the latest 10 entries).
fn acl_log_count(c: &mut Client, user: &str) -> i64 {
    c.cmd(&["ACL", "LOG", "128"])
        .array()
        .iter()
        .filter_map(|entry| {
            let fields = entry.array();
            let field = |name: &str| {
                fields
                    .iter()
                    .position(|f| matches!(f, Value::Bulk(b) if b == name.as_bytes()))
                    .and_then(|i| fields.get(i + 1))
            };
            (field("username")?.text() == user).then(|| field("count").map_or(0, Value::int))
        })
        .sum()
}

fn is_noperm(v: &Value) -> bool {
    v.err().is_some_and(|e| e.starts_with("NOPERM"))
}

// ---- 1. ACL ---------------------------------------------------------------------

#[test]
fn a_user_denied_writes_cannot_write_through_any_command() {
    let s = Server::start();
    let mut admin = s.client();
    admin.cmd(&["SET", "persistent", "1"]);
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "ro",
        "on",
        ">pw",
        "~*",
        "+@all",
        "-@write",
        "-@dangerous",
    ]);
    let mut ro = login(&s, "ro");
    assert!(is_noperm(&ro.cmd(&["SET", "k", "1"])));
    admin.cmd(&["SET", "k:bulk", "1"]);
    for call in every_command("k") {
        let reply = ro.cmd(&call);
        assert!(is_noperm(&reply), "{call:?}: {reply:?}");
    }
    assert_eq!(
        admin
            .cmd(&[
                "EXISTS",
                "k:fixed",
                "k:gcra",
                "k:multi",
                "k:sliding",
                "k:log",
                "k:lease",
                "k:all:f",
                "k:all:l",
                "k:cell"
            ])
            .int(),
        0,
        "nothing written"
    );
    // Neither bulk command gave a TTL.
    assert_eq!(admin.cmd(&["TTL", "k:bulk"]).int(), -1);
    assert_eq!(admin.cmd(&["TTL", "persistent"]).int(), -1);
    // Every refusal is in the ACL log, as the server's own refusals are (SET's too).
    assert_eq!(
        acl_log_count(&mut admin, "ro"),
        1 + every_command("k").len() as i64
    );
}

/// The calls of the commands that write several keys, each naming `first` then
/// `second` (RL.SWEEP names no key).
/// The default user's rules are read at every call, also after the module has kept its
/// handle (it keeps it: the server never frees or moves its default user): denied `SET`
/// after a first call, the default user is refused where the module checks writes
/// itself; given it back, it writes again; a named user deleted and made again with
/// other rules is judged by its new rules.
#[test]
fn the_default_users_rules_are_read_at_every_call_after_its_first() {
    let s = Server::start();
    let mut c = s.client();
    let categories = has_categories(&mut c);
    let fixed = ["RL.FIXED", "d:1", "5", "1m"];
    assert!(!is_noperm(&c.cmd(&fixed)));
    c.cmd(&["ACL", "SETUSER", "default", "-set"]);
    let refused = is_noperm(&c.cmd(&fixed));
    assert_eq!(
        refused, !categories,
        "refused where the module checks writes itself"
    );
    c.cmd(&["ACL", "SETUSER", "default", "+set"]);
    assert!(!is_noperm(&c.cmd(&fixed)));
    if categories {
        return;
    }
    for (rules, refused) in [("+@all", false), ("-set", true), ("+@all", false)] {
        let mut admin = s.client();
        admin.cmd(&["ACL", "DELUSER", "u"]);
        let mut setuser = vec!["ACL", "SETUSER", "u", "on", ">pw", "~*"];
        setuser.extend(rules.split(' '));
        if rules == "-set" {
            setuser.insert(6, "+@all");
        }
        assert_eq!(admin.cmd(&setuser), Value::Status("OK".into()));
        let mut u = login(&s, "u");
        assert_eq!(is_noperm(&u.cmd(&fixed)), refused, "{rules}");
    }
}

fn multi_key_calls(first: &str, second: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        v(&["RL.MULTI", "2", first, second, "LIMIT", "1m", "5"]),
        v(&["RL.SLIDING", "2", first, second, "LIMIT", "1m", "5"]),
        v(&["RL.BULKEXPIRE", "1h", first, second]),
        v(&[
            "RL.ALL", "2", first, second, "FIXED", "1", "5", "1m", "GCRA", "2", "1", "5", "1m",
        ]),
    ]
}

/// Where the module checks writes itself (Redis 7.0, no command categories), it checks
/// every key a call writes, in any order: a user whose only write permission is a
/// selector `(+set ~a:*)` cannot write `b:1` through a call that names `a:1` first.
/// Where the server has categories, the server's own rules decide: that user holds
/// the commands on every key (`~* +rl.multi ...`), so the calls go through there.
#[test]
fn the_write_check_covers_every_key_of_a_call_in_any_order() {
    let s = Server::start();
    let mut admin = s.client();
    let categories = has_categories(&mut admin);
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "sel",
        "on",
        ">pw",
        "~*",
        "+rl.multi",
        "+rl.sliding",
        "+rl.bulkexpire",
        "+rl.all",
        "(+set +pexpire ~a:*)",
    ]);
    let mut sel = login(&s, "sel");
    assert!(
        is_noperm(&sel.cmd(&["SET", "b:1", "1"])),
        "the selector stops SET b:1"
    );
    assert_eq!(sel.cmd(&["SET", "a:0", "1"]), Value::Status("OK".into()));
    for (first, second) in [("a:1", "b:1"), ("b:1", "a:1")] {
        for call in multi_key_calls(first, second) {
            let bulk = call[0] == "RL.BULKEXPIRE";
            if bulk {
                // Keys without a TTL, for RL.BULKEXPIRE to give one to.
                admin.cmd(&["SET", "a:1", "1"]);
                admin.cmd(&["SET", "b:1", "1"]);
            }
            let reply = sel.cmd(&call);
            if categories {
                assert!(!reply.is_err(), "{call:?}: {reply:?}");
            } else {
                assert!(is_noperm(&reply), "{call:?}: {reply:?}");
                // Nothing written on either key.
                if bulk {
                    assert_eq!(admin.cmd(&["TTL", "a:1"]).int(), -1, "{call:?}");
                    assert_eq!(admin.cmd(&["TTL", "b:1"]).int(), -1, "{call:?}");
                } else {
                    assert_eq!(admin.cmd(&["EXISTS", "a:1", "b:1"]).int(), 0, "{call:?}");
                }
            }
            admin.cmd(&["DEL", "a:1", "b:1"]);
        }
    }
    // Keys that the selector covers go through on every server.
    for call in multi_key_calls("a:1", "a:2") {
        let reply = sel.cmd(&call);
        assert!(!reply.is_err(), "{call:?}: {reply:?}");
        admin.cmd(&["DEL", "a:1", "a:2"]);
    }
}

/// A key pattern (`~a:*`) stops a call that names any other key, in any order, on
/// every server (the server checks the declared keys; the module's own check agrees).
#[test]
fn key_patterns_cover_every_key_of_a_call_in_any_order() {
    let s = Server::start();
    let mut admin = s.client();
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "pat",
        "on",
        ">pw",
        "~a:*",
        "+rl.multi",
        "+rl.sliding",
        "+rl.bulkexpire",
        "+rl.all",
        "+set",
        "+pexpire",
    ]);
    let mut pat = login(&s, "pat");
    for (first, second) in [("a:1", "b:1"), ("b:1", "a:1")] {
        for call in multi_key_calls(first, second) {
            admin.cmd(&["SET", "b:1", "1"]);
            let reply = pat.cmd(&call);
            assert!(is_noperm(&reply), "{call:?}: {reply:?}");
            assert_eq!(admin.cmd(&["EXISTS", "a:1"]).int(), 0, "{call:?}");
            assert_eq!(admin.cmd(&["TTL", "b:1"]).int(), -1, "{call:?}");
        }
    }
    for call in multi_key_calls("a:1", "a:2") {
        let reply = pat.cmd(&call);
        assert!(!reply.is_err(), "{call:?}: {reply:?}");
        admin.cmd(&["DEL", "a:1", "a:2"]);
    }
}

#[test]
fn write_and_ratelimit_categories_grant_the_commands_where_the_server_has_them() {
    let s = Server::start();
    let mut admin = s.client();
    admin.cmd(&["ACL", "SETUSER", "w", "on", ">pw", "~*", "+@write"]);
    admin.cmd(&["ACL", "SETUSER", "rl", "on", ">pw", "~*", "+@ratelimit"]);
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "named",
        "on",
        ">pw",
        "~*",
        "+rl.fixed",
        "+set",
    ]);
    let categories = has_categories(&mut admin);
    let mut w = login(&s, "w");
    let mut named = login(&s, "named");
    // Granting a command by name works everywhere (on Redis 7.0 it is the only way;
    // there the module also wants SET, the write the command stands for).
    assert_eq!(named.cmd(&["RL.FIXED", "n", "5", "1m"]).ints()[0], 0);
    let listed = admin.cmd(&["ACL", "CAT", "write"]);
    let listed: Vec<String> = listed
        .array()
        .iter()
        .map(|c| c.text().to_lowercase())
        .collect();
    if categories {
        for call in every_command("w") {
            let reply = w.cmd(&call);
            assert!(!reply.is_err(), "+@write runs {call:?}: {reply:?}");
        }
        let mut rl = login(&s, "rl");
        for call in every_command("r") {
            let reply = rl.cmd(&call);
            assert!(!reply.is_err(), "+@ratelimit runs {call:?}: {reply:?}");
        }
        let own = admin.cmd(&["ACL", "CAT", "ratelimit"]);
        let mut own: Vec<String> = own
            .array()
            .iter()
            .map(|c| c.text().to_lowercase())
            .collect();
        own.sort();
        assert_eq!(
            own,
            [
                "cl.throttle",
                "rl.all",
                "rl.bulkexpire",
                "rl.fixed",
                "rl.gcra",
                "rl.lease",
                "rl.log",
                "rl.multi",
                "rl.release",
                "rl.sliding",
                "rl.sweep"
            ]
        );
        for c in [
            "rl.fixed",
            "rl.gcra",
            "rl.multi",
            "rl.sliding",
            "rl.log",
            "rl.lease",
            "rl.release",
            "rl.all",
            "cl.throttle",
            "rl.bulkexpire",
            "rl.sweep",
        ] {
            assert!(listed.iter().any(|l| l == c), "{c} in @write: {listed:?}");
        }
        let info = admin.cmd(&["COMMAND", "INFO", "RL.SWEEP"]);
        let cats = format!("{:?}", info.array()[0].array()[6]);
        assert!(
            cats.contains("@keyspace") && cats.contains("@slow"),
            "{cats}"
        );
        let info = admin.cmd(&["COMMAND", "INFO", "RL.FIXED"]);
        let cats = format!("{:?}", info.array()[0].array()[6]);
        assert!(cats.contains("@fast"), "{cats}");
    } else {
        // Redis 7.0: module commands are in no category (the load log says so), so
        // +@write does not name them and @ratelimit does not exist.
        assert!(is_noperm(&w.cmd(&["RL.FIXED", "w", "5", "1m"])));
        assert!(!listed.iter().any(|l| l.starts_with("rl.")), "{listed:?}");
        assert!(admin.cmd(&["ACL", "CAT", "ratelimit"]).is_err());
        assert!(s
            .log()
            .contains("cannot put module commands in ACL categories"));
    }
}

// ---- 2. maxmemory ---------------------------------------------------------------

/// A server whose used memory is far above its maxmemory, under `policy`.
fn over_maxmemory(policy: &str) -> (Server, Client, Twins) {
    let s = Server::builder().config("maxmemory-policy", policy).start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    c.cmd(&["DEBUG", "POPULATE", "50000", "filler", "64"]);
    (s, c, twins)
}

fn squeeze(c: &mut Client) {
    let info = c.cmd(&["INFO", "memory"]).text();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    c.cmd(&["CONFIG", "SET", "maxmemory", &(used / 2).to_string()]);
}

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

#[test]
fn over_maxmemory_denials_and_peeks_answer_and_only_writes_are_refused() {
    let (s, mut c, twins) = over_maxmemory("noeviction");
    let at = (unix_ms() + 3_600_000).to_string();
    // Full limiters made before memory ran out, one per command and twin.
    let limiters: Vec<(String, Vec<String>)> = vec![
        ("RL.FIXED".into(), vec!["1".into(), "1h".into()]),
        ("RL.GCRA".into(), vec!["0".into(), "1".into(), "1h".into()]),
    ];
    for (cmd, args) in &limiters {
        for (key, twin) in [("native", None), ("twin", Some(cmd))] {
            let key = format!("{cmd}:{key}:full");
            let mut call: Vec<String> = match twin {
                None => vec![cmd.clone(), key.clone()],
                Some(_) => {
                    let sha = if cmd == "RL.FIXED" {
                        &twins.fixed.id
                    } else {
                        &twins.gcra.id
                    };
                    vec!["EVALSHA".into(), sha.clone(), "1".into(), key.clone()]
                }
            };
            call.extend(args.iter().cloned());
            call.extend(["AT".into(), at.clone()]);
            assert_eq!(c.cmd(&call).ints()[0], 0, "{call:?}");
        }
    }
    squeeze(&mut c);
    assert_eq!(c.cmd(&["SET", "x", "y"]).err(), Some(OOM));
    for (cmd, args) in &limiters {
        let sha = if cmd == "RL.FIXED" {
            &twins.fixed.id
        } else {
            &twins.gcra.id
        };
        for twin in [false, true] {
            let side = if twin { "twin" } else { "native" };
            let call = |key: &str, extra: &[&str]| {
                let mut v: Vec<String> = if twin {
                    vec!["EVALSHA".into(), sha.clone(), "1".into(), key.into()]
                } else {
                    vec![cmd.clone(), key.into()]
                };
                v.extend(args.iter().cloned());
                v.extend(extra.iter().map(|s| s.to_string()));
                v.extend(["AT".into(), at.clone()]);
                v
            };
            let full = format!("{cmd}:{side}:full");
            // A denial answers as a denial.
            let r = c.cmd(&call(&full, &[]));
            assert_eq!(r.ints()[0], 1, "{side} {cmd} denial at OOM: {r:?}");
            // A peek answers.
            let r = c.cmd(&call(&format!("{cmd}:{side}:new"), &["COST", "0"]));
            assert_eq!(r.ints()[0], 0, "{side} {cmd} peek at OOM: {r:?}");
            // An allowed request would write: the server's OOM error, nothing written.
            let fresh = format!("{cmd}:{side}:new");
            assert_eq!(c.cmd(&call(&fresh, &[])).err(), Some(OOM), "{side} {cmd}");
            assert_eq!(c.cmd(&["EXISTS", &fresh]).int(), 0);
        }
    }
    // RL.MULTI: all or nothing holds at OOM too.
    let multi = |c: &mut Client, twin: bool, keys: &[&str], cost: &str| {
        let mut v: Vec<String> = if twin {
            vec!["EVALSHA".into(), twins.multi.id.clone()]
        } else {
            vec!["RL.MULTI".into()]
        };
        v.push(keys.len().to_string());
        v.extend(keys.iter().map(|k| k.to_string()));
        v.extend(["LIMIT", "1h", "3", "COST", cost, "AT", &at].map(String::from));
        c.cmd(&v)
    };
    for twin in [false, true] {
        let r = multi(&mut c, twin, &["{m}a", "{m}b"], "0");
        assert_eq!(r.array()[0].int(), 0, "peek: {r:?}");
        assert_eq!(multi(&mut c, twin, &["{m}a", "{m}b"], "1").err(), Some(OOM));
        assert_eq!(c.cmd(&["EXISTS", "{m}a", "{m}b"]).int(), 0);
    }
    // RL.ALL with a string rule and a log rule: peeks answer, writes get the OOM error
    // and neither key is written.
    for twin in [None, Some(twins.all.id.clone())] {
        let mut v: Vec<String> = match &twin {
            None => vec!["RL.ALL".into()],
            Some(sha) => vec!["EVALSHA".into(), sha.clone()],
        };
        v.extend(
            [
                "2", "{o}f", "{o}l", "FIXED", "1", "5", "1h", "LOG", "2", "5", "1h", "AT", &at,
            ]
            .map(String::from),
        );
        let mut peek = v.clone();
        peek.extend(["COST".into(), "0".into()]);
        assert_eq!(c.cmd(&peek).array()[0].int(), 0, "peek {twin:?}");
        assert_eq!(c.cmd(&v).err(), Some(OOM), "{twin:?}");
        assert_eq!(c.cmd(&["EXISTS", "{o}f", "{o}l"]).int(), 0);
    }
    // Bulk TTLs are how a full server gets memory back: they still run.
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    c.cmd(&["SET", "persistent", "1"]);
    squeeze(&mut c);
    assert_eq!(
        c.cmd(&["RL.BULKEXPIRE", "1h", "persistent"]),
        Value::Array(vec![Value::Bulk(b"persistent".to_vec())])
    );
    drop(s);
}

#[test]
fn under_an_eviction_policy_allowed_requests_write() {
    let (_s, mut c, twins) = over_maxmemory("allkeys-lru");
    squeeze(&mut c);
    // The server evicts before running the command, so the write finds room.
    assert_eq!(
        c.cmd(&["RL.FIXED", "lru", "5", "1m"]).ints()[..3],
        [0, 5, 4]
    );
    // (Not read back: under allkeys-lru any later command may evict it, as it may any
    // key written a moment before; the reply says it was allowed and written.)
    let r = c.cmd(&["EVALSHA", &twins.fixed.id, "1", "lru-twin", "5", "1m"]);
    assert_eq!(r.ints()[..3], [0, 5, 4]);
}

#[test]
fn a_log_over_maxmemory_answers_denials_and_peeks_and_refuses_writes() {
    let (_s, mut c, twins) = over_maxmemory("noeviction");
    let at = (common::unix_ms() + 3_600_000).to_string();
    for (side, head) in [
        ("native", vec!["RL.LOG".to_string()]),
        (
            "twin",
            vec!["EVALSHA".to_string(), twins.log.id.clone(), "1".to_string()],
        ),
    ] {
        let call = |c: &mut Client, key: &str, extra: &[&str]| {
            let mut v = head.clone();
            v.push(key.to_string());
            v.extend(["1", "1h", "META", "u"].map(String::from));
            v.extend(extra.iter().map(|s| s.to_string()));
            v.extend(["AT".to_string(), at.clone()]);
            c.cmd(&v)
        };
        let full = format!("log:{side}:full");
        assert_eq!(call(&mut c, &full, &[]).ints()[0], 0);
        squeeze(&mut c);
        assert_eq!(
            call(&mut c, &full, &[]).ints()[0],
            1,
            "{side}: a denial answers"
        );
        let fresh = format!("log:{side}:fresh");
        assert_eq!(
            call(&mut c, &fresh, &["COST", "0"]).ints()[0],
            0,
            "{side}: a peek answers"
        );
        assert_eq!(call(&mut c, &fresh, &[]).err(), Some(OOM), "{side}");
        assert_eq!(c.cmd(&["EXISTS", &fresh]).int(), 0);
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    }
}

// ---- 3 and 4. bounded state and work ------------------------------------------

#[test]
fn a_multi_key_keeps_a_bounded_number_of_windows() {
    let s = Server::start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    let at = (unix_ms() + 3_600_000).to_string();
    for twin in [false, true] {
        let key = if twin { "grow:twin" } else { "grow:native" };
        let call = |c: &mut Client, windows: std::ops::Range<u64>| {
            let mut v: Vec<String> = if twin {
                vec!["EVALSHA".into(), twins.multi.id.clone()]
            } else {
                vec!["RL.MULTI".into()]
            };
            v.extend(["1".into(), key.into()]);
            for w in windows {
                v.extend(["LIMIT".into(), format!("{}", 3_600 + w), "100".into()]);
            }
            v.extend(["AT".into(), at.clone()]);
            c.cmd(&v)
        };
        // Two calls of 16 distinct long windows each: 32 windows, the most a key keeps.
        assert_eq!(call(&mut c, 0..16).array()[0].int(), 0);
        assert_eq!(call(&mut c, 16..32).array()[0].int(), 0);
        let before = c.cmd(&["GET", key]).text();
        assert_eq!(before.split(',').count(), 32);
        // A 33rd window is refused with the rule in the error, and nothing is written.
        let r = call(&mut c, 32..33);
        let e = r.err().unwrap_or_default();
        assert!(
            e.starts_with(&format!(
                "ERR the key '{key}' would hold more than 32 windows"
            )),
            "{r:?}"
        );
        assert_eq!(c.cmd(&["GET", key]).text(), before);
        // Windows it already holds are still counted.
        assert_eq!(call(&mut c, 0..1).array()[0].int(), 0);
    }
}

#[test]
fn sweep_patterns_are_bounded_and_runs_of_stars_cost_nothing() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["DEBUG", "POPULATE", "5000", "p", "8"]);
    // Four million `*` match as one: the whole chunk is swept, within the client's
    // read timeout (the uncollapsed pattern took seconds per thousand keys).
    let stars = "*".repeat(4_000_000);
    let r = c.cmd(&[
        "RL.SWEEP", "0", "1h", "MATCH", &stars, "COUNT", "5000", "DRYRUN",
    ]);
    let items = r.array();
    assert_eq!(
        items[2].int(),
        items[1].int(),
        "every scanned key matches: {r:?}"
    );
    let long = "a".repeat(1_025);
    assert_eq!(
        c.cmd(&["RL.SWEEP", "0", "1h", "MATCH", &long]).err(),
        Some("ERR invalid MATCH pattern of 1025 bytes: at most 1024 bytes")
    );
}

// ---- 5. trusted time ------------------------------------------------------------

#[test]
fn at_far_from_the_server_clock_is_refused_once_a_tolerance_is_set() {
    let s = Server::start();
    let mut c = s.client();
    // The default: no bound (replays and pinned-time tests work).
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.at-tolerance"]),
        Value::Array(vec![
            Value::Bulk(b"ratelimit.at-tolerance".to_vec()),
            Value::Bulk(b"0".to_vec())
        ])
    );
    assert_eq!(
        c.cmd(&["RL.GCRA", "k", "0", "1", "1d", "AT", "4102444800000"])
            .ints()[0],
        0
    );
    c.cmd(&["CONFIG", "SET", "ratelimit.at-tolerance", "60000"]);
    let now = unix_ms();
    for (cmd, args) in [
        ("RL.FIXED", vec!["5", "1m"]),
        ("RL.GCRA", vec!["0", "1", "1d"]),
    ] {
        for at in [
            4_102_444_800_000,
            now + 120_000,
            now - 120_000,
            1_700_000_000_000,
        ] {
            let at = at.to_string();
            let mut v = vec![cmd, "t"];
            v.extend(&args);
            v.extend(["AT", &at]);
            assert_eq!(
                c.cmd(&v).err().map(str::to_string),
                Some(format!(
                    "ERR invalid AT '{at}': more than 60000 ms from the server clock (ratelimit.at-tolerance)"
                )),
                "{v:?}"
            );
        }
        let near = (now + 1_000).to_string();
        // A key of each command's own: RL.GCRA refuses RL.FIXED's counter.
        let key = format!("t2:{cmd}");
        let mut v = vec![cmd, key.as_str()];
        v.extend(&args);
        v.extend(["AT", &near]);
        assert_eq!(c.cmd(&v).ints()[0], 0, "{v:?}");
    }
    let at = (now - 120_000).to_string();
    let r = c.cmd(&["RL.MULTI", "1", "m", "LIMIT", "1s", "5", "AT", &at]);
    assert!(
        r.err()
            .is_some_and(|e| e.contains("ratelimit.at-tolerance")),
        "{r:?}"
    );
    assert_eq!(c.cmd(&["EXISTS", "t", "m"]).int(), 0);
    // Out of range for the setting.
    assert!(c
        .cmd(&["CONFIG", "SET", "ratelimit.at-tolerance", "-1"])
        .is_err());
}

#[test]
fn at_tolerance_can_be_set_in_the_configuration_file() {
    let s = Server::builder()
        .config("ratelimit.at-tolerance", "5000")
        .start();
    let mut c = s.client();
    let r = c.cmd(&["RL.FIXED", "k", "5", "1m", "AT", "1700000000000"]);
    assert!(r.err().is_some_and(|e| e.contains("5000 ms")), "{r:?}");
}

// ---- 6 and 7. unload and a second load --------------------------------------------

#[test]
fn module_unload_is_refused_so_a_queued_command_cannot_crash_the_server() {
    let s = Server::start();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["MULTI"]), Value::Status("OK".into()));
    assert_eq!(
        a.cmd(&["RL.FIXED", "q", "5", "1m"]),
        Value::Status("QUEUED".into())
    );
    let r = b.cmd(&["MODULE", "UNLOAD", "ratelimit"]);
    assert!(r.is_err(), "{r:?}");
    let exec = a.cmd(&["EXEC"]);
    assert_eq!(exec.array()[0].ints()[..3], [0, 5, 4]);
    assert_eq!(b.cmd(&["PING"]), Value::Status("PONG".into()));
    assert!(s.log().contains("ratelimit: MODULE UNLOAD is refused"));
}

#[test]
fn a_second_module_load_says_why_in_the_log() {
    let s = Server::start();
    let mut c = s.client();
    let path = module_path().display().to_string();
    let r = c.cmd(&["MODULE", "LOAD", &path]);
    assert!(r.is_err(), "{r:?}");
    // The server's reply is generic; its log says why.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !s
        .log()
        .contains("a module named 'ratelimit' is already loaded")
    {
        assert!(std::time::Instant::now() < deadline, "{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["RL.FIXED", "k", "1", "1s"]).ints()[0], 0);
}

#[test]
fn the_module_write_check_can_be_turned_off_only_where_the_server_has_no_categories() {
    let s = Server::start();
    let mut admin = s.client();
    admin.cmd(&[
        "ACL", "SETUSER", "ro", "on", ">pw", "~*", "+@all", "-@write",
    ]);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "ratelimit.acl-write-check", "no"]),
        Value::Status("OK".into())
    );
    let categories = has_categories(&mut admin);
    let mut ro = login(&s, "ro");
    let reply = ro.cmd(&["RL.FIXED", "off", "5", "1m"]);
    if categories {
        // The server enforces @write itself: the setting changes nothing.
        assert!(is_noperm(&reply), "{reply:?}");
    } else {
        // Redis 7.0 with the check off: module commands are in no category.
        assert_eq!(reply.ints()[0], 0, "{reply:?}");
        admin.cmd(&["CONFIG", "SET", "ratelimit.acl-write-check", "yes"]);
        assert!(is_noperm(&ro.cmd(&["RL.FIXED", "off", "5", "1m"])));
    }
}

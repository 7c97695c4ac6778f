//! RL.LEASE and RL.RELEASE against real servers: leases up to the limit, renewal,
//! expiry at the exact millisecond, made ids, the state readable with ZRANGE, release,
//! RL.ALL's LEASE rule, many clients on one key, replicas with and without the module,
//! AOF and RDB restarts, Cluster routing, keyspace events, bad inputs and wrong types.

mod common;

use common::{at_base, Client, Cluster, Server, Value, HOUR};

/// A lease reply: the five fields, and field 6 (the id, or `None` for nil).
fn lease_reply(v: &Value) -> (Vec<i64>, Option<String>) {
    let a = v.array();
    assert_eq!(a.len(), 6, "{v:?}");
    let five = a[..5].iter().map(Value::int).collect();
    let id = match &a[5] {
        Value::Nil => None,
        other => Some(other.text()),
    };
    (five, id)
}

fn lease(c: &mut Client, key: &str, args: &[&str]) -> (Vec<i64>, Option<String>) {
    let mut v = vec!["RL.LEASE", key];
    v.extend_from_slice(args);
    lease_reply(&c.cmd(&v))
}

fn release(c: &mut Client, key: &str, id: &str, at: &str) -> i64 {
    c.cmd(&["RL.RELEASE", key, id, "AT", at]).int()
}

/// The leases as a plain client reads them: (id, expiry ms), earliest first.
fn leases(c: &mut Client, key: &str) -> Vec<(String, u64)> {
    c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
        .array()
        .chunks(2)
        .map(|p| (p[0].text(), p[1].text().parse().expect("an integer score")))
        .collect()
}

#[test]
fn leases_up_to_the_limit_renew_expire_at_the_ms_and_release() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    // Two at a time, each held 10 s unless renewed.
    type Step = (u64, &'static [&'static str], [i64; 5], Option<&'static str>);
    let steps: &[Step] = &[
        (0, &["ID", "job-1"], [0, 2, 1, -1, 10_000], Some("job-1")),
        (
            1_000,
            &["ID", "job-2"],
            [0, 2, 0, -1, 10_000],
            Some("job-2"),
        ),
        // Full: job-3 waits for job-1, the earliest, at +10 000.
        (2_000, &["ID", "job-3"], [1, 2, 0, 8_000, 9_000], None),
        (2_000, &["COST", "0"], [1, 2, 0, 8_000, 9_000], None),
        // job-1 renews (a heartbeat is always allowed): held until +13 000.
        (
            3_000,
            &["ID", "job-1"],
            [0, 2, 0, -1, 10_000],
            Some("job-1"),
        ),
        // A peek with a live id does not renew it.
        (
            4_000,
            &["ID", "job-1", "COST", "0"],
            [1, 2, 0, 7_000, 9_000],
            None,
        ),
        // job-2 expires at exactly +11 000.
        (10_999, &["ID", "job-3"], [1, 2, 0, 1, 2_001], None),
        (
            11_000,
            &["ID", "job-3"],
            [0, 2, 0, -1, 10_000],
            Some("job-3"),
        ),
    ];
    for (ms, opts, want, id) in steps {
        let mut args = vec!["2", "10s"];
        args.extend_from_slice(opts);
        let a = at(*ms);
        args.extend(["AT", &a]);
        let (five, got) = lease(&mut c, "slots", &args);
        assert_eq!(five, want, "+{ms} {opts:?}");
        assert_eq!(got.as_deref(), *id, "+{ms} {opts:?}");
    }
    // job-2 was removed by job-3's write; the key expires with its latest lease.
    assert_eq!(
        leases(&mut c, "slots"),
        [("job-1".into(), t + 13_000), ("job-3".into(), t + 21_000)]
    );
    assert_eq!(c.cmd(&["PEXPIRETIME", "slots"]).int() as u64, t + 21_000);
    // Releases: unknown 0, live 1 (once), expired 0; the last one deletes the key.
    assert_eq!(release(&mut c, "slots", "nope", &at(12_000)), 0);
    assert_eq!(release(&mut c, "slots", "job-3", &at(12_000)), 1);
    assert_eq!(release(&mut c, "slots", "job-3", &at(12_000)), 0);
    assert_eq!(c.cmd(&["PEXPIRETIME", "slots"]).int() as u64, t + 13_000);
    assert_eq!(release(&mut c, "slots", "job-1", &at(13_000)), 0, "expired");
    assert_eq!(c.cmd(&["EXISTS", "slots"]).int(), 0);
    assert_eq!(release(&mut c, "slots", "job-1", &at(13_000)), 0, "no key");
}

#[test]
fn made_ids_are_unique_and_renew_as_given_ones() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR).to_string();
    let mut ids = Vec::new();
    for remaining in (0..5).rev() {
        let (five, id) = lease(&mut c, "made", &["5", "1m", "AT", &t]);
        assert_eq!(five, [0, 5, remaining, -1, 60_000]);
        let id = id.expect("an id");
        assert_eq!(id.len(), 20, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        ids.push(id);
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 5, "{ids:?}");
    // A made id renews as a given one.
    let (five, id) = lease(&mut c, "made", &["5", "2m", "ID", &ids[0], "AT", &t]);
    assert_eq!(
        (five, id.as_deref()),
        (vec![0, 5, 0, -1, 120_000], Some(&*ids[0]))
    );
    assert_eq!(c.cmd(&["ZCARD", "made"]).int(), 5);
    // Binary ids of 1 and 256 bytes.
    for id in ["\u{0}", &"\r\n".repeat(128)] {
        let (five, got) = lease(&mut c, "bin", &["10", "1m", "ID", id, "AT", &t]);
        assert_eq!(five[0], 0);
        assert_eq!(got.as_deref(), Some(id));
        assert_eq!(release(&mut c, "bin", id, &t), 1);
    }
}

#[test]
fn in_rl_all_a_lease_and_a_rate_are_one_atomic_call() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    // 2 at a time per account and 1 per second per user.
    let all = |c: &mut Client, id: &str, ms: u64| {
        let a = at(ms);
        c.cmd(&[
            "RL.ALL", "2", "acct:{7}", "user:{7}", "LEASE", "1", "2", "30s", "FIXED", "2", "1",
            "1s", "ID", id, "AT", &a,
        ])
    };
    let r = all(&mut c, "r1", 0);
    let a = r.array();
    assert_eq!(a.len(), 8);
    assert_eq!(
        a[..6].iter().map(Value::int).collect::<Vec<_>>(),
        [0, 1, 0, -1, 1_000, 2]
    );
    assert_eq!((a[6].text(), a[7].text()), ("user:{7}".into(), "r1".into()));
    // The rate denies: no slot taken, field 8 nil.
    let r = all(&mut c, "r2", 10);
    assert_eq!(r.array()[0].int(), 1);
    assert_eq!(r.array()[7], Value::Nil);
    assert_eq!(leases(&mut c, "acct:{7}"), [("r1".into(), t + 30_000)]);
    // A second later both fit: the lease binds with the least remaining.
    let r = all(&mut c, "r2", 1_000);
    let a = r.array();
    assert_eq!(
        a[..6].iter().map(Value::int).collect::<Vec<_>>(),
        [0, 2, 0, -1, 30_000, 1]
    );
    assert_eq!(a[7].text(), "r2");
    // A call without LEASE has seven fields and takes no ID.
    let r = c.cmd(&["RL.ALL", "1", "x", "FIXED", "1", "5", "1m", "AT", &at(0)]);
    assert_eq!(r.array().len(), 7);
    let r = c.cmd(&["RL.ALL", "1", "x", "FIXED", "1", "5", "1m", "ID", "a"]);
    assert_eq!(
        r.err(),
        Some("ERR unknown option 'ID' (options here: COST, AT)")
    );
    // Without ID the call gets a made id.
    let r = c.cmd(&[
        "RL.ALL",
        "1",
        "acct:9",
        "LEASE",
        "1",
        "2",
        "30s",
        "AT",
        &at(0),
    ]);
    let id = r.array()[7].text();
    assert_eq!(leases(&mut c, "acct:9"), [(id, t + 30_000)]);
}

/// 16 clients acquire and release leases on one key, with the server's clock and a ttl
/// that does not run out during the test: a watcher's snapshots of the sorted set
/// (MULTI/EXEC) never hold more than the limit, every lease granted is released once,
/// and the key is gone at the end.
#[test]
fn sixteen_clients_never_hold_more_than_the_limit() {
    const LIMIT: usize = 5;
    let s = Server::start();
    let port = s.port;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut c = Client::connect(port).expect("connect");
            let (mut most, mut snapshots) = (0usize, 0u32);
            while !done.load(std::sync::atomic::Ordering::SeqCst) && snapshots < 20_000 {
                c.cmd(&["MULTI"]);
                c.cmd(&["ZCARD", "pool"]);
                c.cmd(&["ZRANGE", "pool", "0", "-1"]);
                let r = c.cmd(&["EXEC"]);
                let n = r.array()[0].int() as usize;
                assert_eq!(r.array()[1].array().len(), n);
                assert!(n <= LIMIT, "a snapshot held {n} leases");
                most = most.max(n);
                snapshots += 1;
            }
            (most, snapshots)
        })
    };
    let clients: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut granted = 0;
                for j in 0..150 {
                    let id = format!("c{i}-{j}");
                    let (five, got) = lease(&mut c, "pool", &["5", "1h", "ID", &id]);
                    if five[0] == 0 {
                        assert_eq!(got.as_deref(), Some(&*id));
                        granted += 1;
                        let r = c.cmd(&["RL.RELEASE", "pool", &id]).int();
                        assert_eq!(r, 1, "{id} released once");
                    } else {
                        assert_eq!(got, None);
                        assert!(five[3] >= 1);
                    }
                }
                granted
            })
        })
        .collect();
    let granted: usize = clients.into_iter().map(|t| t.join().expect("client")).sum();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (most, snapshots) = watcher.join().expect("watcher");
    assert!(granted >= LIMIT, "{granted} granted");
    assert!(snapshots > 0 && most <= LIMIT);
    assert_eq!(s.client().cmd(&["EXISTS", "pool"]).int(), 0);
}

/// A sequence that adds, renews, removes expired leases, releases and empties a key.
fn replicated_sequence(c: &mut Client, t: u64) {
    let at = |ms: u64| (t + ms).to_string();
    for (ms, id) in [(0, "a"), (10, "b"), (20, "c")] {
        lease(c, "rep", &["3", "1s", "ID", id, "AT", &at(ms)]);
    }
    lease(c, "rep", &["3", "5s", "ID", "a", "AT", &at(500)]);
    // b and c have expired: removed by d's write.
    lease(c, "rep", &["3", "1s", "ID", "d", "AT", &at(1_500)]);
    lease(c, "rep", &["3", "1s", "AT", &at(1_500)]);
    assert_eq!(release(c, "rep", "d", &at(1_600)), 1);
    // One lease for good, one key emptied by release.
    lease(c, "gone", &["1", "1s", "ID", "x", "AT", &at(0)]);
    lease(c, "gone", &["1", "1s", "ID", "y", "AT", &at(2_000)]);
    assert_eq!(release(c, "gone", "y", &at(2_000)), 1);
    c.cmd(&[
        "RL.ALL",
        "1",
        "rep2",
        "LEASE",
        "1",
        "4",
        "1m",
        "ID",
        "z",
        "AT",
        &at(0),
    ]);
}

/// The calls a server executed, by command (`INFO commandstats`).
fn calls(c: &mut Client, command: &str) -> i64 {
    let info = c.cmd(&["INFO", "commandstats"]).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn replicas_with_and_without_the_module_hold_the_same_leases() {
    let primary = Server::start();
    let with = primary.start_replica(true);
    let without = primary.start_replica(false);
    let mut c = primary.client();
    let t = at_base(2 * HOUR, HOUR);
    replicated_sequence(&mut c, t);
    common::wait_for_replicas(&mut c, 2);
    for replica in [&with, &without] {
        let mut rc = replica.client();
        for key in ["rep", "gone", "rep2"] {
            assert_eq!(leases(&mut rc, key), leases(&mut c, key), "{key}");
            assert_eq!(
                rc.cmd(&["PEXPIRETIME", key]).int(),
                c.cmd(&["PEXPIRETIME", key]).int(),
                "{key}"
            );
        }
        // Effects, not commands.
        assert_eq!(calls(&mut rc, "rl.lease"), 0);
        assert_eq!(calls(&mut rc, "rl.release"), 0);
        for effect in ["zadd", "zrem", "zremrangebyscore", "pexpireat"] {
            assert!(calls(&mut rc, effect) > 0, "{effect}");
        }
    }
    // The made id's lease, then a (renewed); b, c and d are gone.
    let rep = leases(&mut c, "rep");
    assert_eq!(
        rep.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        [t + 2_500, t + 5_500]
    );
    assert_eq!(rep[1].0, "a");
    assert_eq!(c.cmd(&["EXISTS", "gone"]).int(), 0);
}

#[test]
fn leases_survive_aof_and_rdb_restarts() {
    for aof in [true, false] {
        let mut s = Server::builder().aof(aof).start();
        let mut c = s.client();
        let t = at_base(2 * HOUR, HOUR);
        replicated_sequence(&mut c, t);
        let before: Vec<_> = ["rep", "gone", "rep2"]
            .iter()
            .map(|k| (leases(&mut c, k), c.cmd(&["PEXPIRETIME", k]).int()))
            .collect();
        if !aof {
            c.cmd(&["SAVE"]);
        }
        drop(c);
        s.restart(aof);
        let mut c = s.client();
        let after: Vec<_> = ["rep", "gone", "rep2"]
            .iter()
            .map(|k| (leases(&mut c, k), c.cmd(&["PEXPIRETIME", k]).int()))
            .collect();
        assert_eq!(after, before, "aof {aof}");
    }
}

#[test]
fn writes_send_the_keyspace_events_of_their_commands() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = s.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:ev"]);
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    lease(&mut c, "ev", &["3", "1s", "ID", "a", "AT", &at(0)]);
    lease(&mut c, "ev", &["3", "1s", "ID", "b", "AT", &at(500)]);
    // Denials, peeks and unknown releases send nothing; a's expiry is removed by c.
    lease(&mut c, "ev", &["3", "1s", "COST", "0", "AT", &at(500)]);
    release(&mut c, "ev", "zz", &at(500));
    lease(&mut c, "ev", &["3", "1s", "ID", "c", "AT", &at(1_000)]);
    release(&mut c, "ev", "b", &at(1_000));
    release(&mut c, "ev", "c", &at(1_000));
    let want = [
        "zadd",
        "expire",
        "zadd",
        "expire",
        "zadd",
        "zremrangebyscore",
        "expire",
        "zrem",
        "expire",
        "zrem",
        "del",
    ];
    let got: Vec<String> = want
        .iter()
        .map(|_| common::keyspace::next_event(&mut sub).1)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let t = at_base(2 * HOUR, HOUR).to_string();
    lease(&mut c, "k", &["5", "1m", "ID", "held", "AT", &t]);
    let before = leases(&mut c, "k");
    let long = "x".repeat(257);
    let limit = |v: &str| {
        format!("ERR invalid limit '{v}': must be an integer from 1 to 10000 (leases held at once)")
    };
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["0", "1m"], limit("0")),
        (vec!["10001", "1m"], limit("10001")),
        (vec!["x", "1m"], limit("x")),
        (vec!["1m", "5"], format!("{} (RL.LEASE key limit ttl: the limit comes first)", limit("1m"))),
        (vec!["5", "0"], "ERR invalid ttl '0': must be a positive duration (an integer with an optional unit ms, s, m, h or d)".into()),
        (vec!["5", "1y"], "ERR invalid ttl '1y': unknown unit (use ms, s, m, h or d)".into()),
        (vec!["5", "3651d"], "ERR invalid ttl '3651d': must be at most 10 years (3650d)".into()),
        (vec!["5", "1m", "COST", "2"], "ERR invalid cost 2: a lease takes COST 1 (the default) or COST 0 to peek".into()),
        (vec!["5", "1m", "COST", "-1"], "ERR invalid cost '-1': must be an integer from 0 to 9007199254740991".into()),
        (vec!["5", "1m", "ID", ""], "ERR invalid ID '': a lease id is 1 to 256 bytes".into()),
        (vec!["5", "1m", "ID", &long], "ERR ID of 257 bytes: a lease id is 1 to 256 bytes".into()),
        (vec!["5", "1m", "ID"], "ERR option ID needs a value".into()),
        (vec!["5", "1m", "ID", "a", "id", "b"], "ERR option ID given more than once".into()),
        (vec!["5", "1m", "META", "a"], "ERR unknown option 'META' (options here: COST, AT, ID)".into()),
        (vec!["5", "1m", "AT", "1732480000"], "ERR invalid AT '1732480000': AT takes a Unix time in milliseconds, from 1000000000000 (2001-09-09) to 4102444800000; this looks like seconds".into()),
        (vec!["5"], "ERR wrong number of arguments for 'RL.LEASE' command (syntax: RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms])".into()),
    ];
    for (args, want) in &cases {
        let mut v = vec!["RL.LEASE", "k"];
        v.extend(args.iter().copied());
        assert_eq!(c.cmd(&v).err(), Some(want.as_str()), "{args:?}");
        assert_eq!(leases(&mut c, "k"), before, "{args:?} changed the key");
        assert_eq!(c.cmd(&["DBSIZE"]).int(), 1);
    }
    let release_cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["k", ""], "ERR invalid ID '': a lease id is 1 to 256 bytes"),
        (vec!["k", &long], "ERR ID of 257 bytes: a lease id is 1 to 256 bytes"),
        (vec!["k", "held", "COST", "1"], "ERR unknown option 'COST' (options here: AT)"),
        (vec!["k", "held", "AT", "0"], "ERR invalid AT '0': AT takes a Unix time in milliseconds, from 1000000000000 (2001-09-09) to 4102444800000; this looks like seconds"),
        (vec!["k"], "ERR wrong number of arguments for 'RL.RELEASE' command (syntax: RL.RELEASE key id [AT unix_ms])"),
    ];
    for (args, want) in &release_cases {
        let mut v = vec!["RL.RELEASE"];
        v.extend(args.iter().copied());
        assert_eq!(c.cmd(&v).err(), Some(*want), "{args:?}");
        assert_eq!(leases(&mut c, "k"), before, "{args:?} changed the key");
    }
    // Another type: WRONGTYPE, untouched; a sorted set of other members: refused.
    c.cmd(&["SET", "s", "x"]);
    let wrongtype = Some("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(c.cmd(&["RL.LEASE", "s", "5", "1m"]).err(), wrongtype);
    assert_eq!(c.cmd(&["RL.RELEASE", "s", "a"]).err(), wrongtype);
    let invalid = Some("ERR the key does not hold RL.LEASE state (expected a sorted set of lease ids scored by their expiry in Unix milliseconds)");
    c.cmd(&["ZADD", "z", "1.5", "a"]);
    assert_eq!(c.cmd(&["RL.LEASE", "z", "5", "1m"]).err(), invalid);
    assert_eq!(c.cmd(&["RL.RELEASE", "z", "a"]).err(), invalid);
    assert_eq!(c.cmd(&["ZCARD", "z"]).int(), 1);
    assert_eq!(c.cmd(&["PTTL", "z"]).int(), -1);
    assert_eq!(c.cmd(&["GET", "s"]).text(), "x");
}

#[test]
fn command_info_and_cluster_routing() {
    let s = Server::start();
    let mut c = s.client();
    for command in ["RL.LEASE", "RL.RELEASE"] {
        assert_eq!(
            c.cmd(&["COMMAND", "GETKEYS", command, "k", "5", "1m"]),
            Value::Array(vec![Value::Bulk(b"k".to_vec())]),
            "{command}"
        );
    }
    drop(c);
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    let at = at_base(2 * HOUR, HOUR).to_string();
    for i in 0..12 {
        let key = format!("pool:{i}");
        let r = cc.cmd(&["RL.LEASE", &key, "5", "1m", "ID", "w", "AT", &at]);
        assert_eq!(
            lease_reply(&r),
            (vec![0, 5, 4, -1, 60_000], Some("w".into())),
            "{key}"
        );
        assert_eq!(cc.cmd(&["RL.RELEASE", &key, "w", "AT", &at]).int(), 1);
    }
    assert!(cc.moved > 0, "some calls were redirected");
    let total: i64 = cc
        .nodes
        .iter_mut()
        .map(|(_, c)| c.cmd(&["DBSIZE"]).int())
        .sum();
    assert_eq!(total, 0);
}

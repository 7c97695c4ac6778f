//! RL.LEASE and RL.RELEASE against real servers: leases up to the limit, renewal,
//! expiry at the exact millisecond, made ids, the state readable with ZRANGE, release,
//! RL.ALL's LEASE rule, many clients on one key, replicas with and without the module,
//! AOF and RDB restarts, Cluster routing, keyspace events, bad inputs and wrong types.

use crate::common;

use common::{at_base, command_calls, Client, Cluster, Rng, Server, Side, Twins, Value, HOUR};

/// RL.LEASE and RL.RELEASE, natively or through one form of their twins.
#[derive(Clone, Debug)]
struct Sides {
    lease: Side,
    release: Side,
}

impl Sides {
    fn name(&self) -> &'static str {
        self.lease.name()
    }

    fn lease(&self, c: &mut Client, key: &str, args: &[&str]) -> Value {
        c.cmd(&self.lease.argv(key, args))
    }

    fn release(&self, c: &mut Client, key: &str, args: &[&str]) -> Value {
        c.cmd(&self.release.argv(key, args))
    }
}

/// The commands, the functions, the scripts.
fn sides(c: &mut Client) -> Vec<Sides> {
    let [f, s] = Twins::both(c);
    let leases = Side::all("RL.LEASE", [f.lease, s.lease]);
    let releases = Side::all("RL.RELEASE", [f.release, s.release]);
    leases
        .into_iter()
        .zip(releases)
        .map(|(lease, release)| Sides { lease, release })
        .collect()
}

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
    for side in sides(&mut c) {
        rules_on(&mut c, &side);
    }
}

fn rules_on(c: &mut Client, side: &Sides) {
    let key = &format!("slots:{}", side.name());
    let c = &mut *c;
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
        let (five, got) = lease_reply(&side.lease(c, key, &args));
        assert_eq!(five, want, "+{ms} {opts:?}");
        assert_eq!(got.as_deref(), *id, "+{ms} {opts:?}");
    }
    // job-2 was removed by job-3's write; the key expires with its latest lease.
    assert_eq!(
        leases(c, key),
        [("job-1".into(), t + 13_000), ("job-3".into(), t + 21_000)]
    );
    assert_eq!(c.cmd(&["PEXPIRETIME", key]).int() as u64, t + 21_000);
    // Releases: unknown 0, live 1 (once), expired 0; the last one deletes the key.
    assert_eq!(side.release(c, key, &["nope", "AT", &at(12_000)]).int(), 0);
    assert_eq!(side.release(c, key, &["job-3", "AT", &at(12_000)]).int(), 1);
    assert_eq!(side.release(c, key, &["job-3", "AT", &at(12_000)]).int(), 0);
    assert_eq!(c.cmd(&["PEXPIRETIME", key]).int() as u64, t + 13_000);
    assert_eq!(
        side.release(c, key, &["job-1", "AT", &at(13_000)]).int(),
        0,
        "expired"
    );
    assert_eq!(c.cmd(&["EXISTS", key]).int(), 0);
    assert_eq!(
        side.release(c, key, &["job-1", "AT", &at(13_000)]).int(),
        0,
        "no key"
    );
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
        Some("ERR unknown option 'ID' (options here: COST, AT, REFUND, FORCE, UPTO)")
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
        assert_eq!(command_calls(&mut rc, "rl.lease"), 0);
        assert_eq!(command_calls(&mut rc, "rl.release"), 0);
        for effect in ["zadd", "zrem", "zremrangebyscore", "pexpireat"] {
            assert!(command_calls(&mut rc, effect) > 0, "{effect}");
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
    let sides = sides(&mut c);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = s.client();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:ev:*"]);
    let t = at_base(2 * HOUR, HOUR);
    let at = |ms: u64| (t + ms).to_string();
    for side in &sides {
        let key = &format!("ev:{}", side.name());
        let c = &mut c;
        side.lease(c, key, &["3", "1s", "ID", "a", "AT", &at(0)]);
        side.lease(c, key, &["3", "1s", "ID", "b", "AT", &at(500)]);
        // Peeks and unknown releases send nothing; a's expiry is removed by c.
        side.lease(c, key, &["3", "1s", "COST", "0", "AT", &at(500)]);
        side.release(c, key, &["zz", "AT", &at(500)]);
        side.lease(c, key, &["3", "1s", "ID", "c", "AT", &at(1_000)]);
        side.release(c, key, &["b", "AT", &at(1_000)]);
        side.release(c, key, &["c", "AT", &at(1_000)]);
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
        let got: Vec<(String, String)> = want
            .iter()
            .map(|_| common::keyspace::next_event(&mut sub))
            .collect();
        let events: Vec<&str> = got.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(events, want, "{}", side.name());
        assert!(got.iter().all(|(k, _)| k == key), "{got:?}");
    }
}

#[test]
fn bad_inputs_are_errors_that_write_nothing() {
    let s = Server::start();
    let mut c = s.client();
    let sides = sides(&mut c);
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
    let release_cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![""], "ERR invalid ID '': a lease id is 1 to 256 bytes"),
        (vec![&long], "ERR ID of 257 bytes: a lease id is 1 to 256 bytes"),
        (vec!["held", "COST", "1"], "ERR unknown option 'COST' (options here: AT)"),
        (vec!["held", "AT", "0"], "ERR invalid AT '0': AT takes a Unix time in milliseconds, from 1000000000000 (2001-09-09) to 4102444800000; this looks like seconds"),
        (vec![], "ERR wrong number of arguments for 'RL.RELEASE' command (syntax: RL.RELEASE key id [AT unix_ms])"),
    ];
    c.cmd(&["SET", "s", "x"]);
    c.cmd(&["ZADD", "z", "1.5", "a"]);
    let wrongtype = Some("WRONGTYPE Operation against a key holding the wrong kind of value");
    let invalid = Some("ERR the key does not hold RL.LEASE state (expected a sorted set of lease ids scored by their expiry in Unix milliseconds)");
    for side in &sides {
        let name = side.name();
        for (args, want) in &cases {
            let got = side.lease(&mut c, "k", args);
            assert_eq!(got.err(), Some(want.as_str()), "{name} {args:?}");
            assert_eq!(
                leases(&mut c, "k"),
                before,
                "{name} {args:?} changed the key"
            );
            assert_eq!(c.cmd(&["DBSIZE"]).int(), 3);
        }
        for (args, want) in &release_cases {
            let got = side.release(&mut c, "k", args);
            assert_eq!(got.err(), Some(*want), "{name} {args:?}");
            assert_eq!(
                leases(&mut c, "k"),
                before,
                "{name} {args:?} changed the key"
            );
        }
        // Another type: WRONGTYPE, untouched; a sorted set of other members: refused.
        assert_eq!(
            side.lease(&mut c, "s", &["5", "1m"]).err(),
            wrongtype,
            "{name}"
        );
        assert_eq!(side.release(&mut c, "s", &["a"]).err(), wrongtype, "{name}");
        assert_eq!(
            side.lease(&mut c, "z", &["5", "1m"]).err(),
            invalid,
            "{name}"
        );
        assert_eq!(side.release(&mut c, "z", &["a"]).err(), invalid, "{name}");
        assert_eq!(c.cmd(&["ZCARD", "z"]).int(), 1);
        assert_eq!(c.cmd(&["PTTL", "z"]).int(), -1);
        assert_eq!(c.cmd(&["GET", "s"]).text(), "x");
    }
}

/// The leases of a key with each made id named as the walk names it (its logical name).
fn logical(
    c: &mut Client,
    key: &str,
    made: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = leases(c, key)
        .into_iter()
        .map(|(id, e)| {
            let name = made
                .iter()
                .find(|(_, a)| **a == id)
                .map_or(id, |(l, _)| l.clone());
            (name, e)
        })
        .collect();
    v.sort();
    v
}

/// The command, its function and its script on keys of their own, and a key where each
/// call goes to one of the three at random: the same replies (a made id aside, which is
/// each side's own: the same field present), the same leases (made ids named by the walk)
/// and the same expiry, call after call.
#[test]
fn differential_native_function_and_script_mixed_on_one_key() {
    use std::collections::BTreeMap;
    let s = Server::start();
    let mut c = s.client();
    let sides = sides(&mut c);
    let mut counts = [0usize; 4]; // allowed, denied, errors, renewals and releases
    for seed in Rng::seeds(&[1, 2, 3]) {
        let mut rng = Rng::new(seed);
        let mut now = at_base(2 * HOUR, HOUR);
        let keys: Vec<String> = ["native", "function", "script", "mixed"]
            .iter()
            .map(|k| format!("d:{seed}:{k}"))
            .collect();
        let mut made: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(); keys.len()];
        let mut made_n = 0;
        for step in 0..400 {
            now += *rng.pick(&[0u64, 0, 1, 2, 5, 20, 60, 500, 1_000]);
            let at = now.to_string();
            let pool: Vec<String> = ["a", "b", "c", "d", "e"]
                .iter()
                .map(|s| s.to_string())
                .chain(made[0].keys().cloned())
                .collect();
            let id = rng.pick(&pool).clone();
            let releasing = rng.chance(25);
            let mut args: Vec<String> = vec![];
            let mut named = true;
            if releasing {
                args.extend([id.clone(), "AT".into(), at.clone()]);
            } else {
                args.push(rng.pick(&["1", "2", "3", "5"]).to_string());
                args.push(rng.pick(&["5ms", "20ms", "100ms", "1s", "2s"]).to_string());
                if rng.chance(20) {
                    named = false;
                } else {
                    args.extend(["ID".into(), id.clone()]);
                }
                if rng.chance(15) {
                    args.extend(["COST".into(), "0".into()]);
                } else if rng.chance(3) {
                    args.extend(["COST".into(), "2".into()]);
                }
                args.extend(["AT".into(), at.clone()]);
            }
            let mixed = rng.range(0, 3) as usize;
            let mut replies = Vec::new();
            for (k, key) in keys.iter().enumerate() {
                let side = &sides[if k < 3 { k } else { mixed }];
                // A made id is each key's own.
                let argv: Vec<String> = args
                    .iter()
                    .map(|a| made[k].get(a).cloned().unwrap_or_else(|| a.clone()))
                    .collect();
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let r = if releasing {
                    side.release(&mut c, key, &argv)
                } else {
                    side.lease(&mut c, key, &argv)
                };
                replies.push(r);
            }
            let ctx = format!("seed {seed} step {step} args {args:?}");
            let first = replies[0].clone();
            match &first {
                Value::Array(_) => {
                    let (five, id0) = lease_reply(&first);
                    for (k, r) in replies.iter().enumerate() {
                        let (f, id) = lease_reply(r);
                        assert_eq!(f, five, "{} {ctx}", keys[k]);
                        assert_eq!(id.is_some(), id0.is_some(), "{} {ctx}", keys[k]);
                        if !named {
                            if let Some(id) = id {
                                made[k].insert(format!("made-{}", made_n + 1), id);
                            }
                        }
                    }
                    if !named && id0.is_some() {
                        made_n += 1;
                    }
                    counts[if five[0] == 0 { 0 } else { 1 }] += 1;
                }
                _ => {
                    assert!(replies.iter().all(|r| *r == first), "{replies:?} {ctx}");
                    counts[if first.is_err() { 2 } else { 3 }] += 1;
                }
            }
            let want = logical(&mut c, &keys[0], &made[0]);
            let want_exp = c.cmd(&["PEXPIRETIME", &keys[0]]).int();
            for (k, key) in keys.iter().enumerate().skip(1) {
                assert_eq!(logical(&mut c, key, &made[k]), want, "{key} {ctx}");
                assert_eq!(c.cmd(&["PEXPIRETIME", key]).int(), want_exp, "{key} {ctx}");
            }
        }
    }
    assert!(
        counts.iter().all(|&n| n > 20),
        "allowed/denied/errors/releases: {counts:?}"
    );
}

#[test]
fn rl_all_and_its_twin_agree_with_a_lease_rule() {
    let s = Server::start();
    let mut c = s.client();
    let [f, sc] = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR);
    for (i, ms) in [0u64, 10, 20, 1_000, 1_010, 30_000, 31_000]
        .iter()
        .enumerate()
    {
        let at = (t + ms).to_string();
        let id = format!("r{}", i % 3);
        let mut replies = Vec::new();
        for (side, all) in ["n", "f", "s"]
            .iter()
            .zip([None, Some(&f.all), Some(&sc.all)])
        {
            let keys = [format!("{{{side}}}acct"), format!("{{{side}}}user")];
            let args = [
                "LEASE", "1", "2", "30s", "FIXED", "2", "2", "1s", "ID", &id, "AT", &at,
            ];
            let r = match all {
                None => {
                    let mut v = vec![
                        "RL.ALL".to_string(),
                        "2".into(),
                        keys[0].clone(),
                        keys[1].clone(),
                    ];
                    v.extend(args.iter().map(|a| a.to_string()));
                    c.cmd(&v)
                }
                Some(twin) => c.cmd(&twin.argv(&keys, &args)),
            };
            let mut a = r.array().to_vec();
            assert_eq!(a.len(), 8, "{side} {a:?}");
            a[6] = Value::Nil; // the key names differ by side
            replies.push((a, leases(&mut c, &keys[0])));
        }
        assert_eq!(replies[1], replies[0], "function, +{ms}");
        assert_eq!(replies[2], replies[0], "script, +{ms}");
    }
}

/// RL.ALL with a LEASE rule beside a rate and a BAN rule, under REFUND and FORCE: the
/// command, its function and its script give the same replies and leave the same
/// states. A refund is never refused (not by a full lease key, not by a ban) and takes,
/// renews and refuses no lease; a forced call takes or renews its lease, and a full key
/// refuses it writing nothing; a ban ends the call before the lease is read.
#[test]
fn rl_all_and_its_twin_agree_on_a_lease_rule_with_refund_force_and_ban() {
    let s = Server::start();
    let mut c = s.client();
    let [f, sc] = Twins::both(&mut c);
    let t = at_base(2 * HOUR, HOUR);
    // (ms, id, flag, field 1 and field 8 expected)
    let steps: [(u64, &str, &str, i64, Option<&str>); 9] = [
        (0, "r0", "", 0, Some("r0")),
        (10, "r1", "", 1, None), // the lease is full: a strike
        (20, "r1", "REFUND", 0, None),
        (30, "r1", "FORCE", 1, None), // the lease refuses it, nothing written
        (40, "r0", "FORCE", 0, Some("r0")), // a renewal
        (50, "r2", "", 1, None),      // the second strike starts the ban
        (60, "r0", "", 1, None),      // banned: the lease is not read
        (70, "r0", "REFUND", 0, None),
        (80, "r0", "FORCE", 1, None),
    ];
    for (ms, id, flag, limited, field) in steps {
        let at = (t + ms).to_string();
        let mut replies = Vec::new();
        for (side, all) in ["n", "f", "s"]
            .iter()
            .zip([None, Some(&f.all), Some(&sc.all)])
        {
            let keys = [
                format!("{{{side}}}acct"),
                format!("{{{side}}}user"),
                format!("{{{side}}}box"),
            ];
            let mut args = vec![
                "LEASE", "1", "1", "30s", "FIXED", "2", "3", "1m", "BAN", "3", "2", "1m", "10m",
                "ID", id, "AT", &at,
            ];
            if !flag.is_empty() {
                args.push(flag);
            }
            let r = match all {
                None => {
                    let mut v = vec!["RL.ALL".to_string(), "3".into()];
                    v.extend(keys.iter().cloned());
                    v.extend(args.iter().map(|a| a.to_string()));
                    c.cmd(&v)
                }
                Some(twin) => c.cmd(&twin.argv(&keys, &args)),
            };
            let mut a = r.array().to_vec();
            assert_eq!(a.len(), 8, "{side} +{ms} {a:?}");
            assert_eq!(a[0].int(), limited, "{side} +{ms} {a:?}");
            let got = match &a[7] {
                Value::Nil => None,
                other => Some(other.text()),
            };
            assert_eq!(got.as_deref(), field, "{side} +{ms}");
            a[6] = Value::Nil; // the key names differ by side
            let user = c.cmd(&["GET", &keys[1]]);
            let ban = c.cmd(&["GET", &keys[2]]);
            let ttls: Vec<Value> = keys.iter().map(|k| c.cmd(&["PEXPIRETIME", k])).collect();
            replies.push((a, leases(&mut c, &keys[0]), user, ban, ttls));
        }
        assert_eq!(replies[1], replies[0], "function, +{ms}");
        assert_eq!(replies[2], replies[0], "script, +{ms}");
    }
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

/// The three sides (command, function, script) agree on `lines`; the command's replies.
fn agreed(c: &mut Client, lines: &[&str]) -> Vec<String> {
    let [native, function, script] = common::on_every_side(c, lines);
    assert_eq!(function, native, "function");
    assert_eq!(script, native, "script");
    native
}

/// What a line replied, after its `=>`.
fn replied(line: &str) -> &str {
    line.split_once(" => ").map_or("", |(_, r)| r)
}

const NOT_A_LEASE_SET: &str = "error ERR the key does not hold RL.LEASE state (expected a sorted set of lease ids scored by their expiry in Unix milliseconds)";

/// A log's key is no lease set: its scores are µs times, past any lease's expiry (the
/// latest AT plus the longest ttl). RL.LEASE once read them as leases ending in the year
/// 62 000 and set that expiry; RL.RELEASE removed a log entry.
#[test]
fn a_key_of_rl_log_is_invalid_lease_state_and_nothing_is_written() {
    let s = Server::start();
    let mut c = s.client();
    let got = agreed(
        &mut c,
        &[
            "RL.LOG @k 10 10s META u1 AT 1900000000000",
            "RL.LEASE @k 5 10s ID a AT 1900000000000",
            "RL.LEASE @k 5 10s ID a COST 0 AT 1900000000000",
            "RL.RELEASE @k 0000000000000001:1:u1 AT 1900000000000",
            "ZRANGE @k 0 -1 WITHSCORES",
            "PEXPIRETIME @k",
        ],
    );
    for line in &got[1..4] {
        assert_eq!(replied(line), NOT_A_LEASE_SET, "{line}");
    }
    assert_eq!(
        replied(&got[4]),
        r#"["0000000000000001:1:u1", "1900000000000000"]"#
    );
    assert_eq!(replied(&got[5]), "1900000010000");
}

/// Every member a lease call reads is checked, in the command as in its twins: a
/// member scored `inf` (which the command once counted as a lease held for ever, out of
/// its walk's reach), `-inf`, a fraction, or a time past the latest expiry a call can
/// write, is invalid state, as the lowest or the highest member.
#[test]
fn a_member_scored_inf_or_out_of_bounds_is_invalid_lease_state() {
    let s = Server::start();
    let mut c = s.client();
    let mut lines = Vec::new();
    for (i, (score, member)) in [
        ("inf", "ghost"),
        ("-inf", "ghost"),
        ("1900000001000.5", "half"),
        ("-1", "before"),
        ("4417804800001", "late"),
    ]
    .iter()
    .enumerate()
    {
        lines.push(format!("ZADD @z{i} {score} {member}"));
        lines.push(format!("RL.LEASE @z{i} 2 10s ID a AT 1900000000000"));
        lines.push(format!("ZADD @z{i} 1900000005000 ok"));
        lines.push(format!("RL.LEASE @z{i} 2 10s ID a COST 0 AT 1900000000000"));
        lines.push(format!("RL.RELEASE @z{i} ok AT 1900000000000"));
        lines.push(format!("ZCARD @z{i}"));
    }
    lines.push("ZADD @ok 4417804800000 last 0 first".into());
    lines.push("RL.LEASE @ok 3 10s ID a AT 1900000000000".into());
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let got = agreed(&mut c, &lines);
    for step in got[..30].chunks(6) {
        for line in [&step[1], &step[3], &step[4]] {
            assert_eq!(replied(line), NOT_A_LEASE_SET, "{line}");
        }
        assert_eq!(replied(&step[5]), "2", "nothing written: {}", step[5]);
    }
    assert_eq!(
        replied(&got[31]),
        r#"[0, 3, 1, -1, 2517804800000, "a"]"#,
        "the bounds themselves are leases"
    );
}

/// A denial on a key of 9 999 expired leases reads none of them (a denied RL.LEASE once
/// walked them all, about 200 times the time of a denial on a small key): they are
/// counted by score range, as the twins count them, and the replies agree. The command
/// counts with `ZCOUNT` past a few members; on a server whose `ZCOUNT` is renamed away
/// it walks them, with the same replies.
#[test]
fn a_denial_on_many_expired_leases_counts_them_and_replies_as_the_twins() {
    let members: String = (0..9_999u64)
        .map(|i| format!(" {} old{i}", 1_899_999_990_000 + i))
        .collect();
    let fill = format!("ZADD @k 1900000005000 live{members}");
    let lines = [
        fill.as_str(),
        "RL.LEASE @k 1 1m ID x AT 1900000000000",
        "RL.LEASE @k 1 1m ID x COST 0 AT 1900000000000",
        "RL.ALL 1 @k LEASE 1 1 1m ID x AT 1900000000000",
        "ZCARD @k",
        "RL.LEASE @k 2 1m ID x AT 1900000000000",
        "ZRANGE @k 0 -1 WITHSCORES",
        "PEXPIRETIME @k",
    ];
    let s = Server::start();
    let mut c = s.client();
    let got = agreed(&mut c, &lines);
    assert_eq!(replied(&got[1]), "[1, 1, 0, 5000, 5000, nil]");
    assert_eq!(replied(&got[2]), "[1, 1, 0, 5000, 5000, nil]");
    assert_eq!(replied(&got[3]), r#"[1, 1, 0, 5000, 5000, 1, "@k", nil]"#);
    assert_eq!(replied(&got[4]), "10000", "a denial writes nothing");
    assert_eq!(replied(&got[5]), r#"[0, 2, 0, -1, 60000, "x"]"#);
    assert_eq!(
        replied(&got[6]),
        r#"["live", "1900000005000", "x", "1900000060000"]"#,
        "the allowed call removed the expired ones"
    );
    // The command without ZCOUNT: the same replies.
    let renamed = Server::builder()
        .config("rename-command", "ZCOUNT \"\"")
        .start();
    let mut r = renamed.client();
    for (i, line) in lines.iter().enumerate() {
        let line = line.replace('@', "{n}");
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = common::twins::show(&r.cmd(&words)).replace("{n}", "@");
        if i > 0 {
            assert_eq!(reply, replied(&got[i]), "{line} without ZCOUNT");
        }
    }
}

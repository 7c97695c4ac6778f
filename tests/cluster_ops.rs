//! Cluster operations with the module loaded on every node: a slot holding a key of every
//! limiter moves from one primary to another, by Valkey 9's atomic slot migration
//! (`CLUSTER MIGRATESLOTS`) and by the legacy resharding (`CLUSTER SETSLOT` + `MIGRATE`,
//! the steps of `redis-cli --cluster reshard`), first with no client calling (every
//! state and absolute expiry arrives as it left), then while clients call every limiter
//! on the slot's keys, following `MOVED`, `ASK` and `TRYAGAIN`: the limits hold across
//! the move (no more allowed in total than each limit), and the state on the new owner
//! accounts for exactly the requests the clients were allowed.
//!
//! Every call passes the same `AT`, an hour ahead, so the windows neither start nor end
//! during a test, whatever the machine's speed: what was allowed is decided by the
//! state alone.

use crate::common;

use common::{at_base, Cluster, ClusterClient, Value, HOUR, SECOND};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The hash tag of every key of a test: one slot.
const TAG: &str = "{moving}";

/// The clients that call the limiters while the slot moves.
const CLIENTS: usize = 2;
/// The most rounds (one call of each limiter) a client makes.
const MAX_ROUNDS: usize = 1_500;
/// Rounds each client makes after the move has ended.
const ROUNDS_AFTER: usize = 10;

/// A limiter call of the workload: its arguments (with `{k}` for the key prefix and
/// `{at}` for the time), the peek that reads its remaining capacity on the same
/// key(s), and that capacity.
struct Limiter {
    name: &'static str,
    call: &'static str,
    peeks: &'static [&'static str],
    capacity: i64,
}

/// Every limiter, with limits large enough that the clients never exhaust them (so the
/// state counts every allowed request) and two small ones they do exhaust (so the total
/// allowed meets the limit exactly, across the move).
const LIMITERS: &[Limiter] = &[
    Limiter {
        name: "RL.FIXED",
        call: "RL.FIXED {k}:fixed 1000000 1h AT {at}",
        peeks: &["RL.FIXED {k}:fixed 1000000 1h COST 0 AT {at}"],
        capacity: 1_000_000,
    },
    Limiter {
        name: "RL.FIXED (exhausted)",
        call: "RL.FIXED {k}:fixed-small 40 1h AT {at}",
        peeks: &["RL.FIXED {k}:fixed-small 40 1h COST 0 AT {at}"],
        capacity: 40,
    },
    Limiter {
        name: "RL.GCRA",
        call: "RL.GCRA {k}:gcra 999999 1000 1s AT {at}",
        peeks: &["RL.GCRA {k}:gcra 999999 1000 1s COST 0 AT {at}"],
        capacity: 1_000_000,
    },
    Limiter {
        name: "RL.MULTI",
        call: "RL.MULTI 2 {k}:multi-a {k}:multi-b LIMIT 1m 1000000 LIMIT 1h 1000000 AT {at}",
        peeks: &[
            "RL.MULTI 1 {k}:multi-a LIMIT 1m 1000000 LIMIT 1h 1000000 COST 0 AT {at}",
            "RL.MULTI 1 {k}:multi-b LIMIT 1m 1000000 LIMIT 1h 1000000 COST 0 AT {at}",
        ],
        capacity: 1_000_000,
    },
    Limiter {
        name: "RL.SLIDING",
        call: "RL.SLIDING 2 {k}:sliding-a {k}:sliding-b LIMIT 1m 1000000 LIMIT 1h 1000000 BUCKETS 10 AT {at}",
        peeks: &[
            "RL.SLIDING 1 {k}:sliding-a LIMIT 1m 1000000 LIMIT 1h 1000000 BUCKETS 10 COST 0 AT {at}",
            "RL.SLIDING 1 {k}:sliding-b LIMIT 1m 1000000 LIMIT 1h 1000000 BUCKETS 10 COST 0 AT {at}",
        ],
        capacity: 1_000_000,
    },
    Limiter {
        name: "RL.LOG",
        call: "RL.LOG {k}:log 10000 1h META client AT {at}",
        peeks: &["RL.LOG {k}:log 10000 1h COST 0 AT {at}"],
        capacity: 10_000,
    },
    Limiter {
        name: "RL.LOG (exhausted)",
        call: "RL.LOG {k}:log-small 30 1h META client AT {at}",
        peeks: &["RL.LOG {k}:log-small 30 1h COST 0 AT {at}"],
        capacity: 30,
    },
    Limiter {
        name: "RL.ALL",
        call: "RL.ALL 3 {k}:all-fixed {k}:all-gcra {k}:all-log FIXED 1 1000000 1h GCRA 2 999999 1000 1s LOG 3 10000 1h META client AT {at}",
        peeks: &[
            "RL.FIXED {k}:all-fixed 1000000 1h COST 0 AT {at}",
            "RL.GCRA {k}:all-gcra 999999 1000 1s COST 0 AT {at}",
            "RL.LOG {k}:all-log 10000 1h COST 0 AT {at}",
        ],
        capacity: 1_000_000,
    },
];

/// The capacity a peek of `LIMITERS[i]`'s key `j` starts from (RL.ALL's LOG rule has
/// the log's own).
fn peek_capacity(l: &Limiter, peek: &str) -> i64 {
    if l.name == "RL.ALL" && peek.starts_with("RL.LOG") {
        10_000
    } else {
        l.capacity
    }
}

fn expand(template: &str, at: u64) -> Vec<String> {
    template
        .replace("{k}", TAG)
        .replace("{at}", &at.to_string())
        .split(' ')
        .map(str::to_string)
        .collect()
}

/// The keys of the workload (every key a limiter writes).
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = LIMITERS
        .iter()
        .flat_map(|l| l.call.split(' '))
        .filter(|w| w.starts_with("{k}"))
        .map(|w| w.replace("{k}", TAG))
        .collect();
    // CL.THROTTLE, called in the quiet phase: it reads the server clock.
    keys.push(format!("{TAG}:cell"));
    keys.sort();
    keys.dedup();
    keys
}

/// What a key holds, read without the module: its type, its value (a string's bytes, a
/// sorted set's members and scores in order) and its absolute expiry.
type KeyState = (String, Value, i64);

fn state_of(cc: &mut ClusterClient, keys: &[String]) -> BTreeMap<String, KeyState> {
    keys.iter()
        .map(|k| {
            let t = cc.cmd(&["TYPE", k]).text();
            let v = match t.as_str() {
                "string" => cc.cmd(&["GET", k]),
                "zset" => cc.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]),
                other => panic!("key {k} of type {other}"),
            };
            let exp = cc.cmd(&["PEXPIRETIME", k]).int();
            (k.clone(), (t, v, exp))
        })
        .collect()
}

/// A few calls of every limiter (and CL.THROTTLE), so every key exists with a state.
fn fill(cc: &mut ClusterClient, at: u64) {
    for round in 0..5 {
        for l in LIMITERS {
            let r = cc.cmd(&expand(l.call, at));
            assert_eq!(r.array()[0], Value::Int(0), "{} in round {round}", l.name);
        }
        let r = cc.cmd(&["CL.THROTTLE", &format!("{TAG}:cell"), "99", "1", "3600"]);
        assert_eq!(r.array()[0], Value::Int(0), "CL.THROTTLE in round {round}");
    }
}

/// Each limiter's allowed requests, counted by the clients.
type Allowed = Vec<usize>;

/// Start the clients: each calls every limiter in turn until the move is over (and
/// `ROUNDS_AFTER` rounds more), at most `MAX_ROUNDS` rounds.
fn start_clients(
    cluster: &Cluster,
    at: u64,
    done: &Arc<AtomicBool>,
    rounds: &Arc<AtomicUsize>,
    attempts: &Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<(Allowed, ClusterClient)>> {
    (0..CLIENTS)
        .map(|_| {
            let mut cc = cluster.client();
            cc.attempts = Arc::clone(attempts);
            let (done, rounds) = (Arc::clone(done), Arc::clone(rounds));
            std::thread::spawn(move || {
                let mut allowed = vec![0; LIMITERS.len()];
                let mut after = 0;
                for _ in 0..MAX_ROUNDS {
                    if done.load(Ordering::SeqCst) {
                        after += 1;
                        if after > ROUNDS_AFTER {
                            break;
                        }
                    }
                    for (i, l) in LIMITERS.iter().enumerate() {
                        let r = cc.cmd(&expand(l.call, at));
                        match r.array()[0] {
                            Value::Int(0) => allowed[i] += 1,
                            Value::Int(1) => {}
                            ref other => panic!("{}: {other:?}", l.name),
                        }
                    }
                    rounds.fetch_add(1, Ordering::SeqCst);
                }
                (allowed, cc)
            })
        })
        .collect()
}

/// Wait until `counter` (the clients' rounds or calls, between them) reaches `n`; the
/// clients ending first fails the test.
fn wait_for<T>(counter: &AtomicUsize, n: usize, clients: &[std::thread::JoinHandle<T>]) {
    let reached = common::wait_for_clients(|| counter.load(Ordering::SeqCst) >= n, clients);
    assert!(reached, "the clients ended before {n} rounds or calls");
}

/// After a move with clients calling: every limiter allowed at most its capacity in
/// total, and its state on the new owner accounts for exactly what the clients were
/// allowed (nothing lost, nothing counted twice, on every key of the call). Returns the
/// redirections the clients followed (MOVED, ASK, TRYAGAIN).
fn check_limits_held(
    cluster: &Cluster,
    at: u64,
    filled: usize,
    clients: Vec<std::thread::JoinHandle<(Allowed, ClusterClient)>>,
) -> (usize, usize, usize) {
    let mut total = vec![0usize; LIMITERS.len()];
    let (mut moved, mut asked, mut tried_again) = (0, 0, 0);
    for c in clients {
        let (allowed, cc) = c.join().expect("a client panicked");
        for (t, a) in total.iter_mut().zip(allowed) {
            *t += a;
        }
        moved += cc.moved;
        asked += cc.asked;
        tried_again += cc.tried_again;
    }
    eprintln!("allowed per limiter (clients): {total:?}; redirections: {moved} MOVED, {asked} ASK, {tried_again} TRYAGAIN");
    let mut cc = cluster.client();
    for (l, allowed) in LIMITERS.iter().zip(total) {
        // The requests of `fill` (5 a limiter) were allowed before the clients began.
        let allowed = (allowed + filled) as i64;
        assert!(
            allowed <= l.capacity,
            "{}: {allowed} allowed, limit {}",
            l.name,
            l.capacity
        );
        for peek in l.peeks {
            let r = cc.cmd(&expand(peek, at));
            let remaining = r.array()[2].int();
            let capacity = peek_capacity(l, peek);
            assert_eq!(
                capacity - remaining,
                allowed.min(capacity),
                "{} ({peek}): the state after the move counts {} requests, the clients were allowed {allowed}",
                l.name,
                capacity - remaining
            );
        }
        if l.capacity <= 40 {
            assert_eq!(allowed, l.capacity, "{}: exhausted", l.name);
        }
    }
    (moved, asked, tried_again)
}

/// Whether the servers are Valkey 9 or later (which has `CLUSTER MIGRATESLOTS`).
fn valkey_9(cluster: &Cluster) -> bool {
    let info = cluster.node(0).cmd(&["INFO", "server"]).text();
    info.lines()
        .find_map(|l| l.strip_prefix("valkey_version:"))
        .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
        .is_some_and(|major| major >= 9)
}

#[test]
fn the_module_declares_atomic_slot_migration_where_the_server_has_it() {
    let cluster = Cluster::single();
    let modules = cluster.node(0).cmd(&["INFO", "modules"]).text();
    let line = modules
        .lines()
        .find(|l| l.starts_with("module:name=ratelimit,"))
        .unwrap_or_else(|| panic!("the module is not loaded:\n{modules}"));
    assert!(line.contains("no-implicit-signal-modified"), "{line}");
    assert_eq!(
        line.contains("handle-atomic-slot-migration"),
        valkey_9(&cluster),
        "declared on Valkey 9 and later only: {line}"
    );
}

#[test]
fn cluster_migrateslots_moves_every_limiter_with_its_state_and_the_limits_hold() {
    let cluster = Cluster::start(3);
    if !valkey_9(&cluster) {
        eprintln!("skipped: CLUSTER MIGRATESLOTS (atomic slot migration) is Valkey 9's; this server has no such command");
        return;
    }
    let at = at_base(HOUR, SECOND);
    let slot = cluster.keyslot(TAG);
    let keys = keys();
    let mut cc = cluster.client();
    fill(&mut cc, at);
    let owner = cluster.owner_as_seen_by(0, slot);
    let before = state_of(&mut cc, &keys);
    assert_eq!(before.len(), keys.len());

    // No client calling: every key arrives as it left, value and absolute expiry.
    let to = (owner + 1) % 3;
    let reply = cluster.migrate_slot_atomically(slot, owner, to);
    assert_eq!(reply, Value::Status("OK".into()), "CLUSTER MIGRATESLOTS");
    assert_eq!(
        state_of(&mut cc, &keys),
        before,
        "the states after the move"
    );
    assert_eq!(
        cluster
            .node(to)
            .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
            .int(),
        keys.len() as i64
    );

    // Clients calling every limiter while the slot moves on to the third node.
    let (done, rounds) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let attempts = Arc::new(AtomicUsize::new(0));
    let clients = start_clients(&cluster, at, &done, &rounds, &attempts);
    wait_for(&rounds, 20, &clients);
    let next = (to + 1) % 3;
    let rounds_before = rounds.load(Ordering::SeqCst);
    let reply = cluster.migrate_slot_atomically(slot, to, next);
    done.store(true, Ordering::SeqCst);
    eprintln!(
        "rounds of calls while the slot moved: {}",
        rounds.load(Ordering::SeqCst) - rounds_before
    );
    assert_eq!(reply, Value::Status("OK".into()), "CLUSTER MIGRATESLOTS");
    let (moved, _, _) = check_limits_held(&cluster, at, 5, clients);
    assert!(moved > 0, "the clients were redirected to the new owner");
    // The absolute expiries of the keys whose expiry the calls do not move.
    let after = state_of(&mut cc, &keys);
    for k in ["fixed", "fixed-small", "multi-a", "all-fixed"] {
        let k = format!("{TAG}:{k}");
        assert_eq!(after[&k].2, before[&k].2, "expiry of {k}");
    }
}

/// The legacy resharding moves each key with `MIGRATE`, which sends the key's remaining
/// time to live, not its absolute expiry: the target sets it from its own clock, so an
/// expiry can arrive later by the time the transfer took (never earlier). A later
/// expiry keeps a window a little longer: the limits still hold.
#[test]
fn legacy_resharding_moves_every_limiter_with_its_state_and_the_limits_hold() {
    let cluster = Cluster::start(3);
    let at = at_base(HOUR, SECOND);
    let slot = cluster.keyslot(TAG);
    let keys = keys();
    let mut cc = cluster.client();
    fill(&mut cc, at);
    let owner = cluster.owner_as_seen_by(0, slot);
    let before = state_of(&mut cc, &keys);

    let to = (owner + 1) % 3;
    let moved_keys = cluster.migrate_slot_legacy(slot, owner, to, &mut || {});
    assert_eq!(moved_keys.len(), keys.len());
    let after = state_of(&mut cc, &keys);
    for (key, started, ended) in &moved_keys {
        let (b, a) = (&before[key], &after[key]);
        assert_eq!((&a.0, &a.1), (&b.0, &b.1), "the state of {key}");
        // MIGRATE rounds the remaining time down to the ms at the source and adds it to
        // the target's clock: at most the transfer's duration later, never earlier.
        assert!(
            a.2 >= b.2 && a.2 <= b.2 + (ended - started) as i64 + 1,
            "{key}: expiry {} before, {} after a MIGRATE of {} ms",
            b.2,
            a.2,
            ended - started
        );
    }

    // Clients calling every limiter while the keys move one by one (ASK for a key
    // already moved, TRYAGAIN for a call whose keys are split).
    let (done, rounds) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let attempts = Arc::new(AtomicUsize::new(0));
    let clients = start_clients(&cluster, at, &done, &rounds, &attempts);
    wait_for(&rounds, 20, &clients);
    let next = (to + 1) % 3;
    let mut between = || {
        // The clients send 20 calls (redirections and tries again included) between
        // two keys: after the last one, every call meets a key already moved.
        let now = attempts.load(Ordering::SeqCst);
        wait_for(&attempts, now + 20, &clients);
    };
    cluster.migrate_slot_legacy(slot, to, next, &mut between);
    done.store(true, Ordering::SeqCst);
    let (moved, asked, _) = check_limits_held(&cluster, at, 5, clients);
    assert!(moved > 0, "the clients were redirected to the new owner");
    assert!(
        asked > 0,
        "some calls went to the target with ASK during the move"
    );
}

//! Replication, persistence and concurrency: replicas and restarts (AOF after a crash,
//! RDB) hold exactly the primary's values and absolute expiry times, for a workload of
//! every command; concurrent clients never get more than the limit between them.

mod common;

use common::{at_base, workload, Client, Server, Twins, Value, HOUR, SECOND};

fn wait_replicas(c: &mut Client, n: usize) {
    let acked = c.cmd(&["WAIT", &n.to_string(), "10000"]).int();
    assert_eq!(acked, n as i64, "replicas did not acknowledge");
}

#[test]
fn the_replication_stream_holds_effects_not_commands() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    // The replica has no module: had the primary sent RL.FIXED itself, the replica
    // would fail on it and hold nothing. It holds the counter with the same expiry.
    let r = c.cmd(&["RL.FIXED", "k", "3", "1h"]).ints();
    assert_eq!(r[..3], [0, 3, 2]);
    c.cmd(&["SET", "bare", "3"]);
    let r = c.cmd(&["RL.FIXED", "bare", "3", "1h"]).ints();
    assert_eq!(
        r[0], 1,
        "denied, and the missing TTL is repaired with PEXPIREAT"
    );
    wait_replicas(&mut c, 1);
    let mut rc = replica.client();
    for key in ["k", "bare"] {
        assert_eq!(rc.cmd(&["GET", key]), c.cmd(&["GET", key]), "{key}");
        let exp = c.cmd(&["PEXPIRETIME", key]).int();
        assert!(exp > 0);
        assert_eq!(rc.cmd(&["PEXPIRETIME", key]).int(), exp, "{key}");
    }
    assert!(
        !replica.log().contains("unknown command"),
        "{}",
        replica.log()
    );
}

#[test]
fn state_survives_an_aof_restart_after_a_crash() {
    let mut s = Server::builder().aof(true).start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    workload::run(&mut c, &twins, 11, 600, at_base(HOUR, SECOND), true);
    let before = workload::snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    drop(c);
    s.restart(true); // SIGKILL: only what appendfsync always wrote survives
    let mut c = s.client();
    assert_eq!(workload::snapshot(&mut c), before);
    // And limiting carries on from the restored counters.
    let r = c.cmd(&["RL.FIXED", "fresh", "2", "1h"]).ints();
    assert_eq!(r[..3], [0, 2, 1]);
}

#[test]
fn state_survives_an_rdb_restart() {
    let mut s = Server::builder().config("save", "3600 1").start();
    let mut c = s.client();
    let twins = Twins::load(&mut c);
    workload::run(&mut c, &twins, 13, 600, at_base(HOUR, SECOND), true);
    let before = workload::snapshot(&mut c);
    assert!(before.len() > 20, "the workload wrote too little");
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    drop(c);
    s.restart(true);
    assert_eq!(workload::snapshot(&mut s.client()), before);
}

#[test]
fn concurrent_clients_get_exactly_the_limit() {
    let s = Server::start();
    let twins = Twins::load(&mut s.client());
    let limit = 1_000;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let port = s.port;
            let sha = twins.fixed.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = 0;
                for i in 0..300 {
                    // Half the clients use the twin, on the same key.
                    let r = if t % 2 == 0 {
                        c.cmd(&["RL.FIXED", "hot", "1000", "1h"])
                    } else {
                        c.cmd(&["EVALSHA", &sha, "1", "hot", "1000", "1h"])
                    };
                    let f = r.ints();
                    assert_eq!(f.len(), 5, "client {t} call {i}: {r:?}");
                    if f[0] == 0 {
                        allowed += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let total: i64 = threads
        .into_iter()
        .map(|t| t.join().expect("client thread"))
        .sum();
    assert_eq!(
        total, limit,
        "8 clients x 300 requests against a limit of {limit}"
    );
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "hot"]).text(), limit.to_string());
}

//! Failover: a replica promoted with `REPLICAOF NO ONE` keeps limiting from where the
//! primary left off.

mod common;

use common::{Server, Value};

#[test]
fn a_promoted_replica_keeps_limiting_where_the_primary_left_off() {
    let primary = Server::start();
    let replica = primary.start_replica(true);
    let mut c = primary.client();
    for _ in 0..3 {
        assert_eq!(c.cmd(&["RL.FIXED", "user:1", "5", "1h"]).ints()[0], 0);
    }
    assert_eq!(c.cmd(&["WAIT", "1", "10000"]).int(), 1);
    let exp = c.cmd(&["PEXPIRETIME", "user:1"]).int();
    drop(primary); // the primary dies

    let mut r = replica.client();
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Value::Status("OK".into())
    );
    // Two of five are left, in the same window.
    let a = r.cmd(&["RL.FIXED", "user:1", "5", "1h"]).ints();
    let b = r.cmd(&["RL.FIXED", "user:1", "5", "1h"]).ints();
    let denied = r.cmd(&["RL.FIXED", "user:1", "5", "1h"]).ints();
    assert_eq!((a[0], a[2]), (0, 1));
    assert_eq!((b[0], b[2]), (0, 0));
    assert_eq!(denied[0], 1);
    assert_eq!(
        r.cmd(&["PEXPIRETIME", "user:1"]).int(),
        exp,
        "the window did not move"
    );
}

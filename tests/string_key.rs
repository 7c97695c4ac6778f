//! Limiter strings written in place: every kind of write (new key, same window, a
//! value that grows or shrinks by a digit, a key the twin or a plain INCR wrote, an
//! ended window on a key that still exists, a missing TTL) reaches a replica without
//! the module, and an RDB reload, with the primary's value and absolute expiry.

mod common;

use common::{at_base, state, Client, Server, Twins, HOUR, MINUTE};

#[test]
fn in_place_writes_replicate_and_reload_exactly() {
    let primary = Server::start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    let twins = Twins::load(&mut c);
    let t = at_base(HOUR, MINUTE);
    let at = |ms: u64| (t + ms).to_string();
    let fixed = |c: &mut Client, key: &str, args: &[&str]| {
        let mut v = vec!["RL.FIXED", key];
        v.extend_from_slice(args);
        c.cmd(&v)
    };

    // 1 → 12 in one window: the value grows from one digit to two in place.
    for i in 0..12 {
        let r = fixed(&mut c, "grow", &["100", "1h", "AT", &at(i)]);
        assert_eq!(r.ints()[..3], [0, 100, 99 - i as i64]);
    }
    // A new window on the same key: back to one digit, a new expiry.
    fixed(&mut c, "grow", &["100", "1h", "AT", &at(3_600_000)]);
    assert_eq!(
        state(&mut c, "grow"),
        (Some("1".into()), (t + 7_200_000) as i64)
    );

    // Written by the twin (stored as an integer), then by the command.
    c.cmd(&[
        "EVALSHA",
        &twins.fixed,
        "1",
        "mixed",
        "10",
        "1m",
        "AT",
        &at(0),
    ]);
    fixed(&mut c, "mixed", &["10", "1m", "COST", "9", "AT", &at(5)]);
    assert_eq!(
        state(&mut c, "mixed"),
        (Some("10".into()), (t + 60_000) as i64)
    );

    // A counter without TTL made by INCR: allowed (a write) and denied (only a TTL).
    c.cmd(&["SET", "plain", "7"]);
    fixed(&mut c, "plain", &["10", "10s", "AT", &at(0)]);
    c.cmd(&["SET", "full", "10"]);
    let r = fixed(&mut c, "full", &["10", "10s", "AT", &at(0)]);
    assert_eq!(r.ints()[0], 1);
    assert_eq!(
        state(&mut c, "full"),
        (Some("10".into()), (t + 10_000) as i64)
    );

    // Peeks and denials write nothing.
    fixed(&mut c, "peek", &["5", "1m", "COST", "0", "AT", &at(0)]);
    assert_eq!(state(&mut c, "peek"), (None, -2));

    let keys = ["grow", "mixed", "plain", "full", "peek"];
    let on_primary: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(
        c.cmd(&["WAIT", "1", "5000"]).int(),
        1,
        "replica acknowledged"
    );
    let mut r = replica.client();
    let on_replica: Vec<_> = keys.iter().map(|k| state(&mut r, k)).collect();
    assert_eq!(on_replica, on_primary, "replica holds the primary's state");

    c.cmd(&["DEBUG", "RELOAD"]);
    let reloaded: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(reloaded, on_primary, "an RDB reload holds the same state");
}

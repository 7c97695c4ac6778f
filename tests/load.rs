//! Load: many concurrent clients on a few hot keys. Fixed windows allow exactly their
//! limit between all clients (RL.MULTI: on every key and window), GCRA never more than
//! its bound, with no errors. Loopback only, bounded in requests; a stalled server
//! fails a test through the clients' read timeout, never through a measured duration.

use crate::common;

use common::{Client, Server};

const CLIENTS: usize = 16;
const REQUESTS: usize = 2_000;
const HOT_KEYS: usize = 4;

/// Run `CLIENTS` × `REQUESTS` calls spread over the hot keys; return the number of
/// allowed calls per key. `call(key)` builds one call.
fn hammer(s: &Server, call: fn(&str) -> Vec<String>) -> Vec<i64> {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut allowed = vec![0i64; HOT_KEYS];
                for i in 0..REQUESTS {
                    let k = (t + i) % HOT_KEYS;
                    let r = c.cmd(&call(&format!("hot:{k}")));
                    let f = r.array();
                    assert!(f.len() >= 5 && !r.is_err(), "client {t} request {i}: {r:?}");
                    if f[0] == common::Value::Int(0) {
                        allowed[k] += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let mut totals = vec![0i64; HOT_KEYS];
    for t in threads {
        for (k, n) in t.join().expect("client thread").into_iter().enumerate() {
            totals[k] += n;
        }
    }
    totals
}

#[test]
fn fixed_windows_allow_exactly_the_limit_under_load() {
    let s = Server::start();
    let totals = hammer(&s, |key| {
        vec!["RL.FIXED".into(), key.into(), "3000".into(), "1h".into()]
    });
    // 32 000 requests over 4 keys: 8 000 each against a limit of 3 000.
    assert_eq!(totals, vec![3_000; HOT_KEYS]);
}

#[test]
fn gcra_never_exceeds_its_bound_under_load() {
    let s = Server::start();
    let started = common::unix_ms();
    // 1 per minute with a burst of 2 999: 3 000 at once, then one a minute.
    let totals = hammer(&s, |key| {
        vec![
            "RL.GCRA".into(),
            key.into(),
            "2999".into(),
            "1".into(),
            "1m".into(),
        ]
    });
    let elapsed_min = (common::unix_ms() - started) / 60_000;
    for (k, allowed) in totals.iter().enumerate() {
        assert!(
            *allowed >= 3_000,
            "hot:{k}: the burst was not all allowed: {allowed}"
        );
        assert!(
            *allowed as u64 <= 3_000 + elapsed_min + 1,
            "hot:{k}: {allowed} over the bound"
        );
    }
}

#[test]
fn cl_throttle_never_exceeds_its_bound_under_load() {
    let s = Server::start();
    let started = common::unix_ms();
    // redis-cell's arguments: a burst of 2 999 and 1 per hour: 3 000 at once, then one
    // an hour; CL.THROTTLE replies 0 when allowed, as the RL.* commands do.
    let totals = hammer(&s, |key| {
        ["CL.THROTTLE", key, "2999", "1", "3600"]
            .map(String::from)
            .to_vec()
    });
    let elapsed_h = (common::unix_ms() - started) / 3_600_000;
    for (k, allowed) in totals.iter().enumerate() {
        assert!(
            *allowed >= 3_000 && *allowed as u64 <= 3_000 + elapsed_h + 1,
            "hot:{k}: {allowed} allowed, for a burst of 3 000 and one an hour"
        );
    }
}

#[test]
fn gcra_delay_books_exactly_what_fits_under_load() {
    let s = Server::start();
    // 10 per hour (T = 6 min), no burst, DELAY 1 hour: one request acts now and ten
    // are booked 6, 12, ... 60 minutes ahead; every other request is refused.
    let totals = hammer(&s, |key| {
        ["RL.GCRA", key, "0", "10", "1h", "DELAY", "1h"]
            .map(String::from)
            .to_vec()
    });
    assert_eq!(totals, vec![11; HOT_KEYS]);
}

#[test]
fn multi_allows_exactly_the_tightest_limit_under_load() {
    let s = Server::start();
    // Each hot key is checked together with one shared key: 1 000 per hour on the
    // shared one binds first, whatever the per-key limits allow.
    let totals = hammer(&s, |key| {
        let hot = format!("{{t}}{key}");
        [
            "RL.MULTI",
            "2",
            &hot,
            "{t}shared",
            "LIMIT",
            "1h",
            "1000",
            "LIMIT",
            "1d",
            "5000",
        ]
        .map(String::from)
        .to_vec()
    });
    assert_eq!(totals.iter().sum::<i64>(), 1_000, "{totals:?}");
    let mut c = s.client();
    let shared = c.cmd(&["GET", "{t}shared"]).text();
    assert!(shared.contains(":1000:"), "{shared}");
}

#[test]
fn sliding_allows_exactly_the_tightest_limit_under_load() {
    let s = Server::start();
    // As RL.MULTI: 16 clients × 2 000 requests, each on a hot key and one shared key;
    // within the hour the shared key's 1 000 is all that passes, in every sliding
    // window, whatever the interleaving.
    let totals = hammer(&s, |key| {
        let hot = format!("{{t}}{key}");
        [
            "RL.SLIDING",
            "2",
            &hot,
            "{t}shared",
            "LIMIT",
            "1h",
            "1000",
            "LIMIT",
            "1m",
            "5000",
            "BUCKETS",
            "60",
        ]
        .map(String::from)
        .to_vec()
    });
    assert_eq!(totals.iter().sum::<i64>(), 1_000, "{totals:?}");
}

#[test]
fn all_allows_exactly_the_tightest_rule_under_load() {
    let s = Server::start();
    // Each call: a GCRA per hot key (1 000 at once, then 1 000 an hour), a sliding
    // window per hot key, and a fixed window of 700 an hour on one shared key, the
    // tightest: exactly 700 pass across all 16 clients, and nothing else is consumed
    // by the denied calls.
    let totals = hammer(&s, |key| {
        let hot = format!("{{t}}{key}");
        [
            "RL.ALL",
            "3",
            &format!("{hot}:g"),
            &format!("{hot}:s"),
            "{t}shared",
            "GCRA",
            "1",
            "999",
            "1000",
            "1h",
            "SLIDING",
            "2",
            "LIMIT",
            "1h",
            "5000",
            "FIXED",
            "3",
            "700",
            "1h",
        ]
        .map(String::from)
        .to_vec()
    });
    assert_eq!(totals.iter().sum::<i64>(), 700, "{totals:?}");
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "{t}shared"]).text(), "700");
}

#[test]
fn log_allows_exactly_the_limit_under_load() {
    let s = Server::start();
    // 16 clients × 2 000 requests on 4 hot logs of 500 per hour: exactly 500 each, and
    // each log holds exactly its 500 entries.
    let totals = hammer(&s, |key| {
        ["RL.LOG", key, "500", "1h", "META", "client"]
            .map(String::from)
            .to_vec()
    });
    assert_eq!(totals, vec![500; HOT_KEYS]);
    let mut c = s.client();
    for k in 0..HOT_KEYS {
        assert_eq!(c.cmd(&["ZCARD", &format!("hot:{k}")]).int(), 500);
    }
}

#[test]
fn lease_grants_exactly_the_limit_under_load() {
    let s = Server::start();
    // 16 clients × 2 000 requests on 4 hot keys of 500 leases held for an hour, never
    // released: exactly 500 granted on each, each key holding exactly its 500 leases.
    let totals = hammer(&s, |key| {
        ["RL.LEASE", key, "500", "1h"].map(String::from).to_vec()
    });
    assert_eq!(totals, vec![500; HOT_KEYS]);
    let mut c = s.client();
    for k in 0..HOT_KEYS {
        assert_eq!(c.cmd(&["ZCARD", &format!("hot:{k}")]).int(), 500);
    }
}

#[test]
fn a_key_named_with_many_windows_under_load_stays_bounded() {
    // Every client names its own four windows on one shared key: the key fills up to
    // its bound of 32 windows, further windows are refused, nothing else fails.
    let s = Server::start();
    let at = (common::unix_ms() + 3_600_000).to_string();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let port = s.port;
            let at = at.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let (mut ok, mut full) = (0, 0);
                for i in 0..200 {
                    let mut call: Vec<String> = vec!["RL.MULTI".into(), "1".into(), "wide".into()];
                    for w in 0..4 {
                        let window = 600 + (t * 4 + w + i % 3) % 64;
                        call.extend(["LIMIT".into(), format!("{window}s"), "100000".into()]);
                    }
                    call.extend(["AT".into(), at.clone()]);
                    let r = c.cmd(&call);
                    match r.err() {
                        None => ok += 1,
                        Some(e) if e.contains("would hold more than 32 windows") => full += 1,
                        Some(e) => panic!("client {t} call {i}: {e}"),
                    }
                }
                (ok, full)
            })
        })
        .collect();
    let (mut ok, mut full) = (0, 0);
    for t in threads {
        let (o, f) = t.join().expect("client thread");
        ok += o;
        full += f;
    }
    assert!(ok > 0 && full > 0, "{ok} allowed, {full} refused");
    let mut c = s.client();
    let windows = c.cmd(&["GET", "wide"]).text().split(',').count();
    assert!(windows <= 32, "{windows} windows");
}

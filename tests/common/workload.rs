//! A random workload of every command and every twin, for the replication, failover
//! and persistence tests, and a snapshot of a whole (small) dataset to compare servers.

use super::{Client, Rng, Twins, Value};
use std::collections::BTreeMap;

/// One key as a snapshot sees it: type, value (GET for strings, DUMP payload for other
/// types) and absolute expiry.
pub type KeyState = (String, Value, i64);

/// Every key of the dataset (small datasets only: it uses KEYS).
pub fn snapshot(c: &mut Client) -> BTreeMap<Vec<u8>, KeyState> {
    let Value::Array(keys) = c.cmd(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut out = BTreeMap::new();
    for k in keys {
        let Value::Bulk(k) = k else {
            panic!("key {k:?}")
        };
        let t = c.cmd(&[b"TYPE".to_vec(), k.clone()]).text();
        let v = if t == "string" {
            c.cmd(&[b"GET".to_vec(), k.clone()])
        } else {
            c.cmd(&[b"DUMP".to_vec(), k.clone()])
        };
        let exp = c.cmd(&[b"PEXPIRETIME".to_vec(), k.clone()]).int();
        out.insert(k, (t, v, exp));
    }
    out
}

/// `calls` random calls of every command and twin. `at_base`: the `AT` used by the
/// limiter calls that pass one (an hour ahead keeps their keys alive); with
/// `server_clock`, about half of them use the server clock instead. Every reply must be
/// a success: the workload has no bad input.
pub fn run(
    c: &mut Client,
    twins: &Twins,
    seed: u64,
    calls: usize,
    at_base: u64,
    server_clock: bool,
) -> Vec<Value> {
    let mut rng = Rng::new(seed);
    let mut replies = Vec::with_capacity(calls);
    for i in 0..calls {
        let id = rng.range(0, 8);
        let at = (at_base + i as u64 * 7).to_string();
        let with_at = !server_clock || rng.chance(50);
        let twin = rng.chance(40);
        let mut opts: Vec<String> = Vec::new();
        if rng.chance(20) {
            opts.extend(["COST".into(), rng.range(0, 2).to_string()]);
        }
        if with_at {
            opts.extend(["AT".into(), at.clone()]);
        }
        let call: Vec<String> = match rng.range(0, 7) {
            0 | 1 => {
                let key = format!("fixed:{id}");
                let limit = rng.range(1, 5).to_string();
                let window = rng.pick(&["1m", "90", "1h"]).to_string();
                if rng.chance(30) {
                    opts.push("ALIGN".into());
                }
                limiter(
                    twin,
                    "RL.FIXED",
                    &twins.fixed,
                    &[key],
                    &[limit, window],
                    &opts,
                )
            }
            2 | 3 => {
                let key = format!("gcra:{id}");
                let burst = rng.range(0, 4).to_string();
                let count = rng.range(1, 10).to_string();
                let period = rng.pick(&["1m", "1h", "1d"]).to_string();
                limiter(
                    twin,
                    "RL.GCRA",
                    &twins.gcra,
                    &[key],
                    &[burst, count, period],
                    &opts,
                )
            }
            4 | 5 => {
                let keys = vec![format!("{{u{id}}}ip"), format!("{{u{id}}}id")];
                let mut args = Vec::new();
                for w in ["1m", "1h"].iter().take(rng.range(1, 3) as usize) {
                    args.extend([
                        "LIMIT".to_string(),
                        w.to_string(),
                        rng.range(1, 6).to_string(),
                    ]);
                }
                limiter(twin, "RL.MULTI", &twins.multi, &keys, &args, &opts)
            }
            _ => {
                // Persistent keys of several types, then a bulk TTL over some of them.
                let key = format!("data:{}", rng.range(0, 12));
                match rng.range(0, 3) {
                    0 => c.cmd(&["SET", &key, "v"]),
                    1 => c.cmd(&["RPUSH", &key, "a"]),
                    _ => c.cmd(&["HSET", &key, "f", "v"]),
                };
                if rng.chance(50) {
                    let keys: Vec<String> = (0..3)
                        .map(|_| format!("data:{}", rng.range(0, 12)))
                        .collect();
                    if twin {
                        let mut v =
                            vec!["EVALSHA".to_string(), twins.bulkexpire.clone(), "3".into()];
                        v.extend(keys);
                        v.push("1h".into());
                        v
                    } else {
                        let mut v = vec!["RL.BULKEXPIRE".to_string(), "1h".into()];
                        v.extend(keys);
                        v
                    }
                } else {
                    ["RL.SWEEP", "0", "2h", "MATCH", "data:*", "COUNT", "1000"]
                        .map(String::from)
                        .to_vec()
                }
            }
        };
        let r = c.cmd(&call);
        assert!(!r.is_err(), "{call:?}: {r:?}");
        replies.push(r);
    }
    replies
}

/// The native call or its twin's EVALSHA, with the same arguments.
fn limiter(
    twin: bool,
    command: &str,
    sha: &str,
    keys: &[String],
    args: &[String],
    opts: &[String],
) -> Vec<String> {
    let mut v: Vec<String> = if twin {
        vec!["EVALSHA".into(), sha.to_string(), keys.len().to_string()]
    } else if command == "RL.MULTI" {
        vec![command.into(), keys.len().to_string()]
    } else {
        vec![command.into()]
    };
    v.extend(keys.iter().cloned());
    v.extend(args.iter().cloned());
    v.extend(opts.iter().cloned());
    v
}

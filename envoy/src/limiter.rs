//! Judging a request's rules with the module: one `RL.ALL` over every enforced rule
//! that shares a Redis server, a slot and a cost (FIXED rules, windows aligned to the
//! Unix epoch as the reference aligns them), all or nothing. Rules on different slots
//! of a Cluster (or on the per-second server) are settled group after group in a fixed
//! order; when a later group refuses, the groups already taken are given back with
//! `RL.ALL ... REFUND`, so a refused request is counted nowhere.

use crate::backend::{slot, Backend};
use crate::config::Unit;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use redis::{Pipeline, RedisError, Value};
use std::collections::BTreeMap;

/// At most this many keys in one RL.ALL (the module's bound).
pub const MAX_KEYS: usize = 16;

/// One descriptor's limit, ready for Redis.
#[derive(Clone, Debug)]
pub struct Item {
    /// The Redis key: the reference's cache key.
    pub key: String,
    pub limit: u64,
    pub unit: Unit,
    /// The hits this request adds (`hits_addend`).
    pub cost: u64,
    pub shadow: bool,
    /// `is_negative_hits`: give `cost` back.
    pub refund: bool,
    /// Which Redis deployment: 0, or 1 for the per-second one.
    pub backend: usize,
}

/// What Redis said of one item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Judged {
    /// The count in the window before this request.
    pub before: u64,
    /// What is left in the window after the request (or, for a request that was not
    /// counted, now).
    pub remaining: u64,
    /// The rule's own verdict: `before + cost <= limit`.
    pub allowed: bool,
    /// Redis was asked (an item judged without Redis has a zero limit or a cost
    /// above its limit; one whose shadow call failed was not judged).
    pub asked: bool,
}

#[derive(Debug)]
pub struct Outcome {
    /// Whether every enforced rule allowed the request (then it was counted in each).
    pub allowed: bool,
    pub judged: Vec<Judged>,
}

/// The reference's cache key of a descriptor: `prefix domain _ key _ value _ ... start`,
/// `start` the Unix second its window began, a `share_threshold` entry's value replaced
/// by its pattern.
pub fn cache_key(
    prefix: &str,
    domain: &str,
    entries: &[Entry],
    shared: &[Option<String>],
    unit: Unit,
    now_s: u64,
) -> String {
    let mut k = String::with_capacity(64);
    k.push_str(prefix);
    k.push_str(domain);
    k.push('_');
    for (i, Entry { key, value }) in entries.iter().enumerate() {
        k.push_str(key);
        k.push('_');
        match shared.get(i) {
            Some(Some(pattern)) => k.push_str(pattern),
            _ => k.push_str(value),
        }
        k.push('_');
    }
    let w = unit.seconds();
    k.push_str(&((now_s / w) * w).to_string());
    k
}

/// A group of items settled by one RL.ALL: their indices.
#[derive(Debug, PartialEq, Eq)]
pub struct Group {
    pub backend: usize,
    pub slot: u16,
    pub cost: u64,
    pub refund: bool,
    pub items: Vec<usize>,
}

/// The groups of `indices` (into `items`), in the order they are settled: by server,
/// slot (when `clustered[backend]`), cost and refund; at most [`MAX_KEYS`] keys in a
/// group and never one key twice (a descriptor sent twice is counted twice, in two
/// groups, as the reference counts it).
pub fn groups(items: &[Item], indices: &[usize], costs: &[u64], clustered: &[bool]) -> Vec<Group> {
    let mut buckets: BTreeMap<(usize, u16, u64, bool), Vec<Vec<usize>>> = BTreeMap::new();
    for &i in indices {
        let it = &items[i];
        let s = if clustered.get(it.backend).copied().unwrap_or(false) {
            slot(it.key.as_bytes())
        } else {
            0
        };
        let lists = buckets
            .entry((it.backend, s, costs[i], it.refund))
            .or_default();
        let fits = lists
            .iter()
            .position(|g| g.len() < MAX_KEYS && g.iter().all(|&j| items[j].key != it.key));
        match fits {
            Some(g) => lists[g].push(i),
            None => lists.push(vec![i]),
        }
    }
    buckets
        .into_iter()
        .flat_map(|((backend, slot, cost, refund), lists)| {
            lists.into_iter().map(move |items| Group {
                backend,
                slot,
                cost,
                refund,
                items,
            })
        })
        .collect()
}

/// The RL.ALL of a group (with REFUND when `refund`), followed by an MGET of its keys
/// when it has several (the reply names only the binding rule's count).
fn pipeline(items: &[Item], g: &Group, refund: bool) -> (Pipeline, usize) {
    let mut p = redis::pipe();
    let cmd = p.cmd("RL.ALL").arg(g.items.len());
    for &i in &g.items {
        cmd.arg(&items[i].key);
    }
    for (n, &i) in g.items.iter().enumerate() {
        let it = &items[i];
        cmd.arg("FIXED")
            .arg(n + 1)
            .arg(it.limit)
            .arg(format!("{}s", it.unit.seconds()))
            .arg("ALIGN");
    }
    cmd.arg("COST").arg(g.cost);
    if refund {
        cmd.arg("REFUND");
    }
    if g.items.len() > 1 {
        let get = p.cmd("MGET");
        for &i in &g.items {
            get.arg(&items[i].key);
        }
        (p, 2)
    } else {
        (p, 1)
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Nil => Some(0),
        _ => None,
    }
}

fn protocol(what: &str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected reply to RL.ALL",
        what.to_string(),
    ))
}

/// A group's verdict and each item's count, from its replies.
fn read(items: &[Item], g: &Group, replies: &[Value]) -> Result<(bool, Vec<Judged>), RedisError> {
    let Some(Value::Array(all)) = replies.first() else {
        return Err(protocol(&format!("{:?}", replies.first())));
    };
    let field = |n: usize| {
        all.get(n)
            .and_then(int)
            .ok_or_else(|| protocol(&format!("{all:?}")))
    };
    let limited = field(0)? == 1;
    let remaining = field(2)?.max(0) as u64;
    let binding = (field(5)?.max(1) - 1) as usize;
    // What this request added to each count: its cost, unless refused or a refund.
    let added = if limited || g.refund { 0 } else { g.cost };
    let counts: Vec<u64> = if g.items.len() == 1 {
        let it = &items[g.items[0]];
        vec![it.limit.saturating_sub(remaining).saturating_sub(added)]
    } else {
        let Some(Value::Array(values)) = replies.get(1) else {
            return Err(protocol(&format!("{:?}", replies.get(1))));
        };
        let mut counts = Vec::with_capacity(values.len());
        for v in values.iter().take(g.items.len()) {
            let now = int(v).ok_or_else(|| protocol(&format!("{v:?}")))?.max(0) as u64;
            // Allowed: the count after this request; refused: the count before it.
            counts.push(now.saturating_sub(added));
        }
        counts
    };
    let mut judged: Vec<Judged> = g
        .items
        .iter()
        .zip(&counts)
        .map(|(&i, &before)| {
            let it = &items[i];
            Judged {
                before,
                remaining: it.limit.saturating_sub(before + added),
                allowed: before.saturating_add(it.cost) <= it.limit,
                asked: true,
            }
        })
        .collect();
    if limited && judged.iter().all(|j| j.allowed) {
        // The counts moved between the RL.ALL and the MGET: the binding rule refused.
        if let Some(j) = judged.get_mut(binding) {
            j.allowed = false;
        }
    }
    Ok((!limited, judged))
}

/// Settle a request's items. `enforced` are judged all or nothing; `independent` (rules
/// in shadow mode, refunds) each on its own, after: a shadow rule counts the request
/// only when the enforced rules let it through, and only if it fits. `denied_locally`:
/// an enforced rule refuses without Redis (a limit of 0, a cost above the limit), so
/// the enforced rules are only read (COST 0).
pub async fn settle(
    backends: &[Backend],
    items: &[Item],
    enforced: &[usize],
    independent: &[usize],
    denied_locally: bool,
) -> Result<Outcome, RedisError> {
    let clustered: Vec<bool> = backends.iter().map(Backend::is_cluster).collect();
    let mut judged = vec![Judged::default(); items.len()];
    let costs: Vec<u64> = items
        .iter()
        .map(|it| if denied_locally { 0 } else { it.cost })
        .collect();
    let mut allowed = !denied_locally;
    let mut taken: Vec<Group> = Vec::new();
    for g in groups(items, enforced, &costs, &clustered) {
        let (p, n) = pipeline(items, &g, g.refund);
        let replies = match backends[g.backend].run(g.slot, &p, n).await {
            Ok(r) => r,
            Err(e) => {
                give_back(backends, items, &taken).await;
                return Err(e);
            }
        };
        let (ok, js) = read(items, &g, &replies)?;
        for (&i, j) in g.items.iter().zip(js) {
            judged[i] = j;
        }
        if !ok {
            allowed = false;
            give_back(backends, items, &taken).await;
            for g in &taken {
                for &i in &g.items {
                    judged[i].remaining = (judged[i].remaining + g.cost).min(items[i].limit);
                }
            }
            taken.clear();
            break;
        }
        if g.cost > 0 {
            taken.push(g);
        }
    }
    // Shadow rules count a request that passed, each if it fits; refunds always apply
    // (one larger than the limit empties the window, as the limit would).
    let costs: Vec<u64> = items
        .iter()
        .map(|it| {
            if it.refund {
                it.cost.min(it.limit)
            } else if allowed && it.cost <= it.limit {
                it.cost
            } else {
                0
            }
        })
        .collect();
    let singles: Vec<Group> = independent
        .iter()
        .flat_map(|&i| groups(items, &[i], &costs, &clustered))
        .collect();
    let calls = singles.iter().map(|g| async move {
        let (p, n) = pipeline(items, g, g.refund);
        let r = backends[g.backend].run(g.slot, &p, n).await;
        (g, r)
    });
    for (g, r) in futures_util::future::join_all(calls).await {
        match r.and_then(|replies| read(items, g, &replies)) {
            Ok((_, js)) => {
                for (&i, j) in g.items.iter().zip(js) {
                    judged[i] = j;
                }
            }
            Err(e) => tracing::warn!("a rule in shadow mode or a refund was not settled: {e}"),
        }
    }
    Ok(Outcome { allowed, judged })
}

/// Give back what the groups took (REFUND), each group in one call, all at once.
async fn give_back(backends: &[Backend], items: &[Item], taken: &[Group]) {
    let calls = taken.iter().map(|g| async move {
        let (p, n) = pipeline(items, g, true);
        if let Err(e) = backends[g.backend].run(g.slot, &p, n).await {
            tracing::warn!(
                "could not give back {} hit(s) of a refused request: {e}",
                g.cost
            );
        }
    });
    futures_util::future::join_all(calls).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, cost: u64) -> Item {
        Item {
            key: key.into(),
            limit: 10,
            unit: Unit::Minute,
            cost,
            shadow: false,
            refund: false,
            backend: 0,
        }
    }

    #[test]
    fn cache_keys_are_the_references() {
        let entry = |k: &str, v: &str| Entry {
            key: k.into(),
            value: v.into(),
        };
        let e = vec![entry("database", "users")];
        assert_eq!(
            cache_key("", "mongo_cps", &e, &[], Unit::Second, 1_700_000_000),
            "mongo_cps_database_users_1700000000"
        );
        let e = vec![entry("files", "files/a.pdf"), entry("k", "")];
        assert_eq!(
            cache_key(
                "p:",
                "d",
                &e,
                &[Some("files/*".into())],
                Unit::Minute,
                1_700_000_059
            ),
            "p:d_files_files/*_k__1700000040"
        );
    }

    #[test]
    fn one_group_per_server_slot_and_cost_without_a_key_twice() {
        let items = vec![item("a", 1), item("b", 1), item("c", 2), item("a", 1)];
        let all = [0, 1, 2, 3];
        let costs: Vec<u64> = items.iter().map(|i| i.cost).collect();
        let g = groups(&items, &all, &costs, &[false]);
        let members: Vec<Vec<usize>> = g.iter().map(|g| g.items.clone()).collect();
        assert_eq!(members, vec![vec![0, 1], vec![3], vec![2]]);
        // In a Cluster, keys in different slots are different groups, ordered by slot.
        let g = groups(&items[..2], &[0, 1], &costs, &[true]);
        assert_eq!(g.len(), 2);
        assert!(g[0].slot < g[1].slot);
        // At most MAX_KEYS keys in one call.
        let many: Vec<Item> = (0..20).map(|n| item(&format!("{{t}}{n}"), 1)).collect();
        let idx: Vec<usize> = (0..20).collect();
        let g = groups(&many, &idx, &[1; 20], &[true]);
        assert_eq!(
            g.iter().map(|g| g.items.len()).collect::<Vec<_>>(),
            vec![16, 4]
        );
    }

    #[test]
    fn replies_give_each_rules_count() {
        let items = vec![item("a", 2), item("b", 2)];
        let g = Group {
            backend: 0,
            slot: 0,
            cost: 2,
            refund: false,
            items: vec![0, 1],
        };
        let all = Value::Array(vec![
            Value::Int(0),
            Value::Int(10),
            Value::Int(3),
            Value::Int(-1),
            Value::Int(1000),
            Value::Int(1),
            Value::BulkString(b"a".to_vec()),
        ]);
        let counts = Value::Array(vec![
            Value::BulkString(b"7".to_vec()),
            Value::BulkString(b"2".to_vec()),
        ]);
        let (ok, js) = read(&items, &g, &[all, counts]).unwrap();
        assert!(ok);
        assert_eq!(
            js[0],
            Judged {
                before: 5,
                remaining: 3,
                allowed: true,
                asked: true
            }
        );
        assert_eq!(
            js[1],
            Judged {
                before: 0,
                remaining: 8,
                allowed: true,
                asked: true
            }
        );
        // Refused: the counts are before the request; the rule that does not fit refuses.
        let all = Value::Array(vec![
            Value::Int(1),
            Value::Int(10),
            Value::Int(1),
            Value::Int(500),
            Value::Int(500),
            Value::Int(1),
            Value::BulkString(b"a".to_vec()),
        ]);
        let counts = Value::Array(vec![Value::BulkString(b"9".to_vec()), Value::Nil]);
        let (ok, js) = read(&items, &g, &[all, counts]).unwrap();
        assert!(!ok);
        assert!(!js[0].allowed && js[1].allowed);
        assert_eq!((js[0].remaining, js[1].remaining), (1, 10));
    }
}

//! RL.LOG: an exact moving window that remembers who used it.
//!
//! The key is a sorted set: one member per allowed request, scored by the request's
//! time in microseconds since the Unix epoch, named `seq:cost:meta` (a sequence number
//! that keeps members unique, the request's cost, and its `META` value, binary-safe).
//! A request of cost `c` at `t` is allowed iff the cost of the entries with a time in
//! `(t - window, t]` (and any later ones) plus `c` is at most `limit`. No buckets, no
//! approximation: the moving window of a request log. An allowed request with `c > 0`
//! removes the entries that left the window and adds its own; the key expires when
//! its newest entry leaves the window. Denials, peeks and errors write nothing.

use crate::args::{parse_int, Accepts, OptionParser};
use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::limits::{MAX_LOG_LIMIT, MAX_META_LEN, MAX_SAFE_INTEGER};
use crate::state::{parse_decimal, push_decimal, StateKind};
use crate::units::{Micros, UnixMillis};
use crate::verdict::{Decision, Verdict};

const COMMAND: &str = "RL.LOG";

/// What an RL.LOG key holds, as error replies word it.
pub const STATE: StateKind = StateKind {
    command: COMMAND,
    expected: "a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch",
};

/// A checked RL.LOG request (after the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    limit: i64,
    window: Micros,
    cost: i64,
    meta: &'a [u8],
    at: Option<Micros>,
}

impl<'a> Request<'a> {
    pub fn limit(&self) -> i64 {
        self.limit
    }
    pub fn window(&self) -> Micros {
        self.window
    }
    pub fn cost(&self) -> i64 {
        self.cost
    }
    pub fn meta(&self) -> &'a [u8] {
        self.meta
    }
    pub fn at(&self) -> Option<Micros> {
        self.at
    }
}

/// `limit window [META value] [COST n] [AT unix_ms]`, checked in argument order, then
/// the cost against the limit.
pub fn parse_args<'a>(args: &[&'a [u8]]) -> Result<Request<'a>> {
    let [raw_limit, raw_window, options @ ..] = args else {
        return Err(Error::WrongArity { command: COMMAND });
    };
    let limit = match parse_int("limit", raw_limit, 1) {
        Ok(l) if l <= MAX_LOG_LIMIT => l,
        _ => {
            return Err(Error::InvalidLogLimit {
                value: raw_limit.to_vec(),
            })
        }
    };
    let window = parse_duration("window", raw_window)?;
    let mut opts = OptionParser::new(Accepts::CostAt);
    let mut meta: Option<&[u8]> = None;
    let mut i = 0;
    while let Some(word) = options.get(i) {
        if word.eq_ignore_ascii_case(b"META") {
            if meta.is_some() {
                return Err(Error::RepeatedOption { name: "META" });
            }
            let v = options
                .get(i + 1)
                .ok_or(Error::MissingOptionValue { name: "META" })?;
            if v.len() > MAX_META_LEN {
                return Err(Error::MetaTooLong { len: v.len() });
            }
            meta = Some(v);
            i += 2;
        } else {
            i += opts.take(options, i)?.ok_or_else(|| Error::UnknownOption {
                value: word.to_vec(),
            })?;
        }
    }
    let opts = opts.finish();
    if opts.cost > limit {
        return Err(Error::CostOverCapacity {
            cost: opts.cost,
            capacity: limit,
            what: "limit",
        });
    }
    Ok(Request {
        limit,
        window,
        cost: opts.cost,
        meta: meta.unwrap_or(&[]),
        at: opts.at,
    })
}

/// One entry of the log (its `META` plays no part in decisions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub time: Micros,
    pub seq: u64,
    pub cost: i64,
}

/// Read one member and its score (as `ZRANGE ... WITHSCORES` prints it): the score a
/// whole number of µs below 2^53, the member `seq:cost:meta` with a cost from 1 to
/// [`MAX_LOG_LIMIT`].
pub fn parse_entry(member: &[u8], score: &[u8]) -> Option<Entry> {
    let time = parse_decimal(score)?;
    if time > MAX_SAFE_INTEGER {
        return None;
    }
    let mut parts = member.splitn(3, |&b| b == b':');
    let (Some(seq), Some(cost), Some(_meta)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let seq = parse_decimal(seq)?;
    let cost = parse_decimal(cost)?;
    if seq > MAX_SAFE_INTEGER || cost == 0 || cost > MAX_LOG_LIMIT as u64 {
        return None;
    }
    Some(Entry {
        time: Micros(time),
        seq,
        cost: cost as i64,
    })
}

/// A key's entries (member, score pairs); the invalid-state error when any does not
/// parse or there are more than a log can hold.
pub fn parse_state<'m>(pairs: impl Iterator<Item = (&'m [u8], &'m [u8])>) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for (member, score) in pairs {
        if out.len() >= MAX_LOG_LIMIT as usize {
            return Err(STATE.invalid());
        }
        out.push(parse_entry(member, score).ok_or_else(|| STATE.invalid())?);
    }
    Ok(out)
}

/// The member of a new entry: `seq:cost:meta`.
pub fn member(seq: u64, cost: i64, meta: &[u8], out: &mut Vec<u8>) {
    push_decimal(out, seq);
    out.push(b':');
    push_decimal(out, cost.unsigned_abs());
    out.push(b':');
    out.extend_from_slice(meta);
}

/// What an allowed request writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// Remove the entries with a time at or before this (they left the window).
    pub trim_through: Option<Micros>,
    /// The new entry: its time and sequence number.
    pub time: Micros,
    pub seq: u64,
    /// When the newest entry leaves the window.
    pub expires_at: UnixMillis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOutcome {
    pub verdict: Verdict,
    pub write: Option<Write>,
}

/// Decide one request against the key's entries (any order).
pub fn decide(entries: &[Entry], now: Micros, req: &Request) -> LogOutcome {
    let window = req.window.0;
    let cutoff = now.0.saturating_sub(window);
    // Entries in (now - window, now] count, and any later ones (an earlier AT).
    let counts = |e: &&Entry| e.time.0 > cutoff || now.0 < window;
    let counted: i64 = entries.iter().filter(counts).map(|e| e.cost).sum();
    let newest = entries.iter().filter(counts).map(|e| e.time.0).max();
    let leaves = |t: u64| t.saturating_add(window);
    if counted + req.cost <= req.limit {
        let (write, newest) = if req.cost > 0 {
            let newest = newest.map_or(now.0, |n| n.max(now.0));
            let seq = entries.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
            let trim = entries
                .iter()
                .any(|e| !counts(&e))
                .then_some(Micros(cutoff));
            let write = Write {
                trim_through: trim,
                time: now,
                seq,
                expires_at: UnixMillis::covering(Micros(leaves(newest))),
            };
            (Some(write), Some(newest))
        } else {
            (None, newest)
        };
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: req.limit,
            remaining: req.limit - counted - req.cost,
            reset_after: Micros(newest.map_or(0, |n| leaves(n).saturating_sub(now.0))),
        };
        return LogOutcome { verdict, write };
    }
    // Denied: when enough of the oldest entries have left for the cost to fit.
    let mut oldest: Vec<Entry> = entries.iter().filter(counts).copied().collect();
    oldest.sort_unstable_by_key(|e| (e.time, e.seq));
    let mut left = counted;
    let mut retry = newest.map_or(now.0, leaves);
    for e in &oldest {
        left -= e.cost;
        if left + req.cost <= req.limit {
            retry = leaves(e.time.0);
            break;
        }
    }
    let verdict = Verdict {
        decision: Decision::Denied {
            retry_after: Micros(retry.saturating_sub(now.0)),
        },
        limit: req.limit,
        remaining: (req.limit - counted).max(0),
        reset_after: Micros(newest.map_or(0, |n| leaves(n).saturating_sub(now.0))),
    };
    LogOutcome {
        verdict,
        write: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000_000; // ms

    fn at(ms: u64) -> Micros {
        Micros::from_millis(T0 + ms)
    }

    fn req(limit: i64, window_ms: u64, cost: i64) -> Request<'static> {
        Request {
            limit,
            window: Micros::from_millis(window_ms),
            cost,
            meta: b"",
            at: None,
        }
    }

    /// Apply an outcome to a log, as the glue does.
    fn apply(log: &mut Vec<Entry>, out: &LogOutcome, cost: i64) {
        if let Some(w) = out.write {
            if let Some(cut) = w.trim_through {
                log.retain(|e| e.time > cut);
            }
            log.push(Entry {
                time: w.time,
                seq: w.seq,
                cost,
            });
        }
    }

    #[test]
    fn exact_moving_window_and_retry() {
        // 3 per second.
        let mut log = Vec::new();
        let r = req(3, 1_000, 1);
        for (t, want) in [
            (0, [0, 3, 2, -1, 1_000]),
            (300, [0, 3, 1, -1, 1_000]),
            (600, [0, 3, 0, -1, 1_000]),
            // The oldest (at 0) leaves at 1000: exactly then one more fits.
            (999, [1, 3, 0, 1, 601]),
            (1_000, [0, 3, 0, -1, 1_000]),
            (1_000, [1, 3, 0, 300, 1_000]),
        ] {
            let out = decide(&log, at(t), &r);
            assert_eq!(out.verdict.fields(), want, "at {t}");
            apply(&mut log, &out, 1);
        }
        // Entries that left the window are removed at the next write.
        assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn costs_peeks_and_the_write() {
        let mut log = Vec::new();
        let out = decide(&log, at(0), &req(10, 60_000, 4));
        assert_eq!(
            out.write,
            Some(Write {
                trim_through: None,
                time: at(0),
                seq: 1,
                expires_at: UnixMillis(T0 + 60_000),
            })
        );
        apply(&mut log, &out, 4);
        let peek = decide(&log, at(10), &req(10, 60_000, 0));
        assert_eq!(peek.write, None);
        assert_eq!(peek.verdict.fields(), [0, 10, 6, -1, 59_990]);
        // 7 more do not fit until the entry of cost 4 leaves.
        let out = decide(&log, at(10), &req(10, 60_000, 7));
        assert_eq!(out.verdict.fields(), [1, 10, 6, 59_990, 59_990]);
        assert_eq!(out.write, None);
        let mut m = Vec::new();
        member(12, 3, b"user:\x00:42", &mut m);
        assert_eq!(m, b"12:3:user:\x00:42");
        assert_eq!(
            parse_entry(&m, b"1700000000000000"),
            Some(Entry {
                time: Micros(1_700_000_000_000_000),
                seq: 12,
                cost: 3
            })
        );
    }

    #[test]
    fn foreign_entries_are_refused() {
        for (member, score) in [
            (&b"x"[..], &b"1"[..]),
            (b"1:1", b"1"),
            (b"1:0:m", b"1"),
            (b"1:10001:m", b"1"),
            (b"a:1:m", b"1"),
            (b"1:1:m", b"1.5"),
            (b"1:1:m", b"-1"),
            (b"1:1:m", b"inf"),
            (b"1:1:m", b"9007199254740992"),
        ] {
            assert_eq!(parse_entry(member, score), None, "{member:?} {score:?}");
        }
    }

    #[test]
    fn argument_errors() {
        let p = |a: &[&str]| {
            let raw: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            parse_args(&raw).map(|_| ())
        };
        assert_eq!(
            p(&["10001", "1m"]),
            Err(Error::InvalidLogLimit {
                value: b"10001".to_vec()
            })
        );
        assert_eq!(
            p(&["0", "1m"]),
            Err(Error::InvalidLogLimit {
                value: b"0".to_vec()
            })
        );
        let long = "x".repeat(257);
        assert_eq!(
            p(&["5", "1m", "META", &long]),
            Err(Error::MetaTooLong { len: 257 })
        );
        assert!(p(&["5", "1m", "META", &"x".repeat(256)]).is_ok());
        assert_eq!(
            p(&["5", "1m", "META", "a", "meta", "b"]),
            Err(Error::RepeatedOption { name: "META" })
        );
        assert_eq!(
            p(&["5", "1m", "META"]),
            Err(Error::MissingOptionValue { name: "META" })
        );
        assert_eq!(
            p(&["5", "1m", "COST", "6"]),
            Err(Error::CostOverCapacity {
                cost: 6,
                capacity: 5,
                what: "limit"
            })
        );
        assert_eq!(p(&["5"]), Err(Error::WrongArity { command: "RL.LOG" }));
    }

    proptest! {
        /// Never more than the limit in any window-long interval of allowed request
        /// times; a denial means the window really had no room; retry_after exact.
        #[test]
        fn invariants(
            limit in 1i64..12,
            window_ms in prop_oneof![Just(1u64), Just(100), Just(1_000), Just(60_000)],
            steps in proptest::collection::vec((0u64..3, 0u64..3_000, 0i64..5), 1..150),
        ) {
            let window = window_ms * 1000;
            let mut log: Vec<Entry> = Vec::new();
            let mut allowed: Vec<(u64, i64)> = Vec::new();
            let mut now = at(0).0 + 5;
            for (scale, dt, c) in steps {
                now += match scale { 0 => dt % 3, 1 => dt * 37, _ => dt * 1000 };
                let cost = c % (limit + 1);
                let r = req(limit, window_ms, cost);
                let out = decide(&log, Micros(now), &r);
                let f = out.verdict.fields();
                prop_assert!((0..=limit).contains(&f[2]));
                prop_assert_eq!(f[0] == 1, f[3] > 0);
                let in_window: i64 = allowed.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| c).sum();
                if out.verdict.is_allowed() {
                    prop_assert!(in_window + cost <= limit);
                    if cost > 0 { allowed.push((now, cost)); }
                    apply(&mut log, &out, cost);
                    prop_assert!(log.iter().map(|e| e.cost).sum::<i64>() <= limit);
                } else {
                    prop_assert!(in_window + cost > limit, "denied with room");
                    prop_assert_eq!(out.write, None);
                    let Decision::Denied { retry_after } = out.verdict.decision else { unreachable!() };
                    prop_assert!(decide(&log, Micros(now + retry_after.0), &r).verdict.is_allowed());
                    prop_assert!(!decide(&log, Micros(now + retry_after.0 - 1), &r).verdict.is_allowed());
                }
            }
        }
    }
}

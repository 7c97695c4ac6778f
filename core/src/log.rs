//! RL.LOG: an exact moving window that remembers who used it.
//!
//! The key is a sorted set with one member per unit of allowed cost (one per request
//! of cost 1), scored by the request's time in microseconds since the Unix epoch and
//! named `seq:meta`: a sequence number that keeps members unique and the request's
//! `META` value (binary-safe). A request of cost `c` at `t` is allowed iff the members
//! with a time in `(t - window, t]` (and any later ones) plus `c` are at most `limit`.
//! No buckets, no approximation: the moving window of a request log.
//!
//! Every call reads only what it needs, each in O(log n) for a log of n members: how
//! many members count (`ZCOUNT`), the newest one, and when denied the oldest one that
//! must leave. An allowed request with `c > 0` removes the members that left the
//! window, adds its own and sets the key to expire when its newest member leaves the
//! window. Denials, peeks and errors write nothing.

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
    expected: "a sorted set of seq:meta members scored by microseconds since the Unix epoch",
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

/// A member the call read: its time and sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub time: Micros,
    pub seq: u64,
}

/// Read one member and its score (as `ZRANGE ... WITHSCORES` prints it): the score a
/// whole number of µs below 2^53, the member `seq:meta`.
pub fn parse_entry(member: &[u8], score: &[u8]) -> Option<Entry> {
    let time = parse_decimal(score)?;
    let colon = member.iter().position(|&b| b == b':')?;
    let seq = parse_decimal(member.get(..colon)?)?;
    if time > MAX_SAFE_INTEGER || seq > MAX_SAFE_INTEGER {
        return None;
    }
    Some(Entry {
        time: Micros(time),
        seq,
    })
}

/// The member for sequence number `seq`: `seq:meta`.
pub fn member(seq: u64, meta: &[u8], out: &mut Vec<u8>) {
    out.clear();
    push_decimal(out, seq);
    out.push(b':');
    out.extend_from_slice(meta);
}

/// The members of a window begin strictly after this time: `now - window` (the score
/// bound `(cutoff` for ZCOUNT and ZRANGEBYSCORE, `cutoff` for ZREMRANGEBYSCORE).
pub fn cutoff(now: Micros, req: &Request) -> Micros {
    Micros(now.0.saturating_sub(req.window.0))
}

/// What a call reads of the log, each with one O(log n) command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// Members after the cutoff (in the window, or later).
    pub counted: i64,
    /// The member with the highest score (the last of `ZRANGE key 0 -1`), if any.
    pub newest: Option<Entry>,
    /// When denied: the time of the oldest counted member that must leave for the
    /// request to fit (the `need`-th counted member by score, see [`need`]).
    pub must_leave: Option<Micros>,
}

/// When `counted` members count: how many of the oldest must leave before this
/// request fits (`None`: it fits now).
pub fn need(counted: i64, req: &Request) -> Option<u64> {
    let over = counted.saturating_add(req.cost).saturating_sub(req.limit);
    (over > 0).then_some(over as u64)
}

/// What an allowed request writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// Remove the members with a time at or before this (they left the window).
    pub trim_through: Micros,
    /// The new members: `cost` of them at `time`, numbered from `first_seq` (a number
    /// already taken is skipped, see [`member`]).
    pub time: Micros,
    pub first_seq: u64,
    /// When the newest member leaves the window.
    pub expires_at: UnixMillis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOutcome {
    pub verdict: Verdict,
    pub write: Option<Write>,
}

/// Decide one request from what the call read.
pub fn decide(view: &View, now: Micros, req: &Request) -> LogOutcome {
    let window = req.window.0;
    let leaves = |t: Micros| t.0.saturating_add(window);
    // The newest member counts whenever any does (it has the highest score).
    let newest = view.newest.filter(|_| view.counted > 0).map(|e| e.time);
    let reset =
        |newest: Option<Micros>| Micros(newest.map_or(0, |n| leaves(n).saturating_sub(now.0)));
    if need(view.counted, req).is_none() {
        // The newest member after this request: its own when it writes one.
        let after = if req.cost > 0 {
            Some(newest.map_or(now, |n| n.max(now)))
        } else {
            newest
        };
        let write = after.filter(|_| req.cost > 0).map(|newest| Write {
            trim_through: cutoff(now, req),
            time: now,
            first_seq: view.newest.map_or(0, |e| e.seq).saturating_add(1),
            expires_at: UnixMillis::covering(Micros(leaves(newest))),
        });
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: req.limit,
            remaining: req.limit - view.counted - req.cost,
            reset_after: reset(after),
        };
        return LogOutcome { verdict, write };
    }
    // Denied: when the oldest member that must leave has left.
    let retry = view.must_leave.or(newest).map_or(now.0 + 1, leaves);
    let verdict = Verdict {
        decision: Decision::Denied {
            retry_after: Micros(retry.saturating_sub(now.0).max(1)),
        },
        limit: req.limit,
        remaining: (req.limit - view.counted).max(0),
        reset_after: reset(newest),
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

    /// A log as the server keeps it: (time, seq) members, sorted by score then member
    /// bytes (`seq:` with an empty META).
    #[derive(Default)]
    struct Log(Vec<(u64, u64)>);

    impl Log {
        fn sort(&mut self) {
            self.0.sort_by_key(|a| (a.0, a.1.to_string()));
        }

        fn view(&self, now: Micros, r: &Request) -> View {
            let cut = cutoff(now, r).0;
            let counted: Vec<&(u64, u64)> = self.0.iter().filter(|(t, _)| *t > cut).collect();
            let newest = self.0.last().map(|&(t, seq)| Entry {
                time: Micros(t),
                seq,
            });
            let must_leave = need(counted.len() as i64, r)
                .and_then(|k| counted.get(k as usize - 1))
                .map(|&&(t, _)| Micros(t));
            View {
                counted: counted.len() as i64,
                newest,
                must_leave,
            }
        }

        /// Decide and apply, as the glue does.
        fn call(&mut self, now: Micros, r: &Request) -> LogOutcome {
            let out = decide(&self.view(now, r), now, r);
            if let Some(w) = out.write {
                let mut seq = w.first_seq;
                for _ in 0..r.cost {
                    while self.0.iter().any(|&(_, s)| s == seq) {
                        seq += 1;
                    }
                    self.0.push((w.time.0, seq));
                    seq += 1;
                }
                self.0.retain(|&(t, _)| t > w.trim_through.0);
                self.sort();
            }
            out
        }
    }

    #[test]
    fn exact_moving_window_and_retry() {
        // 3 per second.
        let mut log = Log::default();
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
            assert_eq!(log.call(at(t), &r).verdict.fields(), want, "at {t}");
        }
        // Members that left the window are removed at the next write.
        assert_eq!(log.0.iter().map(|m| m.1).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn costs_peeks_and_the_write() {
        let mut log = Log::default();
        let out = log.call(at(0), &req(10, 60_000, 4));
        assert_eq!(
            out.write,
            Some(Write {
                trim_through: Micros::from_millis(T0 - 60_000),
                time: at(0),
                first_seq: 1,
                expires_at: UnixMillis(T0 + 60_000),
            })
        );
        assert_eq!(log.0.len(), 4, "one member per unit of cost");
        let peek = log.call(at(10), &req(10, 60_000, 0));
        assert_eq!(peek.write, None);
        assert_eq!(peek.verdict.fields(), [0, 10, 6, -1, 59_990]);
        // 7 more do not fit until the 4 units leave.
        let out = log.call(at(10), &req(10, 60_000, 7));
        assert_eq!(out.verdict.fields(), [1, 10, 6, 59_990, 59_990]);
        assert_eq!(out.write, None);
        let mut m = Vec::new();
        member(12, b"user:\x00:42", &mut m);
        assert_eq!(m, b"12:user:\x00:42");
        assert_eq!(
            parse_entry(&m, b"1700000000000000"),
            Some(Entry {
                time: Micros(1_700_000_000_000_000),
                seq: 12
            })
        );
    }

    #[test]
    fn foreign_members_are_refused() {
        for (member, score) in [
            (&b"x"[..], &b"1"[..]),
            (b"1", b"1"),
            (b"a:m", b"1"),
            (b":m", b"1"),
            (b"1:m", b"1.5"),
            (b"1:m", b"-1"),
            (b"1:m", b"inf"),
            (b"1:m", b"9007199254740992"),
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
        /// times; a denial means the window really had no room; retry_after exact;
        /// members unique.
        #[test]
        fn invariants(
            limit in 1i64..12,
            window_ms in prop_oneof![Just(1u64), Just(100), Just(1_000), Just(60_000)],
            steps in proptest::collection::vec((0u64..3, 0u64..3_000, 0i64..5), 1..150),
        ) {
            let window = window_ms * 1000;
            let mut log = Log::default();
            let mut allowed: Vec<(u64, i64)> = Vec::new();
            let mut now = at(0).0 + 5;
            for (scale, dt, c) in steps {
                now += match scale { 0 => dt % 3, 1 => dt * 37, _ => dt * 1000 };
                let cost = c % (limit + 1);
                let r = req(limit, window_ms, cost);
                let view = log.view(Micros(now), &r);
                let out = log.call(Micros(now), &r);
                let f = out.verdict.fields();
                prop_assert!((0..=limit).contains(&f[2]));
                prop_assert_eq!(f[0] == 1, f[3] > 0);
                let in_window: i64 = allowed.iter().filter(|&&(t, _)| t + window > now).map(|&(_, c)| c).sum();
                prop_assert_eq!(in_window, view.counted);
                if out.verdict.is_allowed() {
                    prop_assert!(in_window + cost <= limit);
                    if cost > 0 { allowed.push((now, cost)); }
                    let mut seqs: Vec<u64> = log.0.iter().map(|m| m.1).collect();
                    seqs.sort_unstable();
                    seqs.dedup();
                    prop_assert_eq!(seqs.len(), log.0.len());
                } else {
                    prop_assert!(in_window + cost > limit, "denied with room");
                    prop_assert_eq!(out.write, None);
                    let Decision::Denied { retry_after } = out.verdict.decision else { unreachable!() };
                    let later = Micros(now + retry_after.0);
                    prop_assert!(decide(&log.view(later, &r), later, &r).verdict.is_allowed());
                    let early = Micros(now + retry_after.0 - 1);
                    prop_assert!(!decide(&log.view(early, &r), early, &r).verdict.is_allowed());
                }
            }
        }
    }
}

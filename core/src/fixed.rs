//! Fixed-window counters (RL.FIXED, and each (key, window) pair of RL.MULTI).
//!
//! A window starts at the first allowed request (at its millisecond) and ends `window`
//! later, or, with `ALIGN`, is the epoch-aligned
//! slot `[floor(now / window) * window, +window)`. A window that has ended counts as
//! empty, whatever the key still holds.

use crate::args::{parse_int, Accepts, Options};
use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::units::{Micros, UnixMillis};
use crate::verdict::{Decision, Verdict};

/// A fixed-window counter as stored: the count and the key's absolute expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    pub count: i64,
    /// `None`: the key has no TTL (e.g. made by a plain INCR).
    pub ends_at: Option<UnixMillis>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedParams {
    pub limit: i64,
    pub window: Micros,
    pub cost: i64,
    pub align: bool,
}

/// What has to be written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing: a denial, a peek, or nothing to repair.
    None,
    /// Store the counter with this absolute expiry (`SET key count PXAT ends_at`).
    Set { count: i64, ends_at: UnixMillis },
    /// Only give the existing counter its missing expiry (`PEXPIREAT key ends_at`).
    ExpireAt(UnixMillis),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub effect: Effect,
}

/// The arguments of `RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]` after
/// the key, checked: a cost above the limit is refused here, before any key is read.
pub fn parse_args(args: &[&[u8]]) -> Result<(FixedParams, Option<Micros>)> {
    let [limit, window, options @ ..] = args else {
        return Err(Error::WrongArity {
            command: "RL.FIXED",
        });
    };
    let limit = parse_int("limit", limit, 1)?;
    let window = parse_duration("window", window)?;
    let opts = Options::parse(options, Accepts::CostAtAlign)?;
    let params = FixedParams {
        limit,
        window,
        cost: opts.cost,
        align: opts.align,
    };
    check_capacity(&params)?;
    Ok((params, opts.at))
}

/// A cost above the limit can never be allowed: an error, not a denial.
pub fn check_capacity(p: &FixedParams) -> Result<()> {
    if p.cost > p.limit {
        return Err(Error::CostOverCapacity {
            cost: p.cost,
            capacity: p.limit,
            what: "limit",
        });
    }
    Ok(())
}

/// Read a stored counter value: a non-negative decimal integer, as `INCR` writes them.
pub fn parse_count(raw: &[u8]) -> Option<i64> {
    if raw.is_empty() || raw.len() > 19 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// The end of a window that starts now. Windows are whole milliseconds (durations
/// are): a first-hit window starts at the millisecond of `now` (as `SET ... PX` counts
/// from the current millisecond); an aligned one at the multiple of `window` at or
/// before `now`.
pub fn new_window_end(now: Micros, window: Micros, align: bool) -> UnixMillis {
    let now_ms = now.floor_millis();
    let window_ms = window.floor_millis();
    let start = if align && window_ms > 0 {
        now_ms - now_ms % window_ms
    } else {
        now_ms
    };
    UnixMillis(start.saturating_add(window_ms))
}

/// The current window of a stored counter at `now`: its count, its end, and whether
/// the counter lacked an expiry (it then gets one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub count: i64,
    pub ends_at: UnixMillis,
    pub missing_ttl: bool,
}

pub fn current_window(stored: Option<Counter>, now: Micros, window: Micros, align: bool) -> Window {
    let fresh = |count, missing_ttl| Window {
        count,
        ends_at: new_window_end(now, window, align),
        missing_ttl,
    };
    match stored {
        None => fresh(0, false),
        Some(Counter {
            count,
            ends_at: None,
        }) => fresh(count, true),
        Some(Counter {
            count,
            ends_at: Some(end),
        }) if end.as_micros() > now => Window {
            count,
            ends_at: end,
            missing_ttl: false,
        },
        // The window has ended (the key may still exist when AT runs ahead).
        Some(Counter {
            ends_at: Some(_), ..
        }) => fresh(0, false),
    }
}

/// Decide one request against one counter.
pub fn decide(stored: Option<Counter>, now: Micros, p: &FixedParams) -> Result<Outcome> {
    check_capacity(p)?;
    let w = current_window(stored, now, p.window, p.align);
    let until_end = w.ends_at.as_micros().saturating_since(now);
    // A sum past i64::MAX is past any limit: it does not fit.
    match w
        .count
        .checked_add(p.cost)
        .filter(|after| *after <= p.limit)
    {
        Some(after) => {
            let effect = if p.cost > 0 {
                Effect::Set {
                    count: after,
                    ends_at: w.ends_at,
                }
            } else {
                Effect::None
            };
            let reset_after = if after == 0 { Micros::ZERO } else { until_end };
            let verdict = Verdict {
                decision: Decision::Allowed,
                limit: p.limit,
                remaining: p.limit - after,
                reset_after,
            };
            Ok(Outcome { verdict, effect })
        }
        None => {
            let effect = if w.missing_ttl && p.cost > 0 {
                Effect::ExpireAt(w.ends_at)
            } else {
                Effect::None
            };
            let verdict = Verdict {
                decision: Decision::Denied {
                    retry_after: until_end,
                },
                limit: p.limit,
                remaining: p.limit.saturating_sub(w.count).max(0),
                reset_after: until_end,
            };
            Ok(Outcome { verdict, effect })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000_000_000; // µs, an arbitrary instant on a second boundary

    fn p(limit: i64, window_ms: u64, cost: i64, align: bool) -> FixedParams {
        FixedParams {
            limit,
            window: Micros::from_millis(window_ms),
            cost,
            align,
        }
    }

    fn at(ms_after_t0: u64) -> Micros {
        Micros(T0 + ms_after_t0 * 1000)
    }

    fn counter(count: i64, ends_ms_after_t0: Option<u64>) -> Option<Counter> {
        Some(Counter {
            count,
            ends_at: ends_ms_after_t0.map(|ms| UnixMillis(T0 / 1000 + ms)),
        })
    }

    fn end(ms_after_t0: u64) -> UnixMillis {
        UnixMillis(T0 / 1000 + ms_after_t0)
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            stored: Option<Counter>,
            now: Micros,
            params: FixedParams,
            fields: [i64; 5],
            effect: Effect,
        }
        let cases = [
            Case {
                name: "first request opens a window",
                stored: None,
                now: at(0),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    count: 1,
                    ends_at: end(1000),
                },
            },
            Case {
                name: "a window starts at the millisecond of the request",
                stored: None,
                now: Micros(T0 + 1),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    count: 1,
                    ends_at: end(1000),
                },
            },
            Case {
                name: "counts inside the window",
                stored: counter(4, Some(600)),
                now: at(100),
                params: p(10, 1000, 3, false),
                fields: [0, 10, 3, -1, 500],
                effect: Effect::Set {
                    count: 7,
                    ends_at: end(600),
                },
            },
            Case {
                name: "exactly at the limit is allowed",
                stored: counter(9, Some(600)),
                now: at(100),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 0, -1, 500],
                effect: Effect::Set {
                    count: 10,
                    ends_at: end(600),
                },
            },
            Case {
                name: "over the limit is denied and writes nothing",
                stored: counter(10, Some(600)),
                now: at(100),
                params: p(10, 1000, 1, false),
                fields: [1, 10, 0, 500, 500],
                effect: Effect::None,
            },
            Case {
                name: "a cost that does not fit is denied even with room left",
                stored: counter(8, Some(600)),
                now: at(100),
                params: p(10, 1000, 3, false),
                fields: [1, 10, 2, 500, 500],
                effect: Effect::None,
            },
            Case {
                name: "an ended window counts as empty",
                stored: counter(10, Some(600)),
                now: at(600),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    count: 1,
                    ends_at: end(1600),
                },
            },
            Case {
                name: "peek on an empty key",
                stored: None,
                now: at(0),
                params: p(10, 1000, 0, false),
                fields: [0, 10, 10, -1, 0],
                effect: Effect::None,
            },
            Case {
                name: "peek inside a window",
                stored: counter(3, Some(250)),
                now: at(0),
                params: p(10, 1000, 0, false),
                fields: [0, 10, 7, -1, 250],
                effect: Effect::None,
            },
            Case {
                name: "peek on a full window is allowed (cost 0 fits)",
                stored: counter(10, Some(250)),
                now: at(0),
                params: p(10, 1000, 0, false),
                fields: [0, 10, 0, -1, 250],
                effect: Effect::None,
            },
            Case {
                name: "a counter above the limit (set from outside) denies even a peek",
                stored: counter(12, Some(250)),
                now: at(0),
                params: p(10, 1000, 0, false),
                fields: [1, 10, 0, 250, 250],
                effect: Effect::None,
            },
            Case {
                name: "a counter without TTL gets a window starting now",
                stored: counter(3, None),
                now: at(0),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 6, -1, 1000],
                effect: Effect::Set {
                    count: 4,
                    ends_at: end(1000),
                },
            },
            Case {
                name: "a full counter without TTL is denied but gets its TTL",
                stored: counter(10, None),
                now: at(0),
                params: p(10, 1000, 1, false),
                fields: [1, 10, 0, 1000, 1000],
                effect: Effect::ExpireAt(end(1000)),
            },
            Case {
                name: "a peek never repairs a missing TTL",
                stored: counter(10, None),
                now: at(0),
                params: p(10, 1000, 0, false),
                fields: [0, 10, 0, -1, 1000],
                effect: Effect::None,
            },
            Case {
                name: "aligned window ends at the next multiple",
                stored: None,
                now: at(1250),
                params: p(10, 1000, 1, true),
                fields: [0, 10, 9, -1, 750],
                effect: Effect::Set {
                    count: 1,
                    ends_at: end(2000),
                },
            },
            Case {
                name: "aligned window on the boundary is a whole window",
                stored: None,
                now: at(3000),
                params: p(10, 1000, 1, true),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    count: 1,
                    ends_at: end(4000),
                },
            },
            Case {
                name: "aligned window with a sub-millisecond now",
                stored: None,
                now: Micros(T0 + 1_999_999),
                params: p(5, 1000, 5, true),
                fields: [0, 5, 0, -1, 1],
                effect: Effect::Set {
                    count: 5,
                    ends_at: end(2000),
                },
            },
            Case {
                name: "an existing window is kept whatever ALIGN says",
                stored: counter(1, Some(1500)),
                now: at(1250),
                params: p(10, 1000, 1, true),
                fields: [0, 10, 8, -1, 250],
                effect: Effect::Set {
                    count: 2,
                    ends_at: end(1500),
                },
            },
            Case {
                name: "retry after less than a millisecond rounds up to 1",
                stored: counter(1, Some(1)),
                now: Micros(T0 + 999),
                params: p(1, 1000, 1, false),
                fields: [1, 1, 0, 1, 1],
                effect: Effect::None,
            },
            Case {
                // Regression: a saturating sum made count + cost look like it fit.
                name: "huge limits do not overflow",
                stored: counter(i64::MAX - 1, Some(10)),
                now: at(0),
                params: p(i64::MAX, 1000, i64::MAX, false),
                fields: [1, i64::MAX, 1, 10, 10],
                effect: Effect::None,
            },
        ];
        for c in cases {
            let out = decide(c.stored, c.now, &c.params).unwrap();
            assert_eq!(out.verdict.fields(), c.fields, "{}", c.name);
            assert_eq!(out.effect, c.effect, "{}", c.name);
        }
    }

    #[test]
    fn cost_above_limit_is_an_error_not_a_denial() {
        assert_eq!(
            decide(None, at(0), &p(10, 1000, 11, false)),
            Err(Error::CostOverCapacity {
                cost: 11,
                capacity: 10,
                what: "limit"
            })
        );
    }

    #[test]
    fn arguments() {
        let parse = |args: &[&str]| {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse_args(&raw)
        };
        assert_eq!(
            parse(&["10", "1m", "COST", "2", "ALIGN", "AT", "5"]),
            Ok((p(10, 60_000, 2, true), Some(Micros::from_millis(5))))
        );
        assert_eq!(parse(&["10", "90"]), Ok((p(10, 90_000, 1, false), None)));
        assert_eq!(
            parse(&["10"]),
            Err(Error::WrongArity {
                command: "RL.FIXED"
            })
        );
        assert_eq!(
            parse(&["0", "1s"]),
            Err(Error::InvalidInteger {
                what: "limit",
                value: b"0".to_vec(),
                min: 1
            })
        );
        assert!(matches!(
            parse(&["1", "0s"]),
            Err(Error::InvalidDuration { what: "window", .. })
        ));
        assert_eq!(
            parse(&["5", "1s", "COST", "6"]),
            Err(Error::CostOverCapacity {
                cost: 6,
                capacity: 5,
                what: "limit"
            })
        );
    }

    #[test]
    fn counter_values() {
        assert_eq!(parse_count(b"0"), Some(0));
        assert_eq!(parse_count(b"42"), Some(42));
        assert_eq!(parse_count(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"abc",
            b"9223372036854775808",
            b"\x00",
        ] {
            assert_eq!(parse_count(bad), None, "{bad:?}");
        }
    }

    /// Apply an outcome to a simulated key, as the glue does.
    fn apply(stored: &mut Option<Counter>, effect: Effect) {
        match effect {
            Effect::None => {}
            Effect::Set { count, ends_at } => {
                *stored = Some(Counter {
                    count,
                    ends_at: Some(ends_at),
                })
            }
            Effect::ExpireAt(e) => {
                if let Some(c) = stored.as_mut() {
                    c.ends_at = Some(e)
                }
            }
        }
    }

    proptest! {
        /// Any argument vector parses or errors, and any stored state, time and
        /// parameters decide or error: nothing panics or overflows.
        #[test]
        fn arbitrary_input_never_panics(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..8),
            count in any::<i64>(),
            ends in proptest::option::of(any::<u64>()),
            now in any::<u64>(),
            limit in 1i64..=i64::MAX,
            window in 1u64..=crate::duration::MAX_DURATION.0,
            cost in 0i64..=i64::MAX,
            align in any::<bool>(),
        ) {
            let raw: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let _ = parse_args(&raw);
            let stored = Some(Counter { count: count.max(0), ends_at: ends.map(UnixMillis) });
            let params = FixedParams { limit, window: Micros(window), cost, align };
            if let Ok(out) = decide(stored, Micros(now), &params) {
                let f = out.verdict.fields();
                prop_assert!((0..=limit).contains(&f[2]));
                prop_assert_eq!(f[0] == 1, f[3] > 0);
            }
        }

        /// Never more than `limit` allowed cost in any one window; remaining within
        /// [0, limit]; retry_after > 0 exactly when denied; a denied request waits
        /// until the window ends and is then allowed.
        #[test]
        fn invariants(
            limit in 1i64..20,
            window_ms in 1u64..5_000,
            align in any::<bool>(),
            steps in proptest::collection::vec((0u64..3_000_000, 0i64..20), 1..200),
        ) {
            let mut stored: Option<Counter> = None;
            let mut now = Micros(T0 + 123);
            // (window end, cost allowed in it)
            let mut windows: Vec<(UnixMillis, i64)> = Vec::new();
            for (dt, cost) in steps {
                now = Micros(now.0 + dt);
                let cost = cost.min(limit);
                let params = FixedParams { limit, window: Micros::from_millis(window_ms), cost, align };
                let out = decide(stored, now, &params).unwrap();
                let [limited, lim, remaining, retry, reset] = out.verdict.fields();
                prop_assert_eq!(lim, limit);
                prop_assert!((0..=limit).contains(&remaining));
                prop_assert_eq!(limited == 1, retry > 0);
                prop_assert!(reset >= 0);
                prop_assert!(reset <= window_ms as i64 + 1);
                if limited == 1 {
                    prop_assert_eq!(out.effect, Effect::None);
                    // Waiting retry_after makes the same request fit.
                    let later = Micros(now.0 + retry as u64 * 1000);
                    let again = decide(stored, later, &params).unwrap();
                    prop_assert!(again.verdict.is_allowed());
                } else if let Effect::Set { count, ends_at } = out.effect {
                    match windows.last_mut() {
                        Some((e, used)) if *e == ends_at => *used += cost,
                        _ => windows.push((ends_at, cost)),
                    }
                    prop_assert_eq!(count, windows.last().unwrap().1);
                }
                apply(&mut stored, out.effect);
            }
            for (_, used) in windows {
                prop_assert!(used <= limit);
            }
        }
    }
}

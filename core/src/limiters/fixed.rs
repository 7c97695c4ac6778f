//! Fixed-window counters (RL.FIXED, and each (key, window) pair of RL.MULTI).
//!
//! A window starts at the first allowed request (at its millisecond) and ends `window`
//! later, or, with `ALIGN`, is the epoch-aligned
//! slot `[floor(now / window) * window, +window)`. A window that has ended counts as
//! empty, whatever the key still holds.
//!
//! State: the count, a non-negative decimal integer as `INCR` writes it; the key's
//! absolute expiry is the end of the window.

use crate::call::keys::KeyRead;
use crate::call::limiter::{
    Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{parse_decimal, Effect, StateName, Stored};
use crate::call::verdict::{Decision, Verdict};
use crate::error::{DurationProblem, Error, Result};
use crate::limits::{MAX_DURATION, MAX_SAFE_INTEGER};
use crate::parse::args::{check_count, in_order, parse_int, Options};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::{Opt, SETTLE};
use crate::units::{Micros, UnixMillis, MICROS_PER_MS};
use crate::call::Call;
use crate::commands::{ALIGN, AT, COST, Command, FlagCounts, Id, KEY, LIMIT, LIMITER, REFUND_OR_FORCE, WINDOW};

/// What an RL.FIXED key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: "RL.FIXED",
    expected: "a non-negative integer counter",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "FIXED",
    syntax: "FIXED i limit window [ALIGN]",
    state: STATE,
    storage: Storage::String,
    gate: false,
    field: false,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
pub const COMMAND: Command = Command {
    id: Id::Fixed,
    name: "RL.FIXED",
    syntax: "RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]",
    summary: "Counts a request in a fixed window: allowed, limit, remaining, retry and reset times",
    args: &[KEY, LIMIT, WINDOW, COST, ALIGN, AT, REFUND_OR_FORCE],
    flags: "write fast",
    acl: "write fast",
    info: "fixed",
    flag_counts: FlagCounts::Flags,
    ..LIMITER
};

/// `RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]`.
pub fn parse(args: &[&[u8]]) -> Result<Call<Fixed>> {
    Call::single(args)
}

/// RL.FIXED's rule on one key (and each pair of RL.MULTI): a limit per window, windows
/// aligned to the epoch or not. Each call brings its cost.
///
/// Built only by [`Fixed::new`], which guarantees `limit >= 1` and a window of whole
/// milliseconds from 1 ms to ten years.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed {
    limit: i64,
    window: Micros,
    align: bool,
}

impl Fixed {
    /// Check the parameters, with the errors of the arguments they come from.
    pub fn new(limit: i64, window: Micros, align: bool) -> Result<Fixed> {
        check_count("limit", limit, 1)?;
        if window.0 == 0 || !window.0.is_multiple_of(MICROS_PER_MS) || window > MAX_DURATION {
            let reason = if window > MAX_DURATION {
                DurationProblem::TooLong
            } else {
                DurationProblem::NotPositive
            };
            return Err(Error::InvalidDuration {
                what: "window",
                value: format!("{}us", window.0).into_bytes(),
                reason,
            });
        }
        Ok(Fixed {
            limit,
            window,
            align,
        })
    }

    pub fn limit(&self) -> i64 {
        self.limit
    }

    pub fn window(&self) -> Micros {
        self.window
    }

    pub fn align(&self) -> bool {
        self.align
    }
}

impl<'a> Syntax<'a> for Fixed {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 2;
    const OPTIONS: &'static [Opt] = &[Opt::Align];
    const COMMAND_OPTIONS: &'static [Opt] = &SETTLE;
    type Args = (i64, Micros);

    fn parse_args(args: &[&'a [u8]]) -> Result<(i64, Micros)> {
        let [limit, window] = args else {
            return Err(Error::WrongArity {
                command: STATE.command,
            });
        };
        let order = "RL.FIXED key limit window: the limit comes first";
        Ok((
            parse_int("limit", limit, 1).map_err(|e| in_order(e, limit, order))?,
            parse_duration("window", window)?,
        ))
    }

    fn build((limit, window): (i64, Micros), opts: &Options<'a>) -> Result<Fixed> {
        Fixed::new(limit, window, opts.align)
    }
}

impl Limiter for Fixed {
    type State = i64;
    /// The write when the call is allowed, and when it is denied.
    type Pending = (Effect<i64>, Effect<i64>);

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// A cost above the limit can never be allowed.
    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
        if mode == Mode::Take && cost > self.limit {
            return Err(Error::CostOverCapacity {
                cost,
                capacity: self.limit,
                what: "limit",
            });
        }
        Ok(())
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Self::Pending>> {
        let stored = key.string_state(parse_state)?;
        if let Some(s) = &stored {
            check_not_a_tat(s.state, self.limit)?;
        }
        let (verdict, on_allow, on_deny) = judge(stored, req, self)?;
        Ok(Judgement::plain(
            verdict,
            self.window.floor_millis(),
            (on_allow, on_deny),
        ))
    }

    fn write(
        &self,
        (on_allow, on_deny): Self::Pending,
        outcome: Outcome,
        _req: &Request,
    ) -> std::result::Result<Effect<i64>, Full> {
        Ok(match outcome {
            Outcome::Allowed => on_allow,
            Outcome::Denied { repair: true } => on_deny,
            Outcome::Denied { repair: false } => Effect::None,
        })
    }
}

/// The smallest value RL.GCRA (and CL.THROTTLE, and their twins) ever stores: a time
/// in microseconds no earlier than the earliest `AT` (2001-09-09).
pub const MIN_TAT_US: i64 = (crate::limits::MIN_AT_MS * 1_000) as i64;

/// With a limit below 10^15, a count of 10^15 or more (a time RL.GCRA could have
/// written, in µs) can only be RL.GCRA's state on this key: RL.FIXED never counts
/// past its limit, and only a call with a limit of 10^15 or more could have counted
/// that far. Refused, rather than read as a count that denies every request until the
/// key expires. With a limit of 10^15 or more the two cannot be told apart.
pub fn check_not_a_tat(count: i64, limit: i64) -> Result<()> {
    if limit < MIN_TAT_US && count >= MIN_TAT_US {
        return Err(Error::ForeignState {
            command: STATE.command,
            holds: "what can only be RL.GCRA's state (a time in microseconds, above the limit)",
            key: None,
        });
    }
    Ok(())
}

/// Read a stored counter: a non-negative decimal integer, as `INCR` writes them.
pub fn parse_state(raw: &[u8]) -> Result<i64> {
    parse_count(raw).ok_or_else(|| STATE.invalid())
}

/// A stored count: a non-negative decimal integer of at most 19 digits, at most
/// [`MAX_SAFE_INTEGER`] (2^53 - 1), the largest count a call can write and the largest
/// the twins read exactly; anything larger was not written by a limiter.
pub fn parse_count(raw: &[u8]) -> Option<i64> {
    let n = parse_decimal(raw)?;
    (n <= MAX_SAFE_INTEGER).then_some(n as i64)
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
pub struct Current {
    pub count: i64,
    pub ends_at: UnixMillis,
    pub missing_ttl: bool,
}

pub fn current_window(
    stored: Option<Stored<i64>>,
    now: Micros,
    window: Micros,
    align: bool,
) -> Current {
    let fresh = |count, missing_ttl| Current {
        count,
        ends_at: new_window_end(now, window, align),
        missing_ttl,
    };
    match stored {
        None => fresh(0, false),
        Some(Stored {
            state: count,
            expires_at: None,
        }) => fresh(count, true),
        Some(Stored {
            state: count,
            expires_at: Some(end),
        }) if end.as_micros() > now => Current {
            count,
            ends_at: end,
            missing_ttl: false,
        },
        // The window has ended (the key may still exist when AT runs ahead).
        Some(Stored {
            expires_at: Some(_),
            ..
        }) => fresh(0, false),
    }
}

/// The verdict on one request against one counter in the request's mode, what the
/// call writes when it is allowed, and what it writes when it is denied (see [`judge`],
/// [`refund`], [`force`]).
pub(crate) fn judge(
    stored: Option<Stored<i64>>,
    req: &Request,
    p: &Fixed,
) -> Result<(Verdict, Effect<i64>, Effect<i64>)> {
    Ok(match req.mode {
        Mode::Take | Mode::UpTo => take(stored, req.now, p, req.cost),
        Mode::Refund => {
            let (verdict, effect) = refund(stored, req.now, p, req.cost);
            (verdict, effect, Effect::None)
        }
        Mode::Force => {
            let (verdict, effect) = force(stored, req.now, p, req.cost)?;
            (verdict, effect, Effect::None)
        }
    })
}

/// `REFUND`: the current window's count goes down by `cost`, never below 0; the key
/// keeps the end of its window, and is deleted when its count is 0 again. A window
/// that has ended, or a missing key, is not touched. Always allowed.
pub(crate) fn refund(
    stored: Option<Stored<i64>>,
    now: Micros,
    p: &Fixed,
    cost: i64,
) -> (Verdict, Effect<i64>) {
    let live = match stored {
        Some(Stored {
            expires_at: Some(end),
            ..
        }) => end.as_micros() > now,
        Some(_) => true,
        None => false,
    };
    if !live {
        return (Verdict::untouched(p.limit), Effect::None);
    }
    let w = current_window(stored, now, p.window, p.align);
    let after = w.count.saturating_sub(cost).max(0);
    let until_end = w.ends_at.as_micros().saturating_since(now);
    let effect = match (cost, after) {
        (0, _) => Effect::None,
        (_, 0) => Effect::Delete,
        _ => Effect::Set {
            state: after,
            expires_at: w.ends_at,
        },
    };
    let verdict = Verdict {
        decision: Decision::Allowed,
        limit: p.limit,
        remaining: p.limit.saturating_sub(after).max(0),
        reset_after: if after == 0 { Micros::ZERO } else { until_end },
    };
    (verdict, effect)
}

/// `FORCE`: `cost` is counted whether it fits or not (the count may pass the limit,
/// never 2^53 - 1). Over the limit, field 1 is 1 and the wait is until the window
/// ends, when a request of cost 1 fits again.
pub(crate) fn force(
    stored: Option<Stored<i64>>,
    now: Micros,
    p: &Fixed,
    cost: i64,
) -> Result<(Verdict, Effect<i64>)> {
    let w = current_window(stored, now, p.window, p.align);
    let until_end = w.ends_at.as_micros().saturating_since(now);
    let after = w
        .count
        .checked_add(cost)
        .filter(|a| *a as u64 <= MAX_SAFE_INTEGER)
        .ok_or(Error::ForceOutOfBounds {
            what: "a count above 9007199254740991",
        })?;
    let effect = if cost > 0 {
        Effect::Set {
            state: after,
            expires_at: w.ends_at,
        }
    } else {
        Effect::None
    };
    let verdict = if after <= p.limit {
        Verdict {
            decision: Decision::Allowed,
            limit: p.limit,
            remaining: p.limit - after,
            reset_after: if after == 0 { Micros::ZERO } else { until_end },
        }
    } else {
        Verdict {
            decision: Decision::Over {
                retry_after: until_end,
            },
            limit: p.limit,
            remaining: 0,
            reset_after: until_end,
        }
    };
    Ok((verdict, effect))
}

/// The verdict on one request against one counter, what an allowed call writes, and
/// what a denied one writes (a counter without TTL gets the end of its window).
pub(crate) fn take(
    stored: Option<Stored<i64>>,
    now: Micros,
    p: &Fixed,
    cost: i64,
) -> (Verdict, Effect<i64>, Effect<i64>) {
    let w = current_window(stored, now, p.window, p.align);
    let until_end = w.ends_at.as_micros().saturating_since(now);
    let on_deny = if w.missing_ttl && cost > 0 {
        Effect::ExpireAt(w.ends_at)
    } else {
        Effect::None
    };
    // A sum past i64::MAX is past any limit: it does not fit.
    match w.count.checked_add(cost).filter(|after| *after <= p.limit) {
        Some(after) => {
            let on_allow = if cost > 0 {
                Effect::Set {
                    state: after,
                    expires_at: w.ends_at,
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
            (verdict, on_allow, on_deny)
        }
        None => {
            let verdict = Verdict {
                decision: Decision::Denied {
                    retry_after: until_end,
                },
                limit: p.limit,
                remaining: p.limit.saturating_sub(w.count).max(0),
                reset_after: until_end,
            };
            (verdict, Effect::None, on_deny)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::state::Decided;
    use crate::call::Call;
    use crate::parse::args::MAX_SAFE_COUNT;
    use proptest::prelude::*;

    const MAX: i64 = MAX_SAFE_COUNT;

    const T0: u64 = 1_700_000_000_000_000; // µs, an arbitrary instant on a second boundary

    fn p(limit: i64, window_ms: u64, cost: i64, align: bool) -> (Fixed, i64) {
        let rule = Fixed::new(limit, Micros::from_millis(window_ms), align).unwrap();
        rule.check_cost(cost, Mode::Take).unwrap();
        (rule, cost)
    }

    /// One request on a counter held in memory, settled as the module settles a call.
    fn decide(
        stored: Option<Stored<i64>>,
        now: Micros,
        (rule, cost): &(Fixed, i64),
    ) -> Decided<i64> {
        crate::call::memory::run_on(&Call::one(*rule, *cost), &[stored], now)
            .expect("a counter")
            .decided()
    }

    fn at(ms_after_t0: u64) -> Micros {
        Micros(T0 + ms_after_t0 * 1000)
    }

    fn counter(count: i64, ends_ms_after_t0: Option<u64>) -> Option<Stored<i64>> {
        Some(Stored {
            state: count,
            expires_at: ends_ms_after_t0.map(|ms| UnixMillis(T0 / 1000 + ms)),
        })
    }

    fn end(ms_after_t0: u64) -> UnixMillis {
        UnixMillis(T0 / 1000 + ms_after_t0)
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            stored: Option<Stored<i64>>,
            now: Micros,
            params: (Fixed, i64),
            fields: [i64; 5],
            effect: Effect<i64>,
        }
        let cases = [
            Case {
                name: "first request opens a window",
                stored: None,
                now: at(0),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    state: 1,
                    expires_at: end(1000),
                },
            },
            Case {
                name: "a window starts at the millisecond of the request",
                stored: None,
                now: Micros(T0 + 1),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    state: 1,
                    expires_at: end(1000),
                },
            },
            Case {
                name: "counts inside the window",
                stored: counter(4, Some(600)),
                now: at(100),
                params: p(10, 1000, 3, false),
                fields: [0, 10, 3, -1, 500],
                effect: Effect::Set {
                    state: 7,
                    expires_at: end(600),
                },
            },
            Case {
                name: "exactly at the limit is allowed",
                stored: counter(9, Some(600)),
                now: at(100),
                params: p(10, 1000, 1, false),
                fields: [0, 10, 0, -1, 500],
                effect: Effect::Set {
                    state: 10,
                    expires_at: end(600),
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
                    state: 1,
                    expires_at: end(1600),
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
                    state: 4,
                    expires_at: end(1000),
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
                    state: 1,
                    expires_at: end(2000),
                },
            },
            Case {
                name: "aligned window on the boundary is a whole window",
                stored: None,
                now: at(3000),
                params: p(10, 1000, 1, true),
                fields: [0, 10, 9, -1, 1000],
                effect: Effect::Set {
                    state: 1,
                    expires_at: end(4000),
                },
            },
            Case {
                name: "aligned window with a sub-millisecond now",
                stored: None,
                now: Micros(T0 + 1_999_999),
                params: p(5, 1000, 5, true),
                fields: [0, 5, 0, -1, 1],
                effect: Effect::Set {
                    state: 5,
                    expires_at: end(2000),
                },
            },
            Case {
                name: "an existing window is kept whatever ALIGN says",
                stored: counter(1, Some(1500)),
                now: at(1250),
                params: p(10, 1000, 1, true),
                fields: [0, 10, 8, -1, 250],
                effect: Effect::Set {
                    state: 2,
                    expires_at: end(1500),
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
                stored: counter(MAX - 1, Some(10)),
                now: at(0),
                params: p(MAX, 1000, MAX, false),
                fields: [1, MAX, 1, 10, 10],
                effect: Effect::None,
            },
        ];
        for c in cases {
            let out = decide(c.stored, c.now, &c.params);
            assert_eq!(out.verdict.fields(), c.fields, "{}", c.name);
            assert_eq!(out.effect, c.effect, "{}", c.name);
        }
    }

    #[test]
    fn cost_above_limit_is_an_error_not_a_denial() {
        assert_eq!(
            Fixed::new(10, Micros::from_millis(1000), false)
                .and_then(|r| r.check_cost(11, Mode::Take)),
            Err(Error::CostOverCapacity {
                cost: 11,
                capacity: 10,
                what: "limit"
            })
        );
    }

    #[test]
    fn constructor_refuses_what_the_parser_refuses() {
        let s = Micros::from_secs(1);
        assert!(Fixed::new(0, s, false).is_err());
        assert!(Fixed::new(1, Micros::ZERO, false).is_err());
        assert!(Fixed::new(1, Micros(1_500), false).is_err());
        assert!(Fixed::new(1, Micros(MAX_DURATION.0 + 1_000), false).is_err());
        assert!(Fixed::new(1, MAX_DURATION, false).is_ok());
    }

    #[test]
    fn invalid_state_names_the_command() {
        assert_eq!(parse_state(b"12"), Ok(12));
        assert_eq!(
            parse_state(b"x").map_err(|e| e.to_string()),
            Err("ERR the key does not hold RL.FIXED state (expected a non-negative integer counter)".to_string())
        );
    }

    #[test]
    fn arguments() {
        let parse = |args: &[&str]| {
            let raw: Vec<&[u8]> = std::iter::once(&b"key"[..])
                .chain(args.iter().map(|a| a.as_bytes()))
                .collect();
            crate::limiters::fixed::parse(&raw).map(|c| (c.rules[0].1, c.cost, c.at))
        };
        assert_eq!(
            parse(&["10", "1m", "COST", "2", "ALIGN", "AT", "1000000000005"]),
            Ok((
                p(10, 60_000, 2, true).0,
                2,
                Some(Micros::from_millis(1_000_000_000_005))
            ))
        );
        assert_eq!(
            parse(&["10", "90"]),
            Ok((p(10, 90_000, 1, false).0, 1, None))
        );
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
        assert_eq!(
            parse_count(b"9007199254740991"),
            Some(9_007_199_254_740_991)
        );
        assert_eq!(
            parse_count(b"0009007199254740991"),
            Some(9_007_199_254_740_991)
        );
        for bad in [
            &b"9007199254740992"[..],
            b"9223372036854775807",
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
    fn apply(stored: &mut Option<Stored<i64>>, effect: Effect<i64>) {
        match effect {
            Effect::None => {}
            Effect::Set { state, expires_at } => {
                *stored = Some(Stored {
                    state,
                    expires_at: Some(expires_at),
                })
            }
            Effect::ExpireAt(e) => {
                if let Some(c) = stored.as_mut() {
                    c.expires_at = Some(e)
                }
            }
            Effect::Delete => *stored = None,
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
            limit in 1i64..=MAX_SAFE_COUNT,
            window_ms in 1u64..=crate::limits::MAX_DURATION_MS,
            cost in 0i64..=MAX_SAFE_COUNT,
            align in any::<bool>(),
        ) {
            let raw: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let _ = crate::limiters::fixed::parse(&raw);
            let stored = Some(Stored { state: count.clamp(0, MAX), expires_at: ends.map(UnixMillis) });
            if let Ok(rule) = Fixed::new(limit, Micros::from_millis(window_ms), align) {
                let params = (rule, cost.min(limit));
                if check_not_a_tat(count.clamp(0, MAX), limit).is_err() {
                    // What can only be RL.GCRA's state: an error, nothing decided.
                    prop_assert!(crate::call::memory::run_on(&Call::one(rule, params.1), &[stored], Micros(now)).is_err());
                    return Ok(());
                }
                let out = decide(stored, Micros(now), &params);
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
            let mut stored: Option<Stored<i64>> = None;
            let mut now = Micros(T0 + 123);
            // (window end, cost allowed in it)
            let mut windows: Vec<(UnixMillis, i64)> = Vec::new();
            for (dt, cost) in steps {
                now = Micros(now.0 + dt);
                let cost = cost.min(limit);
                let params = p(limit, window_ms, cost, align);
                let out = decide(stored, now, &params);
                let [limited, lim, remaining, retry, reset] = out.verdict.fields();
                prop_assert_eq!(lim, limit);
                prop_assert!((0..=limit).contains(&remaining));
                prop_assert_eq!(limited == 1, retry > 0);
                prop_assert!(reset >= 0);
                prop_assert!(reset <= window_ms as i64 + 1);
                if limited == 1 {
                    prop_assert_eq!(&out.effect, &Effect::None);
                    // Waiting retry_after makes the same request fit.
                    let later = Micros(now.0 + retry as u64 * 1000);
                    let again = decide(stored, later, &params);
                    prop_assert!(again.verdict.is_allowed());
                } else if let Effect::Set { state: count, expires_at: ends_at } = out.effect {
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

//! The generic cell rate algorithm (RL.GCRA), arguments as in `CL.THROTTLE`:
//! `count` requests per `period`, plus `max_burst` extra at once.
//!
//! Everything is integer microseconds. The emission interval is
//! `T = period / count` **rounded up** to a whole microsecond, so the sustained rate
//! never exceeds `count / period` (it is below it by less than one microsecond per
//! request). The capacity is `max_burst + 1` requests, the burst window `T * capacity`.
//!
//! The state is the theoretical arrival time (TAT) in µs since the Unix epoch. A request
//! of cost `n` at `now`:
//!
//! ```text
//! tat     = max(stored TAT or now, now)
//! new_tat = tat + T * n
//! allowed iff new_tat - now <= T * capacity
//! ```
//!
//! An allowed request with `n > 0` stores `new_tat`, expiring at `new_tat` rounded up
//! to the millisecond: the moment the state is back to full capacity.
//!
//! With `DELAY max_delay` a request that does not fit now but fits within `max_delay`
//! is **booked**: allowed iff `new_tat - now <= T * capacity + max_delay`, the TAT
//! advances as for any allowed request, and the caller is told to wait
//! `new_tat - now - T * capacity` (0 when it fits now). Bookings made one after the
//! other are spaced exactly `T * cost` apart, in booking order.
//!
//! Every time involved stays below 2^53 µs (see [`MAX_TAT`]), so the Lua twin, whose
//! numbers are doubles, computes exactly the same integers.

use crate::call::keys::KeyRead;
use crate::call::limiter::{
    Field, Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{Decided, Effect, StateName, Stored};
use crate::call::verdict::{Decision, Verdict};
use crate::error::{Error, Result};
use crate::limits::{MAX_BURST_WINDOW, MAX_TAT, MAX_TAT_DIGITS};
use crate::parse::args::{check_count, in_order, parse_int, Options};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::Opt;
use crate::units::{Micros, UnixMillis};
use crate::call::Call;
use crate::commands::{AT, Arg, ArgType, COST, COUNT, Command, FlagCounts, Id, KEY, LIMITER, MAX_BURST, PERIOD, REFUND_OR_FORCE};

/// What an RL.GCRA key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: "RL.GCRA",
    expected: "a theoretical arrival time in microseconds since the Unix epoch",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "GCRA",
    syntax: "GCRA i max_burst count period",
    state: STATE,
    storage: Storage::String,
    gate: false,
    field: false,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
pub const COMMAND: Command = Command {
    id: Id::Gcra,
    name: "RL.GCRA",
    syntax: "RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay] [REFUND|FORCE|UPTO]",
    summary: "Spaces requests evenly with a burst allowance (GCRA); with DELAY, books a slot and says when to act",
    args: &[
        KEY,
        MAX_BURST,
        COUNT,
        PERIOD,
        COST,
        AT,
        Arg::option(
            "DELAY",
            "max_delay",
            ArgType::String,
            "queue instead of drop: book a request that fits within this duration",
        ),
        REFUND_OR_FORCE,
    ],
    flags: "write fast",
    acl: "write fast",
    info: "gcra",
    flag_counts: FlagCounts::Flags,
    ..LIMITER
};

/// `RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay]`.
pub fn parse(args: &[&[u8]]) -> Result<Call<Gcra>> {
    Call::single(args).map_err(|e| match (e, args) {
        // redis-cell's quantity as a fifth argument (key max_burst count period n):
        // RL.GCRA takes it as COST n.
        (Error::UnknownOption { value, .. }, [_key, _, _, _, fifth, ..])
            if value.as_slice() == *fifth && parse_int("quantity", fifth, 0).is_ok() =>
        {
            Error::QuantityPositional { value }
        }
        (e, _) => e,
    })
}

/// A checked GCRA request: the rate, the capacity and the cost.
///
/// Built only by [`GcraParams::new`], which guarantees `interval >= 1 µs`,
/// `interval * capacity <= MAX_BURST_WINDOW` and `0 <= cost <= capacity`, and
/// [`GcraParams::with_delay`], which keeps `interval * capacity + max_delay` within
/// `MAX_BURST_WINDOW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcraParams {
    interval: Micros,
    capacity: i64,
    cost: i64,
    /// `DELAY max_delay`; `None`: requests that do not fit now are denied.
    max_delay: Option<Micros>,
}

impl GcraParams {
    /// Check `max_burst` (≥ 0), `count` (≥ 1), `period` and `cost` (0 to the capacity),
    /// in that order of errors: rate, burst window, cost.
    pub fn new(max_burst: i64, count: i64, period: Micros, cost: i64) -> Result<GcraParams> {
        check_count("max_burst", max_burst, 0)?;
        check_count("count", count, 1)?;
        check_count("cost", cost, 0)?;
        let count = count as u64;
        if period.0 < count {
            return Err(Error::RateTooHigh);
        }
        let interval = Micros(period.0.div_ceil(count));
        let capacity = max_burst.checked_add(1).ok_or_else(|| Error::BurstTooLong)?;
        match interval.0.checked_mul(capacity as u64) {
            Some(w) if w <= MAX_BURST_WINDOW.0 => {}
            _ => return Err(Error::BurstTooLong),
        }
        if cost > capacity {
            return Err(Error::CostOverCapacity {
                cost,
                capacity,
                what: "burst capacity",
            });
        }
        Ok(GcraParams {
            interval,
            capacity,
            cost,
            max_delay: None,
        })
    }

    /// The same request with `DELAY max_delay`: the burst window plus the delay must
    /// stay within 50 years, so every booked TAT is a TAT the command reads back.
    pub fn with_delay(self, max_delay: Micros) -> Result<GcraParams> {
        match self.burst_window().0.checked_add(max_delay.0) {
            Some(w) if w <= MAX_BURST_WINDOW.0 => Ok(GcraParams {
                max_delay: Some(max_delay),
                ..self
            }),
            _ => Err(Error::DelayTooLong),
        }
    }

    /// `DELAY max_delay`, when given.
    pub fn max_delay(&self) -> Option<Micros> {
        self.max_delay
    }

    /// The emission interval T: `period / count` rounded up to a whole microsecond.
    pub fn interval(&self) -> Micros {
        self.interval
    }

    /// `max_burst + 1`: field 2 of the reply.
    pub fn capacity(&self) -> i64 {
        self.capacity
    }

    pub fn cost(&self) -> i64 {
        self.cost
    }

    /// `T * capacity`: how far ahead of now the TAT may be after an allowed request.
    pub fn burst_window(&self) -> Micros {
        Micros(self.interval.0.saturating_mul(self.capacity as u64))
    }

    /// `T * cost`: how far one request moves the TAT.
    pub fn increment(&self) -> Micros {
        Micros(self.interval.0.saturating_mul(self.cost as u64))
    }
}

/// RL.GCRA's rule on one key: the rate, the burst and, for the command, `DELAY`. Each
/// call brings its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra(GcraParams);

impl Gcra {
    /// The checked parameters of a call with this cost.
    pub fn params(&self, cost: i64) -> GcraParams {
        GcraParams { cost, ..self.0 }
    }
}

/// The rule of checked parameters (their cost is each call's).
impl From<GcraParams> for Gcra {
    fn from(params: GcraParams) -> Gcra {
        Gcra(GcraParams { cost: 0, ..params })
    }
}

impl<'a> Syntax<'a> for Gcra {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 3;
    const OPTIONS: &'static [Opt] = &[];
    const COMMAND_OPTIONS: &'static [Opt] = &[Opt::Delay, Opt::Refund, Opt::Force, Opt::UpTo];
    type Args = (i64, i64, Micros);

    fn parse_args(args: &[&'a [u8]]) -> Result<(i64, i64, Micros)> {
        let [max_burst, count, period] = args else {
            return Err(Error::WrongArity {
                command: STATE.command,
            });
        };
        let order = "RL.GCRA key max_burst count period: the period comes last";
        Ok((
            parse_int("max_burst", max_burst, 0).map_err(|e| in_order(e, max_burst, order))?,
            parse_int("count", count, 1).map_err(|e| in_order(e, count, order))?,
            parse_duration("period", period)?,
        ))
    }

    /// Checked in the order of the errors: rate, burst window, cost, delay.
    fn build((max_burst, count, period): (i64, i64, Micros), opts: &Options<'a>) -> Result<Gcra> {
        // A refund, a forced request or UPTO of any cost can be settled: no capacity
    // check.
        let cost = if opts.refund || opts.force || opts.upto {
            0
        } else {
            opts.cost
        };
        let params = GcraParams::new(max_burst, count, period, cost)?;
        let params = match opts.delay {
            Some(d) => params.with_delay(d)?,
            None => params,
        };
        Ok(Gcra(GcraParams { cost: 0, ..params }))
    }
}

impl Limiter for Gcra {
    type State = Micros;
    /// What an allowed call writes (a denial writes nothing: the expiry follows the TAT).
    type Pending = Effect<Micros>;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
        if mode == Mode::Take && cost > self.0.capacity {
            return Err(Error::CostOverCapacity {
                cost,
                capacity: self.0.capacity,
                what: "burst capacity",
            });
        }
        Ok(())
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Effect<Micros>>> {
        let (now, cost) = (req.now, req.cost);
        let stored = key.string_state(parse_state)?;
        let p = GcraParams { cost, ..self.0 };
        let (decided, booking) = match req.mode {
            Mode::Take | Mode::UpTo => judge_tat(stored, now, &p),
            Mode::Refund => (refund_tat(stored, now, &p), None),
            Mode::Force => (force_tat(stored, now, &p)?, None),
        };
        Ok(Judgement {
            field: booking.map(|b| Field::Int(b.field())),
            ..Judgement::plain(
                decided.verdict,
                self.0.burst_window().ceil_millis(),
                decided.effect,
            )
        })
    }

    fn write(
        &self,
        pending: Effect<Micros>,
        outcome: Outcome,
        _req: &Request,
    ) -> std::result::Result<Effect<Micros>, Full> {
        Ok(match outcome {
            Outcome::Allowed => pending,
            Outcome::Denied { .. } => Effect::None,
        })
    }
}

/// `REFUND`: `tat = max(now, tat - T * cost)`; the key expires at the new TAT, and is
/// deleted when the TAT is at or before now (full again). A missing key is not touched.
fn refund_tat(stored: Option<Stored<Micros>>, now: Micros, p: &GcraParams) -> Decided<Micros> {
    let Some(stored) = stored else {
        return Decided {
            verdict: Verdict::untouched(p.capacity),
            effect: Effect::None,
        };
    };
    let tat = stored.state.max(now);
    let new_tat = tat.saturating_since(p.increment()).max(now);
    let ahead = new_tat.saturating_since(now).0;
    let effect = if p.cost == 0 {
        Effect::None
    } else if new_tat <= now {
        Effect::Delete
    } else {
        Effect::Set {
            state: new_tat,
            expires_at: UnixMillis::covering(new_tat),
        }
    };
    let room = p.burst_window().0.saturating_sub(ahead) / p.interval.0;
    let verdict = Verdict {
        decision: Decision::Allowed,
        limit: p.capacity,
        remaining: i64::try_from(room).unwrap_or(i64::MAX),
        reset_after: Micros(ahead),
    };
    Decided { verdict, effect }
}

/// `FORCE`: `new_tat = max(tat, now) + T * cost` is stored whether it fits or not, at
/// most [`MAX_TAT`] (the latest AT plus the longest burst window). Beyond the burst
/// window, field 1 is 1 and the wait is until a request of cost 1 fits:
/// `new_tat + T - burst window - now`.
fn force_tat(
    stored: Option<Stored<Micros>>,
    now: Micros,
    p: &GcraParams,
) -> Result<Decided<Micros>> {
    let window = p.burst_window().0;
    let tat = stored.map_or(now, |s| s.state.max(now));
    let new_tat = tat
        .0
        .checked_add(p.increment().0)
        .filter(|t| *t <= MAX_TAT.0)
        .map(Micros)
        .ok_or(Error::ForceOutOfBounds {
            what: "a theoretical arrival time beyond the latest AT plus the longest burst window",
        })?;
    let ahead = new_tat.saturating_since(now).0;
    let effect = if p.cost > 0 {
        Effect::Set {
            state: new_tat,
            expires_at: UnixMillis::covering(new_tat),
        }
    } else {
        Effect::None
    };
    let verdict = if ahead <= window {
        Verdict {
            decision: Decision::Allowed,
            limit: p.capacity,
            remaining: i64::try_from((window - ahead) / p.interval.0).unwrap_or(i64::MAX),
            reset_after: Micros(ahead),
        }
    } else {
        Verdict {
            decision: Decision::Over {
                retry_after: Micros(ahead + p.interval.0 - window),
            },
            limit: p.capacity,
            remaining: 0,
            reset_after: Micros(ahead),
        }
    };
    Ok(Decided { verdict, effect })
}

/// Read a stored TAT: the module's own (1 to [`MAX_TAT_DIGITS`] decimal digits, µs,
/// at most [`MAX_TAT`]) or redis-cell's (see [`parse_tat`]).
///
/// A number from 1 to 10^15 - 1 is no time RL.GCRA writes (its TATs are never before
/// the earliest `AT`, 2001-09-09, in µs): it is a counter (RL.FIXED's, `INCR`'s), and
/// the error says so instead of reading it as a time long past, which would allow every
/// request and overwrite the counter. 0 is still a time long past: `SET key 0` is how
/// redis-cell's users reset a key, and no counter is stored as 0.
pub fn parse_state(raw: &[u8]) -> Result<Micros> {
    match parse_tat(raw) {
        Some(tat) if tat.0 >= MIN_TAT_US || tat.0 == 0 => Ok(tat),
        Some(_) => Err(Error::ForeignState {
            command: STATE.command,
            holds: "a counter (RL.FIXED's or INCR's, below 10^15: no time RL.GCRA writes)",
            key: None,
        }),
        None => Err(STATE.invalid()),
    }
}

/// The smallest TAT RL.GCRA stores: a time in µs no earlier than the earliest `AT`.
pub const MIN_TAT_US: u64 = crate::limits::MIN_AT_MS * 1_000;

/// A TAT as [`parse_state`] reads it, or `None`.
///
/// Two formats, which cannot be confused:
/// - the module's: microseconds since the Unix epoch, at most [`MAX_TAT_DIGITS`] (16)
///   digits and at most [`MAX_TAT`];
/// - redis-cell's (`CL.THROTTLE` of that module): nanoseconds since the Unix epoch,
///   [`NS_TAT_DIGITS`] (19) digits, at least 10^18 (any time after September 2001). It
///   is rounded **up** to the microsecond, so it never allows more than redis-cell
///   would have, and must then be at most [`MAX_TAT`] too.
///
/// Anything else (17 or 18 digits, 19 digits below 10^18, 20 or more) is not a TAT.
pub fn parse_tat(raw: &[u8]) -> Option<Micros> {
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = match raw.len() {
        len if len <= MAX_TAT_DIGITS => decimal(raw),
        NS_TAT_DIGITS if raw.first() != Some(&b'0') => decimal(raw).div_ceil(1_000),
        _ => return None,
    };
    (n <= MAX_TAT.0).then_some(Micros(n))
}

/// The digits of a stored TAT in redis-cell's format (nanoseconds since 2001-09-09).
pub const NS_TAT_DIGITS: usize = 19;

/// The value of at most 19 ASCII digits (below 10^19, within a `u64`).
fn decimal(digits: &[u8]) -> u64 {
    digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'))
}

/// Field 6 of the reply to a call with `DELAY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Booking {
    /// It fits now: act at once (0).
    Now,
    /// Booked: act after this long (in ms, rounded up).
    After(Micros),
    /// It does not fit within `max_delay`: denied, nothing booked (-1).
    Refused,
}

impl Booking {
    /// The reply field: 0, the delay in ms rounded up, or -1.
    pub fn field(&self) -> i64 {
        match self {
            Booking::Now => 0,
            Booking::After(d) => crate::call::verdict::ms_i64(*d),
            Booking::Refused => -1,
        }
    }
}

/// The verdict on one request and what an allowed one writes; for a call with `DELAY`
/// its booking (field 6). `stored` is the key's TAT (`None`: no key); a TAT in the past
/// counts as `now`; the key's expiry plays no part (it always follows the TAT). A
/// denied call's `retry_after` is the time until the same call would be booked
/// (without `DELAY`: until it fits).
fn judge_tat(
    stored: Option<Stored<Micros>>,
    now: Micros,
    p: &GcraParams,
) -> (Decided<Micros>, Option<Booking>) {
    let t = p.interval.0;
    let window = p.burst_window().0;
    // How far ahead of now the TAT may be after an allowed (or booked) request.
    let bound = window.saturating_add(p.max_delay.map_or(0, |d| d.0));
    let tat = stored.map_or(now, |s| s.state.max(now));
    let new_tat = tat.saturating_add(p.increment());
    // How far ahead of now the TAT would be after this request.
    let ahead = new_tat.saturating_since(now).0;
    // Whole requests of cost 1 that still fit when the TAT is `behind` ahead of now.
    let room = |behind: u64| -> i64 {
        i64::try_from(window.saturating_sub(behind) / t).unwrap_or(i64::MAX)
    };
    if ahead <= bound {
        let effect = if p.cost > 0 {
            Effect::Set {
                state: new_tat,
                expires_at: UnixMillis::covering(new_tat),
            }
        } else {
            Effect::None
        };
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: p.capacity,
            remaining: room(ahead),
            reset_after: Micros(ahead),
        };
        let booking = p.max_delay.map(|_| match ahead.checked_sub(window) {
            Some(wait) if wait > 0 => Booking::After(Micros(wait)),
            _ => Booking::Now,
        });
        (Decided { verdict, effect }, booking)
    } else {
        let behind = tat.saturating_since(now);
        let verdict = Verdict {
            decision: Decision::Denied {
                retry_after: Micros(ahead - bound),
            },
            limit: p.capacity,
            remaining: room(behind.0),
            reset_after: behind,
        };
        let outcome = Decided {
            verdict,
            effect: Effect::None,
        };
        (outcome, p.max_delay.map(|_| Booking::Refused))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Call;
    use crate::limits::MAX_AT_MS;
    use proptest::prelude::*;

    /// One request on a bare TAT (its key's expiry plays no part), settled as the
    /// module settles a call.
    fn decide(stored: Option<Micros>, now: Micros, p: &GcraParams) -> Decided<Micros> {
        let stored = stored.map(|state| Stored {
            state,
            expires_at: None,
        });
        crate::call::memory::run_on(&Call::one(Gcra::from(*p), p.cost()), &[stored], now)
            .expect("a TAT")
            .decided()
    }

    /// `RL.GCRA key <args>`: the checked parameters (with the call's cost) and AT.
    fn parse_args(args: &[&[u8]]) -> Result<(GcraParams, Option<Micros>)> {
        let raw: Vec<&[u8]> = std::iter::once(&b"key"[..])
            .chain(args.iter().copied())
            .collect();
        crate::limiters::gcra::parse(&raw).map(|c| (c.rules[0].1.params(c.cost), c.at))
    }

    const T0: u64 = 1_700_000_000_000_000; // µs, an arbitrary instant on a second boundary
    const DAY_MS: u64 = 86_400_000;

    fn params(max_burst: i64, count: i64, period_ms: u64, cost: i64) -> GcraParams {
        GcraParams::new(max_burst, count, Micros::from_millis(period_ms), cost).unwrap()
    }

    /// `T0 + us` microseconds.
    fn at(us: u64) -> Micros {
        Micros(T0 + us)
    }

    fn set(tat_after_t0: u64) -> Effect<Micros> {
        Effect::Set {
            state: at(tat_after_t0),
            expires_at: UnixMillis::covering(at(tat_after_t0)),
        }
    }

    /// Run requests (µs after T0, cost) against one key; the reply fields of each.
    fn run(max_burst: i64, count: i64, period_ms: u64, calls: &[(u64, i64)]) -> Vec<[i64; 5]> {
        let mut stored = None;
        calls
            .iter()
            .map(|&(t, cost)| {
                let out = decide(stored, at(t), &params(max_burst, count, period_ms, cost));
                if let Effect::Set { state: tat, .. } = out.effect {
                    stored = Some(tat);
                }
                out.verdict.fields()
            })
            .collect()
    }

    #[test]
    fn redis_cell_readme_example() {
        // CL.THROTTLE user123 15 30 60: 30 per minute (T = 2 s), 16 at once.
        let calls: Vec<(u64, i64)> = (0..17).map(|_| (0, 1)).collect();
        let r = run(15, 30, 60_000, &calls);
        assert_eq!(r[0], [0, 16, 15, -1, 2_000]);
        for (i, f) in r.iter().enumerate().take(16) {
            assert_eq!(
                *f,
                [0, 16, 15 - i as i64, -1, 2_000 * (i as i64 + 1)],
                "{i}"
            );
        }
        assert_eq!(r[16], [1, 16, 0, 2_000, 32_000]);
        // One emission interval later exactly one more fits.
        let mut calls = calls;
        calls.extend([(1_999_999, 1), (2_000_000, 1), (2_000_000, 1)]);
        let r = run(15, 30, 60_000, &calls);
        assert_eq!(r[17], [1, 16, 0, 1, 30_001]);
        assert_eq!(r[18], [0, 16, 0, -1, 32_000]);
        assert_eq!(r[19], [1, 16, 0, 2_000, 32_000]);
    }

    #[test]
    fn one_per_day() {
        let hour = 3_600_000_000;
        let r = run(
            0,
            1,
            DAY_MS,
            &[(0, 1), (hour, 1), (24 * hour - 1, 1), (24 * hour, 1)],
        );
        assert_eq!(r[0], [0, 1, 0, -1, 86_400_000]);
        assert_eq!(r[1], [1, 1, 0, 82_800_000, 82_800_000]);
        assert_eq!(r[2], [1, 1, 0, 1, 1]);
        assert_eq!(r[3], [0, 1, 0, -1, 86_400_000]);
        // The key expires when the day is over.
        let out = decide(None, at(0), &params(0, 1, DAY_MS, 1));
        assert_eq!(out.effect, set(86_400_000_000));
    }

    #[test]
    fn hundred_thousand_per_second() {
        // T = 10 µs: exact, no rounding.
        let p = params(99_999, 100_000, 1_000, 1);
        assert_eq!(p.interval(), Micros(10));
        assert_eq!(p.burst_window(), Micros(1_000_000));
        // The whole burst at once, then one request every 10 µs.
        let r = run(99_999, 100_000, 1_000, &[(0, 100_000)]);
        assert_eq!(r[0], [0, 100_000, 0, -1, 1_000]);
        let full = Some(at(1_000_000));
        let p1 = params(99_999, 100_000, 1_000, 1);
        assert!(!decide(full, at(9), &p1).verdict.is_allowed());
        let out = decide(full, at(10), &p1);
        assert!(out.verdict.is_allowed());
        assert_eq!(out.effect, set(1_000_010));
        let out = decide(full, at(25), &params(99_999, 100_000, 1_000, 2));
        assert_eq!(out.verdict.fields(), [0, 100_000, 0, -1, 1_000]);
        // 1 ms of waiting is exactly 100 requests.
        let out = decide(full, at(1_000), &params(99_999, 100_000, 1_000, 100));
        assert_eq!(out.verdict.fields(), [0, 100_000, 0, -1, 1_000]);
        let out = decide(full, at(1_000), &params(99_999, 100_000, 1_000, 101));
        assert_eq!(out.verdict.fields(), [1, 100_000, 100, 1, 999]);
        assert_eq!(
            out.verdict.decision,
            Decision::Denied {
                retry_after: Micros(10)
            }
        );
    }

    #[test]
    fn a_million_per_second_and_the_lowest_interval() {
        let p = params(0, 1_000_000, 1_000, 1);
        assert_eq!(p.interval(), Micros(1));
        let r = run(
            0,
            1_000_000,
            1_000,
            &[(0, 1), (0, 1), (1, 1), (1, 1), (2, 1)],
        );
        assert_eq!(
            r,
            [
                [0, 1, 0, -1, 1],
                [1, 1, 0, 1, 1],
                [0, 1, 0, -1, 1],
                [1, 1, 0, 1, 1],
                [0, 1, 0, -1, 1],
            ]
        );
    }

    #[test]
    fn period_not_divisible_by_count_rounds_the_interval_up() {
        // 3 per second: T = 333 333.3 µs, rounded up to 333 334 µs.
        let p = params(2, 3, 1_000, 1);
        assert_eq!(p.interval(), Micros(333_334));
        assert_eq!(p.burst_window(), Micros(1_000_002));
        let r = run(2, 3, 1_000, &[(0, 1), (0, 1), (0, 1), (0, 1)]);
        assert_eq!(
            r,
            [
                [0, 3, 2, -1, 334],
                [0, 3, 1, -1, 667],
                [0, 3, 0, -1, 1_001],
                [1, 3, 0, 334, 1_001],
            ]
        );
        // 7 per 10 ms: T = 1428.57 µs, rounded up to 1429 µs.
        assert_eq!(params(0, 7, 10, 1).interval(), Micros(1_429));
        // Never faster than the stated rate: 3 000 000 requests take at least 1 000 000 s.
        assert!(p.interval().0 * 3 >= 1_000_000);
    }

    #[test]
    fn peeks_and_costs() {
        let p0 = params(9, 10, 1_000, 0);
        // A peek on a missing key: full, nothing written.
        let out = decide(None, at(0), &p0);
        assert_eq!(out.verdict.fields(), [0, 10, 10, -1, 0]);
        assert_eq!(out.effect, Effect::None);
        // A peek on a half-used key.
        let out = decide(Some(at(500_000)), at(0), &p0);
        assert_eq!(out.verdict.fields(), [0, 10, 5, -1, 500]);
        assert_eq!(out.effect, Effect::None);
        // A peek on a full key is allowed (cost 0 fits).
        let out = decide(Some(at(1_000_000)), at(0), &p0);
        assert_eq!(out.verdict.fields(), [0, 10, 0, -1, 1_000]);
        // A TAT beyond the burst window (written with a larger burst) denies even a peek.
        let out = decide(Some(at(1_500_000)), at(0), &p0);
        assert_eq!(out.verdict.fields(), [1, 10, 0, 500, 1_500]);
        assert_eq!(out.effect, Effect::None);
        // A cost that does not fit is denied, with the room left as remaining.
        let out = decide(Some(at(500_000)), at(0), &params(9, 10, 1_000, 6));
        assert_eq!(out.verdict.fields(), [1, 10, 5, 100, 500]);
        assert_eq!(out.effect, Effect::None);
        let out = decide(Some(at(500_000)), at(0), &params(9, 10, 1_000, 5));
        assert_eq!(out.verdict.fields(), [0, 10, 0, -1, 1_000]);
        assert_eq!(out.effect, set(1_000_000));
        // A partly refilled cell does not count as room.
        let out = decide(Some(at(500_001)), at(0), &p0);
        assert_eq!(out.verdict.fields()[2], 4);
    }

    #[test]
    fn a_tat_in_the_past_counts_as_now() {
        let p = params(1, 2, 1_000, 1);
        let out = decide(Some(at(0)), at(10_000_000), &p);
        assert_eq!(out.verdict.fields(), [0, 2, 1, -1, 500]);
        assert_eq!(out.effect, set(10_500_000));
        let out = decide(Some(Micros(MIN_TAT_US)), at(0), &p);
        assert_eq!(out.effect, set(500_000));
        // Sub-millisecond TATs expire at the next millisecond.
        let out = decide(None, at(1), &params(0, 1_000, 1_000, 1));
        assert_eq!(
            out.effect,
            Effect::Set {
                state: at(1_001),
                expires_at: UnixMillis((T0 + 2_000) / 1_000)
            }
        );
        assert_eq!(out.verdict.fields(), [0, 1, 0, -1, 1]);
    }

    #[test]
    fn argument_errors() {
        let parse = |args: &[&str]| {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse_args(&raw)
        };
        assert_eq!(
            parse(&["15", "30", "60"]),
            Ok((params(15, 30, 60_000, 1), None))
        );
        assert_eq!(
            parse(&["0", "1", "1d", "cost", "0", "at", "1000000000005"]),
            Ok((
                params(0, 1, DAY_MS, 0),
                Some(Micros::from_millis(1_000_000_000_005))
            ))
        );
        assert_eq!(
            parse(&["1", "1"]),
            Err(Error::WrongArity { command: "RL.GCRA" })
        );
        assert_eq!(
            parse(&["-1", "1", "1s"]),
            Err(Error::InvalidInteger {
                what: "max_burst",
                value: b"-1".to_vec(),
                min: 0
            })
        );
        assert_eq!(
            parse(&["1", "0", "1s"]),
            Err(Error::InvalidInteger {
                what: "count",
                value: b"0".to_vec(),
                min: 1
            })
        );
        assert!(matches!(
            parse(&["1", "1", "0"]),
            Err(Error::InvalidDuration { what: "period", .. })
        ));
        assert_eq!(
            parse(&["1", "1", "1s", "ALIGN"]),
            Err(Error::UnknownOption {
                value: b"ALIGN".to_vec(),
                accepted: Opt::set(&[Opt::Cost, Opt::At, Opt::Delay, Opt::Refund, Opt::Force, Opt::UpTo]),
            })
        );
        // Rate: period / count below 1 µs.
        assert_eq!(parse(&["0", "1001", "1ms"]), Err(Error::RateTooHigh));
        assert!(parse(&["0", "1000", "1ms"]).is_ok());
        assert_eq!(
            parse(&["0", "9007199254740991", "1s"]),
            Err(Error::RateTooHigh)
        );
        // Burst window: T * (max_burst + 1) at most 50 years.
        assert!(parse(&["18249", "1", "1d"]).is_ok());
        assert_eq!(parse(&["18250", "1", "1d"]), Err(Error::BurstTooLong));
        assert_eq!(
            parse(&["9007199254740990", "1", "1ms"]),
            Err(Error::BurstTooLong)
        );
        assert_eq!(
            parse(&["9007199254740990", "1", "1d"]),
            Err(Error::BurstTooLong)
        );
        assert!(parse(&["4", "1", "3650d"]).is_ok());
        assert_eq!(parse(&["5", "1", "3650d"]), Err(Error::BurstTooLong));
        // Cost above the capacity.
        assert_eq!(
            parse(&["15", "30", "60", "COST", "17"]),
            Err(Error::CostOverCapacity {
                cost: 17,
                capacity: 16,
                what: "burst capacity"
            })
        );
        assert!(parse(&["15", "30", "60", "COST", "16"]).is_ok());
        // The rate is checked before the burst window, the burst window before the cost.
        assert_eq!(
            parse(&["99999999999", "2000", "1ms", "COST", "99999999999999"]),
            Err(Error::RateTooHigh)
        );
        assert_eq!(
            parse(&["99999999999", "1", "1s", "COST", "99999999999999"]),
            Err(Error::BurstTooLong)
        );
    }

    #[test]
    fn constructor_refuses_what_the_parser_refuses() {
        let s = Micros::from_secs(1);
        assert!(GcraParams::new(-1, 1, s, 1).is_err());
        assert!(GcraParams::new(0, 0, s, 1).is_err());
        assert!(GcraParams::new(0, 1, s, -1).is_err());
        assert!(GcraParams::new(i64::MAX, 1, s, 1).is_err());
        assert_eq!(GcraParams::new(0, 1, Micros(0), 0), Err(Error::RateTooHigh));
    }

    #[test]
    fn stored_tats() {
        assert_eq!(parse_tat(b"0"), Some(Micros(0)));
        assert_eq!(
            parse_tat(b"1700000000123456"),
            Some(Micros(1_700_000_000_123_456))
        );
        assert_eq!(parse_tat(b"0000000000000042"), Some(Micros(42)));
        assert_eq!(MAX_TAT, Micros(5_679_244_800_000_000));
        assert_eq!(parse_tat(b"5679244800000000"), Some(MAX_TAT));
        for bad in [
            &b""[..],
            b"5679244800000001",
            b"9999999999999999",
            b"00000000000000001",
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"1 ",
            b"abc",
            b"\x00",
        ] {
            assert_eq!(parse_tat(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn redis_cell_nanosecond_tats_are_read_rounded_up_to_the_microsecond() {
        // What redis-cell stores: nanoseconds since the epoch, 19 digits.
        assert_eq!(
            parse_tat(b"1700000000123456000"),
            Some(Micros(1_700_000_000_123_456))
        );
        // Never earlier than redis-cell's own TAT: any part of a µs counts as a whole.
        assert_eq!(
            parse_tat(b"1700000000123456001"),
            Some(Micros(1_700_000_000_123_457))
        );
        assert_eq!(
            parse_tat(b"1700000000123456999"),
            Some(Micros(1_700_000_000_123_457))
        );
        // The first and last nanosecond TATs: 10^18 ns (2001-09-09) and MAX_TAT.
        assert_eq!(
            parse_tat(b"1000000000000000000"),
            Some(Micros(1_000_000_000_000_000))
        );
        assert_eq!(parse_tat(b"5679244800000000000"), Some(MAX_TAT));
        for bad in [
            // Past MAX_TAT once rounded up.
            &b"5679244800000000001"[..],
            b"9999999999999999999",
            // 17 and 18 digits: neither format.
            b"17000000000000000",
            b"170000000000000000",
            // 19 digits below 10^18, and 20 digits.
            b"0999999999999999999",
            b"0000000000000000042",
            b"17000000000000000000",
            b"18446744073709551615",
            b"99999999999999999999",
            b"170000000000000000a",
            b"-700000000000000000",
        ] {
            assert_eq!(parse_tat(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn max_tat_has_max_tat_digits() {
        assert_eq!(MAX_TAT.0.to_string().len(), MAX_TAT_DIGITS);
    }

    // ---- properties ----------------------------------------------------------------

    /// A random valid configuration: (max_burst, count, period in ms).
    /// `params` with `DELAY max_delay_ms`.
    fn delayed(
        max_burst: i64,
        count: i64,
        period_ms: u64,
        cost: i64,
        max_delay_ms: u64,
    ) -> GcraParams {
        params(max_burst, count, period_ms, cost)
            .with_delay(Micros::from_millis(max_delay_ms))
            .unwrap()
    }

    /// Calls at the given µs after T0 with DELAY: the six reply fields of each.
    fn book(p: &GcraParams, times: &[u64]) -> (Vec<[i64; 6]>, Option<Micros>) {
        let mut stored = None;
        let fields = times
            .iter()
            .map(|&t| {
                let (out, booking) = judge_tat(
                    stored.map(|state| Stored {
                        state,
                        expires_at: None,
                    }),
                    at(t),
                    p,
                );
                if let Effect::Set { state, expires_at } = out.effect {
                    // The TAT and its expiry cover the furthest booking.
                    assert_eq!(expires_at, UnixMillis::covering(state));
                    stored = Some(state);
                }
                let [a, b, c, d, e] = out.verdict.fields();
                [a, b, c, d, e, booking.expect("DELAY was given").field()]
            })
            .collect();
        (fields, stored)
    }

    #[test]
    fn delay_books_what_fits_within_max_delay_spaced_by_the_interval() {
        // 30 per minute (T = 2 s), 16 at once, DELAY 10 s: at one instant, 16 act now,
        // five more are booked 2, 4, 6, 8 and 10 s later, the next one is refused.
        let p = delayed(15, 30, 60_000, 1, 10_000);
        let (r, tat) = book(&p, &[0; 23]);
        for (i, f) in r.iter().enumerate().take(16) {
            assert_eq!(
                *f,
                [0, 16, 15 - i as i64, -1, 2_000 * (i as i64 + 1), 0],
                "{i}"
            );
        }
        for k in 1..=5i64 {
            let i = 15 + k as usize;
            assert_eq!(r[i], [0, 16, 0, -1, 2_000 * (16 + k), 2_000 * k], "{i}");
        }
        // Refused: retry when the same call would be booked (2 s), nothing written.
        assert_eq!(r[21], [1, 16, 0, 2_000, 42_000, -1]);
        assert_eq!(r[22], r[21]);
        assert_eq!(tat, Some(at(42_000_000)));
        // Two seconds later one more is booked, 10 s ahead.
        let (r, _) = book(&p, &[&[0u64; 21][..], &[2_000_000]].concat());
        assert_eq!(r[21], [0, 16, 0, -1, 42_000, 10_000]);
    }

    #[test]
    fn delay_without_need_replies_zero_and_changes_nothing_else() {
        let plain = params(4, 10, 1_000, 1);
        let p = delayed(4, 10, 1_000, 1, 500);
        let times = [0, 1, 50_000, 100_000, 100_001, 250_000];
        let (r, _) = book(&p, &times);
        let without = run(4, 10, 1_000, &times.map(|t| (t, 1)));
        for (a, b) in r.iter().zip(&without) {
            assert_eq!(a[..5], b[..]);
            assert_eq!(a[5], 0);
        }
        assert_eq!(plain.max_delay(), None);
    }

    #[test]
    fn delay_at_one_per_day_and_at_100_000_per_second() {
        // 1 per day, no burst, DELAY 3 days: 0, 1, 2, 3 days, then refused.
        let p = delayed(0, 1, DAY_MS, 1, 3 * DAY_MS);
        let (r, _) = book(&p, &[0; 5]);
        let delays: Vec<i64> = r.iter().map(|f| f[5]).collect();
        let d = DAY_MS as i64;
        assert_eq!(delays, [0, d, 2 * d, 3 * d, -1]);
        assert_eq!(r[4][3], DAY_MS as i64); // retry: one day
                                            // 100 000 per second (T = 10 µs), no burst, DELAY 1 s: 100 001 bookings at one
                                            // instant, the k-th acting k * 10 µs later (rounded up to the ms), then refused.
        let p = delayed(0, 100_000, 1_000, 1, 1_000);
        let (r, _) = book(&p, &[0; 100_002]);
        for (k, f) in r.iter().enumerate().take(100_001) {
            assert_eq!(f[0], 0, "{k}");
            assert_eq!(f[5], (k as i64 * 10 + 999) / 1000, "{k}");
        }
        assert_eq!(r[100_001][5], -1);
        assert_eq!(r[100_001][3], 1); // 10 µs, rounded up
    }

    #[test]
    fn delay_peek_books_nothing() {
        let p = delayed(0, 1, 1_000, 1, 5_000);
        let peek = delayed(0, 1, 1_000, 0, 5_000);
        let mut stored = None;
        for _ in 0..3 {
            let (out, _) = judge_tat(stored, at(0), &p);
            if let Effect::Set { state, expires_at } = out.effect {
                stored = Some(Stored {
                    state,
                    expires_at: Some(expires_at),
                });
            }
        }
        // Three booked at 0, 1 s and 2 s: the TAT is 3 s ahead; a peek reports when the
        // queue ahead has drained into the burst window (2 s), and writes nothing.
        let (out, booking) = judge_tat(stored, at(0), &peek);
        assert_eq!(out.effect, Effect::None);
        assert_eq!(booking, Some(Booking::After(Micros(2_000_000))));
        assert_eq!(out.verdict.fields(), [0, 1, 0, -1, 3_000]);
    }

    #[test]
    fn delay_bound_keeps_every_booked_tat_readable() {
        let fifty_years = MAX_BURST_WINDOW.floor_millis();
        assert_eq!(
            params(0, 1, 1_000, 1).with_delay(Micros::from_millis(fifty_years)),
            Err(Error::DelayTooLong)
        );
        assert!(params(0, 1, 1_000, 1)
            .with_delay(Micros::from_millis(fifty_years - 1_000))
            .is_ok());
        assert_eq!(
            parse_args(&[b"0", b"1", b"1s", b"DELAY", b"0"]),
            Err(Error::InvalidDuration {
                what: "max_delay",
                value: b"0".to_vec(),
                reason: crate::error::DurationProblem::NotPositive,
            })
        );
        let (p, _) = parse_args(&[b"0", b"1", b"1s", b"delay", b"3650d"]).unwrap();
        assert_eq!(p.max_delay(), Some(Micros::from_millis(3650 * DAY_MS)));
    }

    fn config() -> impl Strategy<Value = (i64, i64, u64)> {
        prop_oneof![
            // Small buckets, slow to fast.
            (0i64..20, 1i64..50, 1u64..5_000),
            // High rates: the interval is a few microseconds.
            (0i64..2_000, 100i64..2_000, 1u64..3),
            // Long periods.
            (0i64..5, 1i64..3, 1u64..(30 * DAY_MS)),
        ]
        .prop_filter("a valid rate and burst window", |&(b, c, p)| {
            GcraParams::new(b, c, Micros::from_millis(p), 0).is_ok()
        })
    }

    proptest! {
        /// Over any interval of length L, allowed cost <= capacity + L / T; remaining is
        /// in [0, capacity]; retry_after > 0 exactly when denied and is exactly the wait
        /// (1 µs less is still denied); remaining is exact (remaining fits, one more does
        /// not); after reset_after the key is back to full capacity.
        #[test]
        fn invariants(
            (max_burst, count, period_ms) in config(),
            steps in proptest::collection::vec((0u64..4, 0u64..1_000_000, 0u64..100), 1..150),
        ) {
            let period = Micros::from_millis(period_ms);
            let p1 = GcraParams::new(max_burst, count, period, 1).unwrap();
            let (t, capacity) = (p1.interval().0, p1.capacity());
            let mut stored: Option<Micros> = None;
            let mut now = Micros(T0 + 7);
            // (time, cost) of every allowed request.
            let mut allowed: Vec<(u64, i64)> = Vec::new();
            for (scale, dt, c) in steps {
                // Steps from 0 to beyond the burst window, in µs, ms, or intervals.
                now = Micros(now.0 + match scale {
                    0 => dt % 3,
                    1 => dt % (t * 3 + 1),
                    2 => dt % (p1.burst_window().0 + 2),
                    _ => dt,
                });
                let cost = (c as i64) % (capacity + 1);
                let p = GcraParams::new(max_burst, count, period, cost).unwrap();
                let out = decide(stored, now, &p);
                let [limited, lim, remaining, retry, reset] = out.verdict.fields();
                prop_assert_eq!(lim, capacity);
                prop_assert!((0..=capacity).contains(&remaining));
                prop_assert_eq!(limited == 1, retry > 0);
                prop_assert_eq!(limited == 0, retry == -1);
                prop_assert!(reset >= 0);
                prop_assert!(reset as u64 <= p1.burst_window().ceil_millis());
                match out.verdict.decision {
                    Decision::Denied { retry_after } => {
                        prop_assert_eq!(out.effect, Effect::None);
                        prop_assert!(retry_after.0 > 0);
                        // Waiting exactly retry_after (or the rounded-up ms) is enough...
                        let later = decide(stored, Micros(now.0 + retry_after.0), &p);
                        prop_assert!(later.verdict.is_allowed());
                        let later = decide(stored, Micros(now.0 + retry as u64 * 1000), &p);
                        prop_assert!(later.verdict.is_allowed());
                        // ...and 1 µs less is not.
                        let early = decide(stored, Micros(now.0 + retry_after.0 - 1), &p);
                        prop_assert!(!early.verdict.is_allowed());
                    }
                    Decision::Over { .. } => prop_assert!(false, "only FORCE goes over"),
                    Decision::Allowed => {
                        if cost > 0 {
                            allowed.push((now.0, cost));
                            prop_assert!(out.effect != Effect::None);
                        } else {
                            prop_assert_eq!(out.effect, Effect::None);
                        }
                    }
                }
                // remaining is exact, measured on the state after this request.
                let after = match out.effect {
                    Effect::Set { state: tat, expires_at } => {
                        // The key expires when the state is full again.
                        prop_assert_eq!(expires_at, UnixMillis::covering(tat));
                        let full = decide(Some(tat), tat, &GcraParams::new(max_burst, count, period, 0).unwrap());
                        prop_assert_eq!(full.verdict.fields()[2], capacity);
                        prop_assert_eq!(full.verdict.fields()[4], 0);
                        Some(tat)
                    }
                    Effect::None => stored,
                    Effect::ExpireAt(_) | Effect::Delete => {
                        return Err(TestCaseError::fail("GCRA never repairs an expiry alone, nor deletes when taking"));
                    }
                };
                if limited == 0 {
                    let fits = GcraParams::new(max_burst, count, period, remaining).unwrap();
                    prop_assert!(decide(after, now, &fits).verdict.is_allowed());
                    if remaining < capacity {
                        let over = GcraParams::new(max_burst, count, period, remaining + 1).unwrap();
                        prop_assert!(!decide(after, now, &over).verdict.is_allowed());
                    }
                    // After reset_after (rounded up to ms) the state is full again.
                    let peek = GcraParams::new(max_burst, count, period, 0).unwrap();
                    let later = decide(after, Micros(now.0 + reset as u64 * 1000), &peek);
                    prop_assert_eq!(later.verdict.fields()[2], capacity);
                }
                stored = after;
            }
            // Over every interval [t_i, t_j]: cost <= capacity + (t_j - t_i) / T.
            for i in 0..allowed.len() {
                let mut sum = 0i64;
                for &(tj, cj) in &allowed[i..] {
                    sum += cj;
                    let bound = capacity + ((tj - allowed[i].0) / t) as i64;
                    prop_assert!(sum <= bound, "{} allowed in {} µs, bound {}", sum, tj - allowed[i].0, bound);
                }
            }
        }

        /// Any stored TAT the parser accepts, any valid request and any time up to the
        /// latest AT keep every intermediate value below 2^53 (the Lua twin's exact range).
        #[test]
        fn arithmetic_stays_in_range(
            (max_burst, count, period_ms) in config(),
            stored in MIN_TAT_US..=MAX_TAT.0,
            now in 0u64..=MAX_AT_MS * 1000,
            cost in 0i64..1_000_000,
        ) {
            let period = Micros::from_millis(period_ms);
            let capacity = max_burst + 1;
            let p = GcraParams::new(max_burst, count, period, cost % (capacity + 1)).unwrap();
            let tat = stored.max(now);
            prop_assert!(tat + p.increment().0 < 1 << 53);
            prop_assert!(p.burst_window() <= MAX_BURST_WINDOW);
            let out = decide(Some(Micros(stored)), Micros(now), &p);
            if let Effect::Set { state: tat, .. } = out.effect {
                // What is written can be read back.
                prop_assert_eq!(parse_tat(tat.0.to_string().as_bytes()), Some(tat));
            }
        }

        /// redis-cell's nanosecond TAT is read as the µs at or after it: `tat * 1000`
        /// is `tat`, and each of the 999 nanoseconds after it is `tat + 1`; no input
        /// of 17, 18 or 20 digits is read at all.
        #[test]
        fn nanosecond_tats_round_up(
            us in 1_000_000_000_000_000u64..MAX_TAT.0,
            sub in 1u64..1_000,
            other in 10_000_000_000_000_000u64..u64::MAX,
        ) {
            prop_assert_eq!(parse_tat((us * 1_000).to_string().as_bytes()), Some(Micros(us)));
            prop_assert_eq!(parse_tat((us * 1_000 + sub).to_string().as_bytes()), Some(Micros(us + 1)));
            let digits = other.to_string();
            if digits.len() != NS_TAT_DIGITS {
                prop_assert_eq!(parse_tat(digits.as_bytes()), None);
            }
        }

        /// With DELAY: a booked request waits at most max_delay; each one booked while
        /// the queue is not empty acts exactly `T * cost` after the one before; over any
        /// interval of the action times, the cost acting in it is at most capacity plus
        /// the interval over T; a refused request writes nothing and says -1.
        #[test]
        fn delay_invariants(
            (max_burst, count, period_ms) in config(),
            delay_factor in 1u64..6,
            steps in proptest::collection::vec((0u64..3, 0u64..1_000_000, 0u64..100), 1..80),
        ) {
            let period = Micros::from_millis(period_ms);
            let p1 = GcraParams::new(max_burst, count, period, 1).unwrap();
            let (t, capacity) = (p1.interval().0, p1.capacity());
            let max_delay = Micros((t * delay_factor).div_ceil(1000).max(1) * 1000);
            prop_assume!(p1.with_delay(max_delay).is_ok());
            let mut stored: Option<Micros> = None;
            let mut now = Micros(T0 + 3);
            // (action time, cost, wait) of every booked request, in booking order.
            let mut acts: Vec<(u64, i64, u64)> = Vec::new();
            for (scale, dt, c) in steps {
                now = Micros(now.0 + match scale {
                    0 => dt % 3,
                    1 => dt % (t * 3 + 1),
                    _ => dt % (p1.burst_window().0 + max_delay.0 + 2),
                });
                let cost = (c as i64) % (capacity + 1);
                let p = GcraParams::new(max_burst, count, period, cost).unwrap().with_delay(max_delay).unwrap();
                let (out, booking) = judge_tat(stored.map(|state| Stored { state, expires_at: None }), now, &p);
                let booking = booking.unwrap();
                match (out.verdict.decision, booking) {
                    (Decision::Denied { retry_after }, Booking::Refused) => {
                        prop_assert_eq!(out.effect, Effect::None);
                        // After retry_after the same call is booked.
                        let (later, b) = judge_tat(stored.map(|state| Stored { state, expires_at: None }), Micros(now.0 + retry_after.0), &p);
                        prop_assert!(later.verdict.is_allowed());
                        prop_assert!(b != Some(Booking::Refused));
                    }
                    (Decision::Allowed, b) => {
                        let wait = match b {
                            Booking::Now => 0,
                            Booking::After(w) => { prop_assert!(w.0 > 0); w.0 }
                            Booking::Refused => { prop_assert!(false, "allowed but refused"); 0 }
                        };
                        prop_assert!(wait <= max_delay.0);
                        prop_assert!(b.field() >= 0);
                        if cost > 0 {
                            // Two bookings in a row that both wait: exactly T * cost apart.
                            if let (true, Some(&(prev, _, prev_wait))) = (wait > 0, acts.last()) {
                                if prev_wait > 0 {
                                    prop_assert_eq!(now.0 + wait, prev + t * cost as u64);
                                }
                            }
                            acts.push((now.0 + wait, cost, wait));
                            if let Effect::Set { state, .. } = out.effect { stored = Some(state); }
                        }
                    }
                    (d, b) => prop_assert!(false, "{:?} with {:?}", d, b),
                }
            }
            // The GCRA bound over the action times.
            let mut sorted: Vec<(u64, i64)> = acts.iter().map(|&(a, c, _)| (a, c)).collect();
            sorted.sort();
            for i in 0..sorted.len() {
                let mut sum = 0;
                for &(tj, cj) in &sorted[i..] {
                    sum += cj;
                    let bound = capacity + ((tj - sorted[i].0) / t) as i64;
                    prop_assert!(sum <= bound, "{} acting in {} µs, bound {}", sum, tj - sorted[i].0, bound);
                }
            }
        }
    }
}

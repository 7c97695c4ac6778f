//! `CL.THROTTLE key max_burst count period [quantity]`: redis-cell's command, with its
//! arguments and its reply, judged by RL.GCRA on RL.GCRA's state.
//!
//! A call is `RL.GCRA key max_burst count <period>s COST quantity`: the same key, the
//! same TAT (redis-cell's nanosecond TATs are read too, see [`gcra::parse_tat`]), the
//! same decision. What is CL.THROTTLE's own is here:
//!
//! - the arguments: integers, `period` in whole seconds, `quantity` positional (default
//!   1, 0 peeks);
//! - a quantity above `max_burst + 1`, which can never be allowed, is not an error: as
//!   redis-cell does, the reply is limited with retry_after -1 and the key's current
//!   remaining and reset, and nothing is written;
//! - the reply's times are whole seconds, rounded up (a caller that waits is never
//!   early); retry_after is -1 when allowed.

use crate::call::verdict::{Decision, Verdict, NO_RETRY};
use crate::error::{Error, Result};
use crate::limiters::gcra::GcraParams;
use crate::limits::MAX_DURATION_MS;
use crate::parse::args::parse_int;
use crate::units::{Micros, MICROS_PER_SEC};

/// The command's name, as error replies word it.
pub const COMMAND: &str = "CL.THROTTLE";

/// The longest `period`, in seconds: RL.GCRA's longest period (10 years).
pub const MAX_PERIOD_SECS: i64 = (MAX_DURATION_MS / 1_000) as i64;

/// A checked CL.THROTTLE call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throttle {
    /// What RL.GCRA judges: the quantity as its cost, or 0 (a peek) when the quantity
    /// is above the capacity.
    pub params: GcraParams,
    /// The quantity is above `max_burst + 1`: the reply is limited, retry_after -1.
    pub over_capacity: bool,
}

/// The arguments after the key: `max_burst count period [quantity]`, checked in that
/// order, then the rate and burst as RL.GCRA checks them.
pub fn parse_args(args: &[&[u8]]) -> Result<Throttle> {
    let (max_burst, count, period, quantity) = match args {
        [b, c, p] => (b, c, p, None),
        [b, c, p, q] => (b, c, p, Some(q)),
        _ => return Err(Error::WrongArity { command: COMMAND }),
    };
    let max_burst = parse_int("max_burst", max_burst, 0)?;
    let count = parse_int("count", count, 1)?;
    let period = parse_period(period)?;
    let quantity = match quantity {
        Some(q) => parse_int("quantity", q, 0)?,
        None => 1,
    };
    match GcraParams::new(max_burst, count, period, quantity) {
        Ok(params) => Ok(Throttle {
            params,
            over_capacity: false,
        }),
        Err(Error::CostOverCapacity { .. }) => Ok(Throttle {
            params: GcraParams::new(max_burst, count, period, 0)?,
            over_capacity: true,
        }),
        Err(e) => Err(e),
    }
}

/// `period`: whole seconds, 1 to [`MAX_PERIOD_SECS`].
fn parse_period(raw: &[u8]) -> Result<Micros> {
    match parse_int("period", raw, 1) {
        Ok(s) if s <= MAX_PERIOD_SECS => Ok(Micros::from_secs(s as u64)),
        _ => Err(Error::IntegerOutOfRange {
            what: "period",
            value: raw.to_vec(),
            min: 1,
            max: MAX_PERIOD_SECS,
        }),
    }
}

impl Throttle {
    /// The reply to this call judged as `verdict` (see [`reply`]).
    pub fn reply(&self, verdict: &Verdict) -> [i64; 5] {
        reply(verdict, self.over_capacity)
    }
}

/// The reply to a call judged as `verdict`: `[limited, max_burst + 1, remaining,
/// retry_after_s, reset_after_s]`, times in whole seconds rounded up, retry_after -1
/// when allowed and when the quantity is above the capacity.
pub fn reply(verdict: &Verdict, over_capacity: bool) -> [i64; 5] {
    let (limited, retry_after) = match verdict.decision {
        _ if over_capacity => (1, NO_RETRY),
        Decision::Allowed => (0, NO_RETRY),
        Decision::Denied { retry_after } | Decision::Over { retry_after } => {
            (1, secs_i64(retry_after).max(1))
        }
    };
    [
        limited,
        verdict.limit,
        verdict.remaining,
        retry_after,
        secs_i64(verdict.reset_after),
    ]
}

/// A span as a reply field: whole seconds, rounded up.
pub fn secs_i64(t: Micros) -> i64 {
    i64::try_from(t.as_u64().div_ceil(MICROS_PER_SEC)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::state::{Decided, Effect, Stored};
    use crate::call::Call;
    use crate::limiters::gcra::{self, parse_tat};
    use crate::limits::MAX_BURST_WINDOW_US;

    /// RL.GCRA's judgement of the call, settled as the module settles CL.THROTTLE.
    fn decide(stored: Option<Stored<Micros>>, now: Micros, p: &GcraParams) -> Decided<Micros> {
        crate::call::memory::run_on(&Call::one(gcra::Gcra::from(*p), p.cost()), &[stored], now)
            .expect("a TAT")
            .decided()
    }
    use proptest::prelude::*;

    fn parse(args: &[&str]) -> Result<Throttle> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_args(&args)
    }

    const T0: u64 = 1_700_000_000_000_000;

    /// Judge `args` at `T0 + at_us` on a key holding `tat` (µs): the reply and what is
    /// written.
    fn call(tat: Option<u64>, at_us: u64, args: &[&str]) -> ([i64; 5], Option<u64>) {
        let t = parse(args).unwrap();
        let stored = tat.map(|tat| Stored {
            state: Micros(tat),
            expires_at: None,
        });
        let out = decide(stored, Micros(T0 + at_us), &t.params);
        let written = match out.effect {
            Effect::Set { state, .. } => Some(state.0),
            _ => None,
        };
        (t.reply(&out.verdict), written)
    }

    #[test]
    fn arguments_are_rl_gcra_s_with_the_period_in_seconds() {
        let t = parse(&["15", "30", "60"]).unwrap();
        assert_eq!(
            t,
            Throttle {
                params: GcraParams::new(15, 30, Micros::from_secs(60), 1).unwrap(),
                over_capacity: false,
            }
        );
        let t = parse(&["0", "1", "1", "0"]).unwrap();
        assert_eq!(t.params.cost(), 0);
        assert!(!t.over_capacity);
        // A quantity of exactly the capacity is an ordinary request.
        let t = parse(&["4", "1", "1", "5"]).unwrap();
        assert_eq!((t.params.cost(), t.over_capacity), (5, false));
        // Above it: judged as a peek, replied as limited.
        let t = parse(&["4", "1", "1", "6"]).unwrap();
        assert_eq!((t.params.cost(), t.over_capacity), (0, true));
        let t = parse(&["4", "1", "1", "9007199254740991"]).unwrap();
        assert_eq!((t.params.cost(), t.over_capacity), (0, true));
        assert_eq!(
            parse(&["0", "1", "315360000"]).unwrap().params.interval(),
            Micros::from_secs(315_360_000)
        );
    }

    #[test]
    fn bad_arguments() {
        let int = |what: &'static str, v: &str, min| Error::InvalidInteger {
            what,
            value: v.as_bytes().to_vec(),
            min,
        };
        let period = |v: &str| Error::IntegerOutOfRange {
            what: "period",
            value: v.as_bytes().to_vec(),
            min: 1,
            max: 315_360_000,
        };
        let arity = Error::WrongArity {
            command: "CL.THROTTLE",
        };
        let cases: &[(&[&str], Error)] = &[
            (&[], arity.clone()),
            (&["1", "1"], arity.clone()),
            (&["1", "1", "1", "1", "1"], arity),
            (&["-1", "1", "1"], int("max_burst", "-1", 0)),
            (&["x", "1", "1"], int("max_burst", "x", 0)),
            (&["1", "0", "1"], int("count", "0", 1)),
            (&["1", "1.5", "1"], int("count", "1.5", 1)),
            (&["1", "1", "0"], period("0")),
            (&["1", "1", "-5"], period("-5")),
            (&["1", "1", "1s"], period("1s")),
            (&["1", "1", "315360001"], period("315360001")),
            (
                &["1", "1", "99999999999999999999"],
                period("99999999999999999999"),
            ),
            (&["1", "1", "1", "-1"], int("quantity", "-1", 0)),
            (&["1", "1", "1", ""], int("quantity", "", 0)),
            (&["1", "1000001", "1"], Error::RateTooHigh),
            (&["18250", "1", "86400"], Error::BurstTooLong),
            (&["9007199254740991", "1", "1"], Error::BurstTooLong),
            // Counts stop at 2^53 - 1, as everywhere in the module.
            (
                &["1", "1", "1", "9223372036854775807"],
                int("quantity", "9223372036854775807", 0),
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args).as_ref(), Err(want), "{args:?}");
        }
        // The longest burst window is accepted.
        assert!(parse(&["18249", "1", "86400"]).is_ok());
        assert_eq!(18_250 * 86_400 * 1_000_000, MAX_BURST_WINDOW_US);
    }

    #[test]
    fn times_are_whole_seconds_rounded_up() {
        assert_eq!(secs_i64(Micros(0)), 0);
        assert_eq!(secs_i64(Micros(1)), 1);
        assert_eq!(secs_i64(Micros(1_000_000)), 1);
        assert_eq!(secs_i64(Micros(1_000_001)), 2);
        assert_eq!(secs_i64(Micros(u64::MAX)), 18_446_744_073_710);
        // 30 per minute, 16 at once (T = 2 s).
        let args = ["15", "30", "60"];
        assert_eq!(
            call(None, 0, &args),
            ([0, 16, 15, -1, 2], Some(T0 + 2_000_000))
        );
        // Full: one more fits 2 s later; 1 µs before that, the reply says 1 s.
        let full = T0 + 32_000_000;
        assert_eq!(call(Some(full), 0, &args), ([1, 16, 0, 2, 32], None));
        assert_eq!(
            call(Some(full), 1_999_999, &args),
            ([1, 16, 0, 1, 31], None)
        );
        assert_eq!(
            call(Some(full), 2_000_000, &args),
            ([0, 16, 0, -1, 32], Some(full + 2_000_000))
        );
        // 0.5 s to wait is 1 s; 1.5 s of reset is 2 s (2 per second, 3 at once).
        assert_eq!(
            call(Some(T0 + 1_500_000), 0, &["2", "2", "1"]),
            ([1, 3, 0, 1, 2], None)
        );
    }

    #[test]
    fn a_quantity_above_the_capacity_is_limited_with_retry_minus_one_and_writes_nothing() {
        // redis-cell's first case: 5 at once, 6 asked on an empty key.
        assert_eq!(
            call(None, 0, &["4", "1", "1", "6"]),
            ([1, 5, 5, -1, 0], None)
        );
        // On a key in use: its current remaining and reset.
        assert_eq!(
            call(Some(T0 + 2_500_000), 0, &["4", "1", "1", "6"]),
            ([1, 5, 2, -1, 3], None)
        );
        // A quantity of exactly the capacity is judged: limited with a real retry.
        assert_eq!(
            call(Some(T0 + 2_500_000), 0, &["4", "1", "1", "5"]),
            ([1, 5, 2, 3, 3], None)
        );
    }

    #[test]
    fn a_nanosecond_tat_is_judged_as_the_microsecond_at_or_after_it() {
        // redis-cell left a TAT 1 s and 1 ns ahead: read as 1.000001 s.
        let ns = (T0 + 1_000_000) * 1_000 + 1;
        let tat = parse_tat(ns.to_string().as_bytes()).unwrap();
        assert_eq!(tat, Micros(T0 + 1_000_001));
        // 1 per second, 2 at once: the second request fits only once the extra
        // nanosecond has passed, as in redis-cell (read as the µs before it, it
        // would fit 1 µs early).
        assert_eq!(
            call(Some(tat.0), 0, &["1", "1", "1"]),
            ([1, 2, 0, 1, 2], None)
        );
        assert_eq!(
            call(Some(tat.0), 1, &["1", "1", "1"]),
            ([0, 2, 0, -1, 2], Some(T0 + 2_000_001))
        );
    }

    proptest! {
        /// The reply is RL.GCRA's reply in seconds: the same decision, capacity and
        /// remaining; each time rounded up from its exact value, never below RL.GCRA's
        /// milliseconds; retry_after ≥ 1 exactly when limited by the rate.
        #[test]
        fn reply_is_rl_gcra_s_in_seconds(
            max_burst in 0i64..50,
            count in 1i64..1_000,
            period in 1i64..100_000,
            quantity in 0i64..60,
            tat_ahead in proptest::option::of(0u64..10_000_000_000),
            at in 0u64..1_000_000_000,
        ) {
            let args = [max_burst.to_string(), count.to_string(), period.to_string(), quantity.to_string()];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let Ok(t) = parse(&args) else {
                return Ok(());
            };
            let stored = tat_ahead.map(|a| Stored { state: Micros(T0 + a), expires_at: None });
            let out = decide(stored, Micros(T0 + at), &t.params);
            let ms = out.verdict.fields();
            let s = t.reply(&out.verdict);
            prop_assert_eq!(t.over_capacity, quantity > max_burst + 1);
            prop_assert_eq!(s[1], max_burst + 1);
            prop_assert_eq!(s[2], ms[2]);
            prop_assert_eq!(s[4], (ms[4] + 999) / 1000);
            if t.over_capacity {
                prop_assert_eq!(out.effect, Effect::None);
                prop_assert_eq!((s[0], s[3]), (1, -1));
            } else {
                prop_assert_eq!(s[0], ms[0]);
                if s[0] == 1 {
                    prop_assert_eq!(s[3], (ms[3] + 999) / 1000);
                    prop_assert!(s[3] >= 1);
                } else {
                    prop_assert_eq!(s[3], -1);
                }
            }
        }
    }
}

//! RL.ALL's `BAN i strikes window duration` rule: a penalty box for the whole call.
//!
//! The key counts the call's denials ("strikes") in a fixed window that starts at the
//! first strike and lasts `window`; the strike that reaches `strikes` starts a ban of
//! `duration` and clears the count. While a ban runs, every call that names the rule is
//! denied before any other rule is judged (the rule *gates* the call: the other keys
//! are neither read nor written), and the BAN rule binds: field 2 is `strikes`, field 3
//! is 0, fields 4 and 5 are the time left of the ban. A strike is the one write a
//! denied RL.ALL makes (the rule's write when the call is denied); an allowed call leaves the
//! key as it is, and a BAN rule binds an allowed call only when it is the call's only
//! rule (then: field 3 is the strikes left before a ban, field 5 the time left of the
//! strike window). A ban and a strike window end exactly at their end, in whole
//! milliseconds, as a fixed window does. `COST 0` peeks (no strike); `REFUND` is never
//! denied, even while banned, and records no strike; `FORCE` is denied while banned
//! and records no strike. `DEL key` lifts a ban.
//!
//! State: a plain string, `strikes:<count>:<end_ms>` while a strike window runs or
//! `banned:<end_ms>` while a ban runs (`end_ms`: its end in Unix milliseconds); the key
//! expires at that end. `GET key` shows it.

use crate::call::keys::{KeyRead, Value, Written};
use crate::call::limiter::{
    Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{parse_decimal, push_decimal, Effect, Encode, StateName, Stored};
use crate::call::verdict::{Decision, Verdict};
use crate::error::{Error, Result};
use crate::limiters::fixed::new_window_end;
use crate::limits::{MAX_END_MS, MAX_SAFE_INTEGER};
use crate::parse::args::{in_order, parse_int, Options};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::Opt;
use crate::units::{Micros, UnixMillis};

/// What a BAN key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: "RL.ALL",
    expected: "a penalty box: strikes:<count>:<end_ms> or banned:<end_ms>",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "BAN",
    syntax: "BAN i strikes window duration",
    state: STATE,
    storage: Storage::String,
    gate: true,
    field: false,
};

/// A checked BAN rule: a ban of `duration` once `strikes` denials fall in one `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ban {
    strikes: i64,
    window: Micros,
    duration: Micros,
}

impl Ban {
    /// `strikes` from 1 to 2^53 - 1; `window` and `duration` durations (whole ms).
    pub fn new(strikes: i64, window: Micros, duration: Micros) -> Result<Ban> {
        crate::parse::args::check_count("strikes", strikes, 1)?;
        Ok(Ban {
            strikes,
            window,
            duration,
        })
    }

    pub fn strikes(&self) -> i64 {
        self.strikes
    }
}

/// A penalty box's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// `count` strikes in a window that ends at `ends_at`.
    Strikes { count: i64, ends_at: UnixMillis },
    /// Banned until `until`.
    Banned { until: UnixMillis },
}

impl State {
    /// When the state ends (the key's expiry).
    pub fn ends_at(&self) -> UnixMillis {
        match *self {
            State::Strikes { ends_at, .. } => ends_at,
            State::Banned { until } => until,
        }
    }

    /// Read a stored value (see the module's text).
    pub fn parse(raw: &[u8]) -> Option<State> {
        let end = |raw: &[u8]| {
            parse_decimal(raw)
                .filter(|e| *e <= MAX_END_MS)
                .map(UnixMillis)
        };
        if let Some(rest) = raw.strip_prefix(b"banned:") {
            return Some(State::Banned { until: end(rest)? });
        }
        let rest = raw.strip_prefix(b"strikes:")?;
        let colon = rest.iter().position(|&b| b == b':')?;
        let count = parse_decimal(rest.get(..colon)?).filter(|c| *c <= MAX_SAFE_INTEGER)?;
        Some(State::Strikes {
            count: count as i64,
            ends_at: end(rest.get(colon + 1..)?)?,
        })
    }
}

impl Encode for State {
    fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            State::Strikes { count, ends_at } => {
                out.extend_from_slice(b"strikes:");
                count.encode(out);
                out.push(b':');
                push_decimal(out, ends_at.0);
            }
            State::Banned { until } => {
                out.extend_from_slice(b"banned:");
                push_decimal(out, until.0);
            }
        }
    }
}

impl Written for State {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

/// Read a stored penalty box, or the invalid-state error.
pub fn parse_state(raw: &[u8]) -> Result<State> {
    State::parse(raw).ok_or_else(|| STATE.invalid())
}

impl<'a> Syntax<'a> for Ban {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 3;
    const OPTIONS: &'static [Opt] = &[];
    type Args = (i64, Micros, Micros);

    fn parse_args(args: &[&'a [u8]]) -> Result<(i64, Micros, Micros)> {
        let [strikes, window, duration] = args else {
            return Err(Error::RuleArity { kind: "BAN" });
        };
        let order = "BAN i strikes window duration: the strikes come first";
        Ok((
            parse_int("strikes", strikes, 1).map_err(|e| in_order(e, strikes, order))?,
            parse_duration("window", window)?,
            parse_duration("duration", duration)?,
        ))
    }

    fn build((strikes, window, duration): (i64, Micros, Micros), _: &Options<'a>) -> Result<Ban> {
        Ban::new(strikes, window, duration)
    }
}

impl Limiter for Ban {
    type State = State;
    /// The strike a denial of the call records.
    type Pending = Option<State>;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// A penalty box has no capacity: any cost is judged by the other rules.
    fn check_cost(&self, _cost: i64, _mode: Mode) -> Result<()> {
        Ok(())
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Option<State>>> {
        let now = req.now;
        let stored = key.string_state(parse_state)?;
        let window_ms = self.duration.floor_millis();
        let live = |end: UnixMillis| end.as_micros() > now;
        let (count, strike_end) = match stored {
            Some(Stored {
                state: State::Banned { until },
                ..
            }) if live(until) => {
                let left = until.as_micros().saturating_since(now);
                let decision = match req.mode {
                    // A refund is never denied.
                    Mode::Refund => Decision::Allowed,
                    Mode::Take | Mode::UpTo | Mode::Force => Decision::Denied { retry_after: left },
                };
                let verdict = Verdict {
                    decision,
                    limit: self.strikes,
                    remaining: 0,
                    reset_after: left,
                };
                return Ok(Judgement::plain(verdict, window_ms, None));
            }
            Some(Stored {
                state: State::Strikes { count, ends_at },
                ..
            }) if live(ends_at) => (count, Some(ends_at)),
            _ => (0, None),
        };
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: self.strikes,
            remaining: self.strikes.saturating_sub(count).max(0),
            reset_after: strike_end.map_or(Micros::ZERO, |e| e.as_micros().saturating_since(now)),
        };
        // A denial of this call records a strike (not a peek, a refund or a forced
        // call); the strike that reaches `strikes` starts a ban, and binds the call.
        if req.cost == 0 || req.mode != Mode::Take {
            return Ok(Judgement::plain(verdict, window_ms, None));
        }
        let (strike, binds) = if count.saturating_add(1) >= self.strikes {
            let until = new_window_end(now, self.duration, false);
            let left = until.as_micros().saturating_since(now);
            let ban = Verdict {
                decision: Decision::Denied { retry_after: left },
                limit: self.strikes,
                remaining: 0,
                reset_after: left,
            };
            (State::Banned { until }, Some(ban))
        } else {
            let ends_at = strike_end.unwrap_or_else(|| new_window_end(now, self.window, false));
            let strike = State::Strikes {
                count: count + 1,
                ends_at,
            };
            (strike, None)
        };
        Ok(Judgement {
            when_denied: binds,
            ..Judgement::plain(verdict, window_ms, Some(strike))
        })
    }

    /// A denied call records its strike; an allowed call leaves the key as it is.
    fn write(
        &self,
        strike: Option<State>,
        outcome: Outcome,
        _req: &Request,
    ) -> std::result::Result<Effect<State>, Full> {
        Ok(match (outcome, strike) {
            (Outcome::Denied { .. }, Some(state)) => Effect::Set {
                state,
                expires_at: state.ends_at(),
            },
            _ => Effect::None,
        })
    }
}

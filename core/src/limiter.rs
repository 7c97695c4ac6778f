//! The one interface every limiter implements, and the one decision every call makes.
//!
//! A limiter is a checked rule (RL.FIXED's limit and window, RL.GCRA's rate, ...). It
//! judges what one key holds at a time for a cost ([`Limiter::judge`]): a [`Verdict`]
//! with the five reply fields, and what it needs to write the key once the whole call
//! is decided ([`Limiter::write`]). A call is one or more (key, rule) pairs:
//!
//! ```text
//! RL.FIXED key ...             one key, one FIXED rule
//! RL.MULTI 2 a b LIMIT ...     the same MULTI rule on each key
//! RL.ALL 3 a b c FIXED 1 ...   one rule of any kind per key
//! ```
//!
//! and every call is decided the same way ([`decide`]): allowed iff every rule allows;
//! then each key gets its rule's write; when denied, nothing is consumed (a single
//! command still gives a key that lost its TTL its expiry back; RL.ALL writes nothing).
//! The reply carries the numbers of the *binding* rule ([`Chooser`]).
//!
//! Nothing here reads a clock or talks to a server: the glue opens each key as its
//! rule's [`Storage`] says, hands its content over as a [`KeyRead`], and carries out
//! the [`Effect`]s.

use crate::args::{Opt, Options, COST_AT};
use crate::error::{Error, Result};
use crate::gcra::Booking;
use crate::log;
use crate::state::{Effect, Encode, StateKind, Stored};
use crate::units::{Micros, UnixMillis};
use crate::verdict::{Decision, Verdict};

/// The type of key a limiter keeps its state in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A plain string with an absolute expiry (counters, TATs, packed windows).
    String,
    /// A sorted set (RL.LOG's entries), read through [`log::Index`].
    SortedSet,
}

/// What a key holds, as a limiter reads it.
#[derive(Clone, Copy)]
pub enum KeyRead<'a> {
    /// The key does not exist.
    Missing,
    /// A string key: its value and its absolute expiry (`None`: no TTL).
    String {
        value: &'a [u8],
        expires_at: Option<UnixMillis>,
    },
    /// A sorted-set key, read in O(log n) steps through its index.
    SortedSet(&'a dyn log::Index),
}

impl<'a> KeyRead<'a> {
    /// The decoded state of a string limiter (`None`: no key); the invalid-state error
    /// `parse` gives for a value that is not its state.
    pub fn string_state<S>(
        self,
        parse: impl FnOnce(&[u8]) -> Result<S>,
    ) -> Result<Option<Stored<S>>> {
        match self {
            KeyRead::Missing => Ok(None),
            KeyRead::String { value, expires_at } => Ok(Some(Stored {
                state: parse(value)?,
                expires_at,
            })),
            KeyRead::SortedSet(_) => Err(Error::WrongType),
        }
    }
}

/// A limiter's verdict on one key, and what it needs to write that key once the call
/// is decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement<P> {
    pub verdict: Verdict,
    /// The window (ms) whose numbers the verdict carries: the limiter's window, or for
    /// a limiter of several windows its binding window on this key.
    pub window_ms: u64,
    /// RL.GCRA with DELAY: the booking, the reply's sixth field.
    pub booking: Option<Booking>,
    pub pending: P,
}

/// A write that would leave the key with more windows than a key may keep: the call
/// is refused and nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// What a key gets when the call is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Every rule allowed: the request is recorded.
    Allowed,
    /// Some rule denied: nothing is consumed; a single command repairs a lost TTL.
    Denied,
}

/// One rate-limiting algorithm, as a checked rule on one key.
pub trait Limiter {
    /// Its name as an RL.ALL rule (`FIXED`).
    const KIND: &'static str;
    /// How errors name its state (with its command, `RL.FIXED`).
    const STATE: StateKind;
    /// The type of key it keeps.
    const STORAGE: Storage;
    /// What an [`Effect::Set`] stores.
    type State: Written;
    /// What a judgement keeps for [`Limiter::write`].
    type Pending;

    /// A cost above the capacity can never be allowed: an error, not a denial.
    fn check_cost(&self, cost: i64) -> Result<()>;

    /// Judge the key's content at `now` for `cost` (checked by `check_cost`). Errors:
    /// the key's content is not this limiter's state, or holds another type.
    fn judge(&self, key: KeyRead<'_>, now: Micros, cost: i64) -> Result<Judgement<Self::Pending>>;

    /// The write of a judgement once the call is settled.
    fn write(
        &self,
        pending: Self::Pending,
        settled: Settled,
        now: Micros,
        cost: i64,
    ) -> std::result::Result<Effect<Self::State>, Full>;
}

/// A rule as the glue judges and writes it: any one limiter (every [`Limiter`] is
/// one), or a rule of any kind ([`crate::call::Rule`], RL.ALL's). The glue is generic
/// over it, so a command of one limiter runs that limiter's code with its own types,
/// and only RL.ALL goes through the rule of any kind.
pub trait Judge {
    /// What an [`Effect::Set`] stores.
    type State: Written;
    /// What a judgement keeps for [`Judge::write`].
    type Pending;
    /// Its name as an RL.ALL rule (`FIXED`).
    fn kind(&self) -> &'static str;
    /// How errors name its state (with its command).
    fn state_kind(&self) -> StateKind;
    /// The type of key it keeps.
    fn storage(&self) -> Storage;
    /// As [`Limiter::check_cost`].
    fn check_cost(&self, cost: i64) -> Result<()>;
    /// As [`Limiter::judge`].
    fn judge(&self, key: KeyRead<'_>, now: Micros, cost: i64) -> Result<Judgement<Self::Pending>>;
    /// As [`Limiter::write`].
    fn write(
        &self,
        pending: Self::Pending,
        settled: Settled,
        now: Micros,
        cost: i64,
    ) -> std::result::Result<Effect<Self::State>, Full>;
}

impl<L: Limiter> Judge for L {
    type State = L::State;
    type Pending = L::Pending;

    fn kind(&self) -> &'static str {
        L::KIND
    }

    fn state_kind(&self) -> StateKind {
        L::STATE
    }

    fn storage(&self) -> Storage {
        L::STORAGE
    }

    fn check_cost(&self, cost: i64) -> Result<()> {
        Limiter::check_cost(self, cost)
    }

    #[inline]
    fn judge(&self, key: KeyRead<'_>, now: Micros, cost: i64) -> Result<Judgement<L::Pending>> {
        Limiter::judge(self, key, now, cost)
    }

    #[inline]
    fn write(
        &self,
        pending: L::Pending,
        settled: Settled,
        now: Micros,
        cost: i64,
    ) -> std::result::Result<Effect<L::State>, Full> {
        Limiter::write(self, pending, settled, now, cost)
    }
}

/// How a limiter's rule is written in a call: the positional arguments after its key
/// (or, in RL.ALL, after its key's position) and the options of its own. `COST` and
/// `AT` belong to the call; they are never a rule's.
pub trait Syntax<'a>: Sized {
    /// How many positional arguments follow the key.
    const ARGS: usize;
    /// Its own options (`ALIGN`, `BUCKETS`, `META`, `LIMIT`...).
    const OPTIONS: &'static [Opt];
    /// Options its command takes that RL.ALL does not (`DELAY`).
    const COMMAND_OPTIONS: &'static [Opt] = &[];
    /// The positional arguments, read in order.
    type Args;
    fn parse_args(args: &[&'a [u8]]) -> Result<Self::Args>;
    /// The checked rule from its arguments and options. `opts.cost` is the call's
    /// cost, for checks that come before the rule's other checks (RL.GCRA's `DELAY`).
    fn build(args: Self::Args, opts: &Options<'a>) -> Result<Self>;
}

/// A single-key command's rule, cost and time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed<R> {
    pub rule: R,
    pub cost: i64,
    pub at: Option<Micros>,
}

/// The arguments of a single-key command after its key: the positional ones, then
/// `COST`, `AT` and the options of the rule and its command, each checked where it
/// stands; then the rule, and the cost against its capacity.
pub fn parse_single<'a, R: Syntax<'a> + Limiter>(args: &[&'a [u8]]) -> Result<Parsed<R>> {
    if args.len() < R::ARGS {
        return Err(Error::WrongArity {
            command: R::STATE.command,
        });
    }
    let (positional, options) = args.split_at(R::ARGS);
    let positional = R::parse_args(positional)?;
    let accepts = Opt::set(&COST_AT) | Opt::set(R::OPTIONS) | Opt::set(R::COMMAND_OPTIONS);
    let opts = Options::parse(options, accepts)?;
    let rule = R::build(positional, &opts)?;
    rule.check_cost(opts.cost)?;
    Ok(Parsed {
        rule,
        cost: opts.cost,
        at: opts.at,
    })
}

/// What a write stores: a string's value, or an entry of a log.
pub enum Value<'a> {
    String(&'a dyn Encode),
    LogEntry(&'a log::Append<'a>),
}

/// The stored form of a limiter's state.
pub trait Written {
    fn value(&self) -> Value<'_>;
}

impl Written for i64 {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

impl Written for Micros {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

/// Picks the binding verdict while verdicts are offered one by one, in order: when any
/// denies, the denying one with the largest retry_after (ties keep the first), so that
/// after that wait every one allows the same request; when all allow, the one with the
/// least remaining (ties keep the first).
#[derive(Debug)]
pub struct Chooser<T> {
    denied: Option<(Micros, Verdict, T)>,
    least: Option<(Verdict, T)>,
}

impl<T> Default for Chooser<T> {
    fn default() -> Self {
        Chooser {
            denied: None,
            least: None,
        }
    }
}

impl<T> Chooser<T> {
    pub fn offer(&mut self, verdict: Verdict, tag: T) {
        match verdict.decision {
            Decision::Denied { retry_after } => {
                if self
                    .denied
                    .as_ref()
                    .is_none_or(|(r, _, _)| retry_after > *r)
                {
                    self.denied = Some((retry_after, verdict, tag));
                }
            }
            Decision::Allowed => {
                if self
                    .least
                    .as_ref()
                    .is_none_or(|(v, _)| verdict.remaining < v.remaining)
                {
                    self.least = Some((verdict, tag));
                }
            }
        }
    }

    /// Whether some verdict denied.
    pub fn is_denied(&self) -> bool {
        self.denied.is_some()
    }

    /// The binding verdict and its tag; `None` when nothing was offered.
    pub fn finish(self) -> Option<(Verdict, T)> {
        match (self.denied, self.least) {
            (Some((_, v, t)), _) => Some((v, t)),
            (None, least) => least,
        }
    }
}

/// The decision on a call: whether every rule allowed, and the binding rule (an index
/// into the judgements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    pub settled: Settled,
    pub binding: usize,
}

/// Decide a call from the judgements of its rules, in the order the call gives them.
/// `None` for a call without rules (never made: every call names a key).
pub fn decide<P>(judgements: &[Judgement<P>]) -> Option<Decided> {
    let mut chooser = Chooser::default();
    for (i, j) in judgements.iter().enumerate() {
        chooser.offer(j.verdict, i);
    }
    let settled = if chooser.is_denied() {
        Settled::Denied
    } else {
        Settled::Allowed
    };
    chooser
        .finish()
        .map(|(_, binding)| Decided { settled, binding })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(remaining: i64) -> Verdict {
        Verdict {
            decision: Decision::Allowed,
            limit: 10,
            remaining,
            reset_after: Micros::ZERO,
        }
    }

    fn denied(retry_us: u64) -> Verdict {
        Verdict {
            decision: Decision::Denied {
                retry_after: Micros(retry_us),
            },
            limit: 10,
            remaining: 0,
            reset_after: Micros(retry_us),
        }
    }

    fn judged(v: Verdict) -> Judgement<()> {
        Judgement {
            verdict: v,
            window_ms: 0,
            booking: None,
            pending: (),
        }
    }

    #[test]
    fn the_binding_rule_follows_the_tie_rules() {
        let d = |vs: &[Verdict]| decide(&vs.iter().map(|&v| judged(v)).collect::<Vec<_>>());
        assert_eq!(
            d(&[allowed(5), allowed(3), allowed(3)]),
            Some(Decided {
                settled: Settled::Allowed,
                binding: 1
            }),
            "least remaining, first on ties"
        );
        assert_eq!(
            d(&[allowed(0), denied(500), denied(900), denied(900)]),
            Some(Decided {
                settled: Settled::Denied,
                binding: 2
            }),
            "largest retry, first on ties, allowed rules never bind a denial"
        );
        assert_eq!(d(&[]), None);
    }
}

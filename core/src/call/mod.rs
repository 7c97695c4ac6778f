//! A call of a limiter command and the one loop that settles it.
//!
//! Every limiter command is one of these shapes, all settled the same way
//! ([`Call::settle`]):
//!
//! ```text
//! RL.FIXED key ...                      one key, one rule           [`Shape::Single`]
//! RL.MULTI numkeys key... LIMIT ...     the same rule on each key   [`Shape::EachKey`]
//! RL.ALL numkeys key... RULE...         one rule of any kind a key  [`Shape::All`]
//! CL.THROTTLE key ...                   one key, redis-cell's reply [`Shape::Throttle`]
//! ```
//!
//! Settling a call: judge every key with its rule at the call's time and cost; the call
//! is allowed iff every rule allows ([`decision::decide`], which also picks the binding
//! rule whose numbers the reply carries); then each key gets its rule's write (a denial
//! consumes nothing: a single command still gives a key that lost its TTL its expiry
//! back, RL.ALL writes nothing at all). The glue opens the keys, hands what they hold to
//! [`Call::settle`], and applies the [`Settlement`]'s effects in key order.

pub mod decision;
pub mod limiter;
pub mod memory;
pub mod state;
pub mod verdict;

use crate::call::limiter::{Field, KeyRead, Limiter, Mode, Request, Settled, Syntax, Token};
use crate::call::state::{Effect, Encode, Outcome, Stored};
use crate::call::verdict::Verdict;
use crate::parse::args::Options;
use crate::parse::error::{Error, Result};
use crate::parse::keyword::{Opt, COST_AT};
use crate::units::Micros;
use smallvec::SmallVec;

/// How a call names its keys and its binding rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `CMD key ...`: one key, one rule; five fields (six with a limiter's extra field).
    Single,
    /// `CMD numkeys key... ...`: the same rule on every key; the binding key and window
    /// follow the five fields; an invalid state names its key.
    EachKey,
    /// RL.ALL: one rule a key; the binding rule's place and key follow the five
    /// fields; errors name their rule; a denial writes nothing at all.
    All,
    /// CL.THROTTLE: one key, one GCRA rule; the five fields in whole seconds, and
    /// limited with retry -1 when the quantity is above the capacity (judged as a peek).
    Throttle { over_capacity: bool },
}

/// A parsed call, of rules of one limiter (`R`, for the commands of one limiter) or of
/// any kind (RL.ALL's rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call<R> {
    pub command: &'static str,
    pub shape: Shape,
    /// How many keys the call names.
    pub numkeys: usize,
    /// (index of its key, rule), in the order the call gives the rules.
    pub rules: SmallVec<[(usize, R); 1]>,
    pub cost: i64,
    pub at: Option<Micros>,
    /// How the request settles (`REFUND`, `FORCE`; the usual: taken as it fits).
    pub mode: Mode,
}

/// What a call comes to: the binding verdict and the writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement<S> {
    pub settled: Settled,
    /// The binding rule's verdict (its five fields are the reply's).
    pub verdict: Verdict,
    /// The binding rule: its place among the call's rules (0-based).
    pub binding: usize,
    /// The binding rule's window (ms), for the replies that name it.
    pub window_ms: u64,
    /// The binding rule's sixth reply field of its own, if any.
    pub extra: Option<i64>,
    /// The reply field of the first rule that gives one whatever the binding rule
    /// ([`Limiter::reply_field`]: a lease's id), if any.
    pub field: Option<Field>,
    /// The writes, in key order: (the rule's place, its effect); none for a rule that
    /// writes nothing.
    pub writes: SmallVec<[(usize, Effect<S>); 4]>,
    /// The first rule (in the call's order) whose write stores a value: the key the
    /// server's `maxmemory` rule is asked about.
    pub first_set: Option<usize>,
}

impl<R: Limiter> Call<R> {
    /// Where the keys are among the arguments (the command name is 0).
    pub fn first_key(&self) -> usize {
        match self.shape {
            Shape::Single | Shape::Throttle { .. } => 1,
            Shape::EachKey | Shape::All => 2,
        }
    }

    /// Settle the call at `now`: `reads[i]` is what the key of rule `i` holds, `name(i)`
    /// that key's name (for errors).
    pub fn settle<'n>(
        &self,
        reads: &[KeyRead<'_>],
        now: Micros,
        name: impl Fn(usize) -> &'n [u8],
    ) -> Result<Settlement<R::State>> {
        let read = |i: usize| Ok(reads.get(i).copied().unwrap_or(KeyRead::Missing));
        self.settle_with(now, read, name)
    }

    /// Settle the call at `now`, reading the key of rule `i` with `read(i)` (as the
    /// module reads it, its errors those of rule `i`); `name(i)` is that key's name.
    pub fn settle_with<'k, 'n>(
        &self,
        now: Micros,
        read: impl Fn(usize) -> Result<KeyRead<'k>>,
        name: impl Fn(usize) -> &'n [u8],
    ) -> Result<Settlement<R::State>> {
        self.settle_request(&self.request(now, None), read, name)
    }

    /// The request every rule of the call judges at `now`; `token`: the name the glue
    /// made for it, when [`Call::wants_token`].
    pub fn request(&self, now: Micros, token: Option<Token>) -> Request {
        Request {
            now,
            cost: self.cost,
            mode: self.mode,
            token,
        }
    }

    /// Whether a rule of the call records a name the call does not give (a lease
    /// without `ID`): the glue then makes a [`Token`] for the request. A peek records
    /// nothing.
    pub fn wants_token(&self) -> bool {
        self.cost > 0 && self.rules.iter().any(|(_, r)| r.wants_token())
    }

    /// Settle the call's request `req`, reading the key of rule `i` with `read(i)` (as
    /// the module reads it, its errors those of rule `i`); `name(i)` is that key's name.
    /// The one loop of every limiter call.
    pub fn settle_request<'k, 'n>(
        &self,
        req: &Request,
        read: impl Fn(usize) -> Result<KeyRead<'k>>,
        name: impl Fn(usize) -> &'n [u8],
    ) -> Result<Settlement<R::State>> {
        let req = *req;
        let mut judged: SmallVec<[_; 4]> = SmallVec::new();
        for (i, (_, rule)) in self.rules.iter().enumerate() {
            let judgement = read(i)
                .and_then(|key| rule.judge(key, &req))
                .map_err(|e| self.rule_error(i, name(i), e))?;
            judged.push(judgement);
        }
        let decided =
            decision::decide(judged.iter().map(|j| j.verdict)).ok_or(Error::Internal("no rule"))?;
        let binding = judged
            .get(decided.binding)
            .ok_or(Error::Internal("binding rule"))?;
        let (verdict, window_ms, extra) = (binding.verdict, binding.window_ms, binding.extra);
        let field = self
            .rules
            .iter()
            .zip(&judged)
            .find_map(|((_, rule), j)| rule.reply_field(&j.pending, decided.settled));
        let mut writes: SmallVec<[(usize, Effect<R::State>); 4]> = SmallVec::new();
        let mut first_set = None;
        // RL.ALL's denial writes nothing at all.
        if decided.settled == Settled::Allowed || self.shape != Shape::All {
            for (i, ((_, rule), j)) in self.rules.iter().zip(judged).enumerate() {
                let effect = rule.write(j.pending, decided.settled, &req).map_err(|_| {
                    let full = Error::KeyFull {
                        key: name(i).to_vec(),
                        command: rule.state_kind().command,
                    };
                    self.rule_error(i, name(i), full)
                })?;
                if effect.is_none() {
                    continue;
                }
                if first_set.is_none() && matches!(effect, Effect::Set { .. }) {
                    first_set = Some(i);
                }
                writes.push((i, effect));
            }
            // In key order (RL.ALL's rules may name their keys in any order), so that
            // replicas and the AOF get the effects in the order of the keys.
            if writes.len() > 1 {
                writes.sort_unstable_by_key(|(i, _)| self.rules.get(*i).map(|(k, _)| *k));
            }
        }
        Ok(Settlement {
            settled: decided.settled,
            verdict,
            binding: decided.binding,
            window_ms,
            extra,
            field,
            writes,
            first_set,
        })
    }

    /// The error of rule `i` (0-based) on key `name`, as the call reports it: as the
    /// rule's command gives it (a single key), naming the key (several keys), or
    /// naming the rule too (RL.ALL). `WRONGTYPE` and the server's OOM are as they are.
    pub fn rule_error(&self, i: usize, name: &[u8], e: Error) -> Error {
        if matches!(e, Error::WrongType | Error::OutOfMemory) {
            return e;
        }
        let e = match self.shape {
            Shape::Single | Shape::Throttle { .. } => e,
            Shape::EachKey | Shape::All => e.for_key(name),
        };
        match (self.shape, self.rules.get(i)) {
            (Shape::All, Some((_, rule))) => Error::InRule {
                index: i + 1,
                kind: rule.kind(),
                inner: Box::new(e),
            },
            _ => e,
        }
    }

    /// A single-key command: `CMD key <its arguments>`, after the command name: the
    /// positional arguments, then `COST`, `AT` and the options of the rule and its
    /// command, each checked where it stands; then the rule, and the cost against its
    /// capacity.
    pub fn single<'a>(args: &[&'a [u8]]) -> Result<Call<R>>
    where
        R: Syntax<'a>,
    {
        let arity = || Error::WrongArity {
            command: R::STATE.command,
        };
        let (_key, rest) = args.split_first().ok_or_else(arity)?;
        if rest.len() < R::ARGS {
            return Err(arity());
        }
        let (positional, options) = rest.split_at(R::ARGS);
        let positional = R::parse_args(positional)?;
        let accepts = Opt::set(&COST_AT) | Opt::set(R::OPTIONS) | Opt::set(R::COMMAND_OPTIONS);
        let opts = Options::parse(options, accepts)?;
        let rule = R::build(positional, &opts)?;
        rule.check_cost(opts.cost)?;
        Ok(Call {
            command: R::STATE.command,
            shape: Shape::Single,
            numkeys: 1,
            rules: SmallVec::from_buf([(0, rule)]),
            cost: opts.cost,
            at: opts.at,
            mode: Mode::Take,
        })
    }

    /// The same rule on each of `numkeys` keys.
    pub fn each_key(
        command: &'static str,
        numkeys: usize,
        rule: R,
        cost: i64,
        at: Option<Micros>,
    ) -> Call<R>
    where
        R: Clone,
    {
        Call {
            command,
            shape: Shape::EachKey,
            numkeys,
            rules: (0..numkeys).map(|k| (k, rule.clone())).collect(),
            cost,
            at,
            mode: Mode::Take,
        }
    }
}

/// Calls on states held in memory, as tests, benches and models make them: the same
/// [`Call::settle`] as the module's, on the bytes the keys would hold.
impl<R: Limiter> Call<R> {
    /// A call of one rule on one key, as the rule's own command makes it.
    pub fn one(rule: R, cost: i64) -> Call<R> {
        Call {
            command: rule.state_kind().command,
            shape: Shape::Single,
            numkeys: 1,
            rules: SmallVec::from_buf([(0, rule)]),
            cost,
            at: None,
            mode: Mode::Take,
        }
    }

    /// Settle the call on string keys that hold `stored[k]` (key `k`; `None`: no key),
    /// each state encoded as its key would hold it; an error naming a key names it by
    /// its index (`0`, `1`, ...).
    pub fn settle_states<T: Encode>(
        &self,
        stored: &[Option<Stored<T>>],
        now: Micros,
    ) -> Result<Settlement<R::State>> {
        let values: SmallVec<[Encoded; 4]> = stored
            .iter()
            .map(|st| {
                st.as_ref().map(|st| {
                    let mut value = Vec::new();
                    st.state.encode(&mut value);
                    let at = Stored {
                        state: (),
                        expires_at: st.expires_at,
                    };
                    (value, at)
                })
            })
            .collect();
        let reads: SmallVec<[KeyRead<'_>; 4]> = self
            .rules
            .iter()
            .map(|(k, _)| match values.get(*k) {
                Some(Some((value, at))) => KeyRead::String {
                    value,
                    expires_at: at.expires_at,
                },
                _ => KeyRead::Missing,
            })
            .collect();
        let names: SmallVec<[Vec<u8>; 4]> = self
            .rules
            .iter()
            .map(|(k, _)| k.to_string().into_bytes())
            .collect();
        self.settle(&reads, now, |i| {
            names.get(i).map_or(&b""[..], Vec::as_slice)
        })
    }
}

/// A state encoded as its key holds it, and the key's expiry (`None`: no key).
type Encoded = Option<(Vec<u8>, Stored<()>)>;

impl<S: Clone> Settlement<S> {
    /// The write of rule `i` (`Effect::None` when it writes nothing).
    pub fn effect(&self, i: usize) -> Effect<S> {
        self.writes
            .iter()
            .find(|(r, _)| *r == i)
            .map_or(Effect::None, |(_, e)| e.clone())
    }

    /// The verdict and the write of a call of one rule.
    pub fn outcome(&self) -> Outcome<S> {
        Outcome {
            verdict: self.verdict,
            effect: self.effect(0),
        }
    }
}

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
//! Settling a call: judge every key with its rule at the call's time, cost and mode
//! (taken as it fits, or `REFUND`, `FORCE`); a *gate* (RL.ALL's BAN rule) is judged
//! first, and when it denies, the call ends there, its other keys unread. The call is
//! allowed iff no rule denies (a request forced over a limit is written all the same,
//! [`Decision::Over`](crate::call::verdict::Decision::Over)); the binding rule's numbers
//! are the reply's ([`decision::Chooser`]). Then each key gets its rule's write (a
//! denial consumes nothing: a single command still gives a key that lost its TTL its
//! expiry back; RL.ALL writes nothing but a rule's *penalty*, a BAN rule's strike, which
//! binds the reply when it starts a ban). The glue opens the keys, hands what they hold
//! to [`Call::settle`], and applies the [`Settlement`]'s effects in key order.

pub mod decision;
pub mod limiter;
pub mod memory;
pub mod state;
pub mod verdict;

use crate::call::decision::Chooser;
use crate::call::limiter::{
    Field, Judgement, KeyRead, Limiter, Mode, Request, Settled, Syntax, Token,
};
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
    /// Denied by a gate (RL.ALL's BAN rule while a ban runs), no other rule judged.
    pub gated: bool,
    /// A penalty binds the denied call (a strike started a ban).
    pub penalized: bool,
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
    /// without `ID`): the glue then makes a [`Token`] for the request. A peek and a
    /// refund record none.
    pub fn wants_token(&self) -> bool {
        self.cost > 0
            && self.mode != Mode::Refund
            && self.rules.iter().any(|(_, r)| r.wants_token())
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
        let judge = |i: usize, rule: &R| {
            read(i)
                .and_then(|key| rule.judge(key, &req))
                .map_err(|e| self.rule_error(i, name(i), e))
        };
        let mut judged: SmallVec<[Option<Judgement<R::Pending>>; 4]> =
            self.rules.iter().map(|_| None).collect();
        // Gates first (RL.ALL's BAN rule): one that denies ends the call, the other
        // keys unread and nothing written; it binds.
        for (i, (_, rule)) in self.rules.iter().enumerate() {
            if !rule.gates() {
                continue;
            }
            let j = judge(i, rule)?;
            if j.verdict.is_denied() {
                // The other rules, unjudged, give their field as in any denial (nil).
                let field = self
                    .rules
                    .iter()
                    .find_map(|(_, rule)| rule.reply_field(None, Settled::Denied));
                return Ok(Settlement {
                    settled: Settled::Denied,
                    verdict: j.verdict,
                    binding: i,
                    window_ms: j.window_ms,
                    extra: j.extra,
                    field,
                    writes: SmallVec::new(),
                    first_set: None,
                    gated: true,
                    penalized: false,
                });
            }
            if let Some(slot) = judged.get_mut(i) {
                *slot = Some(j);
            }
        }
        let gates_only = self.rules.iter().all(|(_, r)| r.gates());
        let mut chooser = Chooser::default();
        for (i, ((_, rule), slot)) in self.rules.iter().zip(judged.iter_mut()).enumerate() {
            if rule.gates() {
                // A gate that allows binds only a call of gates.
                if let (true, Some(j)) = (gates_only, slot.as_ref()) {
                    chooser.offer(j.verdict, i);
                }
                continue;
            }
            let j = judge(i, rule)?;
            chooser.offer(j.verdict, i);
            *slot = Some(j);
        }
        let settled = if chooser.is_denied() {
            Settled::Denied
        } else {
            Settled::Allowed
        };
        // The chooser's verdict: a forced request over a limit waits for every rule.
        let (mut verdict, mut binding) = chooser.finish().ok_or(Error::Internal("no rule"))?;
        let b = judged
            .get(binding)
            .and_then(Option::as_ref)
            .ok_or(Error::Internal("binding rule"))?;
        let (mut window_ms, mut extra) = (b.window_ms, b.extra);
        // A rule's own reply field (a lease's id), from its judgement as the call settled.
        let field =
            self.rules.iter().zip(&judged).find_map(|((_, rule), j)| {
                rule.reply_field(j.as_ref().map(|j| &j.pending), settled)
            });
        let mut writes: SmallVec<[(usize, Effect<R::State>); 4]> = SmallVec::new();
        let mut first_set = None;
        let mut penalized = false;
        let rules = self.rules.iter().zip(judged.drain(..)).enumerate();
        let rules = rules.filter_map(|(i, ((_, rule), j))| j.map(|j| (i, rule, j)));
        for (i, rule, j) in rules {
            let effect = if settled == Settled::Allowed || self.shape != Shape::All {
                rule.write(j.pending, settled, &req).map_err(|_| {
                    let full = Error::KeyFull {
                        key: name(i).to_vec(),
                        command: rule.state_kind().command,
                    };
                    self.rule_error(i, name(i), full)
                })?
            } else {
                // RL.ALL's denial writes nothing but a penalty (a strike).
                match rule.penalty(j.pending, &req) {
                    None => continue,
                    Some(penalty) => {
                        if let Some(v) = penalty.binds {
                            (verdict, binding, window_ms, extra) = (v, i, j.window_ms, None);
                            penalized = true;
                        }
                        penalty.effect
                    }
                }
            };
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
        Ok(Settlement {
            settled,
            verdict,
            binding,
            window_ms,
            extra,
            field,
            writes,
            first_set,
            gated: false,
            penalized,
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
        let mode = Mode::of(&opts)?;
        let rule = R::build(positional, &opts)?;
        rule.check_cost(opts.cost, mode)?;
        Ok(Call {
            command: R::STATE.command,
            shape: Shape::Single,
            numkeys: 1,
            rules: SmallVec::from_buf([(0, rule)]),
            cost: opts.cost,
            at: opts.at,
            mode,
        })
    }

    /// The same call, settled in `mode` (`REFUND`, `FORCE`).
    pub fn settling(self, mode: Mode) -> Call<R> {
        Call { mode, ..self }
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

//! A call of a limiter command and the one loop that runs it.
//!
//! Every limiter command is one of these shapes, all run the same way ([`Call::run`]):
//!
//! ```text
//! RL.FIXED key ...                      one key, one rule           [`Shape::Single`]
//! RL.MULTI numkeys key... LIMIT ...     the same rule on each key   [`Shape::EachKey`]
//! RL.ALL numkeys key... RULE...         one rule of any kind a key  [`Shape::All`]
//! CL.THROTTLE key ...                   one key, redis-cell's reply [`Shape::Throttle`]
//! ```
//!
//! Running a call: judge every key with its rule at the call's time, cost and mode
//! (taken as it fits, or `REFUND`, `FORCE`); a *gate* (a rule whose [`Kind`] says so:
//! RL.ALL's BAN rule) is judged first, and when it denies, the call ends there, its
//! other keys unread. The call is allowed iff no rule denies (a request forced over a
//! limit is written all the same,
//! [`Decision::Over`](crate::call::verdict::Decision::Over)); the binding rule's numbers
//! are the reply's ([`binding::Binding`]). Then each key gets its rule's write (a
//! denial consumes nothing: a single command still gives a key that lost its TTL its
//! expiry back; RL.ALL writes nothing but a penalty, a BAN rule's strike, which binds
//! the reply when it starts a ban), the server's `maxmemory` rule is asked, and the
//! writes are carried out on the [`Keys`], in key order. The glue opens the keys and
//! replies with the [`Resolution`]; tests run the same loop on keys held in memory
//! ([`memory`]).

pub mod binding;
pub mod keys;
pub mod limiter;
pub mod memory;
pub mod state;
pub mod verdict;

use crate::call::binding::Binding;
use crate::call::keys::Keys;
use crate::call::limiter::{Field, Judgement, Limiter, Mode, Names, Outcome, Request, Syntax};
use crate::call::state::Effect;
use crate::call::verdict::Verdict;
use crate::error::{Error, Result};
use crate::parse::args::Options;
use crate::parse::keyword::{Opt, COST_AT};
use crate::units::Micros;
use smallvec::SmallVec;

/// How a call names its keys and its binding rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `CMD key ...`: one key, one rule; five fields (six with a limiter's own field).
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

/// The rules of a call: (index of its key, rule), inline for calls of up to two keys.
pub type Rules<R> = SmallVec<[(usize, R); 2]>;

/// The rules of a call of one rule, on its one key.
pub fn one_rule<R>(rule: R) -> Rules<R> {
    let mut rules = Rules::new();
    rules.push((0, rule));
    rules
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
    pub rules: Rules<R>,
    pub cost: i64,
    pub at: Option<Micros>,
    /// How the request settles (`REFUND`, `FORCE`; the usual: taken as it fits).
    pub mode: Mode,
}

/// What a call comes to: how it was decided, the binding verdict, the writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution<S> {
    pub outcome: Outcome,
    /// The binding rule's verdict (its five fields are the reply's).
    pub verdict: Verdict,
    /// The binding rule: its place among the call's rules (0-based).
    pub binding: usize,
    /// The binding rule's window (ms), for the replies that name it.
    pub window_ms: u64,
    /// The reply's field after the fixed ones, when the call has one: the field of
    /// the first rule that gives one (nil for a rule the call did not judge).
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
    /// With `UPTO`: the units the call took (0 when denied), the reply's last field.
    pub granted: Option<i64>,
}

impl<R: Limiter> Call<R> {
    /// Where the keys are among the arguments (the command name is 0).
    pub fn first_key(&self) -> usize {
        match self.shape {
            Shape::Single | Shape::Throttle { .. } => 1,
            Shape::EachKey | Shape::All => 2,
        }
    }

    /// The request every rule of the call judges at `now`, its names made by `names`.
    pub fn request<'r>(&self, now: Micros, names: &'r dyn Names) -> Request<'r> {
        Request {
            now,
            cost: self.cost,
            mode: self.mode,
            names,
        }
    }

    /// The one loop of every limiter call: judge the key of every rule at `now` (gates
    /// first), decide all or nothing and the binding rule, ask the `maxmemory` rule
    /// about the first write that stores a value, and carry out the writes on `keys`
    /// in key order. `names` makes the call's name when a rule records one it was not
    /// given.
    pub fn run<K: Keys>(
        &self,
        keys: &mut K,
        now: Micros,
        names: &dyn Names,
    ) -> Result<Resolution<R::State>> {
        let resolution = match self.mode {
            Mode::UpTo => self.resolve_up_to(now, names, &*keys)?,
            _ => self.resolve(&self.request(now, names), &*keys)?,
        };
        if let Some(i) = resolution.first_set {
            keys.check_memory(i)?;
        }
        for (i, effect) in &resolution.writes {
            keys.apply(*i, effect)?;
        }
        Ok(resolution)
    }

    /// `UPTO`: the call taken as `COST k` for the largest `k` up to its cost that every
    /// rule allows now, or denied as `COST 1` when not even 1 fits. `k` is what a peek
    /// (`COST 0`) says remains (every limiter's `remaining` is the largest cost that
    /// fits now, a property test checks it); a call of cost 1 needs no peek (a lease's
    /// renewal fits where a peek says nothing remains), and a call of gates alone (a
    /// BAN rule) takes it all. The reply's last field is `k` (0 when denied).
    fn resolve_up_to<K: Keys>(
        &self,
        now: Micros,
        names: &dyn Names,
        keys: &K,
    ) -> Result<Resolution<R::State>> {
        let take = |cost| Request {
            now,
            cost,
            mode: Mode::Take,
            names,
        };
        let k = if self.cost <= 1 {
            1
        } else {
            let peek = self.resolve(&take(0), keys)?;
            if !peek.outcome.is_allowed() {
                0
            } else if self.rules.iter().all(|(_, r)| r.kind().gate) {
                self.cost
            } else {
                peek.verdict.remaining.clamp(0, self.cost)
            }
        };
        let taken = k.max(1);
        let mut resolution = self.resolve(&take(taken), keys)?;
        resolution.granted = Some(if resolution.outcome.is_allowed() {
            taken
        } else {
            0
        });
        Ok(resolution)
    }

    /// Judge and decide the call's request on `keys`, and the writes it makes.
    fn resolve<K: Keys>(&self, req: &Request, keys: &K) -> Result<Resolution<R::State>> {
        match self.rules.as_slice() {
            // A call of one rule (every single-key command): the steps below without
            // their lists (a test checks that the two agree).
            [(_, rule)] if !rule.kind().gate => self.resolve_one(rule, req, keys),
            _ => self.resolve_all(req, keys),
        }
    }

    /// [`Call::resolve`] of a call of one rule that is no gate.
    fn resolve_one<K: Keys>(
        &self,
        rule: &R,
        req: &Request,
        keys: &K,
    ) -> Result<Resolution<R::State>> {
        let j = self.judge(0, rule, req, keys)?;
        let outcome = if j.verdict.is_denied() {
            Outcome::Denied {
                repair: self.shape != Shape::All,
            }
        } else {
            Outcome::Allowed
        };
        let effect = self.write(0, rule, j.pending, outcome, req, keys)?;
        let first_set = matches!(effect, Effect::Set { .. }).then_some(0);
        let mut writes = SmallVec::new();
        if !effect.is_none() {
            writes.push((0, effect));
        }
        Ok(Resolution {
            outcome,
            verdict: j.verdict,
            binding: 0,
            window_ms: j.window_ms,
            field: j.field,
            writes,
            first_set,
            gated: false,
            penalized: false,
            granted: None,
        })
    }

    /// Both paths of [`Call::resolve`] on the same keys, for the test that they agree.
    #[cfg(test)]
    pub(crate) fn resolve_both<K: Keys>(
        &self,
        keys: &K,
        now: Micros,
    ) -> Option<[Result<Resolution<R::State>>; 2]>
    where
        R::State: Clone,
    {
        let names = crate::call::memory::Counted::default();
        let req = self.request(now, &names);
        match self.rules.as_slice() {
            [(_, rule)] if !rule.kind().gate => Some([
                self.resolve_one(rule, &req, keys),
                self.resolve_all(&req, keys),
            ]),
            _ => None,
        }
    }

    /// [`Call::resolve`] of a call of any rules.
    fn resolve_all<K: Keys>(&self, req: &Request, keys: &K) -> Result<Resolution<R::State>> {
        let judge = |i: usize, rule: &R| self.judge(i, rule, req, keys);
        let mut judged: SmallVec<[Option<Judgement<R::Pending>>; 4]> =
            self.rules.iter().map(|_| None).collect();
        // Gates first (RL.ALL's BAN rule): one that denies ends the call, the other
        // keys unread and nothing written; it binds.
        for (i, (_, rule)) in self.rules.iter().enumerate() {
            if !rule.kind().gate {
                continue;
            }
            let j = judge(i, rule)?;
            if j.verdict.is_denied() {
                // The other rules, unjudged, give their field as in any denial (nil).
                let field = self.rules.iter().find_map(|(_, r)| {
                    let kind = r.kind();
                    kind.field.then_some(Field::Nil)
                });
                return Ok(Resolution {
                    outcome: Outcome::Denied { repair: false },
                    verdict: j.verdict,
                    binding: i,
                    window_ms: j.window_ms,
                    field,
                    writes: SmallVec::new(),
                    first_set: None,
                    gated: true,
                    penalized: false,
                    granted: None,
                });
            }
            if let Some(slot) = judged.get_mut(i) {
                *slot = Some(j);
            }
        }
        let gates_only = self.rules.iter().all(|(_, r)| r.kind().gate);
        let mut binding = Binding::default();
        for (i, ((_, rule), slot)) in self.rules.iter().zip(judged.iter_mut()).enumerate() {
            if rule.kind().gate {
                // A gate that allows binds only a call of gates.
                if let (true, Some(j)) = (gates_only, slot.as_ref()) {
                    binding.offer(j.verdict, i);
                }
                continue;
            }
            let j = judge(i, rule)?;
            binding.offer(j.verdict, i);
            *slot = Some(j);
        }
        let outcome = if binding.is_denied() {
            Outcome::Denied {
                repair: self.shape != Shape::All,
            }
        } else {
            Outcome::Allowed
        };
        // The binding verdict: a forced request over a limit waits for every rule.
        let (mut verdict, mut bound) =
            binding.finish().ok_or_else(|| Error::Internal("no rule"))?;
        let b = judged
            .get(bound)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Internal("binding rule"))?;
        let mut window_ms = b.window_ms;
        // A rule's own field, from its judgement as the call was decided: what a rule
        // allowed records nothing when the call is denied.
        let field = judged.iter().flatten().find_map(|j| {
            let recorded = outcome.is_allowed() || !j.verdict.is_allowed();
            j.field
                .clone()
                .map(|f| if recorded { f } else { Field::Nil })
        });
        let mut writes: SmallVec<[(usize, Effect<R::State>); 4]> = SmallVec::new();
        let mut first_set = None;
        let mut penalized = false;
        let rules = self.rules.iter().zip(judged.drain(..)).enumerate();
        let rules = rules.filter_map(|(i, ((_, rule), j))| j.map(|j| (i, rule, j)));
        for (i, rule, j) in rules {
            let effect = self.write(i, rule, j.pending, outcome, req, keys)?;
            if effect.is_none() {
                continue;
            }
            // A write of a denied call that binds it (a strike that starts a ban).
            if let (Outcome::Denied { .. }, Some(v), false) = (outcome, j.when_denied, penalized) {
                (verdict, bound, window_ms, penalized) = (v, i, j.window_ms, true);
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
        Ok(Resolution {
            outcome,
            verdict,
            binding: bound,
            window_ms,
            field,
            writes,
            first_set,
            gated: false,
            penalized,
            granted: None,
        })
    }

    /// Rule `i`'s judgement of its key for `req`; an error is the rule's, as the call
    /// reports it.
    #[inline]
    fn judge<K: Keys>(
        &self,
        i: usize,
        rule: &R,
        req: &Request,
        keys: &K,
    ) -> Result<Judgement<R::Pending>> {
        keys.read(i)
            .and_then(|key| rule.judge(key, req))
            .map_err(|e| self.rule_error(i, keys.name(i), e))
    }

    /// Rule `i`'s write once the call is decided; a write that would leave its key
    /// too full is the rule's error (`KeyFull`), as the call reports it.
    #[inline]
    fn write<K: Keys>(
        &self,
        i: usize,
        rule: &R,
        pending: R::Pending,
        outcome: Outcome,
        req: &Request,
        keys: &K,
    ) -> Result<Effect<R::State>> {
        rule.write(pending, outcome, req).map_err(|_| {
            let full = Error::KeyFull {
                key: keys.name(i).to_vec(),
                command: rule.kind().state.command,
            };
            self.rule_error(i, keys.name(i), full)
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
                kind: rule.kind().keyword,
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
            command: R::KIND.state.command,
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
            command: R::KIND.state.command,
            shape: Shape::Single,
            numkeys: 1,
            rules: crate::call::one_rule(rule),
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

/// Calls of one rule, as tests, benches and models make them.
impl<R: Limiter> Call<R> {
    /// A call of one rule on one key, as the rule's own command makes it.
    pub fn one(rule: R, cost: i64) -> Call<R> {
        Call {
            command: rule.kind().state.command,
            shape: Shape::Single,
            numkeys: 1,
            rules: crate::call::one_rule(rule),
            cost,
            at: None,
            mode: Mode::Take,
        }
    }
}

impl<S: Clone> Resolution<S> {
    /// The verdict and the write of a call of one rule.
    pub fn decided(&self) -> crate::call::state::Decided<S> {
        crate::call::state::Decided {
            verdict: self.verdict,
            effect: self.effect(0),
        }
    }

    /// The write of rule `i` (`Effect::None` when it writes nothing).
    pub fn effect(&self, i: usize) -> Effect<S> {
        self.writes
            .iter()
            .find(|(r, _)| *r == i)
            .map_or(Effect::None, |(_, e)| e.clone())
    }
}

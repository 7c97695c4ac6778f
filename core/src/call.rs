//! A call of a limiter command, parsed: which rule judges which key, the cost and the
//! time, and how the reply names the binding rule. Every limiter command is one of
//! three shapes, all decided the same way ([`crate::limiter::decide`]):
//!
//! ```text
//! RL.FIXED key ...                      one key, one rule           [`Shape::Single`]
//! RL.MULTI numkeys key... LIMIT ...     the same rule on each key   [`Shape::EachKey`]
//! RL.ALL numkeys key... RULE...         one rule of any kind a key  [`Shape::All`]
//! ```
//!
//! The limiters are listed once, in [`limiters!`] below: that list makes the [`Rule`]
//! of any kind, its state and what it keeps between judging and writing, and RL.ALL's
//! rule keywords.

use crate::args::{parse_int, AtOther, Opt, Options, COST_AT};
use crate::error::{Error, Result};
use crate::limiter::{
    parse_single, Full, Judge, Judgement, KeyRead, Limiter, Settled, Storage, Syntax, Value,
    Written,
};
use crate::limits::MAX_ALL_KEYS;
use crate::multikey;
use crate::state::{Effect, StateKind};
use crate::units::Micros;
use crate::{fixed, gcra, log, multi, sliding};
use smallvec::SmallVec;

/// Every limiter, once: `Variant(its rule type)`. Adding a limiter is its core file,
/// its line here, its twin function and its command's row.
macro_rules! limiters {
    ($($variant:ident($rule:ty)),* $(,)?) => {
        /// A checked rule of any limiter.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Rule<'a> {
            $($variant($rule),)*
        }

        /// What a rule of any limiter writes. Kept on the stack, one per key, whatever
        /// the size of the largest (RL.SLIDING's buckets): no allocation per call.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(clippy::large_enum_variant)]
        pub enum State<'a> {
            $($variant(<$rule as Limiter>::State),)*
        }

        /// What a rule of any limiter keeps between judging and writing (on the stack,
        /// as [`State`]).
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(clippy::large_enum_variant)]
        pub enum Pending<'a> {
            $($variant(<$rule as Limiter>::Pending),)*
        }

        $(
            impl<'a> From<$rule> for Rule<'a> {
                fn from(rule: $rule) -> Rule<'a> {
                    Rule::$variant(rule)
                }
            }
        )*

        /// A rule of any kind is judged by the rule of its kind.
        impl<'a> Judge for Rule<'a> {
            type State = State<'a>;
            type Pending = Pending<'a>;

            /// Its keyword in RL.ALL (`FIXED`).
            fn kind(&self) -> &'static str {
                match self {
                    $(Rule::$variant(_) => <$rule as Limiter>::KIND,)*
                }
            }

            /// How errors name its state (and its command).
            fn state_kind(&self) -> StateKind {
                match self {
                    $(Rule::$variant(_) => <$rule as Limiter>::STATE,)*
                }
            }

            /// The type of key it keeps.
            fn storage(&self) -> Storage {
                match self {
                    $(Rule::$variant(_) => <$rule as Limiter>::STORAGE,)*
                }
            }

            fn check_cost(&self, cost: i64) -> Result<()> {
                match self {
                    $(Rule::$variant(r) => Limiter::check_cost(r, cost),)*
                }
            }

            fn judge(
                &self,
                key: KeyRead<'_>,
                now: Micros,
                cost: i64,
            ) -> Result<Judgement<Pending<'a>>> {
                match self {
                    $(Rule::$variant(r) => Limiter::judge(r, key, now, cost).map(|j| Judgement {
                        verdict: j.verdict,
                        window_ms: j.window_ms,
                        booking: j.booking,
                        pending: Pending::$variant(j.pending),
                    }),)*
                }
            }

            /// The write of a judgement once the call is settled (a judgement of
            /// another rule writes nothing).
            fn write(
                &self,
                pending: Pending<'a>,
                settled: Settled,
                now: Micros,
                cost: i64,
            ) -> std::result::Result<Effect<State<'a>>, Full> {
                match (self, pending) {
                    $((Rule::$variant(r), Pending::$variant(p)) => {
                        Limiter::write(r, p, settled, now, cost).map(|e| e.map(State::$variant))
                    })*
                    _ => Ok(Effect::None),
                }
            }
        }

        impl Written for State<'_> {
            fn value(&self) -> Value<'_> {
                match self {
                    $(State::$variant(s) => s.value(),)*
                }
            }
        }

        /// How many kinds of limiters there are (RL.ALL's rule keywords).
        pub const KINDS_COUNT: usize = [$(stringify!($variant)),*].len();

        /// RL.ALL's rule keyword `word` is, in its canonical spelling, if any. (The
        /// lifetime names the rule types that borrow their arguments.)
        #[allow(clippy::extra_unused_lifetimes)]
        fn kind_of<'a>(word: &[u8]) -> Option<&'static str> {
            [$(<$rule as Limiter>::KIND),*]
                .into_iter()
                .find(|k| word.eq_ignore_ascii_case(k.as_bytes()))
        }

        /// RL.ALL: the rule a keyword starts, read from the arguments after its key
        /// position; with how many arguments it took. `None`: not a rule keyword.
        fn parse_rule<'a>(kind: &[u8], args: &[&'a [u8]]) -> Option<Result<(Rule<'a>, usize)>> {
            $(
                if kind.eq_ignore_ascii_case(<$rule as Limiter>::KIND.as_bytes()) {
                    return Some(rule_syntax::<$rule>(args));
                }
            )*
            None
        }
    };
}

limiters! {
    Fixed(fixed::Rule),
    Gcra(gcra::Rule),
    Multi(multi::Rule),
    Sliding(sliding::Rule),
    Log(log::Rule<'a>),
}

/// One rule of RL.ALL after its key position: its positional arguments and its own
/// options, up to the next rule (or `COST`, `AT`).
fn rule_syntax<'a, R>(args: &[&'a [u8]]) -> Result<(Rule<'a>, usize)>
where
    R: Syntax<'a> + Limiter + Into<Rule<'a>>,
{
    if args.len() < R::ARGS {
        return Err(Error::RuleArity { kind: R::KIND });
    }
    let (positional, rest) = args.split_at(R::ARGS);
    let positional = R::parse_args(positional)?;
    let (opts, used) = Options::parse_prefix(rest, Opt::set(R::OPTIONS), AtOther::Stop)?;
    Ok((R::build(positional, &opts)?.into(), R::ARGS + used))
}

/// How a call names its keys and its binding rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `CMD key ...`: one key, one rule; five fields (six with a booking).
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
/// any kind (RL.ALL's [`Rule`]).
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
}

impl<R: Judge> Call<R> {
    /// Where the keys are among the arguments (the command name is 0).
    pub fn first_key(&self) -> usize {
        match self.shape {
            Shape::Single | Shape::Throttle { .. } => 1,
            Shape::EachKey | Shape::All => 2,
        }
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

    /// A single-key command: `CMD key <its arguments>`, after the command name.
    pub fn single<'a>(args: &[&'a [u8]]) -> Result<Call<R>>
    where
        R: Syntax<'a> + Limiter,
    {
        let Some((_key, rest)) = args.split_first() else {
            return Err(Error::WrongArity {
                command: R::STATE.command,
            });
        };
        let p = parse_single::<R>(rest)?;
        Ok(Call {
            command: R::STATE.command,
            shape: Shape::Single,
            numkeys: 1,
            rules: SmallVec::from_buf([(0, p.rule)]),
            cost: p.cost,
            at: p.at,
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
        }
    }
}

/// `RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]`.
pub fn fixed(args: &[&[u8]]) -> Result<Call<fixed::Rule>> {
    Call::single(args)
}

/// `RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay]`.
pub fn gcra(args: &[&[u8]]) -> Result<Call<gcra::Rule>> {
    Call::single(args)
}

/// `RL.LOG key limit window [META value] [COST n] [AT unix_ms]`.
pub fn log<'a>(args: &[&'a [u8]]) -> Result<Call<log::Rule<'a>>> {
    Call::single(args)
}

/// `CL.THROTTLE key max_burst count period [quantity]`: RL.GCRA's rule on the key, the
/// quantity as the cost (0 when above the capacity), the server's clock.
pub fn throttle(args: &[&[u8]]) -> Result<Call<gcra::Rule>> {
    let Some((_key, rest)) = args.split_first() else {
        return Err(Error::WrongArity {
            command: crate::throttle::COMMAND,
        });
    };
    let t = crate::throttle::parse_args(rest)?;
    Ok(Call {
        command: crate::throttle::COMMAND,
        shape: Shape::Throttle {
            over_capacity: t.over_capacity,
        },
        numkeys: 1,
        rules: SmallVec::from_buf([(0, gcra::Rule::from(t.params))]),
        cost: t.params.cost(),
        at: None,
    })
}

/// `RL.MULTI numkeys key [key ...] LIMIT window limit [...] [COST n] [ALIGN] [AT ms]`.
pub fn multi(args: &[&[u8]]) -> Result<Call<multi::Rule>> {
    let r = multi::parse_args(args)?;
    Ok(Call::each_key(
        multi::STATE.command,
        r.numkeys(),
        r.rule().clone(),
        r.cost(),
        r.at(),
    ))
}

/// `RL.SLIDING numkeys key [key ...] LIMIT window limit [...] [BUCKETS n] [COST n]
/// [AT ms]`.
pub fn sliding(args: &[&[u8]]) -> Result<Call<sliding::Rule>> {
    let r = sliding::parse_args(args)?;
    Ok(Call::each_key(
        sliding::STATE.command,
        r.numkeys(),
        r.rule().clone(),
        r.cost(),
        r.at(),
    ))
}

/// `RL.ALL numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms]`: one rule per
/// key, each naming its key by its 1-based position, `COST` and `AT` after the rules.
pub fn all<'a>(args: &[&'a [u8]]) -> Result<Call<Rule<'a>>> {
    const COMMAND: &str = "RL.ALL";
    // numkeys, one key, a rule keyword and its position, at least.
    if args.len() < 4 {
        return Err(Error::WrongArity { command: COMMAND });
    }
    let numkeys = match args.first().map(|raw| (raw, parse_int("numkeys", raw, 1))) {
        Some((_, Ok(n))) if n as u64 <= MAX_ALL_KEYS as u64 => n as usize,
        Some((raw, _)) => {
            return Err(Error::InvalidAllNumKeys {
                value: raw.to_vec(),
            })
        }
        None => return Err(Error::WrongArity { command: COMMAND }),
    };
    let (_, rest) = multikey::parse_keys(args)?;
    let mut rules: SmallVec<[(usize, Rule<'a>); 1]> = SmallVec::new();
    let mut i = 0;
    let mut opts = Options::default();
    while let Some(word) = rest.get(i) {
        let index = rules.len() + 1;
        if Opt::named(word).is_some_and(|o| COST_AT.contains(&o)) {
            opts = Options::parse(&rest[i..], Opt::set(&COST_AT)).map_err(|e| match e {
                Error::UnknownOption { value, .. } if is_rule_keyword(&value) => {
                    Error::RuleAfterOptions
                }
                other => other,
            })?;
            break;
        }
        if let Some(option) = Opt::named(word) {
            // An option after a rule that does not take it.
            let (index, kind) = rules
                .last()
                .map_or((index, COMMAND), |(_, r)| (rules.len(), r.kind()));
            return Err(Error::InRule {
                index,
                kind,
                inner: Box::new(Error::OptionNotInRule {
                    option: option.keyword(),
                }),
            });
        }
        let in_rule = |kind: &'static str, e: Error| Error::InRule {
            index,
            kind,
            inner: Box::new(e),
        };
        let after = rest.get(i + 1..).unwrap_or(&[]);
        let Some(kind) = kind_of(word) else {
            return Err(Error::UnknownRule {
                value: word.to_vec(),
            });
        };
        let raw_position = after.first().copied().unwrap_or(&[]);
        let position = match parse_int("position", raw_position, 1) {
            Ok(p) if p as u64 <= numkeys as u64 => p as usize,
            _ => {
                return Err(in_rule(
                    kind,
                    Error::InvalidPosition {
                        value: raw_position.to_vec(),
                        numkeys,
                    },
                ))
            }
        };
        if let Some(by) = rules.iter().position(|(k, _)| *k == position - 1) {
            return Err(in_rule(
                kind,
                Error::PositionTaken {
                    position,
                    by: by + 1,
                },
            ));
        }
        let (rule, used) = parse_rule(word, after.get(1..).unwrap_or(&[]))
            .unwrap_or(Err(Error::UnknownRule {
                value: word.to_vec(),
            }))
            .map_err(|e| in_rule(kind, e))?;
        rules.push((position - 1, rule));
        i += 2 + used;
    }
    if let Some(k) = (0..numkeys).find(|k| rules.iter().all(|(r, _)| r != k)) {
        return Err(Error::KeyWithoutRule {
            position: k + 1,
            key: args.get(k + 1).map_or_else(Vec::new, |k| k.to_vec()),
        });
    }
    for (i, (_, rule)) in rules.iter().enumerate() {
        rule.check_cost(opts.cost).map_err(|e| Error::InRule {
            index: i + 1,
            kind: rule.kind(),
            inner: Box::new(e),
        })?;
    }
    Ok(Call {
        command: COMMAND,
        shape: Shape::All,
        numkeys,
        rules,
        cost: opts.cost,
        at: opts.at,
    })
}

fn is_rule_keyword(word: &[u8]) -> bool {
    kind_of(word).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{decide, Settled};
    use crate::units::UnixMillis;
    use crate::verdict::Decision;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn parse(args: &[&'static str]) -> Result<Call<Rule<'static>>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        all(&raw)
    }

    #[test]
    fn rules_name_their_keys_by_position_in_any_order() {
        let call = parse(&[
            "3",
            "user:7",
            "acct:3",
            "ip:1",
            "sliding",
            "3",
            "LIMIT",
            "1m",
            "100",
            "GCRA",
            "1",
            "9",
            "10",
            "1s",
            "Fixed",
            "2",
            "10000",
            "1d",
            "ALIGN",
            "COST",
            "2",
            "AT",
            "1900000000000",
        ])
        .unwrap();
        assert_eq!(call.shape, Shape::All);
        assert_eq!(call.numkeys, 3);
        let kinds: Vec<(usize, &str)> = call.rules.iter().map(|(k, r)| (*k, r.kind())).collect();
        assert_eq!(kinds, [(2, "SLIDING"), (0, "GCRA"), (1, "FIXED")]);
        assert_eq!(
            (call.cost, call.at),
            (2, Some(Micros(1_900_000_000_000_000)))
        );
        assert_eq!(call.first_key(), 2);
        // A META value may be any word, a keyword included.
        let call = parse(&[
            "2", "a", "b", "LOG", "1", "5", "1m", "META", "GCRA", "GCRA", "2", "0", "1", "1s",
        ])
        .unwrap();
        assert_eq!(call.rules.len(), 2);
    }

    #[test]
    fn errors_name_their_rule() {
        let cases: &[(&[&'static str], &str)] = &[
            (&["1", "a", "FIXED"], "ERR wrong number of arguments for 'RL.ALL' command (syntax: RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms])"),
            (&["1", "a", "FIXED", "1", "5"], "ERR rule 1 (FIXED): wrong number of arguments for a FIXED rule (syntax: FIXED i limit window [ALIGN])"),
            (&["1", "a", "FIXED", "1", "1m", "5"], "ERR rule 1 (FIXED): invalid limit '1m': must be an integer from 1 to 9007199254740991 (RL.FIXED key limit window: the limit comes first)"),
            (&["1", "a", "FIXED", "1", "5", "1m", "COST", "1", "BUCKETS"], "ERR unknown option 'BUCKETS' (options here: COST, AT)"),
            (&["17", "a", "FIXED", "1"], "ERR invalid numkeys '17': must be an integer from 1 to 16"),
            (&["1", "a", "NOPE", "1", "5", "1m"], "ERR unknown rule 'NOPE': a rule is FIXED, GCRA, MULTI, SLIDING or LOG followed by its key's position (COST and AT come after the rules)"),
            (&["1", "a", "LOG", "0", "5", "1m"], "ERR rule 1 (LOG): invalid key position '0': must be an integer from 1 to 1 (the keys' places after numkeys)"),
            (&["2", "a", "b", "LOG", "1", "5", "1m", "LOG", "1", "5", "1m"], "ERR rule 2 (LOG): key 1 is already named by rule 1: one rule per key"),
            (&["2", "a", "b", "LOG", "2", "5", "1m"], "ERR key 1 'a' is named by no rule: every key needs exactly one rule"),
            (&["1", "a", "GCRA", "1", "0", "1", "1s", "DELAY", "1s"], "ERR rule 1 (GCRA): DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)"),
            (&["1", "a", "FIXED", "1", "5", "1m", "BUCKETS", "2"], "ERR rule 1 (FIXED): option BUCKETS does not belong to this rule"),
            (&["1", "a", "FIXED", "1", "5", "1m", "COST", "9"], "ERR rule 1 (FIXED): cost 9 exceeds the limit 5: the request can never be allowed"),
            (&["1", "a", "AT", "1000000000005", "FIXED", "1", "5", "1m"], "ERR COST and AT come after every rule"),
        ];
        for (args, want) in cases {
            assert_eq!(
                parse(args).err().map(|e| e.to_string()).as_deref(),
                Some(*want),
                "{args:?}"
            );
        }
    }

    /// Keys as the server holds them, for the rules to read and the effects to write.
    #[derive(Clone, Debug, Default)]
    struct Keys {
        strings: Vec<Option<(Vec<u8>, Option<UnixMillis>)>>,
        logs: Vec<BTreeSet<(u64, Vec<u8>)>>,
    }

    struct LogView<'a>(&'a BTreeSet<(u64, Vec<u8>)>);

    impl LogView<'_> {
        fn entries(&self) -> impl DoubleEndedIterator<Item = Result<log::Entry>> + '_ {
            self.0
                .iter()
                .map(|(t, m)| log::parse_entry(m, *t as f64).ok_or_else(|| log::STATE.invalid()))
        }
    }

    impl log::Index for LogView<'_> {
        fn members(&self) -> usize {
            self.0.len()
        }
        fn last(&self) -> Result<Option<log::Entry>> {
            self.entries().next_back().transpose()
        }
        fn first_after(&self, after: Micros) -> Result<Option<log::Entry>> {
            self.entries()
                .find(|e| e.as_ref().map_or(true, |e| e.time > after))
                .transpose()
        }
        fn last_through(&self, through: Micros) -> Result<Option<log::Entry>> {
            self.entries()
                .rev()
                .find(|e| e.as_ref().map_or(true, |e| e.time <= through))
                .transpose()
        }
        fn scan_after(&self, after: Micros, f: &mut dyn FnMut(log::Entry) -> bool) -> Result<()> {
            for e in self.entries() {
                let e = e?;
                if e.time > after && !f(e) {
                    break;
                }
            }
            Ok(())
        }
    }

    /// Judge every rule of `call` at `now`: the judgements, or the first error.
    fn judge_all<'a>(
        call: &Call<Rule<'a>>,
        keys: &Keys,
        now: Micros,
    ) -> Vec<Judgement<Pending<'a>>> {
        call.rules
            .iter()
            .map(|(k, rule)| {
                let read = match rule.storage() {
                    Storage::String => match &keys.strings[*k] {
                        Some((value, expires_at)) => KeyRead::String {
                            value,
                            expires_at: *expires_at,
                        },
                        None => KeyRead::Missing,
                    },
                    Storage::SortedSet if keys.logs[*k].is_empty() => KeyRead::Missing,
                    Storage::SortedSet => KeyRead::SortedSet(&LogView(&keys.logs[*k])),
                };
                rule.judge(read, now, call.cost).expect("valid state")
            })
            .collect()
    }

    /// The keys after `effects` (one per rule, in rule order).
    fn apply(call: &Call<Rule>, keys: &mut Keys, effects: Vec<Effect<State>>) {
        for ((k, _), effect) in call.rules.iter().zip(effects) {
            match effect {
                Effect::None => {}
                Effect::ExpireAt(at) => {
                    if let Some((_, e)) = keys.strings[*k].as_mut() {
                        *e = Some(at);
                    }
                }
                Effect::Set { state, expires_at } => match state.value() {
                    Value::String(v) => {
                        let mut out = Vec::new();
                        v.encode(&mut out);
                        keys.strings[*k] = Some((out, Some(expires_at)));
                    }
                    Value::LogEntry(a) => {
                        let mut m = Vec::new();
                        a.member(&mut m);
                        keys.logs[*k].insert((a.time.0, m));
                        keys.logs[*k].retain(|(t, _)| *t > a.trim_through.0);
                    }
                },
            }
        }
    }

    /// The arguments of one random rule of each kind, on key position `pos`.
    fn rule_args(kind: usize, pos: usize, n: u64) -> Vec<String> {
        let p = (pos + 1).to_string();
        let l = (1 + n % 4).to_string();
        let v: Vec<&str> = match kind {
            0 => vec!["FIXED", &p, &l, "1s"],
            1 => vec!["GCRA", &p, &l, "2", "1s"],
            2 => vec!["MULTI", &p, "LIMIT", "1s", &l, "LIMIT", "10s", "6"],
            3 => vec!["SLIDING", &p, "LIMIT", "1s", &l, "BUCKETS", "4"],
            _ => vec!["LOG", &p, &l, "1s", "META", "m"],
        };
        v.into_iter().map(String::from).collect()
    }

    proptest! {
        /// A call of several kinds of rules: allowed iff every rule allows; the binding
        /// rule is the denying one with the largest retry_after (the first of equals),
        /// or the one with the least remaining (the first of equals); a denial writes
        /// nothing; and after the binding retry_after every rule allows the same call.
        #[test]
        fn the_call_is_all_or_nothing_and_retry_after_is_enough(
            kinds in proptest::collection::btree_set(0usize..5, 1..=5),
            limits in proptest::collection::vec(0u64..8, 5),
            steps in proptest::collection::vec((0u64..1_500, 0i64..2), 1..60),
        ) {
            let kinds: Vec<usize> = kinds.into_iter().collect();
            let n = kinds.len();
            let mut keys = Keys { strings: vec![None; n], logs: vec![BTreeSet::new(); n] };
            let mut now = 1_700_000_000_000_000u64;
            for (dt, cost) in steps {
                now += dt * 1_000;
                let mut args: Vec<String> = vec![n.to_string()];
                args.extend((0..n).map(|k| format!("k{k}")));
                for (pos, &kind) in kinds.iter().enumerate() {
                    args.extend(rule_args(kind, pos, limits[kind]));
                }
                args.extend(["COST".to_string(), cost.to_string()]);
                let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                let call = all(&raw).expect("valid call");
                let judged = judge_all(&call, &keys, Micros(now));
                let decided = decide(&judged).expect("rules");
                let every = judged.iter().all(|j| j.verdict.is_allowed());
                prop_assert_eq!(decided.settled == Settled::Allowed, every);
                let binding = &judged[decided.binding];
                if every {
                    let least = judged.iter().map(|j| j.verdict.remaining).min().unwrap();
                    prop_assert_eq!(binding.verdict.remaining, least);
                    prop_assert!(judged[..decided.binding].iter().all(|j| j.verdict.remaining > least));
                    let rules = call.rules.clone();
                    let effects = rules
                        .iter()
                        .zip(judged)
                        .map(|((_, r), j)| r.write(j.pending, Settled::Allowed, Micros(now), call.cost).expect("room"))
                        .collect();
                    apply(&call, &mut keys, effects);
                } else {
                    let retry = |j: &Judgement<_>| match j.verdict.decision {
                        Decision::Denied { retry_after } => Some(retry_after),
                        Decision::Allowed => None,
                    };
                    let most = judged.iter().filter_map(retry).max().unwrap();
                    prop_assert_eq!(retry(binding), Some(most));
                    prop_assert!(judged[..decided.binding].iter().all(|j| retry(j) < Some(most)));
                    // Nothing is written; at now + retry_after every rule allows.
                    let later = Micros(now + most.0);
                    let again = judge_all(&call, &keys, later);
                    prop_assert!(again.iter().all(|j| j.verdict.is_allowed()), "not all allowed after {most:?}");
                }
            }
        }
    }
}

/// What every call moves stays small: RL.SLIDING's buckets and RL.MULTI's windows
/// were once kept inline in the enums of any rule, so every command moved several
/// hundred bytes per judgement and write, and the single-key commands got a quarter
/// slower. They live on the heap now (a rule's LIMITs are shared between its keys).
#[cfg(test)]
mod sizes {
    use super::{Call, Pending, Rule, State};
    use crate::limiter::{Judgement, Limiter};
    use crate::{fixed, gcra, log, multi, sliding, Effect};
    use std::mem::size_of;

    fn small<L: Limiter>() {
        assert!(size_of::<L>() <= 48, "{}", L::KIND);
        assert!(size_of::<Judgement<L::Pending>>() <= 136, "{}", L::KIND);
        assert!(size_of::<Effect<L::State>>() <= 64, "{}", L::KIND);
    }

    #[test]
    fn single_key_commands_became_slower_when_every_call_moved_the_largest_limiter() {
        small::<fixed::Rule>();
        small::<gcra::Rule>();
        small::<multi::Rule>();
        small::<sliding::Rule>();
        small::<log::Rule>();
        assert!(size_of::<Judgement<Pending>>() <= 144);
        assert!(size_of::<Effect<State>>() <= 72);
        assert!(size_of::<Call<Rule>>() <= 128);
    }
}

//! Every limiter, listed once ([`limiters!`], from the files of this folder that
//! declare their kind: `core/build.rs` finds them), and the rule of any kind that list
//! makes (RL.ALL's rules, their keywords and their parser, [`all`]); CL.THROTTLE's
//! parser. Each limiter's command has its parser in its own file (`fixed::parse`).

pub mod throttle;
pub mod windows;

#[cfg(test)]
mod settle_tests;

use crate::call::keys::{KeyRead, Value, Written};
use crate::call::limiter::{Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Syntax};
use crate::call::state::Effect;
use crate::call::{Call, Shape};
use crate::error::{Error, Result};
use crate::limits::MAX_ALL_KEYS;
use crate::parse::args::{parse_int, AtOther, Options};
use crate::parse::keyword::{Opt, COST_AT, SETTLE};
use smallvec::SmallVec;

/// Every limiter, once: `Variant(its rule type)`, as `core/build.rs` lists them.
macro_rules! limiters {
    ($($variant:ident($rule:ty)),* $(,)?) => {
        /// A checked rule of any limiter.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum AnyRule<'a> {
            $($variant($rule),)*
        }

        /// What a rule of any limiter writes. Kept on the stack, one per key, whatever
        /// the size of the largest (RL.SLIDING's buckets): no allocation per call.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnyState<'a> {
            $($variant(<$rule as Limiter>::State),)*
        }

        /// What a rule of any limiter keeps between judging and writing (on the stack,
        /// as [`AnyState`]).
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnyPending<'a> {
            $($variant(<$rule as Limiter>::Pending),)*
        }

        $(
            impl<'a> From<$rule> for AnyRule<'a> {
                fn from(rule: $rule) -> AnyRule<'a> {
                    AnyRule::$variant(rule)
                }
            }
        )*

        /// A rule of any kind is judged by the rule of its kind.
        impl<'a> Limiter for AnyRule<'a> {
            type State = AnyState<'a>;
            type Pending = AnyPending<'a>;

            fn kind(&self) -> &'static Kind {
                match self {
                    $(AnyRule::$variant(r) => Limiter::kind(r),)*
                }
            }

            fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
                match self {
                    $(AnyRule::$variant(r) => Limiter::check_cost(r, cost, mode),)*
                }
            }

            fn judge(
                &self,
                key: KeyRead<'_>,
                req: &Request,
            ) -> Result<Judgement<AnyPending<'a>>> {
                match self {
                    $(AnyRule::$variant(r) => {
                        Limiter::judge(r, key, req).map(|j| j.map(AnyPending::$variant))
                    })*
                }
            }

            /// The write of a judgement once the call is decided (a judgement of
            /// another rule writes nothing).
            fn write(
                &self,
                pending: AnyPending<'a>,
                outcome: Outcome,
                req: &Request,
            ) -> std::result::Result<Effect<AnyState<'a>>, Full> {
                match (self, pending) {
                    $((AnyRule::$variant(r), AnyPending::$variant(p)) => {
                        Limiter::write(r, p, outcome, req).map(|e| e.map(AnyState::$variant))
                    })*
                    _ => Ok(Effect::None),
                }
            }
        }

        impl<'a> AnyRule<'a> {
            /// The options of the whole call this rule takes in RL.ALL (a set of bits).
            fn call_option_set(&self) -> u16 {
                match self {
                    $(AnyRule::$variant(_) => Opt::set(<$rule as Syntax>::CALL_OPTIONS),)*
                }
            }

            /// Take the call's options, read after every rule.
            fn call_options(&mut self, opts: &Options<'a>) -> Result<()> {
                match self {
                    $(AnyRule::$variant(r) => Syntax::call_options(r, opts),)*
                }
            }
        }

        impl Written for AnyState<'_> {
            fn value(&self) -> Value<'_> {
                match self {
                    $(AnyState::$variant(s) => s.value(),)*
                }
            }
        }

        /// How many kinds of limiters there are (RL.ALL's rule keywords).
        pub const KIND_COUNT: usize = [$(stringify!($variant)),*].len();

        /// Every limiter's kind, in the order of the limiters. (The lifetime names the
        /// rule types that borrow their arguments.)
        #[allow(clippy::extra_unused_lifetimes)]
        pub fn kinds<'a>() -> [&'static Kind; KIND_COUNT] {
            [$(<$rule as Syntax>::KIND),*]
        }

        /// Every limiter: its RL.ALL keyword and the command its state is named after
        /// (the command of its own).
        pub fn keywords() -> [(&'static str, &'static str); KIND_COUNT] {
            kinds().map(|k| (k.keyword, k.state.command))
        }

        /// RL.ALL's rule keyword `word` is, in its canonical spelling, if any. (The
        /// lifetime names the rule types that borrow their arguments.)
        #[allow(clippy::extra_unused_lifetimes)]
        fn kind_of<'a>(word: &[u8]) -> Option<&'static str> {
            [$(<$rule as Syntax>::KIND.keyword),*]
                .into_iter()
                .find(|k| word.eq_ignore_ascii_case(k.as_bytes()))
        }

        /// RL.ALL: the rule a keyword starts, read from the arguments after its key
        /// position; with how many arguments it took. `None`: not a rule keyword.
        fn parse_rule<'a>(kind: &[u8], args: &[&'a [u8]]) -> Option<Result<(AnyRule<'a>, usize)>> {
            $(
                if kind.eq_ignore_ascii_case(<$rule as Syntax>::KIND.keyword.as_bytes()) {
                    return Some(rule_syntax::<$rule>(args));
                }
            )*
            None
        }
    };
}

// Every limiter, found by core/build.rs: each file of this folder that declares its
// `KIND`, its module and its line in `limiters! { ... }`.
include!(concat!(env!("OUT_DIR"), "/limiters.rs"));

/// One rule of RL.ALL after its key position: its positional arguments and its own
/// options, up to the next rule (or `COST`, `AT`).
fn rule_syntax<'a, R>(args: &[&'a [u8]]) -> Result<(AnyRule<'a>, usize)>
where
    R: Syntax<'a> + Limiter + Into<AnyRule<'a>>,
{
    if args.len() < R::ARGS {
        return Err(Error::RuleArity {
            kind: R::KIND.keyword,
        });
    }
    let (positional, rest) = args.split_at(R::ARGS);
    let positional = R::parse_args(positional)?;
    let (opts, used) = Options::parse_prefix(rest, Opt::set(R::OPTIONS), AtOther::Stop)?;
    Ok((R::build(positional, &opts)?.into(), R::ARGS + used))
}

/// `CL.THROTTLE key max_burst count period [quantity]`: RL.GCRA's rule on the key, the
/// quantity as the cost (0 when above the capacity), the server's clock.
pub fn throttle(args: &[&[u8]]) -> Result<Call<gcra::Gcra>> {
    let Some((_key, rest)) = args.split_first() else {
        return Err(Error::WrongArity {
            command: crate::limiters::throttle::COMMAND,
        });
    };
    let t = crate::limiters::throttle::parse_args(rest)?;
    Ok(Call {
        command: crate::limiters::throttle::COMMAND,
        shape: Shape::Throttle {
            over_capacity: t.over_capacity,
        },
        numkeys: 1,
        rules: crate::call::one_rule(gcra::Gcra::from(t.params)),
        cost: t.params.cost(),
        at: None,
        mode: Mode::Take,
    })
}

/// The options of a whole RL.ALL call, after its rules: `COST`, `AT`, and those some
/// rules take from the call (`ID`, a LEASE rule's).
const CALL: [Opt; 3] = [Opt::Cost, Opt::At, Opt::Id];

/// `RL.ALL numkeys key [key ...] RULE [RULE ...] [COST n] [AT unix_ms] [ID id]`: one
/// rule per key, each naming its key by its 1-based position, the call's options after
/// the rules.
pub fn all<'a>(args: &[&'a [u8]]) -> Result<Call<AnyRule<'a>>> {
    all_as_given(args)
        .map_err(|e| windows::numkeys_hint(args, e, MAX_ALL_KEYS, |a| all_as_given(a).is_ok()))
}

fn all_as_given<'a>(args: &[&'a [u8]]) -> Result<Call<AnyRule<'a>>> {
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
    let (_, rest) = windows::parse_keys(args)?;
    let mut rules: crate::call::Rules<AnyRule<'a>> = SmallVec::new();
    let mut i = 0;
    let mut opts = Options::default();
    while let Some(word) = rest.get(i) {
        let index = rules.len() + 1;
        if Opt::named(word).is_some_and(|o| CALL.contains(&o) || SETTLE.contains(&o)) {
            let accepts = rules
                .iter()
                .fold(Opt::set(&COST_AT) | Opt::set(&SETTLE), |set, (_, r)| {
                    set | r.call_option_set()
                });
            opts = Options::parse(&rest[i..], accepts).map_err(|e| match e {
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
                .map_or((index, COMMAND), |(_, r)| (rules.len(), r.kind().keyword));
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
    // At most one penalty box per call.
    let mut bans = rules.iter().enumerate().filter(|(_, (_, r))| r.kind().gate);
    if let (Some(_), Some((i, (_, rule)))) = (bans.next(), bans.next()) {
        return Err(Error::InRule {
            index: i + 1,
            kind: rule.kind().keyword,
            inner: Box::new(Error::SecondBan),
        });
    }
    let mode = Mode::of(&opts)?;
    for (i, (_, rule)) in rules.iter_mut().enumerate() {
        let in_rule = |kind: &'static str, e: Error| Error::InRule {
            index: i + 1,
            kind,
            inner: Box::new(e),
        };
        rule.call_options(&opts)
            .map_err(|e| in_rule(rule.kind().keyword, e))?;
        rule.check_cost(opts.cost, mode)
            .map_err(|e| in_rule(rule.kind().keyword, e))?;
    }
    Ok(Call {
        command: COMMAND,
        shape: Shape::All,
        numkeys,
        rules,
        cost: opts.cost,
        at: opts.at,
        mode,
    })
}

fn is_rule_keyword(word: &[u8]) -> bool {
    kind_of(word).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_table_lists_every_rule_in_the_order_of_the_limiters() {
        let table: Vec<(&str, &str)> = crate::commands::RULES.to_vec();
        let listed: Vec<(&str, &str)> = kinds().iter().map(|k| (k.keyword, k.syntax)).collect();
        assert_eq!(table, listed);
    }
    use crate::call::memory::{self, Key};
    use crate::call::verdict::{Decision, Verdict};
    use crate::units::Micros;
    use proptest::prelude::*;

    fn parse(args: &[&'static str]) -> Result<Call<AnyRule<'static>>> {
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
        let kinds: Vec<(usize, &str)> = call
            .rules
            .iter()
            .map(|(k, r)| (*k, r.kind().keyword))
            .collect();
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
            (&["1", "a", "FIXED"], "ERR wrong number of arguments for 'RL.ALL' command (syntax: RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE|UPTO])"),
            (&["1", "a", "FIXED", "1", "5"], "ERR rule 1 (FIXED): wrong number of arguments for a FIXED rule (syntax: FIXED i limit window [ALIGN])"),
            (&["1", "a", "FIXED", "1", "1m", "5"], "ERR rule 1 (FIXED): invalid limit '1m': must be an integer from 1 to 9007199254740991 (RL.FIXED key limit window: the limit comes first)"),
            (&["1", "a", "FIXED", "1", "5", "1m", "COST", "1", "BUCKETS"], "ERR unknown option 'BUCKETS' (options here: COST, AT, REFUND, FORCE, UPTO)"),
            (&["17", "a", "FIXED", "1"], "ERR invalid numkeys '17': must be an integer from 1 to 16"),
            (&["1", "a", "NOPE", "1", "5", "1m"], "ERR unknown rule 'NOPE': a rule is BAN, FIXED, GCRA, LEASE, LOG, MULTI or SLIDING followed by its key's position (COST and AT come after the rules)"),
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

    /// The arguments of one random rule of each kind, on key position `pos`.
    fn rule_args(kind: usize, pos: usize, n: u64) -> Vec<String> {
        let p = (pos + 1).to_string();
        let l = (1 + n % 4).to_string();
        let v: Vec<&str> = match kind {
            0 => vec!["FIXED", &p, &l, "1s"],
            1 => vec!["GCRA", &p, &l, "2", "1s"],
            2 => vec!["MULTI", &p, "LIMIT", "1s", &l, "LIMIT", "10s", "6"],
            3 => vec!["SLIDING", &p, "LIMIT", "1s", &l, "BUCKETS", "4"],
            4 => vec!["LOG", &p, &l, "1s", "META", "m"],
            _ => vec!["LEASE", &p, &l, "1s"],
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
            kinds in proptest::collection::btree_set(0usize..6, 1..=6),
            limits in proptest::collection::vec(0u64..8, 6),
            steps in proptest::collection::vec((0u64..1_500, 0i64..2), 1..60),
        ) {
            let kinds: Vec<usize> = kinds.into_iter().collect();
            let n = kinds.len();
            let mut keys: Vec<Option<Key>> = vec![None; n];
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
                // Each rule judged alone, as its own command, on a copy of its key.
                let alone = |keys: &[Option<Key>], at: u64| -> Vec<Verdict> {
                    call.rules
                        .iter()
                        .map(|(k, rule)| {
                            let mut copy = vec![keys[*k].clone()];
                            memory::run(&Call::one(rule.clone(), call.cost), &mut copy, Micros(at))
                                .expect("valid state")
                                .verdict
                        })
                        .collect()
                };
                let judged = alone(&keys, now);
                let before = keys.clone();
                let ran = memory::run(&call, &mut keys, Micros(now)).expect("valid state");
                let every = judged.iter().all(|v| v.is_allowed());
                prop_assert_eq!(ran.outcome == Outcome::Allowed, every);
                prop_assert_eq!(ran.verdict, judged[ran.binding]);
                if every {
                    let least = judged.iter().map(|v| v.remaining).min().unwrap();
                    prop_assert_eq!(ran.verdict.remaining, least);
                    prop_assert!(judged[..ran.binding].iter().all(|v| v.remaining > least));
                } else {
                    let retry = |v: &Verdict| match v.decision {
                        Decision::Denied { retry_after } | Decision::Over { retry_after } => {
                            Some(retry_after)
                        }
                        Decision::Allowed => None,
                    };
                    let most = judged.iter().filter_map(retry).max().unwrap();
                    prop_assert_eq!(retry(&ran.verdict), Some(most));
                    prop_assert!(judged[..ran.binding].iter().all(|v| retry(v) < Some(most)));
                    // Nothing is written; at now + retry_after every rule allows.
                    prop_assert_eq!(&keys, &before);
                    let again = alone(&keys, now + most.0);
                    prop_assert!(again.iter().all(|v| v.is_allowed()), "not all allowed after {most:?}");
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
    use super::{fixed, gcra, lease, log, multi, sliding};
    use super::{AnyPending, AnyRule, AnyState, Call};
    use crate::call::limiter::{Judgement, Limiter};
    use crate::Effect;
    use std::mem::size_of;

    fn small<L: Limiter>() {
        assert!(size_of::<L>() <= 48, "{}", std::any::type_name::<L>());
        assert!(
            size_of::<Judgement<L::Pending>>() <= 192,
            "{}",
            std::any::type_name::<L>()
        );
        assert!(
            size_of::<Effect<L::State>>() <= 64,
            "{}",
            std::any::type_name::<L>()
        );
    }

    #[test]
    fn single_key_commands_became_slower_when_every_call_moved_the_largest_limiter() {
        small::<fixed::Fixed>();
        small::<gcra::Gcra>();
        small::<multi::Multi>();
        small::<sliding::Sliding>();
        small::<log::Log>();
        small::<lease::Lease>();
        assert!(size_of::<Judgement<AnyPending>>() <= 200);
        assert!(size_of::<Effect<AnyState>>() <= 72);
        // Two rules inline: a call of two keys (RL.MULTI's, RL.ALL's) does not allocate
        // its list of rules.
        assert!(size_of::<Call<AnyRule>>() <= 176);
    }
}

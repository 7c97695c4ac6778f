//! Bulk TTLs: `RL.BULKEXPIRE seconds key [key ...]` gives a TTL to those of
//! the named keys that have none; `RL.SWEEP cursor seconds [MATCH pattern] [COUNT n]
//! [TYPE type] [DRYRUN]` does the same for one bounded SCAN chunk of the keyspace.
//!
//! Both set the same absolute expiry on every key one call touches: the call's time
//! (in whole milliseconds, as `PEXPIRE` counts) plus the TTL.

use crate::error::{Error, Result};
use crate::parse::args::{once, parse_int};
use crate::parse::duration::parse_duration;
pub mod glob;
use crate::units::{Micros, UnixMillis};

use crate::limits::{MAX_PATTERN_LEN, SWEEP_DEFAULT_COUNT, SWEEP_MAX_COUNT};

/// The absolute expiry given at `now` for a TTL of `ttl`: the current millisecond plus
/// the TTL, as `PEXPIRE key ttl_ms` would set it.
pub fn expiry_at(now: Micros, ttl: Micros) -> UnixMillis {
    UnixMillis(now.floor_millis().saturating_add(ttl.floor_millis()))
}

/// `RL.BULKEXPIRE seconds key [key ...]` (arguments after the command name): the TTL,
/// checked; the keys are the rest. At least one key is required.
pub fn parse_bulkexpire(args: &[&[u8]]) -> Result<Micros> {
    let [seconds, _first_key, ..] = args else {
        return Err(Error::WrongArity {
            command: "RL.BULKEXPIRE",
        });
    };
    parse_duration("seconds", seconds).map_err(|e| match args.last() {
        // The keys first, the seconds last (the order FCALL gives the twin): say so.
        Some(last)
            if !seconds.first().is_some_and(u8::is_ascii_digit)
                && parse_duration("seconds", last).is_ok() =>
        {
            Error::SecondsFirst {
                value: seconds.to_vec(),
                seconds: last.to_vec(),
            }
        }
        _ => e,
    })
}

/// The value types a `TYPE` filter can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    String,
    List,
    Set,
    ZSet,
    Hash,
    Stream,
    /// A key of a type added by a module; `TYPE` shows that type's own name.
    Module,
}

/// The `TYPE` option of RL.SWEEP: one of the server's types, or any other name (a
/// module type's, compared with what `TYPE key` answers). Case-insensitive, as SCAN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeFilter {
    Core(KeyType),
    Named(Vec<u8>),
}

impl TypeFilter {
    pub fn parse(raw: &[u8]) -> TypeFilter {
        let core = [
            (&b"string"[..], KeyType::String),
            (b"list", KeyType::List),
            (b"set", KeyType::Set),
            (b"zset", KeyType::ZSet),
            (b"hash", KeyType::Hash),
            (b"stream", KeyType::Stream),
        ];
        core.iter()
            .find(|(name, _)| raw.eq_ignore_ascii_case(name))
            .map_or_else(
                || TypeFilter::Named(raw.to_vec()),
                |&(_, t)| TypeFilter::Core(t),
            )
    }

    /// Whether a key of type `t` passes. For a module type, `module_type_name` is asked
    /// for the type's name (only then, since it costs a lookup).
    pub fn accepts(&self, t: KeyType, module_type_name: impl FnOnce() -> Option<Vec<u8>>) -> bool {
        match (self, t) {
            (TypeFilter::Core(want), t) => *want == t,
            (TypeFilter::Named(want), KeyType::Module) => {
                module_type_name().is_some_and(|name| name.eq_ignore_ascii_case(want))
            }
            (TypeFilter::Named(_), _) => false,
        }
    }
}

/// The arguments of one RL.SWEEP call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepArgs {
    /// Where SCAN resumes; 0 starts a sweep.
    pub cursor: u64,
    pub ttl: Micros,
    /// `MATCH`; `None` when absent or `*` (which selects every key, as in SCAN).
    pub pattern: Option<Vec<u8>>,
    /// `COUNT`: the SCAN hint of how many keys to visit.
    pub count: u64,
    pub type_filter: Option<TypeFilter>,
    /// `DRYRUN`: count the keys that would get a TTL, change nothing.
    pub dry_run: bool,
}

impl SweepArgs {
    /// Whether a key name passes `MATCH` (the type is checked separately).
    pub fn name_matches(&self, key: &[u8]) -> bool {
        self.pattern
            .as_deref()
            .is_none_or(|p| glob::matches(p, key))
    }
}

/// Parse `RL.SWEEP cursor seconds [MATCH pattern] [COUNT n] [TYPE type] [DRYRUN]`
/// (arguments after the command name). Options are case-insensitive, each at most once.
pub fn parse_sweep(args: &[&[u8]]) -> Result<SweepArgs> {
    let [cursor, seconds, options @ ..] = args else {
        return Err(Error::WrongArity {
            command: "RL.SWEEP",
        });
    };
    let cursor = parse_cursor(cursor)?;
    let ttl = parse_duration("seconds", seconds)?;
    let mut out = SweepArgs {
        cursor,
        ttl,
        pattern: None,
        count: SWEEP_DEFAULT_COUNT,
        type_filter: None,
        dry_run: false,
    };
    let (mut seen_match, mut seen_count, mut seen_type, mut seen_dry) =
        (false, false, false, false);
    let mut i = 0;
    while let Some(word) = options.get(i) {
        let value = options.get(i + 1);
        let need = |name| value.copied().ok_or(Error::MissingOptionValue { name });
        if word.eq_ignore_ascii_case(b"MATCH") {
            once(&mut seen_match, "MATCH")?;
            let p = need("MATCH")?;
            // A lone `*` selects every key (the empty name too, as in SCAN); anything
            // else is matched with its runs of `*` collapsed, and bounded.
            if !glob::matches_everything(p) {
                let collapsed = glob::collapse_stars(p);
                if collapsed.len() > MAX_PATTERN_LEN {
                    return Err(Error::PatternTooLong {
                        len: collapsed.len(),
                    });
                }
                out.pattern = Some(collapsed);
            }
            i += 2;
        } else if word.eq_ignore_ascii_case(b"COUNT") {
            once(&mut seen_count, "COUNT")?;
            out.count = parse_count(need("COUNT")?)?;
            i += 2;
        } else if word.eq_ignore_ascii_case(b"TYPE") {
            once(&mut seen_type, "TYPE")?;
            out.type_filter = Some(TypeFilter::parse(need("TYPE")?));
            i += 2;
        } else if word.eq_ignore_ascii_case(b"DRYRUN") {
            once(&mut seen_dry, "DRYRUN")?;
            out.dry_run = true;
            i += 1;
        } else {
            return Err(Error::UnknownOption {
                value: word.to_vec(),
                accepted: 0,
            });
        }
    }
    Ok(out)
}

/// A SCAN cursor: an unsigned 64-bit decimal integer.
pub fn parse_cursor(raw: &[u8]) -> Result<u64> {
    let err = || Error::InvalidCursor {
        value: raw.to_vec(),
    };
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return Err(err());
    }
    raw.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(err)
    })
}

fn parse_count(raw: &[u8]) -> Result<u64> {
    let out_of_range = || Error::IntegerOutOfRange {
        what: "count",
        value: raw.to_vec(),
        min: 1,
        max: SWEEP_MAX_COUNT as i64,
    };
    let n = parse_int("count", raw, 1).map_err(|_| out_of_range())?;
    if n as u64 > SWEEP_MAX_COUNT {
        return Err(out_of_range());
    }
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DurationProblem;
    use proptest::prelude::*;

    fn sweep(args: &[&str]) -> Result<SweepArgs> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_sweep(&raw)
    }

    fn base(cursor: u64, ttl_ms: u64) -> SweepArgs {
        SweepArgs {
            cursor,
            ttl: Micros::from_millis(ttl_ms),
            pattern: None,
            count: SWEEP_DEFAULT_COUNT,
            type_filter: None,
            dry_run: false,
        }
    }

    #[test]
    fn expiry_counts_from_the_current_millisecond() {
        let cases: &[(u64, u64, u64)] = &[
            (1_700_000_000_123_456, 60_000, 1_700_000_060_123),
            (1_700_000_000_123_999, 1, 1_700_000_000_124),
            (0, 1_000, 1_000),
        ];
        for &(now_us, ttl_ms, want) in cases {
            assert_eq!(
                expiry_at(Micros(now_us), Micros::from_millis(ttl_ms)),
                UnixMillis(want)
            );
        }
    }

    #[test]
    fn bulkexpire_arguments() {
        let ok: &[(&[&str], u64)] = &[
            (&["60", "k"], 60_000),
            (&["1500ms", "a", "b", "a"], 1_500),
            (&["1d", "k"], 86_400_000),
        ];
        for &(args, ms) in ok {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            assert_eq!(
                parse_bulkexpire(&raw),
                Ok(Micros::from_millis(ms)),
                "{args:?}"
            );
        }
        let arity = Err(Error::WrongArity {
            command: "RL.BULKEXPIRE",
        });
        assert_eq!(parse_bulkexpire(&[]), arity);
        assert_eq!(parse_bulkexpire(&[b"60"]), arity);
        for (bad, reason) in [
            ("0", DurationProblem::NotPositive),
            ("-1", DurationProblem::NotPositive),
            ("1.5", DurationProblem::NotPositive),
            ("1w", DurationProblem::UnknownUnit),
            ("3651d", DurationProblem::TooLong),
        ] {
            assert_eq!(
                parse_bulkexpire(&[bad.as_bytes(), b"k"]),
                Err(Error::InvalidDuration {
                    what: "seconds",
                    value: bad.as_bytes().to_vec(),
                    reason
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn sweep_arguments() {
        assert_eq!(sweep(&["0", "60"]), Ok(base(0, 60_000)));
        assert_eq!(
            sweep(&["18446744073709551615", "1m"]),
            Ok(base(u64::MAX, 60_000))
        );
        assert_eq!(sweep(&["007", "1s"]), Ok(base(7, 1_000)));
        assert_eq!(
            sweep(&["5", "2h", "match", "app:*", "Count", "5000", "type", "HASH", "dryrun"]),
            Ok(SweepArgs {
                pattern: Some(b"app:*".to_vec()),
                count: 5_000,
                type_filter: Some(TypeFilter::Core(KeyType::Hash)),
                dry_run: true,
                ..base(5, 7_200_000)
            })
        );
        // A lone `*` is no pattern at all, as in SCAN.
        assert_eq!(sweep(&["0", "1", "MATCH", "*"]), Ok(base(0, 1_000)));
        assert_eq!(
            sweep(&["0", "1", "TYPE", "ReJSON-RL", "COUNT", "1"]),
            Ok(SweepArgs {
                count: 1,
                type_filter: Some(TypeFilter::Named(b"ReJSON-RL".to_vec())),
                ..base(0, 1_000)
            })
        );
    }

    #[test]
    fn sweep_errors() {
        use Error::*;
        let count_err = |v: &str| IntegerOutOfRange {
            what: "count",
            value: v.as_bytes().to_vec(),
            min: 1,
            max: 5_000,
        };
        let cases: &[(&[&str], Error)] = &[
            (
                &[],
                WrongArity {
                    command: "RL.SWEEP",
                },
            ),
            (
                &["0"],
                WrongArity {
                    command: "RL.SWEEP",
                },
            ),
            (
                &["-1", "1"],
                InvalidCursor {
                    value: b"-1".to_vec(),
                },
            ),
            (
                &["x", "1"],
                InvalidCursor {
                    value: b"x".to_vec(),
                },
            ),
            (&["", "1"], InvalidCursor { value: vec![] }),
            (
                &["18446744073709551616", "1"],
                InvalidCursor {
                    value: b"18446744073709551616".to_vec(),
                },
            ),
            (
                &["0", "0"],
                InvalidDuration {
                    what: "seconds",
                    value: b"0".to_vec(),
                    reason: DurationProblem::NotPositive,
                },
            ),
            (&["0", "1", "COUNT", "0"], count_err("0")),
            (&["0", "1", "COUNT", "5001"], count_err("5001")),
            (&["0", "1", "COUNT", "-5"], count_err("-5")),
            (&["0", "1", "COUNT", "many"], count_err("many")),
            (
                &["0", "1", "COUNT", "99999999999999999999"],
                count_err("99999999999999999999"),
            ),
            (&["0", "1", "COUNT"], MissingOptionValue { name: "COUNT" }),
            (&["0", "1", "MATCH"], MissingOptionValue { name: "MATCH" }),
            (&["0", "1", "TYPE"], MissingOptionValue { name: "TYPE" }),
            (
                &["0", "1", "MATCH", "a", "match", "b"],
                RepeatedOption { name: "MATCH" },
            ),
            (
                &["0", "1", "DRYRUN", "DryRun"],
                RepeatedOption { name: "DRYRUN" },
            ),
            (
                &["0", "1", "COUNT", "5", "COUNT", "5"],
                RepeatedOption { name: "COUNT" },
            ),
            (
                &["0", "1", "TYPE", "set", "TYPE", "set"],
                RepeatedOption { name: "TYPE" },
            ),
            (
                &["0", "1", "AT", "5"],
                UnknownOption {
                    value: b"AT".to_vec(),
                    accepted: 0,
                },
            ),
            (
                &["0", "1", "COUNT", "5", "7"],
                UnknownOption {
                    value: b"7".to_vec(),
                    accepted: 0,
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(sweep(args).as_ref(), Err(want), "{args:?}");
        }
    }

    #[test]
    fn match_patterns_are_collapsed_and_bounded() {
        let pattern = |p: &str| sweep(&["0", "60", "MATCH", p]).map(|s| s.pattern);
        let stars = "*".repeat(4_000_000);
        assert_eq!(pattern(&stars), Ok(Some(b"*".to_vec())));
        assert_eq!(
            pattern(&format!("app:{stars}:x")),
            Ok(Some(b"app:*:x".to_vec()))
        );
        let longest = "a".repeat(crate::limits::MAX_PATTERN_LEN);
        assert_eq!(pattern(&longest), Ok(Some(longest.clone().into_bytes())));
        assert_eq!(
            pattern(&format!("{longest}b")),
            Err(Error::PatternTooLong {
                len: crate::limits::MAX_PATTERN_LEN + 1
            })
        );
        assert_eq!(pattern("*"), Ok(None));
    }

    #[test]
    fn type_filter() {
        let none = || -> Option<Vec<u8>> { panic!("a core filter never asks the name") };
        assert!(TypeFilter::parse(b"String").accepts(KeyType::String, none));
        assert!(!TypeFilter::parse(b"string").accepts(KeyType::Hash, none));
        assert!(!TypeFilter::parse(b"zset").accepts(KeyType::Module, none));
        let json = TypeFilter::parse(b"rejson-rl");
        assert!(json.accepts(KeyType::Module, || Some(b"ReJSON-RL".to_vec())));
        assert!(!json.accepts(KeyType::Module, || Some(b"other".to_vec())));
        assert!(!json.accepts(KeyType::Module, || None));
        assert!(!json.accepts(KeyType::String, || Some(b"ReJSON-RL".to_vec())));
        assert!(!TypeFilter::parse(b"nosuchtype").accepts(KeyType::List, || None));
    }

    proptest! {
        #[test]
        fn any_u64_cursor_round_trips(n in any::<u64>()) {
            prop_assert_eq!(parse_cursor(n.to_string().as_bytes()), Ok(n));
        }

        #[test]
        fn sweep_parsing_never_panics(args in proptest::collection::vec(
            proptest::sample::select(vec![
                "0", "1", "60", "1h", "MATCH", "match", "COUNT", "TYPE", "DRYRUN", "5000",
                "5001", "-1", "", "x*", "hash", "18446744073709551616",
            ]),
            0..8,
        )) {
            let _ = sweep(&args);
        }

        #[test]
        fn counts_in_range_are_accepted(n in 1u64..=SWEEP_MAX_COUNT) {
            let s = n.to_string();
            prop_assert_eq!(sweep(&["0", "1", "COUNT", &s]).map(|a| a.count), Ok(n));
        }

        #[test]
        fn expiry_is_never_earlier_than_now_plus_ttl_minus_a_millisecond(
            now in 0u64..4_102_444_800_000_000, ttl_ms in 1u64..315_360_000_000
        ) {
            let e = expiry_at(Micros(now), Micros::from_millis(ttl_ms));
            prop_assert!(e.as_micros().0 + 1_000 > now + ttl_ms * 1_000);
            prop_assert!(e.as_micros().0 <= now + ttl_ms * 1_000);
        }
    }
}

//! Integer arguments and the options that follow a limiter's positional arguments, one
//! parser for all of them: `COST n`, `AT unix_ms`, and each command's own (`ALIGN`,
//! `DELAY max_delay`, `BUCKETS n`, `META value`, `LIMIT window limit`);
//! case-insensitive, each at most once but `LIMIT`.

use crate::error::{Error, Result};
use crate::limits::{
    MAX_AT_MS, MAX_BUCKETS, MAX_META_LEN, MAX_SAFE_INTEGER, MAX_WINDOWS, MIN_AT_MS,
};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::Opt;
use crate::units::Micros;
use smallvec::SmallVec;

/// Parse a count (a limit, a burst, a rate, a cost) written the way Redis writes
/// integers: an optional `-` and decimal digits, nothing else. It must be from `min` to
/// [`MAX_SAFE_INTEGER`] (2^53 - 1): every count, every sum of counts a state holds and
/// every reply field then stays exact in the Lua twins, whose numbers are doubles.
pub fn parse_int(what: &'static str, raw: &[u8], min: i64) -> Result<i64> {
    let err = || Error::InvalidInteger {
        what,
        value: raw.to_vec(),
        min,
    };
    let (negative, digits) = match raw {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, raw),
    };
    if digits.is_empty() {
        return Err(err());
    }
    // Leading zeros change nothing; 19 digits always fit in a u64.
    let zeros = digits.iter().take_while(|&&d| d == b'0').count();
    let significant = digits.get(zeros..).unwrap_or(&[]);
    if significant.len() > 19 {
        return Err(err());
    }
    let mut n: u64 = 0;
    for &b in significant {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(err());
        }
        n = n * 10 + u64::from(d);
    }
    let value = match (negative, i64::try_from(n)) {
        (false, Ok(v)) => v,
        (true, Ok(v)) => -v,
        (true, Err(_)) if n == 1 << 63 => i64::MIN,
        _ => return Err(err()),
    };
    if value < min || value > MAX_SAFE_COUNT {
        return Err(err());
    }
    Ok(value)
}

/// A count given as a number (by a caller that did not parse it): from `min` to
/// [`MAX_SAFE_INTEGER`], or the error [`parse_int`] gives for the same value.
#[inline]
pub fn check_count(what: &'static str, n: i64, min: i64) -> Result<i64> {
    if n < min || n > MAX_SAFE_COUNT {
        return Err(Error::InvalidInteger {
            what,
            value: n.to_string().into_bytes(),
            min,
        });
    }
    Ok(n)
}

/// [`MAX_SAFE_INTEGER`] as a count.
pub const MAX_SAFE_COUNT: i64 = MAX_SAFE_INTEGER as i64;

/// Parse the value of `AT`: Unix milliseconds from [`MIN_AT_MS`] to [`MAX_AT_MS`]; a
/// smaller time is refused as one in seconds.
pub fn parse_at(raw: &[u8]) -> Result<Micros> {
    match parse_int("AT", raw, 0) {
        Ok(ms) if (ms as u64) < MIN_AT_MS => Err(Error::AtInSeconds {
            value: raw.to_vec(),
        }),
        Ok(ms) if (ms as u64) <= MAX_AT_MS => Ok(Micros::from_millis(ms as u64)),
        _ => Err(Error::InvalidTime {
            value: raw.to_vec(),
        }),
    }
}

/// One `LIMIT window limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub window: Micros,
    pub limit: i64,
}

/// The LIMITs of one call (at most [`MAX_WINDOWS`]), inline for the usual few.
pub type Limits = SmallVec<[Limit; 4]>;

/// The options of one call (or one rule), as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options<'a> {
    /// `COST n`, default 1; 0 is a peek.
    pub cost: i64,
    pub at: Option<Micros>,
    pub align: bool,
    pub delay: Option<Micros>,
    pub buckets: Option<u64>,
    pub meta: Option<&'a [u8]>,
    /// The `LIMIT window limit` triples, in argument order.
    pub limits: Limits,
    /// `ID id`, as given (its checks are its limiter's).
    pub id: Option<&'a [u8]>,
    pub refund: bool,
    pub force: bool,
    /// `UPTO`: as much of `COST` as fits.
    pub upto: bool,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            cost: 1,
            at: None,
            align: false,
            delay: None,
            buckets: None,
            meta: None,
            limits: Limits::new(),
            id: None,
            refund: false,
            force: false,
            upto: false,
        }
    }
}

/// What to do at a word that is not an accepted option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtOther {
    /// It is an error (`unknown option`): a command's own arguments.
    Refuse,
    /// Stop there: a rule of RL.ALL, which the next rule or the call's options follow.
    Stop,
}

impl<'a> Options<'a> {
    /// Parse every argument in `args` as one of the options `accepts` (a set of
    /// [`Opt::bit`]s, as [`Opt::set`] makes it).
    pub fn parse(args: &[&'a [u8]], accepts: u16) -> Result<Options<'a>> {
        Options::parse_prefix(args, accepts, AtOther::Refuse).map(|(o, _)| o)
    }

    /// Parse the options `accepts` at the start of `args`, left to right, each value
    /// checked where it stands; at a word that is not one of them, refuse it or stop
    /// (`at_other`). The options and how many arguments they took.
    pub fn parse_prefix(
        args: &[&'a [u8]],
        accepts: u16,
        at_other: AtOther,
    ) -> Result<(Options<'a>, usize)> {
        let mut o = Options::default();
        let mut seen = 0u16;
        let mut i = 0;
        while let Some(word) = args.get(i) {
            let Some(opt) = Opt::named(word).filter(|o| accepts & o.bit() != 0) else {
                match at_other {
                    AtOther::Refuse => {
                        return Err(Error::UnknownOption {
                            value: word.to_vec(),
                            accepted: accepts,
                        })
                    }
                    AtOther::Stop => break,
                }
            };
            if opt != Opt::Limit {
                if seen & opt.bit() != 0 {
                    return Err(Error::RepeatedOption {
                        name: opt.keyword(),
                    });
                }
                seen |= opt.bit();
            }
            let value = args.get(i + 1);
            let need = || {
                value.copied().ok_or_else(|| Error::MissingOptionValue {
                    name: opt.keyword(),
                })
            };
            i += match opt {
                Opt::Cost => {
                    o.cost = parse_int("cost", need()?, 0)?;
                    2
                }
                Opt::At => {
                    o.at = Some(parse_at(need()?)?);
                    2
                }
                Opt::Align => {
                    o.align = true;
                    1
                }
                Opt::Delay => {
                    o.delay = Some(parse_duration("max_delay", need()?)?);
                    2
                }
                Opt::Buckets => {
                    let v = need()?;
                    match parse_int("BUCKETS", v, 1) {
                        Ok(n) if (n as u64) <= MAX_BUCKETS => o.buckets = Some(n as u64),
                        _ => return Err(Error::InvalidBuckets { value: v.to_vec() }),
                    }
                    2
                }
                Opt::Meta => {
                    let v = need()?;
                    if v.len() > MAX_META_LEN {
                        return Err(Error::MetaTooLong { len: v.len() });
                    }
                    o.meta = Some(v);
                    2
                }
                Opt::Limit => {
                    o.limits
                        .push(parse_limit(&o.limits, args.get(i + 1), args.get(i + 2))?);
                    3
                }
                Opt::Id => {
                    o.id = Some(need()?);
                    2
                }
                Opt::Refund => {
                    o.refund = true;
                    1
                }
                Opt::Force => {
                    o.force = true;
                    1
                }
                Opt::UpTo => {
                    o.upto = true;
                    1
                }
            };
        }
        Ok((o, i))
    }
}

/// One `LIMIT window limit` after those already read: at most [`MAX_WINDOWS`] of them,
/// both values present, no window twice (compared in milliseconds).
fn parse_limit(earlier: &[Limit], window: Option<&&[u8]>, limit: Option<&&[u8]>) -> Result<Limit> {
    if earlier.len() >= MAX_WINDOWS {
        return Err(Error::TooManyWindows);
    }
    let (Some(raw_window), Some(raw_limit)) = (window, limit) else {
        return Err(Error::IncompleteLimit);
    };
    let window = parse_duration("window", raw_window)?;
    let limit = parse_int("limit", raw_limit, 1)
        .map_err(|e| in_order(e, raw_limit, "LIMIT window limit: the window comes first"))?;
    if earlier.iter().any(|l| l.window == window) {
        return Err(Error::DuplicateWindow {
            value: raw_window.to_vec(),
            ms: window.floor_millis(),
        });
    }
    Ok(Limit { window, limit })
}

/// A count's error, with the order of the command's arguments when the count is
/// written as a duration (two arguments given in the wrong order).
pub fn in_order(e: Error, raw: &[u8], order: &'static str) -> Error {
    if crate::commands::looks_like_a_duration(raw) {
        Error::Order {
            inner: Box::new(e),
            order,
        }
    } else {
        e
    }
}

/// Mark the option `name` seen; an error if it already was.
pub(crate) fn once(seen: &mut bool, name: &'static str) -> Result<()> {
    if std::mem::replace(seen, true) {
        return Err(Error::RepeatedOption { name });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::keyword::COST_AT;

    const COST_AT_ALIGN: &[Opt] = &[Opt::Cost, Opt::At, Opt::Align];
    const COST_AT_DELAY: &[Opt] = &[Opt::Cost, Opt::At, Opt::Delay];

    fn opts(args: &[&'static str], accepts: &[Opt]) -> Result<Options<'static>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        Options::parse(&raw, Opt::set(accepts))
    }

    #[test]
    fn integers() {
        let ok: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("10", 1, 10),
            ("007", 0, 7),
            ("9007199254740991", 1, 9_007_199_254_740_991),
            ("-9007199254740991", i64::MIN, -9_007_199_254_740_991),
            ("-0", 0, 0),
        ];
        for &(raw, min, want) in ok {
            assert_eq!(parse_int("limit", raw.as_bytes(), min), Ok(want), "{raw}");
        }
        let bad: &[(&str, i64)] = &[
            ("", 0),
            ("-", 0),
            ("+1", 0),
            (" 1", 0),
            ("1 ", 0),
            ("1.0", 0),
            ("1e3", 0),
            ("0x10", 0),
            ("0", 1),
            ("-1", 0),
            ("9223372036854775808", 0),
            ("-9223372036854775809", i64::MIN),
            // Counts stop at 2^53 - 1, where the twins stop being exact.
            ("9007199254740992", 0),
            ("9223372036854775807", 1),
            ("99999999999999999999999", 0),
        ];
        for &(raw, min) in bad {
            assert_eq!(
                parse_int("limit", raw.as_bytes(), min),
                Err(Error::InvalidInteger {
                    what: "limit",
                    value: raw.as_bytes().to_vec(),
                    min
                }),
                "{raw}"
            );
        }
    }

    #[test]
    fn at_bounds() {
        assert_eq!(
            parse_at(b"1000000000000"),
            Ok(Micros(1_000_000_000_000_000))
        );
        // A time in seconds (and anything below 2001-09-09 in ms) says so.
        for secs in ["0", "1732480000", "999999999999", "0001732480000"] {
            assert_eq!(
                parse_at(secs.as_bytes()),
                Err(Error::AtInSeconds {
                    value: secs.as_bytes().to_vec()
                }),
                "{secs}"
            );
        }
        assert_eq!(
            parse_at(b"4102444800000"),
            Ok(Micros(4_102_444_800_000_000))
        );
        for bad in ["-1", "4102444800001", "", "x", "1.5"] {
            assert_eq!(
                parse_at(bad.as_bytes()),
                Err(Error::InvalidTime {
                    value: bad.as_bytes().to_vec()
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn options_defaults_and_case() {
        assert_eq!(opts(&[], &COST_AT), Ok(Options::default()));
        assert_eq!(
            opts(
                &["cost", "3", "Align", "aT", "1000000000001"],
                COST_AT_ALIGN
            ),
            Ok(Options {
                cost: 3,
                at: Some(Micros(1_000_000_000_001_000)),
                align: true,
                ..Options::default()
            })
        );
        assert_eq!(opts(&["COST", "0"], &COST_AT).map(|o| o.cost), Ok(0));
        assert_eq!(
            opts(&["delay", "1500ms", "COST", "2"], COST_AT_DELAY),
            Ok(Options {
                cost: 2,
                delay: Some(Micros(1_500_000)),
                ..Options::default()
            })
        );
    }

    #[test]
    fn option_errors() {
        use Error::*;
        let cases: &[(&[&str], &[Opt], Error)] = &[
            (
                &["ALIGN"],
                &COST_AT,
                UnknownOption {
                    value: b"ALIGN".to_vec(),
                    accepted: Opt::set(&COST_AT),
                },
            ),
            (
                &["FOO"],
                COST_AT_ALIGN,
                UnknownOption {
                    value: b"FOO".to_vec(),
                    accepted: Opt::set(COST_AT_ALIGN),
                },
            ),
            (&["COST"], &COST_AT, MissingOptionValue { name: "COST" }),
            (&["AT"], &COST_AT, MissingOptionValue { name: "AT" }),
            (
                &["DELAY", "1s"],
                &COST_AT,
                UnknownOption {
                    value: b"DELAY".to_vec(),
                    accepted: Opt::set(&COST_AT),
                },
            ),
            (
                &["DELAY"],
                COST_AT_DELAY,
                MissingOptionValue { name: "DELAY" },
            ),
            (
                &["DELAY", "1s", "delay", "2s"],
                COST_AT_DELAY,
                RepeatedOption { name: "DELAY" },
            ),
            (
                &["COST", "1", "cost", "2"],
                &COST_AT,
                RepeatedOption { name: "COST" },
            ),
            (
                &["ALIGN", "align"],
                COST_AT_ALIGN,
                RepeatedOption { name: "ALIGN" },
            ),
            (
                &["AT", "1000000000000", "AT", "1000000000000"],
                &COST_AT,
                RepeatedOption { name: "AT" },
            ),
            (
                &["COST", "-1"],
                &COST_AT,
                InvalidInteger {
                    what: "cost",
                    value: b"-1".to_vec(),
                    min: 0,
                },
            ),
            // The value of an option is never read as the next keyword.
            (
                &["COST", "ALIGN"],
                COST_AT_ALIGN,
                InvalidInteger {
                    what: "cost",
                    value: b"ALIGN".to_vec(),
                    min: 0,
                },
            ),
            (
                &["COST", "1", "2"],
                &COST_AT,
                UnknownOption {
                    value: b"2".to_vec(),
                    accepted: Opt::set(&COST_AT),
                },
            ),
        ];
        for (args, accepts, want) in cases {
            assert_eq!(opts(args, accepts).as_ref(), Err(want), "{args:?}");
        }
    }
}

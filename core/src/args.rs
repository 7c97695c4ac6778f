//! Integer arguments and the trailing options shared by the limiter commands:
//! `COST n`, `AT unix_ms`, (for fixed windows) `ALIGN` and (for GCRA) `DELAY
//! max_delay`; case-insensitive, each at most once.

use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::limits::{MAX_AT_MS, MAX_BUCKETS, MAX_SAFE_INTEGER};
use crate::units::Micros;

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
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(err());
    }
    let mut n: i64 = 0;
    for &d in digits {
        let d = i64::from(d - b'0');
        n = n.checked_mul(10).ok_or_else(err)?;
        n = if negative {
            n.checked_sub(d)
        } else {
            n.checked_add(d)
        }
        .ok_or_else(err)?;
    }
    if n < min || n > MAX_SAFE_COUNT {
        return Err(err());
    }
    Ok(n)
}

/// A count given as a number (by a caller that did not parse it): from `min` to
/// [`MAX_SAFE_INTEGER`], or the error [`parse_int`] gives for the same value.
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

/// Parse the value of `AT`: Unix milliseconds from 0 to [`MAX_AT_MS`].
pub fn parse_at(raw: &[u8]) -> Result<Micros> {
    match parse_int("AT", raw, 0) {
        Ok(ms) if (ms as u64) <= MAX_AT_MS => Ok(Micros::from_millis(ms as u64)),
        _ => Err(Error::InvalidTime {
            value: raw.to_vec(),
        }),
    }
}

/// Which options a command accepts besides `COST` and `AT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepts {
    CostAt,
    CostAtAlign,
    CostAtDelay,
    CostAtBuckets,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `COST n`, default 1; 0 is a peek.
    pub cost: i64,
    /// `AT unix_ms`: the time to judge the request at instead of the server clock.
    pub at: Option<Micros>,
    /// `ALIGN`: fixed windows aligned to the Unix epoch.
    pub align: bool,
    /// `DELAY max_delay`: book a request that fits within this delay (GCRA).
    pub delay: Option<Micros>,
    /// `BUCKETS n`: buckets per sliding window.
    pub buckets: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cost: 1,
            at: None,
            align: false,
            delay: None,
            buckets: None,
        }
    }
}

impl Options {
    /// Parse every argument in `args` as an option.
    pub fn parse(args: &[&[u8]], accepts: Accepts) -> Result<Options> {
        let mut opts = OptionParser::new(accepts);
        let mut i = 0;
        while i < args.len() {
            i += opts.take(args, i)?.ok_or_else(|| Error::UnknownOption {
                value: args[i].to_vec(),
            })?;
        }
        Ok(opts.finish())
    }
}

/// Option parsing one keyword at a time, for commands that mix options with keywords
/// of their own (RL.MULTI's `LIMIT`).
#[derive(Debug)]
pub struct OptionParser {
    accepts: Accepts,
    options: Options,
    seen_cost: bool,
    seen_at: bool,
    seen_align: bool,
    seen_delay: bool,
    seen_buckets: bool,
}

impl OptionParser {
    pub fn new(accepts: Accepts) -> Self {
        OptionParser {
            accepts,
            options: Options::default(),
            seen_cost: false,
            seen_at: false,
            seen_align: false,
            seen_delay: false,
            seen_buckets: false,
        }
    }

    /// Try to read one option at `args[i]`. Returns how many arguments it used, or
    /// `None` when `args[i]` is not one of the accepted options. `i` must be in range.
    pub fn take(&mut self, args: &[&[u8]], i: usize) -> Result<Option<usize>> {
        let Some(word) = args.get(i) else {
            return Ok(None);
        };
        let value = args.get(i + 1);
        if word.eq_ignore_ascii_case(b"COST") {
            once(&mut self.seen_cost, "COST")?;
            let v = value.ok_or(Error::MissingOptionValue { name: "COST" })?;
            self.options.cost = parse_int("cost", v, 0)?;
            Ok(Some(2))
        } else if word.eq_ignore_ascii_case(b"AT") {
            once(&mut self.seen_at, "AT")?;
            let v = value.ok_or(Error::MissingOptionValue { name: "AT" })?;
            self.options.at = Some(parse_at(v)?);
            Ok(Some(2))
        } else if word.eq_ignore_ascii_case(b"ALIGN") && self.accepts == Accepts::CostAtAlign {
            once(&mut self.seen_align, "ALIGN")?;
            self.options.align = true;
            Ok(Some(1))
        } else if word.eq_ignore_ascii_case(b"DELAY") && self.accepts == Accepts::CostAtDelay {
            once(&mut self.seen_delay, "DELAY")?;
            let v = value.ok_or(Error::MissingOptionValue { name: "DELAY" })?;
            self.options.delay = Some(parse_duration("max_delay", v)?);
            Ok(Some(2))
        } else if word.eq_ignore_ascii_case(b"BUCKETS") && self.accepts == Accepts::CostAtBuckets {
            once(&mut self.seen_buckets, "BUCKETS")?;
            let v = value.ok_or(Error::MissingOptionValue { name: "BUCKETS" })?;
            match parse_int("BUCKETS", v, 1) {
                Ok(n) if (n as u64) <= MAX_BUCKETS => self.options.buckets = Some(n as u64),
                _ => return Err(Error::InvalidBuckets { value: v.to_vec() }),
            }
            Ok(Some(2))
        } else {
            Ok(None)
        }
    }

    pub fn finish(self) -> Options {
        self.options
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

    fn opts(args: &[&str], accepts: Accepts) -> Result<Options> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        Options::parse(&raw, accepts)
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
        assert_eq!(parse_at(b"0"), Ok(Micros(0)));
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
        assert_eq!(opts(&[], Accepts::CostAt), Ok(Options::default()));
        assert_eq!(
            opts(&["cost", "3", "Align", "aT", "1000"], Accepts::CostAtAlign),
            Ok(Options {
                cost: 3,
                at: Some(Micros(1_000_000)),
                align: true,
                delay: None,
                buckets: None,
            })
        );
        assert_eq!(opts(&["COST", "0"], Accepts::CostAt).map(|o| o.cost), Ok(0));
        assert_eq!(
            opts(&["delay", "1500ms", "COST", "2"], Accepts::CostAtDelay),
            Ok(Options {
                cost: 2,
                at: None,
                align: false,
                delay: Some(Micros(1_500_000)),
                buckets: None,
            })
        );
    }

    #[test]
    fn option_errors() {
        use Error::*;
        let cases: &[(&[&str], Accepts, Error)] = &[
            (
                &["ALIGN"],
                Accepts::CostAt,
                UnknownOption {
                    value: b"ALIGN".to_vec(),
                },
            ),
            (
                &["FOO"],
                Accepts::CostAtAlign,
                UnknownOption {
                    value: b"FOO".to_vec(),
                },
            ),
            (
                &["COST"],
                Accepts::CostAt,
                MissingOptionValue { name: "COST" },
            ),
            (&["AT"], Accepts::CostAt, MissingOptionValue { name: "AT" }),
            (
                &["DELAY", "1s"],
                Accepts::CostAt,
                UnknownOption {
                    value: b"DELAY".to_vec(),
                },
            ),
            (
                &["DELAY"],
                Accepts::CostAtDelay,
                MissingOptionValue { name: "DELAY" },
            ),
            (
                &["DELAY", "1s", "delay", "2s"],
                Accepts::CostAtDelay,
                RepeatedOption { name: "DELAY" },
            ),
            (
                &["COST", "1", "cost", "2"],
                Accepts::CostAt,
                RepeatedOption { name: "COST" },
            ),
            (
                &["ALIGN", "align"],
                Accepts::CostAtAlign,
                RepeatedOption { name: "ALIGN" },
            ),
            (
                &["AT", "1", "AT", "1"],
                Accepts::CostAt,
                RepeatedOption { name: "AT" },
            ),
            (
                &["COST", "-1"],
                Accepts::CostAt,
                InvalidInteger {
                    what: "cost",
                    value: b"-1".to_vec(),
                    min: 0,
                },
            ),
            // The value of an option is never read as the next keyword.
            (
                &["COST", "ALIGN"],
                Accepts::CostAtAlign,
                InvalidInteger {
                    what: "cost",
                    value: b"ALIGN".to_vec(),
                    min: 0,
                },
            ),
            (
                &["COST", "1", "2"],
                Accepts::CostAt,
                UnknownOption {
                    value: b"2".to_vec(),
                },
            ),
        ];
        for (args, accepts, want) in cases {
            assert_eq!(opts(args, *accepts).as_ref(), Err(want), "{args:?}");
        }
    }
}

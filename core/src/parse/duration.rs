//! Duration arguments: a positive integer with an optional unit `ms`, `s`, `m`, `h` or
//! `d` (lower case); a bare integer is seconds, as in `EXPIRE`. At most 10 years.

use crate::error::{DurationProblem, Error, Result};
use crate::limits::MAX_DURATION;
use crate::units::{Micros, MICROS_PER_MS};

/// Parse a duration argument named `what` (used in the error message).
pub fn parse_duration(what: &'static str, raw: &[u8]) -> Result<Micros> {
    let err = |reason| Error::InvalidDuration {
        what,
        value: raw.to_vec(),
        reason,
    };
    let digits = raw.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, unit) = raw.split_at(digits);
    if number.is_empty() {
        return Err(err(DurationProblem::NotPositive));
    }
    let ms_per_unit: u64 = match unit {
        b"" | b"s" => 1_000,
        b"ms" => 1,
        b"m" => 60_000,
        b"h" => 3_600_000,
        b"d" => 86_400_000,
        _ if unit.iter().all(u8::is_ascii_alphabetic) => {
            return Err(err(DurationProblem::UnknownUnit))
        }
        // `1.5s`, `10 s`, `3e2`...
        _ => return Err(err(DurationProblem::NotPositive)),
    };
    // The number is all ASCII digits; only its size can be wrong. Anything with more
    // than 19 digits is far beyond ten years whatever the unit.
    let mut n: u64 = 0;
    for &d in number {
        n = match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
        {
            Some(n) => n,
            None => return Err(err(DurationProblem::TooLong)),
        };
    }
    if n == 0 {
        return Err(err(DurationProblem::NotPositive));
    }
    let micros = n
        .checked_mul(ms_per_unit)
        .and_then(|ms| ms.checked_mul(MICROS_PER_MS))
        .map(Micros)
        .ok_or_else(|| err(DurationProblem::TooLong))?;
    if micros > MAX_DURATION {
        return Err(err(DurationProblem::TooLong));
    }
    Ok(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_durations() {
        let cases: &[(&str, u64)] = &[
            ("90", 90_000),
            ("1500ms", 1_500),
            ("1ms", 1),
            ("1s", 1_000),
            ("1m", 60_000),
            ("24h", 86_400_000),
            ("7d", 7 * 86_400_000),
            ("010", 10_000),
            ("3650d", 3_650 * 86_400_000),
            ("315360000", 315_360_000_000),
        ];
        for &(raw, ms) in cases {
            assert_eq!(
                parse_duration("window", raw.as_bytes()),
                Ok(Micros::from_millis(ms)),
                "{raw}"
            );
        }
    }

    #[test]
    fn invalid_durations() {
        use DurationProblem::*;
        let cases: &[(&[u8], DurationProblem)] = &[
            (b"", NotPositive),
            (b"0", NotPositive),
            (b"0s", NotPositive),
            (b"000ms", NotPositive),
            (b"-1", NotPositive),
            (b"-1s", NotPositive),
            (b"+1", NotPositive),
            (b"1.5", NotPositive),
            (b"1.5s", NotPositive),
            (b" 1", NotPositive),
            (b"1 ", NotPositive),
            (b"s", NotPositive),
            (b"ms", NotPositive),
            (b"1e3", NotPositive),
            (b"1x", UnknownUnit),
            (b"1S", UnknownUnit),
            (b"1MS", UnknownUnit),
            (b"1sec", UnknownUnit),
            (b"1y", UnknownUnit),
            (b"1\0", NotPositive),
            (b"3651d", TooLong),
            (b"315360001", TooLong),
            (b"99999999999999999999999999", TooLong),
            (b"18446744073709551615d", TooLong),
        ];
        for &(raw, reason) in cases {
            assert_eq!(
                parse_duration("window", raw),
                Err(Error::InvalidDuration {
                    what: "window",
                    value: raw.to_vec(),
                    reason
                }),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}

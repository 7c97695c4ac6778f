//! The vocabulary every limiter shares: what a key held when the call started
//! ([`Stored`]), what a call writes back ([`Effect`]), how a state is encoded in its key
//! ([`Encode`]), and how a key with foreign content is reported ([`StateName`]).

use crate::call::verdict::Verdict;
use crate::error::Error;
use crate::units::{Micros, UnixMillis};

/// What a key held when the call started: its decoded state and its absolute expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored<S> {
    pub state: S,
    /// `None`: the key has no TTL (written from outside, or `PERSIST`ed).
    pub expires_at: Option<UnixMillis>,
}

/// What a decision writes back to one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect<S> {
    /// Nothing: a denial, a peek, or nothing to repair.
    None,
    /// Store `state` with this absolute expiry (`SET key value PXAT expires_at`).
    Set { state: S, expires_at: UnixMillis },
    /// Only give the existing key its missing expiry (`PEXPIREAT key expires_at`).
    ExpireAt(UnixMillis),
    /// Delete the key: its state is full again (a refund that gave everything back).
    Delete,
}

impl<S> Effect<S> {
    pub fn is_none(&self) -> bool {
        matches!(self, Effect::None)
    }

    /// The same effect with its state changed by `f`.
    pub fn map<T>(self, f: impl FnOnce(S) -> T) -> Effect<T> {
        match self {
            Effect::None => Effect::None,
            Effect::Set { state, expires_at } => Effect::Set {
                state: f(state),
                expires_at,
            },
            Effect::ExpireAt(at) => Effect::ExpireAt(at),
            Effect::Delete => Effect::Delete,
        }
    }
}

/// The decision on one request against one key, and its write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided<S> {
    pub verdict: Verdict,
    pub effect: Effect<S>,
}

/// The state a command keeps in its keys, as error replies name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateName {
    pub command: &'static str,
    /// What the key should hold, e.g. "a non-negative integer counter".
    pub expected: &'static str,
}

impl StateName {
    /// The error for a key of the right type whose content is not this state; commands
    /// with several keys name the key (see [`Error::for_key`]).
    pub const fn invalid(&self) -> Error {
        Error::InvalidState {
            command: self.command,
            expected: self.expected,
            key: None,
        }
    }
}

/// A state as its key's value holds it: the bytes a write stores, appended to `out`.
pub trait Encode {
    fn encode(&self, out: &mut Vec<u8>);
}

/// A counter, as `INCR` writes integers.
impl Encode for i64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
    }
}

/// An instant, as decimal microseconds since the Unix epoch.
impl Encode for Micros {
    fn encode(&self, out: &mut Vec<u8>) {
        push_decimal(out, self.0);
    }
}

/// Append the decimal digits of `n` (no allocation, no formatting machinery: this runs
/// on every write).
pub fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Read 1 to 19 decimal digits (nothing else) as a u64.
pub fn parse_decimal(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in raw {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        // 19 digits always fit in a u64.
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(v: impl Encode) -> String {
        let mut out = Vec::new();
        v.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn decimals_parse_as_written() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"007"), Some(7));
        assert_eq!(
            parse_decimal(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"1a",
            b"1 ",
            b"12345678901234567890",
            b"/",
            b":",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn integers_encode_as_redis_writes_them() {
        for n in [0i64, 7, 10, 42, -1, -10, i64::MAX, i64::MIN] {
            assert_eq!(encoded(n), n.to_string());
        }
        for n in [0u64, 9, 10, 1_700_000_000_123_456, u64::MAX] {
            assert_eq!(encoded(Micros(n)), n.to_string());
        }
    }
}

//! Time units. Everything inside the limiters is integer microseconds: instants are
//! microseconds since the Unix epoch, spans are microseconds. Replies and key expiry
//! times are milliseconds, always rounded up so that a client that waits the number it
//! was told never comes back too early.

use std::fmt;

/// A number of microseconds: an instant (since the Unix epoch) or a span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(pub u64);

pub const MICROS_PER_MS: u64 = 1_000;
pub const MICROS_PER_SEC: u64 = 1_000_000;

impl Micros {
    pub const ZERO: Micros = Micros(0);

    pub const fn from_millis(ms: u64) -> Micros {
        Micros(ms.saturating_mul(MICROS_PER_MS))
    }

    pub const fn from_secs(s: u64) -> Micros {
        Micros(s.saturating_mul(MICROS_PER_SEC))
    }

    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Whole milliseconds, rounded up (1 µs is 1 ms; 0 is 0).
    pub const fn ceil_millis(self) -> u64 {
        self.0.div_ceil(MICROS_PER_MS)
    }

    /// Whole milliseconds, rounded down.
    pub const fn floor_millis(self) -> u64 {
        self.0 / MICROS_PER_MS
    }

    /// `self - earlier`, or zero when `earlier` is not earlier.
    pub const fn saturating_since(self, earlier: Micros) -> Micros {
        Micros(self.0.saturating_sub(earlier.0))
    }

    pub fn checked_add(self, other: Micros) -> Option<Micros> {
        self.0.checked_add(other.0).map(Micros)
    }

    pub const fn saturating_add(self, other: Micros) -> Micros {
        Micros(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

/// An absolute key expiry in milliseconds since the Unix epoch, as Redis stores it
/// (`PEXPIRETIME`, `SET ... PXAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    /// The expiry that covers the instant `t`: `t` rounded up to the millisecond.
    pub const fn covering(t: Micros) -> UnixMillis {
        UnixMillis(t.ceil_millis())
    }

    pub const fn as_micros(self) -> Micros {
        Micros::from_millis(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_millis() {
        let cases = [
            (0, 0, 0),
            (1, 1, 0),
            (999, 1, 0),
            (1_000, 1, 1),
            (1_001, 2, 1),
        ];
        for (us, ceil, floor) in cases {
            assert_eq!(Micros(us).ceil_millis(), ceil, "ceil of {us}");
            assert_eq!(Micros(us).floor_millis(), floor, "floor of {us}");
        }
        assert_eq!(Micros(u64::MAX).ceil_millis(), u64::MAX / 1000 + 1);
    }

    #[test]
    fn covering_expiry_never_ends_before_the_instant() {
        for us in [0u64, 1, 999, 1000, 1_700_000_000_123_456] {
            let e = UnixMillis::covering(Micros(us));
            assert!(e.as_micros() >= Micros(us));
            assert!(e.as_micros().0 - us < 1000);
        }
    }

    #[test]
    fn saturating_since_is_zero_for_the_future() {
        assert_eq!(Micros(5).saturating_since(Micros(9)), Micros::ZERO);
        assert_eq!(Micros(9).saturating_since(Micros(5)), Micros(4));
    }
}

//! This machine's clock (the one the servers under test read), and the `AT` bases the
//! tests judge their calls at.

use std::time::{SystemTime, UNIX_EPOCH};

pub const SECOND: u64 = 1_000;
pub const MINUTE: u64 = 60 * SECOND;
pub const HOUR: u64 = 60 * MINUTE;

/// Milliseconds since the Unix epoch, from this machine's clock.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Microseconds since the Unix epoch, from this machine's clock (the servers' clock).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// An `AT` base in milliseconds: `ahead` from now, rounded down to a multiple of
/// `align` (so between `ahead - align` and `ahead` from now). Keys written at a base
/// ahead of the clock stay alive while the test runs, and an aligned base makes window
/// ends predictable: `at_base(HOUR, MINUTE)` is on a minute boundary about an hour
/// ahead, `at_base(2 * HOUR, HOUR)` on an hour boundary at least an hour ahead.
pub fn at_base(ahead: u64, align: u64) -> u64 {
    (unix_ms() + ahead) / align * align
}

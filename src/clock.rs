//! The server's wall clock (the clock behind `TIME`), read once per command.

use crate::register::config;
use ratelimit_core::{Error, Micros};

/// Microseconds since the Unix epoch, from `CLOCK_REALTIME` as `TIME` reads it.
pub fn wall_clock() -> Micros {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; CLOCK_REALTIME always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return Micros::ZERO;
    }
    Micros((ts.tv_sec as u64).saturating_mul(1_000_000) + (ts.tv_nsec as u64) / 1_000)
}

/// The time a request is judged at: `AT` when given, the wall clock otherwise. An `AT`
/// further from the wall clock than `ratelimit.at-tolerance` is an error.
pub fn request_time(at: Option<Micros>) -> Result<Micros, Error> {
    let Some(at) = at else {
        return Ok(wall_clock());
    };
    if let Some(tolerance) = config::at_tolerance() {
        let now = wall_clock();
        let off = at.saturating_since(now).max(now.saturating_since(at));
        if off > tolerance {
            return Err(Error::AtOutOfTolerance {
                value: at.floor_millis().to_string().into_bytes(),
                tolerance_ms: tolerance.floor_millis(),
            });
        }
    }
    Ok(at)
}

//! The server's wall clock (the clock behind `TIME`), read once per command.

use ratelimit_core::Micros;

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

/// The time a request is judged at: `AT` when given, the wall clock otherwise.
pub fn request_time(at: Option<Micros>) -> Micros {
    at.unwrap_or_else(wall_clock)
}

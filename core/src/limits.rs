//! Every numeric bound of the module, in one place. The Lua twins' Functions library
//! (`lua/ratelimit.lua`) mirrors each bound the twins need under the same name; a test
//! below checks that the two agree.
//!
//! Times in microseconds stay below 2^53 (see [`MAX_SAFE_INTEGER`]), so the twins,
//! whose numbers are doubles, compute exactly the same integers as the module.

use crate::units::{Micros, MICROS_PER_MS};

/// The largest integer a double holds exactly (2^53 - 1): every time, count and sum the
/// twins compute stays at or below it.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The earliest accepted `AT`: 10^12 ms, 2001-09-09T01:46:40Z. A smaller value is
/// almost surely a time in seconds, which would judge every call in 1970.
pub const MIN_AT_MS: u64 = 1_000_000_000_000;
/// The latest accepted `AT`: 2100-01-01T00:00:00Z, in Unix milliseconds.
pub const MAX_AT_MS: u64 = 4_102_444_800_000;

/// The longest duration argument (window, period, TTL): 3650 days, in milliseconds.
pub const MAX_DURATION_MS: u64 = 3_650 * 86_400_000;
/// [`MAX_DURATION_MS`] in microseconds.
pub const MAX_DURATION: Micros = Micros(MAX_DURATION_MS * MICROS_PER_MS);

/// RL.MULTI: at most this many keys per call.
pub const MAX_KEYS: usize = 64;
/// RL.ALL: at most this many keys (one rule each) per call.
pub const MAX_ALL_KEYS: usize = 16;
/// RL.MULTI: at most this many `LIMIT window limit` triples per call.
pub const MAX_WINDOWS: usize = 16;
/// RL.MULTI: at most this many windows in one key (windows a call does not name are
/// kept until they end, so calls with different windows add up): a write that would
/// keep more is refused, so a key's value, and what each write replicates, stay small.
pub const MAX_WINDOWS_PER_KEY: usize = 32;
/// RL.SLIDING: buckets per window, at most (`BUCKETS n`), and by default.
pub const MAX_BUCKETS: u64 = 100;
pub const DEFAULT_BUCKETS: u64 = 10;
/// RL.LOG: the largest `limit` (a log keeps one entry per allowed request: memory and
/// the work of a call grow with it).
pub const MAX_LOG_LIMIT: i64 = 10_000;
/// The most members (and the largest cost of one member) a log may hold: twice the
/// largest limit, as `FORCE` may fill a window to twice its limit.
pub const MAX_LOG_MEMBERS: usize = 2 * MAX_LOG_LIMIT as usize;
/// RL.LOG: the longest `META` value, in bytes.
pub const MAX_META_LEN: usize = 256;
/// RL.LEASE: the largest `limit` (leases held at once on one key: a key keeps one
/// member per lease, and a denial reads the earliest of them).
pub const MAX_LEASE_LIMIT: i64 = 10_000;
/// RL.LEASE, RL.RELEASE: the longest lease id, in bytes.
pub const MAX_ID_LEN: usize = 256;
/// RL.LOG: the most members that left the window one write removes (the oldest
/// first). The rest stay, uncounted, for the next writes (each removes up to this
/// many again) or the key's expiry: so a burst of entries leaving at once costs no
/// call more than this many removals (an RL.ALL call of 16 LOG rules, 16 times it).
pub const MAX_LOG_TRIM: usize = 64;
/// RL.MULTI: the largest `end_ms` accepted in stored state: the latest `AT` plus the
/// longest window, the latest end a call can write. A later one (written by hand) is
/// invalid state, not a window that would deny until then.
pub const MAX_END_MS: u64 = MAX_AT_MS + MAX_DURATION_MS;
/// The latest `AT` in microseconds: RL.LOG's latest entry time, the latest start of an
/// RL.SLIDING bucket a call writes into.
pub const MAX_AT_US: u64 = MAX_AT_MS * MICROS_PER_MS;
/// RL.SLIDING: the most buckets one key keeps, its windows' `BUCKETS` added up (with
/// [`MAX_WINDOWS_PER_KEY`] windows of [`MAX_BUCKETS`] a key would otherwise hold 3 200,
/// and a call of 64 keys read and write 204 800): a write that would keep more is
/// refused, so that the longest call stays within a few milliseconds.
pub const MAX_BUCKETS_PER_KEY: u64 = 1_000;

/// RL.GCRA: the longest burst window `T * (max_burst + 1)`, 18 250 days (50 years).
pub const MAX_BURST_WINDOW_US: u64 = 18_250 * 86_400 * 1_000_000;
/// [`MAX_BURST_WINDOW_US`] as a span.
pub const MAX_BURST_WINDOW: Micros = Micros(MAX_BURST_WINDOW_US);
/// RL.GCRA: the largest TAT accepted from a key, the latest `AT` plus the longest burst
/// window. Anything the limiter writes is at most this.
pub const MAX_TAT_US: u64 = MAX_AT_MS * MICROS_PER_MS + MAX_BURST_WINDOW_US;
/// [`MAX_TAT_US`] as an instant.
pub const MAX_TAT: Micros = Micros(MAX_TAT_US);
/// RL.GCRA: a stored TAT has at most this many digits (`MAX_TAT` has 16).
pub const MAX_TAT_DIGITS: usize = 16;

// The largest sum ever formed, the largest stored TAT plus the longest burst window, is
// exact in a double.
const _: () = assert!(MAX_TAT_US + MAX_BURST_WINDOW_US < MAX_SAFE_INTEGER);
const _: () = assert!(MAX_TAT_US < 10_u64.pow(MAX_TAT_DIGITS as u32));
// A window end is the latest AT plus the longest window: below 2^53 too.
const _: () = assert!(MAX_AT_MS + MAX_DURATION_MS <= MAX_END_MS);

/// RL.SWEEP: COUNT when none is given (about this many keys visited per call).
pub const SWEEP_DEFAULT_COUNT: u64 = 1_000;
/// RL.SWEEP: the largest COUNT, so that one call stays short.
pub const SWEEP_MAX_COUNT: u64 = 5_000;

/// RL.SWEEP: the longest MATCH pattern, in bytes (runs of `*` are collapsed first).
pub const MAX_PATTERN_LEN: usize = 1_024;

/// Glob patterns: the deepest `*` recursion the matcher follows before giving up (the
/// server's own guard against abusive patterns).
pub const GLOB_MAX_NESTING: u32 = 1_000;

/// Error replies quote at most this many bytes of a bad argument.
pub const ECHO_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// `local NAME = value` lines of the twins' Functions library.
    fn library_constants() -> Vec<(String, u64)> {
        include_str!("../../lua/ratelimit.lua")
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("local ")?;
                let (name, value) = rest.split_once(" = ")?;
                let value = value.split("--").next()?.trim();
                Some((name.trim().to_string(), value.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn lua_library_mirrors_every_limit_the_twins_use() {
        let want: &[(&str, u64)] = &[
            ("MAX_SAFE_INTEGER", MAX_SAFE_INTEGER),
            ("MIN_AT_MS", MIN_AT_MS),
            ("MAX_AT_MS", MAX_AT_MS),
            ("MAX_DURATION_MS", MAX_DURATION_MS),
            ("MAX_KEYS", MAX_KEYS as u64),
            ("MAX_ALL_KEYS", MAX_ALL_KEYS as u64),
            ("MAX_WINDOWS", MAX_WINDOWS as u64),
            ("MAX_WINDOWS_PER_KEY", MAX_WINDOWS_PER_KEY as u64),
            ("MAX_BUCKETS", MAX_BUCKETS),
            ("DEFAULT_BUCKETS", DEFAULT_BUCKETS),
            ("MAX_LOG_LIMIT", MAX_LOG_LIMIT as u64),
            ("MAX_META_LEN", MAX_META_LEN as u64),
            ("MAX_LEASE_LIMIT", MAX_LEASE_LIMIT as u64),
            ("MAX_ID_LEN", MAX_ID_LEN as u64),
            ("MAX_LOG_TRIM", MAX_LOG_TRIM as u64),
            ("MAX_AT_US", MAX_AT_US),
            ("MAX_BUCKETS_PER_KEY", MAX_BUCKETS_PER_KEY),
            ("MAX_END_MS", MAX_END_MS),
            ("MAX_BURST_WINDOW_US", MAX_BURST_WINDOW_US),
            ("MAX_TAT_US", MAX_TAT_US),
            ("MAX_TAT_DIGITS", MAX_TAT_DIGITS as u64),
            ("ECHO_MAX", ECHO_MAX as u64),
        ];
        let got = library_constants();
        for (name, value) in want {
            let found: Vec<u64> = got
                .iter()
                .filter(|(n, _)| n == name)
                .map(|&(_, v)| v)
                .collect();
            assert_eq!(
                found,
                [*value],
                "lua/ratelimit.lua must define `local {name} = {value}` exactly once"
            );
        }
    }
}

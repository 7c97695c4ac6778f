//! The one error type of the module. Its `Display` is the exact error reply a client
//! receives (one line, starting with the Redis error code), and the Lua twins produce
//! the same text.

use crate::limits::{
    ECHO_MAX, MAX_ALL_KEYS, MAX_AT_MS, MAX_BUCKETS, MAX_BUCKETS_PER_KEY, MAX_ID_LEN, MAX_KEYS,
    MAX_LEASE_LIMIT, MAX_LOG_LIMIT, MAX_META_LEN, MAX_PATTERN_LEN, MAX_SAFE_INTEGER, MAX_WINDOWS,
    MAX_WINDOWS_PER_KEY, MIN_AT_MS,
};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// `what` is the argument's name (`window`, `period`, `seconds`...).
    InvalidDuration {
        what: &'static str,
        value: Vec<u8>,
        reason: DurationProblem,
    },
    /// A count (limit, burst, rate, cost) that is not an integer from `min` to 2^53 - 1.
    InvalidInteger {
        what: &'static str,
        value: Vec<u8>,
        min: i64,
    },
    /// An integer argument with an upper bound of its own (RL.SWEEP's COUNT).
    IntegerOutOfRange {
        what: &'static str,
        value: Vec<u8>,
        min: i64,
        max: i64,
    },
    /// A SCAN cursor that is not an unsigned 64-bit integer.
    InvalidCursor {
        value: Vec<u8>,
    },
    /// The `AT` option's value is not a Unix time in milliseconds.
    InvalidTime {
        value: Vec<u8>,
    },
    /// An `AT` below 10^12 ms: almost surely a time in seconds.
    AtInSeconds {
        value: Vec<u8>,
    },
    /// A word where an option should be; `accepted`: the options of this call (a set
    /// of [`crate::parse::args::Opt`] bits, in their canonical order; 0: none listed).
    UnknownOption {
        value: Vec<u8>,
        accepted: u16,
    },
    /// A count given where a duration goes, or the other way round: the argument's
    /// error, then the order the command takes them in.
    Order {
        inner: Box<Error>,
        order: &'static str,
    },
    /// RL.ALL: a rule with too few arguments.
    RuleArity {
        kind: &'static str,
    },
    RepeatedOption {
        name: &'static str,
    },
    MissingOptionValue {
        name: &'static str,
    },
    /// A request that can never be allowed: its cost exceeds the capacity.
    CostOverCapacity {
        cost: i64,
        capacity: i64,
        what: &'static str,
    },
    /// GCRA: `period / count` is below one microsecond.
    RateTooHigh,
    /// GCRA: the burst window `T * (max_burst + 1)` is longer than 50 years.
    BurstTooLong,
    /// GCRA with DELAY: the burst window plus `max_delay` is longer than 50 years.
    DelayTooLong,
    /// RL.LOG: `limit` not an integer from 1 to [`MAX_LOG_LIMIT`].
    InvalidLogLimit {
        value: Vec<u8>,
    },
    /// RL.LEASE: `limit` not an integer from 1 to [`MAX_LEASE_LIMIT`].
    InvalidLeaseLimit {
        value: Vec<u8>,
    },
    /// RL.LEASE: a cost other than 1 (a lease) or 0 (a peek).
    LeaseCost {
        cost: i64,
    },
    /// RL.LEASE, RL.RELEASE: an id that is empty or longer than [`MAX_ID_LEN`] bytes.
    InvalidId {
        len: usize,
    },
    /// RL.LOG: a `META` value longer than [`MAX_META_LEN`] bytes.
    MetaTooLong {
        len: usize,
    },
    /// RL.SLIDING: `BUCKETS` not an integer from 1 to [`MAX_BUCKETS`].
    InvalidBuckets {
        value: Vec<u8>,
    },
    /// RL.SLIDING: a window that `BUCKETS` does not split into whole microseconds.
    UnevenBuckets {
        window_ms: u64,
        buckets: u64,
    },
    /// The key holds a value of the right type that is not state of this command
    /// (built by [`crate::call::state::StateName::invalid`]); `key` is named by commands with
    /// several keys.
    InvalidState {
        command: &'static str,
        expected: &'static str,
        key: Option<Vec<u8>>,
    },
    /// The key holds what can only be another limiter's state (RL.GCRA's time read by
    /// RL.FIXED, a counter read by RL.GCRA): `holds` says what.
    ForeignState {
        command: &'static str,
        holds: &'static str,
        key: Option<Vec<u8>>,
    },
    /// The key holds another Redis type.
    WrongType,
    /// Wrong number of arguments for the command (named as Redis names it).
    WrongArity {
        command: &'static str,
    },
    /// The ACL user of the calling client was deleted while it was connected.
    UnknownAclUser,
    /// The server refused an operation the module needed (never expected).
    Internal(&'static str),
    /// RL.MULTI: `numkeys` is not an integer from 1 to 64.
    InvalidNumKeys {
        value: Vec<u8>,
    },
    /// RL.MULTI: `numkeys` names more keys than there are arguments after it.
    NumKeysOverArgs {
        value: Vec<u8>,
        available: usize,
    },
    /// RL.MULTI, RL.SLIDING, RL.ALL: the call does not parse with its `numkeys`, but
    /// does with `meant` keys; `word` is the argument that shows it (the first argument
    /// after `meant` keys when `meant` is smaller, the first after `given` keys when
    /// larger).
    NumKeysMeant {
        given: usize,
        meant: usize,
        word: Vec<u8>,
    },
    /// RL.BULKEXPIRE with the keys first: the first argument is no duration, the last
    /// one is.
    SecondsFirst {
        value: Vec<u8>,
        seconds: Vec<u8>,
    },
    /// RL.GCRA with redis-cell's quantity as a fifth positional argument.
    QuantityPositional {
        value: Vec<u8>,
    },
    /// RL.MULTI: the same key named twice in one call.
    DuplicateKey {
        key: Vec<u8>,
    },
    /// RL.MULTI: no `LIMIT window limit` at all.
    MissingLimit,
    /// RL.MULTI: `LIMIT` without both its window and its limit.
    IncompleteLimit,
    /// RL.MULTI: two LIMITs with the same window (compared in milliseconds).
    DuplicateWindow {
        value: Vec<u8>,
        ms: u64,
    },
    /// RL.MULTI: more than [`MAX_WINDOWS`] LIMITs.
    TooManyWindows,
    /// A write would leave a key with more than [`MAX_WINDOWS_PER_KEY`] windows.
    KeyFull {
        key: Vec<u8>,
        command: &'static str,
    },
    /// RL.SWEEP: a MATCH pattern longer than [`MAX_PATTERN_LEN`] bytes.
    PatternTooLong {
        len: usize,
    },
    /// `AT` further from the server clock than the configured tolerance.
    AtOutOfTolerance {
        value: Vec<u8>,
        tolerance_ms: u64,
    },
    /// The caller's ACL user may not run the plain write command the call stands for
    /// (on servers that cannot put module commands in ACL categories).
    NoPermission {
        command: &'static str,
    },
    /// A write refused because the server is over `maxmemory` (the server's own text).
    OutOfMemory,
    /// RL.LOG: recording the call would number its units past 2^53 - 1.
    LogNumbersSpent,
    /// RL.ALL: an error of one of its rules (1-based, in the call's order), with the
    /// message the rule's own command gives.
    InRule {
        index: usize,
        kind: &'static str,
        inner: Box<Error>,
    },
    /// RL.ALL: `numkeys` is not an integer from 1 to [`MAX_ALL_KEYS`].
    InvalidAllNumKeys {
        value: Vec<u8>,
    },
    /// RL.ALL: a word where a rule (or `COST`, `AT`) should start.
    UnknownRule {
        value: Vec<u8>,
    },
    /// RL.ALL: a rule's key position is not an integer from 1 to numkeys.
    InvalidPosition {
        value: Vec<u8>,
        numkeys: usize,
    },
    /// RL.ALL: a key position named by an earlier rule too.
    PositionTaken {
        position: usize,
        by: usize,
    },
    /// RL.ALL: a key that no rule names.
    KeyWithoutRule {
        position: usize,
        key: Vec<u8>,
    },
    /// RL.ALL: a rule after `COST` or `AT`.
    RuleAfterOptions,
    /// RL.ALL: an option of another command or rule after a rule (`DELAY`, or `ALIGN`
    /// after a GCRA rule).
    OptionNotInRule {
        option: &'static str,
    },
    /// `REFUND` and `FORCE` in one call.
    RefundAndForce,
    /// `REFUND` or `FORCE` with `DELAY`.
    SettleWithDelay {
        flag: &'static str,
    },
    /// `UPTO` with `REFUND`, `FORCE` or `DELAY`.
    UptoWith {
        flag: &'static str,
    },
    /// `UPTO` with `COST 0`.
    UptoCostZero,
    /// `FORCE` would store a state past the bounds every reader accepts (`what`: a
    /// count above 2^53 - 1, a TAT beyond the latest AT plus the longest burst window).
    ForceOutOfBounds {
        what: &'static str,
    },
    /// RL.LOG: `FORCE` would leave the window holding more than twice the limit.
    LogForceOverTwice {
        limit: i64,
    },
    /// RL.ALL: a second BAN rule in one call.
    SecondBan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationProblem {
    /// Zero, negative, fractional, empty or not a number.
    NotPositive,
    UnknownUnit,
    TooLong,
}

/// Quote user input inside an error reply: printable ASCII is kept, anything else
/// (including NUL, CR and LF, which would break the reply) is written as `\xNN`, and
/// long values are cut.
pub fn echo(value: &[u8]) -> String {
    let mut out = String::new();
    for &b in value.iter().take(ECHO_MAX) {
        if (0x20..0x7f).contains(&b) && b != b'\\' && b != b'\'' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if value.len() > ECHO_MAX {
        out.push_str("...");
    }
    out
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidDuration {
                what,
                value,
                reason,
            } => {
                let v = echo(value);
                match reason {
                    DurationProblem::NotPositive => write!(
                        f,
                        "ERR invalid {what} '{v}': must be a positive duration (an integer with an optional unit ms, s, m, h or d)"
                    ),
                    DurationProblem::UnknownUnit => write!(
                        f,
                        "ERR invalid {what} '{v}': unknown unit (use ms, s, m, h or d)"
                    ),
                    DurationProblem::TooLong => {
                        write!(f, "ERR invalid {what} '{v}': must be at most 10 years (3650d)")
                    }
                }
            }
            Error::InvalidInteger { what, value, min } => write!(
                f,
                "ERR invalid {what} '{}': must be an integer from {min} to {MAX_SAFE_INTEGER}",
                echo(value)
            ),
            Error::IntegerOutOfRange {
                what,
                value,
                min,
                max,
            } => write!(
                f,
                "ERR invalid {what} '{}': must be an integer from {min} to {max}",
                echo(value)
            ),
            Error::InvalidCursor { value } => write!(
                f,
                "ERR invalid cursor '{}': must be an unsigned 64-bit integer (0 starts a sweep)",
                echo(value)
            ),
            Error::InvalidTime { value } => write!(
                f,
                "ERR invalid AT '{}': must be a Unix time in milliseconds from {MIN_AT_MS} to {MAX_AT_MS}",
                echo(value),
            ),
            Error::AtInSeconds { value } => write!(
                f,
                "ERR invalid AT '{}': AT takes a Unix time in milliseconds, from {MIN_AT_MS} (2001-09-09) to {MAX_AT_MS}; this looks like seconds",
                echo(value),
            ),
            Error::UnknownOption { value, accepted: 0 } => {
                write!(f, "ERR unknown option '{}'", echo(value))
            }
            Error::UnknownOption { value, accepted } => write!(
                f,
                "ERR unknown option '{}' (options here: {})",
                echo(value),
                crate::parse::keyword::Opt::list(*accepted)
            ),
            Error::Order { inner, order } => write!(f, "{inner} ({order})"),
            Error::RuleArity { kind } => match crate::commands::rule(kind) {
                Some(syntax) => write!(
                    f,
                    "ERR wrong number of arguments for a {kind} rule (syntax: {syntax})"
                ),
                None => write!(f, "ERR wrong number of arguments for a {kind} rule"),
            },
            Error::RepeatedOption { name } => write!(f, "ERR option {name} given more than once"),
            Error::MissingOptionValue { name } => write!(f, "ERR option {name} needs a value"),
            Error::CostOverCapacity {
                cost,
                capacity,
                what,
            } => write!(
                f,
                "ERR cost {cost} exceeds the {what} {capacity}: the request can never be allowed"
            ),
            Error::RateTooHigh => write!(
                f,
                "ERR invalid rate: period / count must be at least 1 microsecond"
            ),
            Error::BurstTooLong => write!(
                f,
                "ERR invalid burst: (max_burst + 1) * period / count must be at most 50 years (18250d)"
            ),
            Error::InvalidLogLimit { value } => write!(
                f,
                "ERR invalid limit '{}': must be an integer from 1 to {MAX_LOG_LIMIT}",
                echo(value)
            ),
            Error::InvalidLeaseLimit { value } => write!(
                f,
                "ERR invalid limit '{}': must be an integer from 1 to {MAX_LEASE_LIMIT} (leases held at once)",
                echo(value)
            ),
            Error::LeaseCost { cost } => write!(
                f,
                "ERR invalid cost {cost}: a lease takes COST 1 (the default) or COST 0 to peek"
            ),
            Error::InvalidId { len: 0 } => write!(
                f,
                "ERR invalid ID '': a lease id is 1 to {MAX_ID_LEN} bytes"
            ),
            Error::InvalidId { len } => write!(
                f,
                "ERR ID of {len} bytes: a lease id is 1 to {MAX_ID_LEN} bytes"
            ),
            Error::MetaTooLong { len } => write!(
                f,
                "ERR META of {len} bytes: at most {MAX_META_LEN} bytes"
            ),
            Error::InvalidBuckets { value } => write!(
                f,
                "ERR invalid BUCKETS '{}': must be an integer from 1 to {MAX_BUCKETS}",
                echo(value)
            ),
            Error::UnevenBuckets { window_ms, buckets } => write!(
                f,
                "ERR a window of {window_ms} ms does not split into {buckets} buckets of whole microseconds (choose BUCKETS dividing {window_ms}000)"
            ),
            Error::DelayTooLong => write!(
                f,
                "ERR invalid max_delay: (max_burst + 1) * period / count + max_delay must be at most 50 years (18250d)"
            ),
            Error::InvalidState {
                command,
                expected,
                key: None,
            } => write!(
                f,
                "ERR the key does not hold {command} state (expected {expected})"
            ),
            Error::InvalidState {
                command,
                expected,
                key: Some(key),
            } => write!(
                f,
                "ERR the key '{}' does not hold {command} state (expected {expected})",
                echo(key)
            ),
            Error::ForeignState {
                command,
                holds,
                key: None,
            } => write!(
                f,
                "ERR the key holds {holds}, not {command} state: each algorithm needs keys of its own"
            ),
            Error::ForeignState {
                command,
                holds,
                key: Some(key),
            } => write!(
                f,
                "ERR the key '{}' holds {holds}, not {command} state: each algorithm needs keys of its own",
                echo(key)
            ),
            Error::WrongType => write!(
                f,
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            ),
            Error::WrongArity { command } => match crate::commands::command(command) {
                Some(syntax) => write!(
                    f,
                    "ERR wrong number of arguments for '{command}' command (syntax: {syntax})"
                ),
                None => write!(f, "ERR wrong number of arguments for '{command}' command"),
            },
            Error::UnknownAclUser => write!(f, "ERR the current ACL user no longer exists"),
            Error::Internal(what) => write!(f, "ERR internal error: {what}"),
            Error::InvalidNumKeys { value } => write!(
                f,
                "ERR invalid numkeys '{}': must be an integer from 1 to {}",
                echo(value),
                MAX_KEYS
            ),
            Error::NumKeysOverArgs { value, available } => write!(
                f,
                "ERR invalid numkeys '{}': only {available} arguments follow it",
                echo(value)
            ),
            Error::NumKeysMeant {
                given,
                meant,
                word,
            } if meant < given => write!(
                f,
                "ERR numkeys is {given} but '{}' starts the arguments after {meant} key{}: did you mean numkeys {meant}?",
                echo(word),
                if *meant == 1 { "" } else { "s" }
            ),
            Error::NumKeysMeant {
                given, meant, word, ..
            } => write!(
                f,
                "ERR numkeys is {given} but '{}' reads as a key: did you mean numkeys {meant}?",
                echo(word)
            ),
            Error::SecondsFirst { value, seconds } => write!(
                f,
                "ERR invalid seconds '{}': the seconds come first, then the keys (RL.BULKEXPIRE seconds key [key ...]): did you mean RL.BULKEXPIRE {} ...?",
                echo(value),
                echo(seconds)
            ),
            Error::QuantityPositional { value } => write!(
                f,
                "ERR unknown option '{v}': RL.GCRA takes redis-cell's quantity as COST {v} (or call CL.THROTTLE, which takes it fifth)",
                v = echo(value)
            ),
            Error::DuplicateKey { key } => {
                write!(f, "ERR key '{}' given more than once", echo(key))
            }
            Error::MissingLimit => write!(f, "ERR at least one LIMIT window limit is needed"),
            Error::IncompleteLimit => write!(f, "ERR LIMIT needs a window and a limit"),
            Error::DuplicateWindow { value, ms } => write!(
                f,
                "ERR window '{}' given more than once ({ms} ms)",
                echo(value)
            ),
            Error::TooManyWindows => {
                write!(f, "ERR too many LIMITs: at most {MAX_WINDOWS} windows")
            }
            Error::KeyFull { key, command } if *command == "RL.SLIDING" => write!(
                f,
                "ERR the key '{}' would hold more than {MAX_WINDOWS_PER_KEY} windows or {MAX_BUCKETS_PER_KEY} buckets: {command} keeps at most {MAX_WINDOWS_PER_KEY} windows per key, their BUCKETS adding up to at most {MAX_BUCKETS_PER_KEY} (use fewer distinct windows or buckets, or other keys)",
                echo(key)
            ),
            Error::KeyFull { key, command } => write!(
                f,
                "ERR the key '{}' would hold more than {MAX_WINDOWS_PER_KEY} windows: {command} keeps at most {MAX_WINDOWS_PER_KEY} windows per key (use fewer distinct windows, or other keys)",
                echo(key)
            ),
            Error::PatternTooLong { len } => write!(
                f,
                "ERR invalid MATCH pattern of {len} bytes: at most {MAX_PATTERN_LEN} bytes"
            ),
            Error::AtOutOfTolerance {
                value,
                tolerance_ms,
            } => write!(
                f,
                "ERR invalid AT '{}': more than {tolerance_ms} ms from the server clock (ratelimit.at-tolerance)",
                echo(value)
            ),
            Error::NoPermission { command } => write!(
                f,
                "NOPERM this user has no permissions to run the '{}' command",
                command.to_ascii_lowercase()
            ),
            Error::OutOfMemory => write!(
                f,
                "OOM command not allowed when used memory > 'maxmemory'."
            ),
            Error::LogNumbersSpent => write!(
                f,
                "ERR the log has numbered {MAX_SAFE_INTEGER} units since it began: delete the key (or let it expire) to start a new log"
            ),
            Error::RefundAndForce => write!(
                f,
                "ERR REFUND and FORCE cannot be given together: a request is either given back or forced"
            ),
            Error::SettleWithDelay { flag } => write!(
                f,
                "ERR {flag} cannot be given with DELAY: a settled request is not booked"
            ),
            Error::UptoWith { flag } => write!(
                f,
                "ERR UPTO cannot be given with {flag}: UPTO takes as much of COST as fits now"
            ),
            Error::UptoCostZero => write!(
                f,
                "ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)"
            ),
            Error::ForceOutOfBounds { what } => write!(
                f,
                "ERR FORCE would store {what}: nothing was written"
            ),
            Error::LogForceOverTwice { limit } => write!(
                f,
                "ERR FORCE would leave the log holding more than twice its limit ({}): nothing was written",
                limit.saturating_mul(2)
            ),
            Error::SecondBan => write!(
                f,
                "ERR at most one BAN rule per call"
            ),
            Error::InRule { index, kind, inner } => {
                let text = inner.to_string();
                let text = text.strip_prefix("ERR ").unwrap_or(&text);
                write!(f, "ERR rule {index} ({kind}): {text}")
            }
            Error::InvalidAllNumKeys { value } => write!(
                f,
                "ERR invalid numkeys '{}': must be an integer from 1 to {MAX_ALL_KEYS}",
                echo(value)
            ),
            Error::UnknownRule { value } => {
                // RL.ALL's rules, in the order of the list of limiters (a test keeps it).
                let kinds: Vec<&str> = crate::commands::RULES.iter().map(|(kind, _)| *kind).collect();
                let (last, first) = kinds.split_last().unwrap_or((&"", &[]));
                write!(
                    f,
                    "ERR unknown rule '{}': a rule is {} or {last} followed by its key's position (COST and AT come after the rules)",
                    echo(value),
                    first.join(", ")
                )
            }
            Error::InvalidPosition { value, numkeys } => write!(
                f,
                "ERR invalid key position '{}': must be an integer from 1 to {numkeys} (the keys' places after numkeys)",
                echo(value)
            ),
            Error::PositionTaken { position, by } => write!(
                f,
                "ERR key {position} is already named by rule {by}: one rule per key"
            ),
            Error::KeyWithoutRule { position, key } => write!(
                f,
                "ERR key {position} '{}' is named by no rule: every key needs exactly one rule",
                echo(key)
            ),
            Error::RuleAfterOptions => write!(f, "ERR COST and AT come after every rule"),
            Error::OptionNotInRule { option: "DELAY" } => write!(
                f,
                "ERR DELAY is not accepted inside RL.ALL (book with RL.GCRA ... DELAY on its own)"
            ),
            Error::OptionNotInRule { option } => {
                write!(f, "ERR option {option} does not belong to this rule")
            }
        }
    }
}

impl Error {
    /// Name `key` in an invalid-state error (commands with several keys); any other
    /// error is returned as it is.
    pub fn for_key(self, key: &[u8]) -> Error {
        match self {
            Error::InvalidState {
                command, expected, ..
            } => Error::InvalidState {
                command,
                expected,
                key: Some(key.to_vec()),
            },
            Error::ForeignState { command, holds, .. } => Error::ForeignState {
                command,
                holds,
                key: Some(key.to_vec()),
            },
            other => other,
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_keeps_replies_on_one_line() {
        assert_eq!(echo(b"10s"), "10s");
        assert_eq!(echo(b"a\r\nb\0"), "a\\x0d\\x0ab\\x00");
        assert_eq!(echo(b"it's"), "it\\x27s");
        let long = vec![b'x'; 100];
        assert_eq!(echo(&long).len(), ECHO_MAX + 3);
    }

    #[test]
    fn documented_example_message() {
        let e = Error::InvalidDuration {
            what: "window",
            value: b"0s".to_vec(),
            reason: DurationProblem::NotPositive,
        };
        assert!(e
            .to_string()
            .starts_with("ERR invalid window '0s': must be a positive duration"));
    }

    #[test]
    fn every_message_is_one_line_with_an_error_code() {
        let all = [
            Error::InvalidInteger {
                what: "limit",
                value: b"\n".to_vec(),
                min: 1,
            },
            Error::InvalidTime {
                value: b"-1".to_vec(),
            },
            Error::AtInSeconds {
                value: b"1732480000".to_vec(),
            },
            Error::IntegerOutOfRange {
                what: "count",
                value: b"\r\n".to_vec(),
                min: 1,
                max: 10,
            },
            Error::InvalidCursor {
                value: b"\n".to_vec(),
            },
            Error::UnknownOption {
                value: b"\r\n".to_vec(),
                accepted: 3,
            },
            Error::Order {
                inner: Box::new(Error::InvalidInteger {
                    what: "limit",
                    value: b"1m".to_vec(),
                    min: 1,
                }),
                order: "LIMIT window limit: the window comes first",
            },
            Error::RuleArity { kind: "FIXED" },
            Error::RepeatedOption { name: "COST" },
            Error::MissingOptionValue { name: "AT" },
            Error::CostOverCapacity {
                cost: 5,
                capacity: 4,
                what: "limit",
            },
            Error::RateTooHigh,
            Error::BurstTooLong,
            Error::DelayTooLong,
            Error::InvalidBuckets {
                value: b"0".to_vec(),
            },
            Error::InvalidLogLimit {
                value: b"0".to_vec(),
            },
            Error::MetaTooLong { len: 300 },
            Error::InvalidLeaseLimit {
                value: b"\n".to_vec(),
            },
            Error::LeaseCost { cost: 2 },
            Error::InvalidId { len: 0 },
            Error::InvalidId { len: 257 },
            Error::UnevenBuckets {
                window_ms: 1,
                buckets: 7,
            },
            Error::InvalidState {
                command: "RL.FIXED",
                expected: "an integer counter",
                key: None,
            },
            Error::WrongType,
            Error::WrongArity {
                command: "RL.FIXED",
            },
            Error::UnknownAclUser,
            Error::Internal("x"),
            Error::InvalidNumKeys {
                value: b"\r\n".to_vec(),
            },
            Error::NumKeysOverArgs {
                value: b"9".to_vec(),
                available: 3,
            },
            Error::DuplicateKey {
                key: b"a\nb".to_vec(),
            },
            Error::NumKeysMeant {
                given: 2,
                meant: 1,
                word: b"\n".to_vec(),
            },
            Error::NumKeysMeant {
                given: 1,
                meant: 2,
                word: b"\r".to_vec(),
            },
            Error::SecondsFirst {
                value: b"\n".to_vec(),
                seconds: b"\r".to_vec(),
            },
            Error::QuantityPositional {
                value: b"\n".to_vec(),
            },
            Error::ForeignState {
                command: "RL.FIXED",
                holds: "RL.GCRA state",
                key: Some(b"\n".to_vec()),
            },
            Error::MissingLimit,
            Error::IncompleteLimit,
            Error::DuplicateWindow {
                value: b"1m".to_vec(),
                ms: 60_000,
            },
            Error::TooManyWindows,
            Error::KeyFull {
                key: b"k\n".to_vec(),
                command: "RL.MULTI",
            },
            Error::PatternTooLong { len: 5000 },
            Error::AtOutOfTolerance {
                value: b"\r".to_vec(),
                tolerance_ms: 1,
            },
            Error::NoPermission {
                command: "RL.FIXED",
            },
            Error::OutOfMemory,
            Error::LogNumbersSpent,
            Error::InRule {
                index: 2,
                kind: "GCRA",
                inner: Box::new(Error::InvalidPosition {
                    value: b"\n".to_vec(),
                    numkeys: 3,
                }),
            },
            Error::InRule {
                index: 1,
                kind: "FIXED",
                inner: Box::new(Error::PositionTaken { position: 1, by: 1 }),
            },
            Error::InRule {
                index: 1,
                kind: "GCRA",
                inner: Box::new(Error::OptionNotInRule { option: "DELAY" }),
            },
            Error::InvalidAllNumKeys {
                value: b"\r".to_vec(),
            },
            Error::UnknownRule {
                value: b"\r\n".to_vec(),
            },
            Error::KeyWithoutRule {
                position: 2,
                key: b"k\n".to_vec(),
            },
            Error::RuleAfterOptions,
            Error::RefundAndForce,
            Error::SettleWithDelay { flag: "FORCE" },
            Error::UptoWith { flag: "REFUND" },
            Error::UptoCostZero,
            Error::ForceOutOfBounds {
                what: "a count above 9007199254740991",
            },
            Error::LogForceOverTwice { limit: 5 },
            Error::SecondBan,
            Error::InvalidState {
                key: Some(b"k\r\n".to_vec()),
                command: "RL.MULTI",
                expected: "x",
            },
        ];
        for e in all {
            let s = e.to_string();
            assert!(
                !s.contains('\n') && !s.contains('\r') && !s.contains('\0'),
                "{s}"
            );
            let code = s.split(' ').next().unwrap_or("");
            assert!(["ERR", "WRONGTYPE", "NOPERM", "OOM"].contains(&code), "{s}");
        }
    }
}

//! What the commands with several keys and several windows share (RL.MULTI, and every
//! command of the same call shape): `numkeys key [key ...]`, `LIMIT window limit`
//! triples mixed with options, the key positions for servers that ask the command, and
//! the choice of the *binding* pair whose numbers the reply carries.

use crate::args::{parse_int, OptionParser};
use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::limits::{MAX_KEYS, MAX_WINDOWS};
use crate::state::Effect;
use crate::units::Micros;
use crate::verdict::{Decision, Verdict};
use smallvec::SmallVec;

/// `numkeys key [key ...]` at the start of `args` (the arguments after the command
/// name): the number of keys, checked (1 to [`MAX_KEYS`], no key twice), and the
/// arguments after the keys.
pub fn parse_keys<'a, 'b>(args: &'a [&'b [u8]]) -> Result<(usize, &'a [&'b [u8]])> {
    let Some((raw_numkeys, after)) = args.split_first() else {
        return Err(Error::InvalidNumKeys { value: Vec::new() });
    };
    let numkeys = match parse_int("numkeys", raw_numkeys, 1) {
        Ok(n) if n as u64 <= MAX_KEYS as u64 => n as usize,
        _ => {
            return Err(Error::InvalidNumKeys {
                value: raw_numkeys.to_vec(),
            })
        }
    };
    if numkeys > after.len() {
        return Err(Error::NumKeysOverArgs {
            value: raw_numkeys.to_vec(),
            available: after.len(),
        });
    }
    let (keys, rest) = after.split_at(numkeys);
    for (i, key) in keys.iter().enumerate() {
        if keys.iter().take(i).any(|earlier| earlier == key) {
            return Err(Error::DuplicateKey { key: key.to_vec() });
        }
    }
    Ok((numkeys, rest))
}

/// The LIMITs of one call (at most [`MAX_WINDOWS`]), inline for the usual few.
pub type Limits = SmallVec<[Limit; 4]>;

/// One effect per key of a call, inline for the usual one or two keys.
pub type Effects<S> = SmallVec<[Effect<S>; 2]>;

/// One `LIMIT window limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub window: Micros,
    pub limit: i64,
}

/// Read `LIMIT window limit` triples (1 to [`MAX_WINDOWS`], no window twice, compared
/// in milliseconds) and, between them, the options `opts` accepts; anything else is
/// an unknown option. The limits come back in argument order.
pub fn parse_limits(rest: &[&[u8]], opts: &mut OptionParser) -> Result<Limits> {
    let mut limits = Limits::new();
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        if word.eq_ignore_ascii_case(b"LIMIT") {
            if limits.len() >= MAX_WINDOWS {
                return Err(Error::TooManyWindows);
            }
            let (Some(raw_window), Some(raw_limit)) = (rest.get(i + 1), rest.get(i + 2)) else {
                return Err(Error::IncompleteLimit);
            };
            let window = parse_duration("window", raw_window)?;
            let limit = parse_int("limit", raw_limit, 1)?;
            if limits.iter().any(|l| l.window == window) {
                return Err(Error::DuplicateWindow {
                    value: raw_window.to_vec(),
                    ms: window.floor_millis(),
                });
            }
            limits.push(Limit { window, limit });
            i += 3;
        } else {
            i += opts.take(rest, i)?.ok_or_else(|| Error::UnknownOption {
                value: word.to_vec(),
            })?;
        }
    }
    if limits.is_empty() {
        return Err(Error::MissingLimit);
    }
    Ok(limits)
}

/// The checks every command with RL.MULTI's call shape makes of its keys and LIMITs:
/// 1 to [`MAX_KEYS`] keys, 1 to [`MAX_WINDOWS`] windows, no window twice.
pub fn check_shape(numkeys: usize, limits: &[Limit]) -> Result<()> {
    if numkeys == 0 || numkeys > MAX_KEYS {
        return Err(Error::InvalidNumKeys {
            value: numkeys.to_string().into_bytes(),
        });
    }
    if limits.is_empty() {
        return Err(Error::MissingLimit);
    }
    if limits.len() > MAX_WINDOWS {
        return Err(Error::TooManyWindows);
    }
    for (i, l) in limits.iter().enumerate() {
        if limits.iter().take(i).any(|e| e.window == l.window) {
            return Err(Error::DuplicateWindow {
                value: format!("{}ms", l.window.floor_millis()).into_bytes(),
                ms: l.window.floor_millis(),
            });
        }
    }
    Ok(())
}

/// A cost above the smallest limit can never be allowed: an error naming that limit.
pub fn check_cost(limits: &[Limit], cost: i64) -> Result<()> {
    match limits.iter().map(|l| l.limit).min() {
        Some(smallest) if cost > smallest => Err(Error::CostOverCapacity {
            cost,
            capacity: smallest,
            what: "limit",
        }),
        _ => Ok(()),
    }
}

/// Where the keys are among the arguments after the command name (`1..=numkeys`), for
/// servers that ask the command itself (Redis 7.0 routes Cluster calls that way);
/// `None` when `numkeys` is not valid, so no key is reported and the command's own
/// error follows.
pub fn key_positions(args: &[&[u8]]) -> Option<std::ops::RangeInclusive<usize>> {
    let raw = args.first()?;
    let n = usize::try_from(parse_int("numkeys", raw, 1).ok()?).ok()?;
    (n <= MAX_KEYS && n < args.len()).then_some(1..=n)
}

/// The pair whose numbers the reply carries (fields 2, 3 and 5, then 6 and 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Index into the call's keys.
    pub key: usize,
    pub window_ms: u64,
}

/// The decision on one request against several keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiOutcome<S> {
    pub verdict: Verdict,
    pub binding: Binding,
    /// One per key, in key order.
    pub effects: Effects<S>,
}

/// A write that would leave the key at this index (into the call's keys) with more
/// windows than a key may keep; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFull {
    pub key: usize,
}

impl KeyFull {
    /// The error reply, naming the key.
    pub fn error(self, name: &[u8], command: &'static str) -> Error {
        Error::KeyFull {
            key: name.to_vec(),
            command,
        }
    }
}

/// Picks the binding pair while the pairs are decided one by one, in key order and,
/// within a key, in LIMIT order: when any pair denies, the denying pair that frees up
/// last (the largest retry_after; ties keep the first); when all allow, the pair with
/// the least remaining (ties keep the first).
#[derive(Debug, Default)]
pub struct BindingChooser {
    denied: Option<(Micros, Verdict, Binding)>,
    least: Option<(Verdict, Binding)>,
}

impl BindingChooser {
    pub fn offer(&mut self, verdict: Verdict, binding: Binding) {
        match verdict.decision {
            Decision::Denied { retry_after } => {
                if self.denied.map_or(true, |(r, _, _)| retry_after > r) {
                    self.denied = Some((retry_after, verdict, binding));
                }
            }
            Decision::Allowed => {
                if self
                    .least
                    .map_or(true, |(v, _)| verdict.remaining < v.remaining)
                {
                    self.least = Some((verdict, binding));
                }
            }
        }
    }

    /// Whether some pair denied the request.
    pub fn is_denied(&self) -> bool {
        self.denied.is_some()
    }

    /// The binding verdict and pair; `fallback` when no pair was offered at all (a call
    /// always has at least one key and one window, so only a caller's mistake gets it).
    pub fn finish(self, fallback: (Verdict, Binding)) -> (Verdict, Binding) {
        match (self.denied, self.least) {
            (Some((_, v, b)), _) => (v, b),
            (None, Some(least)) => least,
            (None, None) => fallback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(remaining: i64) -> Verdict {
        Verdict {
            decision: Decision::Allowed,
            limit: 10,
            remaining,
            reset_after: Micros::ZERO,
        }
    }

    fn denied(retry_us: u64) -> Verdict {
        Verdict {
            decision: Decision::Denied {
                retry_after: Micros(retry_us),
            },
            limit: 10,
            remaining: 0,
            reset_after: Micros(retry_us),
        }
    }

    fn b(key: usize, window_ms: u64) -> Binding {
        Binding { key, window_ms }
    }

    #[test]
    fn binding_choice() {
        let fallback = (allowed(10), b(9, 9));
        let mut c = BindingChooser::default();
        c.offer(allowed(5), b(0, 1));
        c.offer(allowed(3), b(0, 2));
        c.offer(allowed(3), b(1, 1));
        assert!(!c.is_denied());
        assert_eq!(
            c.finish(fallback).1,
            b(0, 2),
            "least remaining, first on ties"
        );

        let mut c = BindingChooser::default();
        c.offer(allowed(0), b(0, 1));
        c.offer(denied(500), b(0, 2));
        c.offer(denied(900), b(1, 1));
        c.offer(denied(900), b(1, 2));
        assert!(c.is_denied());
        assert_eq!(
            c.finish(fallback).1,
            b(1, 1),
            "largest retry, first on ties"
        );

        assert_eq!(BindingChooser::default().finish(fallback), fallback);
    }
}

//! What the commands with several keys and several windows share (RL.MULTI, RL.SLIDING):
//! `numkeys key [key ...]` then `LIMIT window limit` triples mixed with options, the
//! key positions for servers that ask the command, and the write of a key of several
//! windows.

use crate::call::limiter::{Full, Mode, Outcome};
use crate::call::state::Effect;
use crate::error::{Error, Result};
use crate::limits::{MAX_BUCKETS_PER_KEY, MAX_KEYS, MAX_WINDOWS, MAX_WINDOWS_PER_KEY};
use crate::parse::args::{parse_int, Options};
pub use crate::parse::args::{Limit, Limits};
use crate::parse::keyword::{Opt, COST_AT, SETTLE};
use crate::units::{Micros, UnixMillis};
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

/// The error of a call with `numkeys` that does not parse (RL.MULTI, RL.SLIDING,
/// RL.ALL), made helpful when a wrong `numkeys` explains it: when `e` is an unknown
/// option or rule, no LIMIT, or a key without a rule, and the same arguments parse with
/// another number of keys (`parses`, tried at the nearest numbers first, fewer before
/// more, up to `max` and the arguments there are), the error says which. Only on the
/// error path. The twins do the same with FCALL's numkeys (`with_numkeys_hint` in
/// lua/ratelimit.lua).
pub fn numkeys_hint(
    args: &[&[u8]],
    e: Error,
    max: usize,
    parses: impl Fn(&[&[u8]]) -> bool,
) -> Error {
    if !matches!(
        e,
        Error::UnknownOption { .. }
            | Error::UnknownRule { .. }
            | Error::MissingLimit
            | Error::KeyWithoutRule { .. }
    ) {
        return e;
    }
    let Some(given) = args
        .first()
        .and_then(|raw| parse_int("numkeys", raw, 1).ok())
        .and_then(|n| usize::try_from(n).ok())
    else {
        return e;
    };
    let most = max.min(args.len().saturating_sub(1));
    for d in 1..=most {
        for meant in [given.checked_sub(d), given.checked_add(d)] {
            let Some(meant) = meant.filter(|m| (1..=most).contains(m)) else {
                continue;
            };
            let number = meant.to_string();
            let mut trial: Vec<&[u8]> = Vec::with_capacity(args.len());
            trial.push(number.as_bytes());
            trial.extend(args.iter().skip(1));
            if parses(&trial) {
                let at = if meant < given { meant } else { given };
                return Error::NumKeysMeant {
                    given,
                    meant,
                    word: args.get(at + 1).map_or_else(Vec::new, |w| w.to_vec()),
                };
            }
        }
    }
    e
}

/// One effect per key of a call, inline for the usual one or two keys.
pub type Effects<S> = SmallVec<[Effect<S>; 2]>;

/// The arguments of a command with RL.MULTI's call shape (after its name):
/// `numkeys key [key ...]`, then `LIMIT window limit` triples among `COST`, `AT` and
/// the command's own options (`own`, which include `LIMIT`), at least one LIMIT.
pub fn parse_call<'a>(
    args: &[&'a [u8]],
    command: &'static str,
    own: &[Opt],
) -> Result<(usize, Options<'a>, Mode)> {
    // numkeys, one key, LIMIT window limit.
    if args.len() < 5 {
        return Err(Error::WrongArity { command });
    }
    let (numkeys, rest) = parse_keys(args)?;
    let opts = Options::parse(rest, Opt::set(&COST_AT) | Opt::set(own) | Opt::set(&SETTLE))?;
    let mode = Mode::of(&opts)?;
    if opts.limits.is_empty() {
        return Err(Error::MissingLimit);
    }
    Ok((numkeys, opts, mode))
}

/// The checks every command with RL.MULTI's call shape makes of its keys and LIMITs:
/// 1 to [`MAX_KEYS`] keys, 1 to [`MAX_WINDOWS`] windows, no window twice.
pub fn check_shape(numkeys: usize, limits: &[Limit]) -> Result<()> {
    if numkeys == 0 || numkeys > MAX_KEYS {
        return Err(Error::InvalidNumKeys {
            value: numkeys.to_string().into_bytes(),
        });
    }
    check_limits(limits)
}

/// The LIMITs of one key's rule: 1 to [`MAX_WINDOWS`], no window twice.
pub fn check_limits(limits: &[Limit]) -> Result<()> {
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

/// One window of a key that keeps several (RL.MULTI's counter, RL.SLIDING's buckets).
pub trait WindowEntry {
    fn window_ms(&self) -> u64;
    /// The buckets the window keeps (RL.SLIDING's `BUCKETS`; 0 for a counter).
    fn buckets(&self) -> u64 {
        0
    }
    /// When the window stops counting anything (`None`: it counts nothing).
    fn ends_at(&self) -> Option<Micros>;
}

/// The write of a key of several windows, the same for RL.MULTI and RL.SLIDING: a peek
/// writes nothing; a denial consumes nothing, and by its own command gives a key that
/// lost its TTL the end of its last live window; an allowed request stores the named windows as `updated`
/// has them (those that still count) with the windows the call does not name
/// (`names`) kept while they have not ended, at most [`MAX_WINDOWS_PER_KEY`] (and
/// [`MAX_BUCKETS_PER_KEY`] buckets between them), as the
/// state `state` makes of them (sorted by window; `None`: nothing to store).
pub fn write_windows<E: WindowEntry + Clone, S>(
    stored: Option<(&[E], Option<UnixMillis>)>,
    updated: Vec<E>,
    names: impl Fn(u64) -> bool,
    (outcome, now, cost): (Outcome, Micros, i64),
    state: impl FnOnce(Vec<E>) -> Option<S>,
) -> std::result::Result<Effect<S>, Full> {
    let live = |e: &E| e.ends_at().filter(|&end| end > now);
    if cost == 0 {
        return Ok(Effect::None);
    }
    if outcome == (Outcome::Denied { repair: false }) {
        return Ok(Effect::None);
    }
    if outcome == (Outcome::Denied { repair: true }) {
        return Ok(match stored {
            Some((entries, None)) => entries
                .iter()
                .filter_map(live)
                .max()
                .map_or(Effect::None, |end| {
                    Effect::ExpireAt(UnixMillis::covering(end))
                }),
            _ => Effect::None,
        });
    }
    // The new state is made in the list of the named windows (no other allocation).
    let mut windows = updated;
    windows.retain(|e| e.ends_at().is_some());
    if let Some((entries, _)) = stored {
        // Windows this call does not name are kept while they have not ended.
        windows.extend(
            entries
                .iter()
                .filter(|e| !names(e.window_ms()) && live(e).is_some())
                .cloned(),
        );
    }
    if windows.len() > MAX_WINDOWS_PER_KEY
        || windows.iter().map(WindowEntry::buckets).sum::<u64>() > MAX_BUCKETS_PER_KEY
    {
        return Err(Full);
    }
    windows.sort_unstable_by_key(WindowEntry::window_ms);
    let Some(end) = windows.iter().filter_map(WindowEntry::ends_at).max() else {
        // Nothing left to keep (a refund gave everything back): the key goes.
        return Ok(if stored.is_some() {
            Effect::Delete
        } else {
            Effect::None
        });
    };
    Ok(state(windows).map_or(Effect::None, |state| Effect::Set {
        state,
        expires_at: UnixMillis::covering(end),
    }))
}

/// Calls of several keys on states held in memory, for the tests of RL.MULTI and
/// RL.SLIDING: the one loop of every call ([`crate::call::Call::run`]), its result per
/// key.
#[cfg(test)]
pub(crate) mod testing {
    use crate::call::limiter::Limiter;
    use crate::call::state::{Effect, Encode, Stored};
    use crate::call::verdict::Verdict;
    use crate::call::Call;
    use crate::error::Error;
    use crate::units::Micros;

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
        pub effects: Vec<Effect<S>>,
    }

    /// A write that would leave the key at this index with more windows than a key may
    /// keep; nothing is written.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct KeyFull {
        pub key: usize,
    }

    /// Settle `call` on keys that hold `stored[k]` (`None`: no key).
    pub fn decide<R: Limiter, T: Encode>(
        stored: &[Option<Stored<T>>],
        now: Micros,
        call: &Call<R>,
    ) -> Result<MultiOutcome<R::State>, KeyFull>
    where
        R::State: Clone,
    {
        match crate::call::memory::run_on(call, stored, now) {
            Ok(s) => Ok(MultiOutcome {
                verdict: s.verdict,
                binding: Binding {
                    key: call.rules.get(s.binding).map_or(0, |(k, _)| *k),
                    window_ms: s.window_ms,
                },
                effects: (0..call.rules.len()).map(|i| s.effect(i)).collect(),
            }),
            Err(Error::KeyFull { key, .. }) => Ok(KeyFull {
                key: String::from_utf8_lossy(&key).parse().unwrap_or(usize::MAX),
            })
            .and_then(Err),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

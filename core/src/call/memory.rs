//! Keys held in memory as a server holds them, for the tests, benches and models that
//! settle calls without a server: each key read as the module reads it, each effect
//! applied as the module applies it, and [`run`], the module's path of a call (read,
//! [`Call::settle`], write) on them.

use crate::call::limiter::{
    KeyRead, Limiter, SortedSet, Storage, Token, Value, Walk, Written, TOKEN_LEN,
};
use crate::call::state::Effect;
use crate::call::{Call, Settlement};
use crate::parse::error::Result;
use crate::units::{Micros, UnixMillis};
use smallvec::SmallVec;
use std::collections::BTreeSet;

/// A key's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// A string and its absolute expiry (`None`: no TTL).
    String {
        value: Vec<u8>,
        expires_at: Option<UnixMillis>,
    },
    /// A sorted set: (score, member), members unique; and its absolute expiry.
    SortedSet {
        members: BTreeSet<(u64, Vec<u8>)>,
        expires_at: Option<UnixMillis>,
    },
}

/// A sorted set as a limiter reads it.
pub struct Members<'a>(pub &'a BTreeSet<(u64, Vec<u8>)>);

impl SortedSet for Members<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn walk(&self, walk: Walk, f: &mut dyn FnMut(&[u8], f64) -> Result<bool>) -> Result<()> {
        match walk {
            Walk::After(after) => {
                for (score, member) in self.0.iter().filter(|(s, _)| *s > after.0) {
                    if !f(member, *score as f64)? {
                        break;
                    }
                }
            }
            Walk::Through(through) => {
                for (score, member) in self.0.iter().rev().filter(|(s, _)| *s <= through.0) {
                    if !f(member, *score as f64)? {
                        break;
                    }
                }
            }
            Walk::All => {
                for (score, member) in self.0.iter() {
                    if !f(member, *score as f64)? {
                        break;
                    }
                }
            }
            Walk::Down => {
                for (score, member) in self.0.iter().rev() {
                    if !f(member, *score as f64)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn count_through(&self, through: Micros) -> Result<usize> {
        Ok(self.0.range(..(through.0 + 1, Vec::new())).count())
    }

    fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        Ok(self
            .0
            .iter()
            .find(|(_, m)| m == member)
            .map(|(s, _)| *s as f64))
    }
}

/// What a key holds, as a rule that keeps `storage` reads it.
pub fn read<'a>(key: &'a Option<Key>, members: &'a Option<Members<'a>>) -> KeyRead<'a> {
    match (key, members) {
        (None, _) => KeyRead::Missing,
        (Some(Key::String { value, expires_at }), _) => KeyRead::String {
            value,
            expires_at: *expires_at,
        },
        (Some(Key::SortedSet { .. }), Some(m)) => KeyRead::SortedSet(m),
        (Some(Key::SortedSet { .. }), None) => KeyRead::Missing,
    }
}

/// Apply an effect to a key, as the module does (a key left empty is deleted).
pub fn apply<S: Written>(key: &mut Option<Key>, effect: &Effect<S>) {
    match effect {
        Effect::None => {}
        Effect::Delete => *key = None,
        Effect::ExpireAt(at) => match key {
            Some(Key::String { expires_at, .. }) | Some(Key::SortedSet { expires_at, .. }) => {
                *expires_at = Some(*at)
            }
            None => {}
        },
        Effect::Set { state, expires_at } => match state.value() {
            Value::String(v) => {
                let mut value = Vec::new();
                v.encode(&mut value);
                *key = Some(Key::String {
                    value,
                    expires_at: Some(*expires_at),
                });
            }
            Value::SortedSet(w) => {
                let mut members = match key.take() {
                    Some(Key::SortedSet { members, .. }) => members,
                    _ => BTreeSet::new(),
                };
                members.retain(|(_, m)| !w.remove.contains(m));
                if let Some((member, score)) = w.add {
                    let mut bytes = Vec::new();
                    member.encode(&mut bytes);
                    members.retain(|(_, m)| *m != bytes);
                    members.insert((score.0, bytes));
                }
                if let Some(through) = w.remove_through {
                    let leaving: Vec<(u64, Vec<u8>)> = members
                        .iter()
                        .take_while(|(s, _)| *s <= through.0)
                        .take(crate::limits::MAX_LOG_TRIM)
                        .cloned()
                        .collect();
                    for m in &leaving {
                        members.remove(m);
                    }
                }
                if let Some(through) = w.remove_expired {
                    members.retain(|(s, _)| *s > through.0);
                }
                *key = (!members.is_empty()).then_some(Key::SortedSet {
                    members,
                    expires_at: Some(*expires_at),
                });
            }
        },
    }
}

/// The module's path of a call on keys in memory: `keys[k]` is the call's key `k`;
/// every rule's key read, the call settled at `now`, its writes applied.
pub fn run<R: Limiter>(
    call: &Call<R>,
    keys: &mut [Option<Key>],
    now: Micros,
) -> Result<Settlement<R::State>> {
    let settlement = {
        let members: SmallVec<[Option<Members<'_>>; 4]> = call
            .rules
            .iter()
            .map(|(k, rule)| match (rule.storage(), keys.get(*k)) {
                (Storage::SortedSet, Some(Some(Key::SortedSet { members, .. }))) => {
                    Some(Members(members))
                }
                _ => None,
            })
            .collect();
        let reads: SmallVec<[KeyRead<'_>; 4]> = call
            .rules
            .iter()
            .zip(&members)
            .map(|((k, _), m)| match keys.get(*k) {
                Some(key) => read(key, m),
                None => KeyRead::Missing,
            })
            .collect();
        let names: SmallVec<[Vec<u8>; 4]> = call
            .rules
            .iter()
            .map(|(k, _)| k.to_string().into_bytes())
            .collect();
        let token = call.wants_token().then(next_token);
        call.settle_request(
            &call.request(now, token),
            |i| Ok(reads.get(i).copied().unwrap_or(KeyRead::Missing)),
            |i| names.get(i).map_or(&b""[..], Vec::as_slice),
        )?
    };
    for (i, effect) in &settlement.writes {
        if let Some(key) = call.rules.get(*i).and_then(|(k, _)| keys.get_mut(*k)) {
            apply(key, effect);
        }
    }
    Ok(settlement)
}

thread_local! {
    /// How many tokens [`next_token`] has made on this thread.
    static TOKENS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The name the glue would make for a call, made here from a count (`...0001`, then
/// `...0002`, ...), so that tests see every call's token and none twice.
pub fn next_token() -> Token {
    let n = TOKENS.with(|t| {
        t.set(t.get() + 1);
        t.get()
    });
    let digits = format!("{n:0width$x}", width = TOKEN_LEN);
    let mut token = [b'0'; TOKEN_LEN];
    for (t, d) in token.iter_mut().zip(
        digits
            .bytes()
            .rev()
            .take(TOKEN_LEN)
            .collect::<Vec<_>>()
            .into_iter()
            .rev(),
    ) {
        *t = d;
    }
    Token(token)
}

//! Keys held in memory as a server holds them, for the tests, benches and models that
//! run calls without a server: each key read as the module reads it, each effect
//! applied as the module applies it ([`InMemory`], the [`Keys`] of the one loop,
//! [`Call::run`]), and names made from a count ([`Counted`]).

use crate::call::keys::{KeyRead, Keys, SetOp, SortedSet, Value, Walk, Written};
use crate::call::limiter::{Limiter, Names, Storage, Token, TOKEN_LEN};
use crate::call::state::{Effect, Encode, Stored};
use crate::call::{Call, Resolution};
use crate::error::{Error, Result};
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
        members: Members,
        expires_at: Option<UnixMillis>,
    },
}

impl Key {
    /// A string key holding `stored`, encoded as its limiter writes it.
    pub fn of<T: Encode>(stored: &Stored<T>) -> Key {
        let mut value = Vec::new();
        stored.state.encode(&mut value);
        Key::String {
            value,
            expires_at: stored.expires_at,
        }
    }
}

/// A sorted set's members: (score, member), in score order.
pub type Members = BTreeSet<(u64, Vec<u8>)>;

/// A sorted set held in memory, read as a limiter reads one.
impl SortedSet for Members {
    fn len(&self) -> usize {
        BTreeSet::len(self)
    }

    fn walk(&self, walk: Walk, f: &mut dyn FnMut(&[u8], f64) -> Result<bool>) -> Result<()> {
        let all = self.iter();
        let visit: Box<dyn Iterator<Item = &(u64, Vec<u8>)>> = match walk {
            Walk::After(after) => Box::new(all.filter(move |(s, _)| *s > after.0)),
            Walk::Through(through) => Box::new(all.rev().filter(move |(s, _)| *s <= through.0)),
            Walk::All => Box::new(all),
            Walk::Down => Box::new(all.rev()),
        };
        for (score, member) in visit {
            if !f(member, *score as f64)? {
                break;
            }
        }
        Ok(())
    }

    fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        Ok(self
            .iter()
            .find(|(_, m)| m == member)
            .map(|(s, _)| *s as f64))
    }

    fn count_through(&self, through: Micros) -> Result<usize> {
        Ok(self.range(..(through.0 + 1, Vec::new())).count())
    }
}

/// What a key holds, as a rule that keeps `storage` reads it (a key of the other type
/// is `WRONGTYPE`, as the module opens it).
pub fn read(key: &Option<Key>, storage: Storage) -> Result<KeyRead<'_>> {
    Ok(match (key, storage) {
        (None, _) => KeyRead::Missing,
        (Some(Key::String { value, expires_at }), Storage::String) => KeyRead::String {
            value,
            expires_at: *expires_at,
        },
        (Some(Key::SortedSet { members, .. }), Storage::SortedSet) => KeyRead::SortedSet(members),
        _ => return Err(Error::WrongType),
    })
}

/// The keys of a call held in memory: `keys[k]` is the call's key `k`, named by its
/// index (`0`, `1`, ...) in errors.
pub struct InMemory<'k> {
    keys: &'k mut [Option<Key>],
    /// The key of each rule, and how the rule keeps it.
    rules: SmallVec<[(usize, Storage); 4]>,
    names: SmallVec<[Vec<u8>; 4]>,
}

impl<'k> InMemory<'k> {
    /// The keys of `call`, each named in errors by the name a server would have:
    /// `names[k]` is key `k`'s.
    pub fn named<R: Limiter>(
        call: &Call<R>,
        keys: &'k mut [Option<Key>],
        names: &[&[u8]],
    ) -> InMemory<'k> {
        let mut keys = InMemory::new(call, keys);
        for ((k, _), name) in keys.rules.iter().zip(keys.names.iter_mut()) {
            if let Some(n) = names.get(*k) {
                *name = n.to_vec();
            }
        }
        keys
    }

    pub fn new<R: Limiter>(call: &Call<R>, keys: &'k mut [Option<Key>]) -> InMemory<'k> {
        let rules: SmallVec<[(usize, Storage); 4]> = call
            .rules
            .iter()
            .map(|(k, rule)| (*k, rule.kind().storage))
            .collect();
        let names = rules
            .iter()
            .map(|(k, _)| k.to_string().into_bytes())
            .collect();
        InMemory { keys, rules, names }
    }
}

impl Keys for InMemory<'_> {
    fn read(&self, rule: usize) -> Result<KeyRead<'_>> {
        let (k, storage) = *self
            .rules
            .get(rule)
            .ok_or_else(|| Error::Internal("rule key"))?;
        match self.keys.get(k) {
            Some(key) => read(key, storage),
            None => Ok(KeyRead::Missing),
        }
    }

    fn name(&self, rule: usize) -> &[u8] {
        self.names.get(rule).map_or(&b""[..], Vec::as_slice)
    }

    fn check_memory(&self, _rule: usize) -> Result<()> {
        Ok(())
    }

    fn apply<S: Written>(&mut self, rule: usize, effect: &Effect<S>) -> Result<()> {
        let (k, _) = *self
            .rules
            .get(rule)
            .ok_or_else(|| Error::Internal("rule key"))?;
        let key = self
            .keys
            .get_mut(k)
            .ok_or_else(|| Error::Internal("rule key"))?;
        apply(key, effect);
        Ok(())
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
            Value::SortedSet(ops) => {
                let mut members = match key.take() {
                    Some(Key::SortedSet { members, .. }) => members,
                    _ => BTreeSet::new(),
                };
                for op in &ops {
                    apply_op(&mut members, op);
                }
                *key = (!members.is_empty()).then_some(Key::SortedSet {
                    members,
                    expires_at: Some(*expires_at),
                });
            }
        },
    }
}

/// One change to a sorted set's members.
fn apply_op(members: &mut Members, op: &SetOp<'_>) {
    match *op {
        SetOp::Add { member, score } => {
            let mut bytes = Vec::new();
            member.encode(&mut bytes);
            members.retain(|(_, m)| *m != bytes);
            members.insert((score, bytes));
        }
        SetOp::Remove(member) => members.retain(|(_, m)| m != member),
        SetOp::RemoveOldest { through, at_most } => {
            let leaving: Vec<(u64, Vec<u8>)> = members
                .iter()
                .take_while(|(s, _)| *s <= through)
                .take(at_most)
                .cloned()
                .collect();
            for m in &leaving {
                members.remove(m);
            }
        }
        SetOp::RemoveThrough { through, .. } => members.retain(|(s, _)| *s > through),
    }
}

/// The module's path of a call on keys in memory: `keys[k]` is the call's key `k`;
/// the call run at `now` by the one loop, names made by [`Counted`].
pub fn run<R: Limiter>(
    call: &Call<R>,
    keys: &mut [Option<Key>],
    now: Micros,
) -> Result<Resolution<R::State>> {
    call.run(&mut InMemory::new(call, keys), now, &Counted::default())
}

/// A call of one rule on string keys that hold `stored` (`None`: no key), each state
/// encoded as its key would hold it, at `now`: its resolution.
pub fn run_on<R: Limiter, T: Encode>(
    call: &Call<R>,
    stored: &[Option<Stored<T>>],
    now: Micros,
) -> Result<Resolution<R::State>> {
    let mut keys: Vec<Option<Key>> = stored.iter().map(|s| s.as_ref().map(Key::of)).collect();
    keys.resize(keys.len().max(call.numkeys), None);
    run(call, &mut keys, now)
}

/// Names made from a count (`...0001`, then `...0002`, ... on each thread), so that
/// tests see every call's name and none twice; one name for a whole call.
#[derive(Default)]
pub struct Counted(std::cell::Cell<Option<Token>>);

impl Names for Counted {
    fn token(&self) -> Result<Token> {
        if let Some(token) = self.0.get() {
            return Ok(token);
        }
        let token = next_token();
        self.0.set(Some(token));
        Ok(token)
    }
}

thread_local! {
    /// How many tokens [`next_token`] has made on this thread.
    static TOKENS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The next name of this thread's count.
pub fn next_token() -> Token {
    let n = TOKENS.with(|t| {
        t.set(t.get() + 1);
        t.get()
    });
    let digits = format!("{n:0width$x}", width = TOKEN_LEN);
    let mut token = [b'0'; TOKEN_LEN];
    for (t, d) in token
        .iter_mut()
        .zip(digits.bytes().skip(digits.len().saturating_sub(TOKEN_LEN)))
    {
        *t = d;
    }
    Token(token)
}

//! A limiter's key, whatever type its state is kept in: opened as its rule's kind says
//! (`WRONGTYPE` for another type), read for judging, and written with the effect the
//! call was decided on; and the keys of a call ([`CallKeys`]), as the one loop of every
//! limiter call sees them (`ratelimit_core::call::keys::Keys`).

use crate::argv::{Args, KeyName};
use crate::keys::sorted_set::SortedSetKey;
use crate::keys::string::StringKey;
use crate::propagate;
use ratelimit_core::call::keys::{KeyRead, Keys, Value, Written};
use ratelimit_core::call::limiter::{Limiter, Storage};
use ratelimit_core::call::Call;
use ratelimit_core::{Effect, Error};
use redis_module::Context;
use smallvec::SmallVec;

pub enum LimiterKey<'a> {
    String(StringKey<'a>),
    SortedSet(SortedSetKey<'a>),
}

impl<'a> LimiterKey<'a> {
    pub fn open(ctx: &'a Context, name: KeyName<'a>, storage: Storage) -> Result<Self, Error> {
        Ok(match storage {
            Storage::String => LimiterKey::String(StringKey::open(ctx, name)?),
            Storage::SortedSet => LimiterKey::SortedSet(SortedSetKey::open(ctx, name)?),
        })
    }

    /// What the key holds, for its rule to judge (before any write of the key).
    pub fn read(&self) -> Result<KeyRead<'_>, Error> {
        match self {
            LimiterKey::String(k) => k.read(),
            LimiterKey::SortedSet(k) if k.exists() => Ok(KeyRead::SortedSet(k)),
            LimiterKey::SortedSet(_) => Ok(KeyRead::Missing),
        }
    }

    /// Carry out an effect on this key.
    pub fn apply(&self, effect: &Effect<impl Written>) -> Result<(), Error> {
        match (self, effect) {
            (_, Effect::None) => Ok(()),
            (LimiterKey::String(k), Effect::Delete) => k.delete(),
            (LimiterKey::SortedSet(k), Effect::Delete) => k.delete(),
            (LimiterKey::String(k), Effect::ExpireAt(at)) => k.expire_at(*at),
            (LimiterKey::String(k), Effect::Set { state, expires_at }) => match state.value() {
                Value::String(value) => k.store(value, *expires_at),
                Value::SortedSet(_) => Err(Error::Internal("a sorted set write for a string key")),
            },
            (LimiterKey::SortedSet(k), Effect::Set { state, expires_at }) => match state.value() {
                Value::SortedSet(ops) => k.write(&ops, *expires_at),
                Value::String(_) => Err(Error::Internal("a string for a sorted-set key")),
            },
            (LimiterKey::SortedSet(_), Effect::ExpireAt(_)) => {
                Err(Error::Internal("a lone expiry for a sorted set"))
            }
        }
    }
}

/// The keys of one limiter call, one per rule, each opened as its rule keeps it.
pub struct CallKeys<'a> {
    ctx: &'a Context,
    keys: SmallVec<[(KeyName<'a>, LimiterKey<'a>); 4]>,
}

impl<'a> CallKeys<'a> {
    /// No keys yet: [`CallKeys::open`] opens them, in place (the keys of a call are
    /// not small, and are not moved).
    pub fn new(ctx: &'a Context) -> CallKeys<'a> {
        CallKeys {
            ctx,
            keys: SmallVec::new(),
        }
    }

    /// Open the key of every rule of `call` among `args`, in the rules' order (a wrong
    /// type is found before any state is read).
    pub fn open<'b: 'a, R: Limiter>(
        &mut self,
        args: &Args<'b>,
        call: &Call<R>,
    ) -> Result<(), Error> {
        let first = call.first_key();
        for (i, (k, rule)) in call.rules.iter().enumerate() {
            let name = args
                .key(first + k)
                .ok_or_else(|| Error::Internal("rule key"))?;
            let key = LimiterKey::open(self.ctx, name, rule.kind().storage)
                .map_err(|e| call.rule_error(i, name.bytes(), e))?;
            self.keys.push((name, key));
        }
        Ok(())
    }

    /// The name of the key of rule `rule`.
    pub fn key_name(&self, rule: usize) -> Result<KeyName<'a>, Error> {
        self.keys
            .get(rule)
            .map(|(name, _)| *name)
            .ok_or_else(|| Error::Internal("rule key"))
    }

    fn key(&self, rule: usize) -> Result<&LimiterKey<'a>, Error> {
        self.keys
            .get(rule)
            .map(|(_, key)| key)
            .ok_or_else(|| Error::Internal("rule key"))
    }
}

impl Keys for CallKeys<'_> {
    fn read(&self, rule: usize) -> Result<KeyRead<'_>, Error> {
        self.key(rule)?.read()
    }

    fn name(&self, rule: usize) -> &[u8] {
        self.keys
            .get(rule)
            .map_or(&b""[..], |(name, _)| name.bytes())
    }

    fn check_memory(&self, rule: usize) -> Result<(), Error> {
        propagate::check_memory(self.ctx, Some(self.key_name(rule)?))
    }

    fn apply<S: Written>(&mut self, rule: usize, effect: &Effect<S>) -> Result<(), Error> {
        self.key(rule)?.apply(effect)
    }
}

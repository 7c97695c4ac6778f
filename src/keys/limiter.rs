//! A limiter's key, whatever type its state is kept in: opened as its rule's storage
//! says (`WRONGTYPE` for another type), read for judging, and written with the effect
//! the call settled on. The one path every limiter command takes (see
//! `commands/limit.rs`).

use crate::argv::KeyName;
use crate::keys::sorted_set::SortedSetKey;
use crate::keys::string::StringKey;
use ratelimit_core::call::limiter::{KeyRead, Storage, Value, Written};
use ratelimit_core::{Effect, Error};
use redis_module::Context;

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
                Value::SortedSet(w) => k.write(&w, *expires_at),
                Value::String(_) => Err(Error::Internal("a string for a sorted-set key")),
            },
            (LimiterKey::SortedSet(_), Effect::ExpireAt(_)) => {
                Err(Error::Internal("a lone expiry for a sorted set"))
            }
        }
    }
}

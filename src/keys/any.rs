//! Keys of any type as the bulk TTL commands (RL.BULKEXPIRE, RL.SWEEP) see them:
//! whether a key exists, its type and whether it has a TTL; and giving it one.
//!
//! A key is first opened for reading only, without touching its LRU/LFU data (as
//! `TTL` does), so that looking at a key changes nothing about it. Only a key that gets
//! a TTL is opened for writing, and gets what `EXPIRE` gives it: the modified-key
//! signal (`WATCH`, client tracking), the `expire` keyspace event, and the effect
//! replicated as `PEXPIREAT key <absolute ms>` (see `propagate.rs`).

use crate::api::api;
use crate::argv::KeyName;
use crate::keys::open::OpenKey;
use crate::propagate;
use ratelimit_core::bulk::KeyType;
use ratelimit_core::{Error, UnixMillis};
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};
use std::os::raw::c_int;

/// What a key holds, as far as a bulk TTL is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The key does not exist (or has just expired).
    Missing,
    /// The key exists and has no TTL.
    Persistent(KeyType),
    /// The key exists and already has a TTL.
    WithTtl(KeyType),
}

/// Look at `name` without changing anything about it.
pub fn inspect(ctx: &Context, name: KeyName) -> Result<Found, Error> {
    let Some(key) = OpenKey::open(
        ctx,
        name,
        raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH,
    )?
    else {
        return Ok(Found::Missing);
    };
    let key_type_of = api!(RedisModule_KeyType)?;
    // SAFETY: the key is open.
    let key_type = match unsafe { key_type_of(key.ptr()) } as isize {
        raw::REDISMODULE_KEYTYPE_EMPTY => return Ok(Found::Missing),
        raw::REDISMODULE_KEYTYPE_STRING => KeyType::String,
        raw::REDISMODULE_KEYTYPE_LIST => KeyType::List,
        raw::REDISMODULE_KEYTYPE_SET => KeyType::Set,
        raw::REDISMODULE_KEYTYPE_ZSET => KeyType::ZSet,
        raw::REDISMODULE_KEYTYPE_HASH => KeyType::Hash,
        raw::REDISMODULE_KEYTYPE_STREAM => KeyType::Stream,
        _ => KeyType::Module,
    };
    let get_abs_expire = api!(RedisModule_GetAbsExpire)?;
    // SAFETY: the key is open.
    let expire = unsafe { get_abs_expire(key.ptr()) };
    Ok(if expire == raw::REDISMODULE_NO_EXPIRE as i64 {
        Found::Persistent(key_type)
    } else {
        Found::WithTtl(key_type)
    })
}

/// The name `TYPE key` answers (a module type's own name for module keys).
pub fn type_name(ctx: &Context, name: KeyName) -> Option<Vec<u8>> {
    let opts = CallOptionsBuilder::new().errors_as_replies().build();
    let reply: CallResult = ctx.call_ext("TYPE", &opts, &[name.bytes()][..]);
    match reply {
        Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// Give the existing key `name` the absolute expiry `at`, and replicate
/// `PEXPIREAT name at`.
pub fn give_ttl(ctx: &Context, name: KeyName, at: UnixMillis) -> Result<(), Error> {
    let ms = propagate::millis(at);
    let key = OpenKey::open(
        ctx,
        name,
        raw::REDISMODULE_READ | raw::REDISMODULE_WRITE | raw::REDISMODULE_OPEN_KEY_NOTOUCH,
    )?
    .ok_or_else(|| Error::Internal("open key"))?;
    let set_abs_expire = api!(RedisModule_SetAbsExpire)?;
    // SAFETY: the key is open for writing; the caller saw that it holds a value.
    if unsafe { set_abs_expire(key.ptr(), ms) } != raw::REDISMODULE_OK as c_int {
        return Err(Error::Internal("set expire"));
    }
    propagate::expiry_set(ctx, name, at);
    Ok(())
}

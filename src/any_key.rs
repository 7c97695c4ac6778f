//! Keys of any type as the bulk TTL commands (RL.BULKEXPIRE, RL.SWEEP) see them:
//! whether a key exists, its type and whether it has a TTL; giving it one; and the
//! calling user's ACL write permission on a key.
//!
//! A key is first opened for reading only, without touching its LRU/LFU data (as
//! `TTL` does), so that looking at a key changes nothing about it. Only a key that gets
//! a TTL is opened for writing, and gets what `EXPIRE` gives it: the modified-key
//! signal (`WATCH`, client tracking), the `expire` keyspace event, and the effect
//! replicated as `PEXPIREAT key <absolute ms>` (see `effects.rs`).

use crate::api::api;
use crate::args::KeyName;
use crate::effects;
use crate::open_key::OpenKey;
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
    let ms = effects::millis(at);
    let key = OpenKey::open(
        ctx,
        name,
        raw::REDISMODULE_READ | raw::REDISMODULE_WRITE | raw::REDISMODULE_OPEN_KEY_NOTOUCH,
    )?
    .ok_or(Error::Internal("open key"))?;
    let set_abs_expire = api!(RedisModule_SetAbsExpire)?;
    // SAFETY: the key is open for writing; the caller saw that it holds a value.
    if unsafe { set_abs_expire(key.ptr(), ms) } != raw::REDISMODULE_OK as c_int {
        return Err(Error::Internal("set expire"));
    }
    effects::expiry_set(ctx, name, at);
    Ok(())
}

/// The ACL user running the command, to check key permissions with; freed on drop.
/// A client without a user (one a module made) is not restricted, as the server
/// itself treats it.
pub struct CallerAcl(Option<*mut raw::RedisModuleUser>);

impl CallerAcl {
    pub fn current(ctx: &Context) -> Result<CallerAcl, Error> {
        let current_name = api!(RedisModule_GetCurrentUserName)?;
        let user_from_name = api!(RedisModule_GetModuleUserFromUserName)?;
        let free_string = api!(RedisModule_FreeString)?;
        // SAFETY: ctx is the live command context.
        let name = unsafe { current_name(ctx.ctx) };
        if name.is_null() {
            return Ok(CallerAcl(None));
        }
        // SAFETY: name is a live string returned above; it is freed right after.
        let user = unsafe { user_from_name(name) };
        // SAFETY: the string came from GetCurrentUserName and is not used again.
        unsafe { free_string(ctx.ctx, name) };
        if user.is_null() {
            return Err(Error::UnknownAclUser);
        }
        Ok(CallerAcl(Some(user)))
    }

    /// Whether the user may change `key` (the permission `EXPIRE key` needs).
    pub fn may_write(&self, key: KeyName) -> bool {
        let Some(user) = self.0 else {
            return true;
        };
        let Ok(check) = api!(RedisModule_ACLCheckKeyPermissions) else {
            return false;
        };
        // SAFETY: user is live until drop; key is a live module string.
        let rc = unsafe { check(user, key.ptr(), raw::REDISMODULE_CMD_KEY_UPDATE as c_int) };
        rc == raw::REDISMODULE_OK as c_int
    }
}

impl Drop for CallerAcl {
    fn drop(&mut self) {
        if let (Some(user), Ok(free)) = (self.0, api!(RedisModule_FreeModuleUser)) {
            // SAFETY: obtained from GetModuleUserFromUserName, freed exactly once.
            unsafe { free(user) };
        }
    }
}

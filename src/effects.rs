//! What a write tells the rest of the server: keyspace events (as the equivalent plain
//! commands send them) and the effect replicated to replicas and the AOF as a plain
//! command with an absolute time, so neither ever reads a clock of its own.

use crate::api::api;
use ratelimit_core::UnixMillis;
use redis_module::{raw, Context, RedisString};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// Send the keyspace event `event` of class `class` (`REDISMODULE_NOTIFY_*`) for `key`.
pub fn notify(ctx: &Context, class: c_int, event: &CStr, key: &RedisString) {
    if let Ok(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
        // SAFETY: ctx and key are live; the event name is NUL-terminated.
        unsafe { notify(ctx.ctx, class, event.as_ptr(), key.inner) };
    }
}

/// The events of `SET key value PXAT t`: `set`, then `expire`.
pub fn notify_set_with_expiry(ctx: &Context, key: &RedisString) {
    notify(ctx, raw::REDISMODULE_NOTIFY_STRING, c"set", key);
    notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"expire", key);
}

/// Replicate `SET key value PXAT at`.
pub fn replicate_set_pxat(ctx: &Context, key: &RedisString, value: &[u8], at: UnixMillis) {
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "sbcl" matches (string, buffer + length, C string, long long);
    // the buffer is live for the call, which copies it.
    unsafe {
        replicate(
            ctx.ctx,
            c"SET".as_ptr(),
            c"sbcl".as_ptr(),
            key.inner,
            value.as_ptr() as *const c_char,
            value.len(),
            c"PXAT".as_ptr() as *const c_char,
            millis(at),
        );
    }
}

/// Replicate `PEXPIREAT key at`.
pub fn replicate_pexpireat(ctx: &Context, key: &RedisString, at: UnixMillis) {
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "sl" matches (string, long long).
    unsafe {
        replicate(
            ctx.ctx,
            c"PEXPIREAT".as_ptr(),
            c"sl".as_ptr(),
            key.inner,
            millis(at),
        )
    };
}

/// An expiry as the API's signed milliseconds. Expiries here are at most about 2^53 ms
/// (the latest AT plus ten years, or a TAT bound), far inside i64.
pub fn millis(at: UnixMillis) -> i64 {
    i64::try_from(at.0).unwrap_or(i64::MAX)
}

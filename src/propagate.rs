//! What a write tells the rest of the server, in one place: the modified-key signal
//! (`WATCH`, client-side caching), the keyspace events the equivalent plain command
//! sends, and the effect replicated to replicas and the AOF as a plain command with an
//! absolute time, so neither ever reads a clock of its own.
//!
//! The module loads with `REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED`: closing a key
//! opened for writing signals nothing by itself, so a denial or a peek, which opens the
//! key for writing but changes nothing, leaves watchers alone (as its twin does). Every
//! write goes through the two functions below, which signal it.

use crate::api::api;
use crate::argv::KeyName;
use crate::static_strings;
use ratelimit_core::{Error, Micros, UnixMillis};
use redis_module::{raw, CallOptionsBuilder, CallResult, Context};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// Ask the server to leave the modified-key signal to the module (see above), and
/// declare atomic slot migration support where the server has it (`slot_migration.rs`).
pub fn take_over_modified_signal(ctx: &Context) -> Result<(), Error> {
    let set_options = api!(RedisModule_SetModuleOptions)?;
    // SAFETY: called from OnLoad with the module's context.
    unsafe {
        set_options(
            ctx.ctx,
            raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int
                | crate::slot_migration::option_flags(),
        )
    };
    Ok(())
}

/// The effects of `SET key value PXAT at`: the signal, the `set` and `expire` events,
/// and the same command replicated.
pub fn value_set(ctx: &Context, key: KeyName, value: &[u8], at: UnixMillis) {
    signal_modified(ctx, key);
    notify(ctx, raw::REDISMODULE_NOTIFY_STRING, c"set", key);
    notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"expire", key);
    let (Ok(replicate), Some(pxat)) = (api!(RedisModule_Replicate), static_strings::PXAT.get())
    else {
        return;
    };
    // SAFETY: the format "sbsl" matches (string, buffer + length, string, long long);
    // the buffer is live for the call, which copies it; PXAT is a static string.
    unsafe {
        replicate(
            ctx.ctx,
            c"SET".as_ptr(),
            c"sbsl".as_ptr(),
            key.ptr(),
            value.as_ptr() as *const c_char,
            value.len(),
            pxat,
            millis(at),
        );
    }
}

/// The effects of `PEXPIREAT key at`: the signal, the `expire` event, and the same
/// command replicated.
pub fn expiry_set(ctx: &Context, key: KeyName, at: UnixMillis) {
    signal_modified(ctx, key);
    notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"expire", key);
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "sl" matches (string, long long).
    unsafe {
        replicate(
            ctx.ctx,
            c"PEXPIREAT".as_ptr(),
            c"sl".as_ptr(),
            key.ptr(),
            millis(at),
        )
    };
}

/// The effects of `ZADD key score member`: the signal, the `zadd` event, and the same
/// command replicated (the score is the entry's time, a whole number of µs).
pub fn member_added(ctx: &Context, key: KeyName, score: Micros, member: &[u8]) {
    signal_modified(ctx, key);
    notify(ctx, raw::REDISMODULE_NOTIFY_ZSET, c"zadd", key);
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "slb" matches (string, long long, buffer + length); the
    // buffer is live for the call, which copies it.
    unsafe {
        replicate(
            ctx.ctx,
            c"ZADD".as_ptr(),
            c"slb".as_ptr(),
            key.ptr(),
            micros(score),
            member.as_ptr() as *const c_char,
            member.len(),
        )
    };
}

/// The effects of `DEL key` (a refund that left the state full again): the signal,
/// the `del` event, and the same command replicated.
pub fn key_deleted(ctx: &Context, key: KeyName) {
    signal_modified(ctx, key);
    notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"del", key);
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "s" matches (string).
    unsafe { replicate(ctx.ctx, c"DEL".as_ptr(), c"s".as_ptr(), key.ptr()) };
}

/// The effects of `ZREM key member` (a refund's write, a released lease): the signal, the `zrem` event
/// and the same command replicated.
pub fn member_removed(ctx: &Context, key: KeyName, member: &[u8]) {
    signal_modified(ctx, key);
    notify(ctx, raw::REDISMODULE_NOTIFY_ZSET, c"zrem", key);
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "sb" matches (string, buffer + length); the buffer is live
    // for the call, which copies it.
    unsafe {
        replicate(
            ctx.ctx,
            c"ZREM".as_ptr(),
            c"sb".as_ptr(),
            key.ptr(),
            member.as_ptr() as *const c_char,
            member.len(),
        )
    };
}

/// The effects of `ZREM key member...` that removed every member named: the `zrem`
/// event and the same command replicated (the key was signalled by the write it goes
/// with).
pub fn members_removed(ctx: &Context, key: KeyName, members: &mut [*mut raw::RedisModuleString]) {
    notify(ctx, raw::REDISMODULE_NOTIFY_ZSET, c"zrem", key);
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "sv" matches (string, array of strings and its length); the
    // strings are live for the call, which copies them.
    unsafe {
        replicate(
            ctx.ctx,
            c"ZREM".as_ptr(),
            c"sv".as_ptr(),
            key.ptr(),
            members.as_mut_ptr(),
            members.len(),
        )
    };
}

/// The effects of `ZREMRANGEBYSCORE key -inf through` that removed members (a lease
/// key's expired leases): the `zremrangebyscore` event (`notify_it`: when the server did
/// not run the command itself) and the same command replicated (the key was signalled
/// by the write it goes with).
pub fn members_removed_through(ctx: &Context, key: KeyName, through: Micros, notify_it: bool) {
    if notify_it {
        notify(ctx, raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore", key);
    }
    let Ok(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    // SAFETY: the format "scl" matches (string, C string, long long).
    unsafe {
        replicate(
            ctx.ctx,
            c"ZREMRANGEBYSCORE".as_ptr(),
            c"scl".as_ptr(),
            key.ptr(),
            c"-inf".as_ptr(),
            micros(through),
        )
    };
}

/// The `del` event of a key a removal emptied (the server deleted it; the replicated
/// removal empties it on replicas too).
pub fn key_emptied(ctx: &Context, key: KeyName) {
    notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"del", key);
}

/// A time in µs as the API's signed integer (times here are below 2^53).
fn micros(t: Micros) -> i64 {
    i64::try_from(t.0).unwrap_or(i64::MAX)
}

fn signal_modified(ctx: &Context, key: KeyName) {
    if let Ok(signal) = api!(RedisModule_SignalModifiedKey) {
        // SAFETY: ctx and key are live.
        unsafe { signal(ctx.ctx, key.ptr()) };
    }
}

fn notify(ctx: &Context, class: c_int, event: &CStr, key: KeyName) {
    if let Ok(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
        // SAFETY: ctx and key are live; the event name is NUL-terminated.
        unsafe { notify(ctx.ctx, class, event.as_ptr(), key.ptr()) };
    }
}

/// Refuse a call that is about to store values (any [`Effect::Set`]) when the server
/// is out of memory, with the server's own OOM error, before anything is written.
/// `keys` are the call's keys, in the order of `effects` (string keys or missing).
///
/// The commands are not flagged `deny-oom`, so the server runs them whatever its memory:
/// denials, peeks and TTL repairs (`PEXPIREAT`, which the server allows at OOM as it
/// allows `EXPIRE`) always answer, and only a write of a value is refused, exactly when
/// a Lua script's `SET` would be: the server decides once, before the command, after
/// evicting what its policy lets it evict. That decision is not in the module API, so
/// when memory is over the limit right now, the module asks for it the way a script
/// does, with a `deny-oom` command that changes nothing (`SETRANGE key 0 ""` on a key
/// it is about to write) called under the server's OOM rule. Checked once per call, so
/// that a call with several keys writes all of them or none.
pub fn check_memory(ctx: &Context, first_set: Option<KeyName>) -> Result<(), Error> {
    let Some(key) = first_set else {
        return Ok(());
    };
    let flags = api!(RedisModule_GetContextFlags)?;
    // SAFETY: ctx is the live command context.
    let flags = unsafe { flags(ctx.ctx) };
    if flags & raw::REDISMODULE_CTX_FLAGS_OOM as c_int == 0 {
        return Ok(());
    }
    let opts = CallOptionsBuilder::new()
        .verify_oom()
        .errors_as_replies()
        .build();
    let probe: [&[u8]; 3] = [key.bytes(), b"0", b""];
    match ctx.call_ext::<_, CallResult>("SETRANGE", &opts, &probe[..]) {
        Err(e) if e.to_string().starts_with("OOM") => Err(Error::OutOfMemory),
        _ => Ok(()),
    }
}

/// An expiry as the API's signed milliseconds. Expiries here are at most about 2^53 ms
/// (the latest AT plus ten years, or a TAT bound), far inside i64.
pub fn millis(at: UnixMillis) -> i64 {
    i64::try_from(at.0).unwrap_or(i64::MAX)
}

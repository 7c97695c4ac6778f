//! redis-ratelimit: rate limiting as native Redis/Valkey commands.
//!
//! This file holds the module's allocator and its load and unload entry points;
//! `register/` registers the commands from the command table of the `ratelimit-core`
//! crate, which also holds the limiter logic (pure, unit-tested); `commands/` holds the
//! per-command glue and `keys/` the access to keys.

// An `Error` has drop glue (some variants own bytes): `ok_or(Error::...)` builds one
// and drops it on every call that succeeds, measurably so on the command path, so the
// error is built only when needed (`ok_or_else`), whatever clippy takes it for.
#![allow(clippy::unnecessary_lazy_evaluations)]
mod api;
mod argv;
mod clock;
mod commands;
mod keys;
mod propagate;
mod register;
mod reply;
mod slot_migration;
mod static_strings;
mod stats;

use redis_module::{raw, Context};
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

// The module allocates with the server's allocator; anything linked outside a server
// (tests, tools) uses the system one.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;

/// The name the server knows the module by (`MODULE LIST`, `INFO ratelimit`).
const MODULE_NAME: &CStr = c"ratelimit";
const MODULE_VERSION: c_int = 1;

/// The server's entry point when it loads the module (`loadmodule`, `MODULE LOAD`).
///
/// # Safety
///
/// Called by the server with its load context and the module's arguments.
#[no_mangle]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // Nothing may allocate before this call: the global allocator is the server's,
    // reached through the API pointers it fills in.
    // SAFETY: ctx is the server's load context; the name is NUL-terminated and static.
    let init = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            MODULE_NAME.as_ptr(),
            MODULE_VERSION,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    if init == raw::Status::Err as c_int {
        register::log_second_load(ctx);
        return raw::Status::Err as c_int;
    }
    let context = Context::new(ctx);
    match register::load(&context) {
        Ok(()) => raw::Status::Ok as c_int,
        Err(why) => {
            context.log_warning(&format!("ratelimit: {why}"));
            raw::Status::Err as c_int
        }
    }
}

/// The server's entry point for `MODULE UNLOAD`: always refused. A client can queue a
/// module command in `MULTI` and another can unload the module before `EXEC`; the
/// server then runs a command whose code is gone and crashes. No state of this module
/// needs unloading to upgrade: restart the server (or fail over to a replica started
/// with the new module file).
///
/// A server that unloads its modules as it shuts down (Valkey 9) calls this too, after
/// the shutdown event: that unload is accepted, quietly, since no command runs again.
#[no_mangle]
pub extern "C" fn RedisModule_OnUnload(ctx: *mut raw::RedisModuleCtx) -> c_int {
    if register::SHUTTING_DOWN.load(Ordering::SeqCst) {
        return raw::Status::Ok as c_int;
    }
    Context::new(ctx).log_warning(
        "ratelimit: MODULE UNLOAD is refused (a command queued in MULTI would crash the server at EXEC); to remove or upgrade the module, restart the server",
    );
    raw::Status::Err as c_int
}

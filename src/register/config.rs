//! The module's configuration, set like any server setting: in redis.conf after the
//! `loadmodule` line, or at run time with `CONFIG SET ratelimit.<name> <value>`
//! (`CONFIG GET ratelimit.*` lists them).
//!
//! - `ratelimit.at-tolerance` (milliseconds, 0 to ten years; default 0: no bound): how
//!   far a request's `AT` may be from the server clock, either way. A client clock far
//!   behind is always allowed (its writes expire on arrival) and one far ahead locks a
//!   key until that time; servers whose clients pass their own clock should set it
//!   (e.g. 60000). The default keeps replays of old traffic and tests with pinned
//!   times working.
//! - `ratelimit.acl-write-check` (yes/no, default yes): on servers that cannot put module
//!   commands in ACL categories (Redis 7.0), whether the module refuses its commands to
//!   users who may not run the plain write they stand for (see `acl.rs`). It costs a
//!   few hundred nanoseconds a call; a server without ACL users may turn it off.
//!   Elsewhere it has no effect: the server enforces the categories itself.
//! - `ratelimit.cl-throttle` (yes/no, default yes; set at load time only: in redis.conf,
//!   or `MODULE LOADEX ... CONFIG ratelimit.cl-throttle no`): whether the module
//!   registers `CL.THROTTLE`, redis-cell's command. It is skipped anyway, with a notice
//!   in the server log, when the name is taken (redis-cell loaded first, or a server
//!   with a command of that name).

use crate::api::api;
use ratelimit_core::limits::MAX_DURATION_MS;
use ratelimit_core::Micros;
use redis_module::{raw, Context};
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int, c_longlong};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The default of `ratelimit.at-tolerance`: no bound (see above).
pub const DEFAULT_AT_TOLERANCE_MS: i64 = 0;

static AT_TOLERANCE_MS: AtomicI64 = AtomicI64::new(DEFAULT_AT_TOLERANCE_MS);

/// How far `AT` may be from the server clock; `None`: no bound.
pub fn at_tolerance() -> Option<Micros> {
    match AT_TOLERANCE_MS.load(Ordering::Relaxed) {
        ms if ms <= 0 => None,
        ms => Some(Micros::from_millis(ms as u64)),
    }
}

extern "C" fn get_at_tolerance(_name: *const c_char, _data: *mut c_void) -> c_longlong {
    AT_TOLERANCE_MS.load(Ordering::Relaxed)
}

extern "C" fn set_at_tolerance(
    _name: *const c_char,
    value: c_longlong,
    _data: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // The server has checked the range given at registration.
    AT_TOLERANCE_MS.store(value, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

static ACL_WRITE_CHECK: AtomicBool = AtomicBool::new(true);

/// Whether the module checks the caller's write permission itself (where it must).
pub fn acl_write_check() -> bool {
    ACL_WRITE_CHECK.load(Ordering::Relaxed)
}

extern "C" fn get_acl_write_check(_name: *const c_char, _data: *mut c_void) -> c_int {
    c_int::from(ACL_WRITE_CHECK.load(Ordering::Relaxed))
}

extern "C" fn set_acl_write_check(
    _name: *const c_char,
    value: c_int,
    _data: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    ACL_WRITE_CHECK.store(value != 0, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

static CL_THROTTLE: AtomicBool = AtomicBool::new(true);

/// Whether `CL.THROTTLE` is to be registered (`ratelimit.cl-throttle`).
pub fn cl_throttle() -> bool {
    CL_THROTTLE.load(Ordering::Relaxed)
}

extern "C" fn get_cl_throttle(_name: *const c_char, _data: *mut c_void) -> c_int {
    c_int::from(CL_THROTTLE.load(Ordering::Relaxed))
}

extern "C" fn set_cl_throttle(
    _name: *const c_char,
    value: c_int,
    _data: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    CL_THROTTLE.store(value != 0, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// Register the settings and load their values from the server's configuration.
pub fn register(ctx: &Context) -> Result<(), String> {
    let (Ok(register), Ok(register_bool), Ok(load)) = (
        api!(RedisModule_RegisterNumericConfig),
        api!(RedisModule_RegisterBoolConfig),
        api!(RedisModule_LoadConfigs),
    ) else {
        return Err("this server has no module configuration API (Redis 7.0+ is needed)".into());
    };
    let name: &CStr = c"at-tolerance";
    // SAFETY: called during OnLoad with the module's context; the name is static and
    // the callbacks have the server's signatures.
    let rc = unsafe {
        register(
            ctx.ctx,
            name.as_ptr(),
            DEFAULT_AT_TOLERANCE_MS,
            raw::REDISMODULE_CONFIG_DEFAULT,
            0,
            MAX_DURATION_MS as c_longlong,
            Some(get_at_tolerance),
            Some(set_at_tolerance),
            None,
            std::ptr::null_mut(),
        )
    };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("could not register ratelimit.at-tolerance".into());
    }
    let name: &CStr = c"acl-write-check";
    // SAFETY: as above.
    let rc = unsafe {
        register_bool(
            ctx.ctx,
            name.as_ptr(),
            1,
            raw::REDISMODULE_CONFIG_DEFAULT,
            Some(get_acl_write_check),
            Some(set_acl_write_check),
            None,
            std::ptr::null_mut(),
        )
    };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("could not register ratelimit.acl-write-check".into());
    }
    let name: &CStr = c"cl-throttle";
    // SAFETY: as above. Immutable: commands are registered only while the module loads.
    let rc = unsafe {
        register_bool(
            ctx.ctx,
            name.as_ptr(),
            1,
            raw::REDISMODULE_CONFIG_IMMUTABLE,
            Some(get_cl_throttle),
            Some(set_cl_throttle),
            None,
            std::ptr::null_mut(),
        )
    };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("could not register ratelimit.cl-throttle".into());
    }
    // SAFETY: called during OnLoad, after every setting is registered.
    if unsafe { load(ctx.ctx) } != raw::REDISMODULE_OK as c_int {
        return Err("invalid ratelimit.* setting in the server's configuration".into());
    }
    Ok(())
}

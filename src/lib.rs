//! redis-ratelimit: rate limiting as native Redis/Valkey commands.
//!
//! This file only registers the module: the allocator, the load entry point and the one
//! table of commands. The limiter logic is in the `ratelimit-core` crate (pure,
//! unit-tested); `commands/` holds the per-command glue.

mod any_key;
mod api;
mod args;
mod clock;
mod commands;
mod effects;
mod keyspec;
mod open_key;
mod reply;
mod stats;
mod string_key;

use args::Args;
use keyspec::{set_command_info, KeySpec, READ_WRITE_UPDATE, WRITE_UPDATE};
use redis_module::{raw, Context, InfoContext};
use std::ffi::CStr;
use std::os::raw::c_int;

// The module allocates with the server's allocator; anything linked outside a server
// (tests, tools) uses the system one.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;

/// The name the server knows the module by (`MODULE LIST`, `INFO ratelimit`).
const MODULE_NAME: &CStr = c"ratelimit";
const MODULE_VERSION: c_int = 1;

/// A command handler as the server calls it.
type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Everything the server is told about one command.
struct CommandDef {
    name: &'static CStr,
    handler: CommandFn,
    /// `RedisModule_CreateCommand` flags.
    flags: &'static CStr,
    /// Where its keys are (also the legacy first/last/step).
    keys: KeySpec,
    /// Arity as the server counts it (negative: at least).
    arity: i32,
    /// The access the command has to its keys (key spec flags).
    key_flags: u64,
}

/// A handler for `$body` (`fn(&Context, &Args) -> Result<stats::Outcome, Error>`):
/// borrows the arguments, sends the body's error as the reply, counts the outcome
/// for `INFO ratelimit`. With `getkeys`, a server asking where the keys are (Redis 7.0
/// routing a Cluster call) is answered from `numkeys` instead.
macro_rules! handler {
    ($stats:expr, $body:path) => {
        handler!($stats, $body, false)
    };
    ($stats:expr, $body:path, getkeys) => {
        handler!($stats, $body, true)
    };
    ($stats:expr, $body:path, $getkeys:expr) => {{
        unsafe extern "C" fn handle(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            let context = Context::new(ctx);
            // SAFETY: the server passes this call's live argv/argc, alive until we return.
            let args = unsafe { Args::new(argv, argc) };
            if $getkeys && keyspec::is_keys_position_request(&context) {
                keyspec::report_numkeys_positions(&context, &args);
            } else {
                reply::run(&context, $stats, || $body(&context, &args));
            }
            raw::REDISMODULE_OK as c_int
        }
        handle as CommandFn
    }};
}

/// The commands, in the order `COMMAND INFO` and `INFO ratelimit` list them.
const COMMANDS: &[CommandDef] = &[
    CommandDef {
        name: c"RL.FIXED",
        handler: handler!(stats::Command::Fixed, commands::fixed::command),
        flags: c"write deny-oom fast",
        keys: KeySpec::First,
        arity: -4,
        key_flags: READ_WRITE_UPDATE,
    },
    CommandDef {
        name: c"RL.GCRA",
        handler: handler!(stats::Command::Gcra, commands::gcra::command),
        flags: c"write deny-oom fast",
        keys: KeySpec::First,
        arity: -5,
        key_flags: READ_WRITE_UPDATE,
    },
    // Keys come from the numkeys key spec (the server then marks the command
    // movablekeys); the legacy first/last/step cannot express them. Redis 7.0 routes
    // Cluster calls with the legacy range only, or by asking the command
    // (`getkeys-api`): RL.MULTI answers those requests too.
    CommandDef {
        name: c"RL.MULTI",
        handler: handler!(stats::Command::Multi, commands::multi::command, getkeys),
        flags: c"write deny-oom getkeys-api",
        keys: KeySpec::NumKeys,
        // RL.MULTI numkeys key LIMIT window limit, at least.
        arity: -6,
        key_flags: READ_WRITE_UPDATE,
    },
    // Not deny-oom: giving keys a TTL is how a full server gets its memory back (EXPIRE
    // is not deny-oom either). As EXPIRE: the keys' TTLs change, their values are
    // neither read nor returned.
    CommandDef {
        name: c"RL.BULKEXPIRE",
        handler: handler!(stats::Command::BulkExpire, commands::bulkexpire::command),
        flags: c"write",
        keys: KeySpec::AllFrom(2),
        arity: -3,
        key_flags: WRITE_UPDATE,
    },
    // Node-wide like SCAN: no keys declared; it checks each key's ACL itself.
    CommandDef {
        name: c"RL.SWEEP",
        handler: handler!(stats::Command::Sweep, commands::sweep::command),
        flags: c"write",
        keys: KeySpec::None,
        arity: -3,
        key_flags: 0,
    },
];

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
        return raw::Status::Err as c_int;
    }
    let context = Context::new(ctx);
    match load(&context) {
        Ok(()) => raw::Status::Ok as c_int,
        Err(why) => {
            context.log_warning(&format!("ratelimit: {why}"));
            raw::Status::Err as c_int
        }
    }
}

fn load(ctx: &Context) -> Result<(), String> {
    // Absolute expiry times are read and written with APIs that arrived in Redis 6.2;
    // command info in 7.0.
    if api::api!(RedisModule_GetAbsExpire).is_err() || api::api!(RedisModule_SetAbsExpire).is_err()
    {
        return Err("this server lacks RedisModule_GetAbsExpire/SetAbsExpire (Redis 7.0+ or Valkey 8+ is needed)".into());
    }
    effects::take_over_modified_signal(ctx).map_err(|_| {
        "this server lacks RedisModule_SetModuleOptions (Redis 7.0+ or Valkey 8+ is needed)"
            .to_string()
    })?;
    let create = api::api!(RedisModule_CreateCommand).map_err(|e| e.to_string())?;
    for def in COMMANDS {
        let (first, last, step) = def.keys.legacy_range();
        // SAFETY: called during OnLoad with the module's context; name and flags are
        // static NUL-terminated strings; the handler has the server's signature.
        let rc = unsafe {
            create(
                ctx.ctx,
                def.name.as_ptr(),
                Some(def.handler),
                def.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if rc != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not create command {:?}", def.name));
        }
        set_command_info(ctx.ctx, def.name, def.arity, def.keys, def.key_flags)?;
    }
    raw::register_info_function(ctx.ctx, Some(info));
    Ok(())
}

/// The `ratelimit` section of `INFO`.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    stats::info(&InfoContext::new(ctx));
}

/// The server's entry point for `MODULE UNLOAD`.
#[no_mangle]
pub extern "C" fn RedisModule_OnUnload(_ctx: *mut raw::RedisModuleCtx) -> c_int {
    raw::Status::Ok as c_int
}

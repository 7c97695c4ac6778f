//! redis-ratelimit: rate limiting as native Redis/Valkey commands.
//!
//! This file only registers the module: the allocator, the load entry point and the one
//! table of commands. The limiter logic is in the `ratelimit-core` crate (pure,
//! unit-tested); `commands/` holds the per-command glue.

mod acl;
mod any_key;
mod api;
mod args;
mod clock;
mod commands;
mod config;
mod effects;
mod keyspec;
mod open_key;
mod reply;
mod static_strings;
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
    /// ACL categories where the server supports them (`@ratelimit` is added to all).
    acl: &'static str,
}

/// One row of [`COMMANDS`]: the definition, and a handler that borrows the arguments,
/// checks the caller's write permission where the server cannot (see `acl.rs`; `probe`
/// is the plain command the call stands for, on the argument `first_key`), runs `body`
/// (`fn(&Context, &Args) -> Result<stats::Outcome, Error>`), sends its error as the
/// reply and counts the outcome for `INFO ratelimit`. With `getkeys: true`, a server asking
/// where the keys are (Redis 7.0 routing a Cluster call) is answered from `numkeys`.
macro_rules! command {
    (
        $name:literal, $stats:expr, $body:path,
        flags: $flags:literal, keys: $keys:expr, arity: $arity:expr,
        key_flags: $key_flags:expr, acl: $acl:literal, probe: $probe:expr,
        first_key: $first_key:expr, getkeys: $getkeys:literal
    ) => {{
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
                reply::run(&context, $stats, || {
                    let first_key: Option<usize> = $first_key;
                    acl::check_write(
                        &context,
                        $name,
                        &$probe,
                        first_key.and_then(|i| args.key(i)),
                    )?;
                    $body(&context, &args)
                });
            }
            raw::REDISMODULE_OK as c_int
        }
        CommandDef {
            name: match CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("command name"),
            },
            handler: handle,
            flags: $flags,
            keys: $keys,
            arity: $arity,
            key_flags: $key_flags,
            acl: $acl,
        }
    }};
}

/// The commands, in the order `COMMAND INFO` and `INFO ratelimit` list them.
///
/// None is flagged `deny-oom`: a limiter must answer denials and peeks whatever the
/// server's memory, so the limiters refuse only a write of a value at OOM themselves
/// (`effects::check_memory`), as a Lua script's `SET` is refused; the bulk TTL commands
/// are how a full server gets memory back (`EXPIRE` is not `deny-oom` either).
const COMMANDS: &[CommandDef] = &[
    command!(
        "RL.FIXED", stats::Command::Fixed, commands::fixed::command,
        flags: c"write fast", keys: KeySpec::First, arity: -4,
        key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET, first_key: Some(1), getkeys: false
    ),
    command!(
        "RL.GCRA", stats::Command::Gcra, commands::gcra::command,
        flags: c"write fast", keys: KeySpec::First, arity: -5,
        key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET, first_key: Some(1), getkeys: false
    ),
    // Keys come from the numkeys key spec (the server then marks the command
    // movablekeys); the legacy first/last/step cannot express them. Redis 7.0 routes
    // Cluster calls with the legacy range only, or by asking the command
    // (`getkeys-api`): RL.MULTI answers those requests too. Arity: RL.MULTI numkeys key
    // LIMIT window limit, at least.
    command!(
        "RL.MULTI", stats::Command::Multi, commands::multi::command,
        flags: c"write getkeys-api", keys: KeySpec::NumKeys, arity: -6,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET, first_key: Some(2), getkeys: true
    ),
    // The call shape of RL.MULTI (numkeys key spec, getkeys-api); arity alike.
    command!(
        "RL.SLIDING", stats::Command::Sliding, commands::sliding::command,
        flags: c"write getkeys-api", keys: KeySpec::NumKeys, arity: -6,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET, first_key: Some(2), getkeys: true
    ),
    // Its work grows with the entries in the window (at most its limit): not `fast`.
    command!(
        "RL.LOG", stats::Command::Log, commands::log::command,
        flags: c"write", keys: KeySpec::First, arity: -4,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET, first_key: Some(1), getkeys: false
    ),
    // As EXPIRE: the keys' TTLs change, their values are neither read nor returned.
    command!(
        "RL.BULKEXPIRE", stats::Command::BulkExpire, commands::bulkexpire::command,
        flags: c"write", keys: KeySpec::AllFrom(2), arity: -3,
        key_flags: WRITE_UPDATE, acl: "write keyspace", probe: static_strings::PEXPIRE, first_key: Some(2), getkeys: false
    ),
    // Node-wide like SCAN: no keys declared; it checks each key's ACL itself.
    command!(
        "RL.SWEEP", stats::Command::Sweep, commands::sweep::command,
        flags: c"write", keys: KeySpec::None, arity: -3,
        key_flags: 0, acl: "write keyspace slow", probe: static_strings::PEXPIRE, first_key: None, getkeys: false
    ),
];

/// redis-cell's command, registered at load unless `ratelimit.cl-throttle` is `no` or
/// the name is taken; key spec, flags and ACL categories as RL.GCRA's.
const CL_THROTTLE: CommandDef = command!(
    "CL.THROTTLE", stats::Command::Throttle, commands::throttle::command,
    flags: c"write fast", keys: KeySpec::First, arity: -5,
    key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET, first_key: Some(1), getkeys: false
);

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
        log_second_load(ctx);
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

/// `MODULE LOAD` of a module that is already loaded gets only the server's generic
/// "Error loading the extension": say why in the server's log. `RedisModule_Init` fills
/// in the API before it finds the name taken, so the log call is there; nothing is
/// allocated (the allocator may not be usable).
fn log_second_load(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: these pointers are written only while a module loads, on this thread.
    let (busy, log) = unsafe { (raw::RedisModule_IsModuleNameBusy, raw::RedisModule_Log) };
    let (Some(busy), Some(log)) = (busy, log) else {
        return;
    };
    // SAFETY: a static NUL-terminated name.
    if unsafe { busy(MODULE_NAME.as_ptr()) } == 0 {
        return;
    }
    // SAFETY: ctx is the load context; the format takes no arguments (static text).
    unsafe {
        log(
            ctx,
            c"warning".as_ptr(),
            c"ratelimit: a module named 'ratelimit' is already loaded (MODULE LIST shows it); this copy was not loaded. To upgrade, restart the server with the new module file: MODULE UNLOAD is refused (see the operations guide).".as_ptr(),
        )
    };
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
    // The settings first: `ratelimit.cl-throttle` decides whether CL.THROTTLE is made.
    config::register(ctx)?;
    static_strings::make_all()?;
    let create = api::api!(RedisModule_CreateCommand).map_err(|e| e.to_string())?;
    let own_category = acl::add_own_category(ctx);
    let mut categories = acl::Categories::SelfCheck;
    for def in COMMANDS {
        if !create_command(ctx, create, def) {
            return Err(format!("could not create command {:?}", def.name));
        }
        categories = describe_command(ctx, def, own_category)?;
    }
    if !config::cl_throttle() {
        ctx.log_notice("ratelimit: CL.THROTTLE not registered (ratelimit.cl-throttle is no)");
    } else if create_command(ctx, create, &CL_THROTTLE) {
        describe_command(ctx, &CL_THROTTLE, own_category)?;
    } else {
        ctx.log_notice(&format!(
            "ratelimit: CL.THROTTLE not registered: {}; the RL.* commands are loaded, and RL.GCRA reads the same keys (see docs/redis-cell.md)",
            cl_throttle_taken_by()
        ));
    }
    match categories {
        acl::Categories::WithOwn => {}
        acl::Categories::ServerOnly => ctx.log_notice(
            "ratelimit: this server cannot add module ACL categories: the commands are in @write and the server's other categories, but there is no @ratelimit",
        ),
        acl::Categories::SelfCheck => ctx.log_warning(
            "ratelimit: this server cannot put module commands in ACL categories (Redis 7.2+ and Valkey 8+ can): rules such as +@write or -@write do not name the RL.* commands; grant them by name (+rl.fixed ...). The module refuses its commands to users who may not run SET (limiters) or PEXPIRE (bulk TTL commands).",
        ),
    }
    raw::register_info_function(ctx.ctx, Some(info));
    Ok(())
}

/// `RedisModule_CreateCommand` for `def`; false when the server refuses it (for a name
/// that exists already).
fn create_command(
    ctx: &Context,
    create: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *const std::os::raw::c_char,
        raw::RedisModuleCmdFunc,
        *const std::os::raw::c_char,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    def: &CommandDef,
) -> bool {
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
    rc == raw::REDISMODULE_OK as c_int
}

/// Arity, key specs and ACL categories of a command just created.
fn describe_command(
    ctx: &Context,
    def: &CommandDef,
    own_category: bool,
) -> Result<acl::Categories, String> {
    set_command_info(ctx.ctx, def.name, def.arity, def.keys, def.key_flags)?;
    acl::set_categories(ctx, def.name, def.acl, own_category)
}

/// Why `CL.THROTTLE` could not be created: the server refuses a name it knows.
fn cl_throttle_taken_by() -> &'static str {
    // SAFETY: the pointer is written only while a module loads, on this thread.
    let busy = unsafe { raw::RedisModule_IsModuleNameBusy };
    // SAFETY: a static NUL-terminated name.
    match busy.map(|busy| unsafe { busy(c"redis-cell".as_ptr()) }) {
        Some(n) if n != 0 => "the redis-cell module, loaded before this one, has it",
        _ => "the name is taken (by another module, or by the server itself)",
    }
}

/// The `ratelimit` section of `INFO`.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    stats::info(&InfoContext::new(ctx));
}

/// The server's entry point for `MODULE UNLOAD`: always refused. A client can queue a
/// module command in `MULTI` and another can unload the module before `EXEC`; the
/// server then runs a command whose code is gone and crashes. No state of this module
/// needs unloading to upgrade: restart the server (or fail over to a replica started
/// with the new module file).
#[no_mangle]
pub extern "C" fn RedisModule_OnUnload(ctx: *mut raw::RedisModuleCtx) -> c_int {
    Context::new(ctx).log_warning(
        "ratelimit: MODULE UNLOAD is refused (a command queued in MULTI would crash the server at EXEC); to remove or upgrade the module, restart the server",
    );
    raw::Status::Err as c_int
}

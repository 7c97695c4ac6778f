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
mod command_docs;
mod commands;
mod config;
mod effects;
mod keyspec;
mod limiter_key;
mod log_key;
mod open_key;
mod reply;
mod slot_migration;
mod static_strings;
mod stats;
mod string_key;

use args::Args;
use keyspec::{set_command_info, KeySpec, READ_WRITE_UPDATE, WRITE_UPDATE};
use ratelimit_core::call;
use redis_module::{raw, Context, InfoContext};
use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// The access the command has to its keys (key spec flags).
    key_flags: u64,
    /// ACL categories where the server supports them (`@ratelimit` is added to all).
    acl: &'static str,
}

/// One row of [`COMMANDS`]: the definition, and a handler that borrows the arguments,
/// checks the caller's write permission where the server cannot (see `acl.rs`; `probe`
/// is the plain command the call stands for, checked on every key `keys` finds), runs `body`
/// (`fn(&Context, &Args) -> Result<stats::Outcome, Error>`), sends its error as the
/// reply and counts the outcome for `INFO ratelimit`. A command whose keys follow
/// `numkeys` is registered with `getkeys-api`, and a server asking where its keys are
/// (Redis 7.0 routing a Cluster call) is answered from `numkeys`.
macro_rules! command {
    (
        $name:literal, $stats:expr, $body:expr,
        flags: $flags:literal, keys: $keys:expr,
        key_flags: $key_flags:expr, acl: $acl:literal, probe: $probe:expr
    ) => {{
        unsafe extern "C" fn handle(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            let context = Context::new(ctx);
            // SAFETY: the server passes this call's live argv/argc, alive until we return.
            let args = unsafe { Args::new(argv, argc) };
            if matches!($keys, KeySpec::NumKeys) && keyspec::is_keys_position_request(&context) {
                keyspec::report_numkeys_positions(&context, &args);
            } else {
                reply::run(&context, $stats, || {
                    acl::check_call(&context, $name, &$probe, $keys, &args)?;
                    ($body)(&context, &args)
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
            key_flags: $key_flags,
            acl: $acl,
        }
    }};
}

/// Every command's arity as the server sees it: at least its name. Each command counts
/// its arguments itself, so that a call with too few gets the command's syntax in its
/// error (the server's own arity error says only "wrong number of arguments").
const ARITY: i32 = -1;

/// The body of a limiter command: its parser, on the one path of every limiter (a
/// macro, as the rules of RL.LOG and RL.ALL borrow the call's arguments).
macro_rules! limit {
    ($parse:path) => {
        |ctx: &Context, args: &Args| commands::limit::run(ctx, args, $parse)
    };
}

/// The commands, in the order `COMMAND INFO` and `INFO ratelimit` list them.
///
/// None is flagged `deny-oom`: a limiter must answer denials and peeks whatever the
/// server's memory, so the limiters refuse only a write of a value at OOM themselves
/// (`effects::check_memory`), as a Lua script's `SET` is refused; the bulk TTL commands
/// are how a full server gets memory back (`EXPIRE` is not `deny-oom` either).
const COMMANDS: &[CommandDef] = &[
    command!(
        "RL.FIXED", stats::Command::Fixed, limit!(call::fixed),
        flags: c"write fast", keys: KeySpec::First,
        key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET
    ),
    command!(
        "RL.GCRA", stats::Command::Gcra, limit!(call::gcra),
        flags: c"write fast", keys: KeySpec::First,
        key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET
    ),
    // Keys come from the numkeys key spec (the server then marks the command
    // movablekeys); the legacy first/last/step cannot express them. Redis 7.0 routes
    // Cluster calls with the legacy range only, or by asking the command
    // (`getkeys-api`): RL.MULTI answers those requests too.
    command!(
        "RL.MULTI", stats::Command::Multi, limit!(call::multi),
        flags: c"write", keys: KeySpec::NumKeys,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET
    ),
    // The call shape of RL.MULTI (numkeys key spec, getkeys-api).
    command!(
        "RL.SLIDING", stats::Command::Sliding, limit!(call::sliding),
        flags: c"write", keys: KeySpec::NumKeys,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET
    ),
    // Counting is O(log n), but a write removes every entry that has left the window
    // (up to its limit at once): not `fast`.
    command!(
        "RL.LOG", stats::Command::Log, limit!(call::log),
        flags: c"write", keys: KeySpec::First,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET
    ),
    // One rule of any limiter per key, all or nothing: the keys follow numkeys (as
    // RL.MULTI's).
    command!(
        "RL.ALL", stats::Command::All, limit!(call::all),
        flags: c"write", keys: KeySpec::NumKeys,
        key_flags: READ_WRITE_UPDATE, acl: "write", probe: static_strings::SET
    ),
    // As EXPIRE: the keys' TTLs change, their values are neither read nor returned.
    command!(
        "RL.BULKEXPIRE", stats::Command::BulkExpire, commands::bulkexpire::command,
        flags: c"write", keys: KeySpec::AllFrom(2),
        key_flags: WRITE_UPDATE, acl: "write keyspace", probe: static_strings::PEXPIRE
    ),
    // Node-wide like SCAN: no keys declared; it checks each key's ACL itself.
    command!(
        "RL.SWEEP", stats::Command::Sweep, commands::sweep::command,
        flags: c"write", keys: KeySpec::None,
        key_flags: 0, acl: "write keyspace slow", probe: static_strings::PEXPIRE
    ),
];

/// redis-cell's command, registered at load unless `ratelimit.cl-throttle` is `no` or
/// the name is taken; key spec, flags and ACL categories as RL.GCRA's.
const CL_THROTTLE: CommandDef = command!(
    "CL.THROTTLE", stats::Command::Throttle, limit!(call::throttle),
    flags: c"write fast", keys: KeySpec::First,
    key_flags: READ_WRITE_UPDATE, acl: "write fast", probe: static_strings::SET
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
    // Why a server that can add categories refused ours: errno, read at once.
    let refused = (!own_category && api::api!(RedisModule_AddACLCategory).is_ok())
        .then(std::io::Error::last_os_error);
    let mut categories = acl::Categories::SelfCheck;
    for def in COMMANDS {
        if !create_command(ctx, create, def)? {
            return Err(format!("could not create command {:?}", def.name));
        }
        categories = describe_command(ctx, def, own_category)?;
    }
    if !config::cl_throttle() {
        ctx.log_notice("ratelimit: CL.THROTTLE not registered (ratelimit.cl-throttle is no)");
    } else if create_command(ctx, create, &CL_THROTTLE)? {
        describe_command(ctx, &CL_THROTTLE, own_category)?;
    } else {
        ctx.log_notice(&format!(
            "ratelimit: CL.THROTTLE not registered: {}; the RL.* commands are loaded, and RL.GCRA reads the same keys (see docs/redis-cell.md)",
            cl_throttle_taken_by()
        ));
    }
    log_acl_categories(ctx, categories, refused);
    subscribe_to_shutdown(ctx);
    raw::register_info_function(ctx.ctx, Some(info));
    Ok(())
}

/// `RedisModule_CreateCommand` for `def`; false when the server refuses it (for a name
/// that exists already). Commands whose keys follow numkeys also answer the server's
/// key-position requests (`getkeys-api`).
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
) -> Result<bool, String> {
    let (first, last, step) = def.keys.legacy_range();
    let flags = match def.keys {
        KeySpec::NumKeys => CString::new(format!("{} getkeys-api", def.flags.to_string_lossy()))
            .map_err(|_| "command flags".to_string())?,
        _ => def.flags.to_owned(),
    };
    // SAFETY: called during OnLoad with the module's context; name and flags are
    // NUL-terminated strings alive for the call; the handler has the server's signature.
    let rc = unsafe {
        create(
            ctx.ctx,
            def.name.as_ptr(),
            Some(def.handler),
            flags.as_ptr(),
            first,
            last,
            step,
        )
    };
    Ok(rc == raw::REDISMODULE_OK as c_int)
}

/// Arity, key specs, COMMAND DOCS and ACL categories of a command just created.
fn describe_command(
    ctx: &Context,
    def: &CommandDef,
    own_category: bool,
) -> Result<acl::Categories, String> {
    let doc = command_docs::find(def.name).ok_or_else(|| {
        format!(
            "command {:?} has no entry in command_docs.rs (COMMAND DOCS)",
            def.name
        )
    })?;
    set_command_info(ctx.ctx, def.name, ARITY, def.keys, def.key_flags, doc)?;
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

/// Say in the server's log what the ACL categories of the commands are on this server,
/// when they are not the full set (`@write` and the others, and `@ratelimit`).
/// `refused`: why the server refused to add `@ratelimit`, when it can add categories.
fn log_acl_categories(ctx: &Context, categories: acl::Categories, refused: Option<std::io::Error>) {
    match (categories, refused) {
        (acl::Categories::WithOwn, _) => {}
        (acl::Categories::ServerOnly, None) => ctx.log_notice(
            "ratelimit: this server cannot add module ACL categories (Redis 7.4+ and Valkey 8+ can): the commands are in @write and the server's other categories, but there is no @ratelimit",
        ),
        // EBUSY: a category of that name exists.
        (acl::Categories::ServerOnly, Some(why)) => {
            ctx.log_warning(&format!(
                "ratelimit: the server refused to add the ACL category @ratelimit ({why}; another module may have added a category of that name): the commands are in @write and the server's other categories, but not in @ratelimit"
            ));
        }
        (acl::Categories::SelfCheck, _) if config::acl_write_check() => ctx.log_warning(
            "ratelimit: this server cannot put module commands in ACL categories (Redis 7.2+ and Valkey 8+ can): rules such as +@write or -@write do not name the RL.* commands; grant them by name (+rl.fixed ...). The module refuses its commands to users who may not run SET (limiters) or PEXPIRE (bulk TTL commands).",
        ),
        (acl::Categories::SelfCheck, _) => ctx.log_warning(
            "ratelimit: this server cannot put module commands in ACL categories (Redis 7.2+ and Valkey 8+ can): rules such as +@write or -@write do not name the RL.* commands; grant them by name (+rl.fixed ...). The module's own write check is off (ratelimit.acl-write-check no): a user granted an RL.* command can write through it even where it may not run SET or PEXPIRE.",
        ),
    }
}

/// Whether the server has announced its shutdown: from then on it may unload every
/// module (Valkey 9 does), and that unload is not a `MODULE UNLOAD`.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Ask the server to tell the module when it shuts down. The server announces it once
/// the shutdown can no longer fail (after the last save), just before it exits.
fn subscribe_to_shutdown(ctx: &Context) {
    let Ok(subscribe) = api::api!(RedisModule_SubscribeToServerEvent) else {
        return;
    };
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_SHUTDOWN,
        dataver: 1,
    };
    // SAFETY: called during OnLoad with the module's context; the callback has the
    // server's signature and lives as long as the module.
    if unsafe { subscribe(ctx.ctx, event, Some(on_shutdown)) } != raw::REDISMODULE_OK as c_int {
        ctx.log_notice("ratelimit: cannot subscribe to the shutdown event: a server that unloads modules at shutdown will log that it refused");
    }
}

/// The server is shutting down.
unsafe extern "C" fn on_shutdown(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
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
    if SHUTTING_DOWN.load(Ordering::SeqCst) {
        return raw::Status::Ok as c_int;
    }
    Context::new(ctx).log_warning(
        "ratelimit: MODULE UNLOAD is refused (a command queued in MULTI would crash the server at EXEC); to remove or upgrade the module, restart the server",
    );
    raw::Status::Err as c_int
}

//! Registration: the command table (each command's entry in
//! `ratelimit_core::commands::TABLE` with its handler), and what the load entry point
//! does with it: create each command, give it its arity, key spec and documentation
//! (`keyspec.rs`, `command_docs.rs`) and its ACL categories (`acl.rs`), register the
//! settings (`config.rs`) and the `INFO ratelimit` section.

pub mod acl;
mod command_docs;
pub mod config;
pub mod keyspec;

use crate::argv::Args;
use crate::{api, commands, propagate, reply, static_strings, stats, MODULE_NAME};
use ratelimit_core::commands::{entry, Command, Id, Keys, TABLE};
use ratelimit_core::limiters;
use redis_module::{raw, Context, InfoContext};
use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// A command handler as the server calls it.
type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// One command: its entry in the table, and its handler.
struct CommandDef {
    command: &'static Command,
    handler: CommandFn,
}

/// One row of [`COMMANDS`]: the entry of `$id`, and a handler that borrows the
/// arguments, checks the caller's write permission where the server cannot (see
/// `acl.rs`), runs `body` (`fn(&Context, &Args) -> Result<stats::Tally, Error>`), sends
/// its error as the reply and counts the tally for `INFO ratelimit`. A command whose
/// keys follow `numkeys` is registered with `getkeys-api`, and a server asking where its
/// keys are (Redis 7.0 routing a Cluster call) is answered from `numkeys`.
macro_rules! command {
    ($id:expr, $body:expr) => {{
        unsafe extern "C" fn handle(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            const COMMAND: &Command = entry($id);
            let context = Context::new(ctx);
            // SAFETY: the server passes this call's live argv/argc, alive until we return.
            let args = unsafe { Args::new(argv, argc) };
            if matches!(COMMAND.keys, Keys::NumKeys) && keyspec::is_keys_position_request(&context)
            {
                keyspec::report_numkeys_positions(&context, &args);
            } else {
                reply::run(&context, COMMAND.id, || {
                    acl::check_call(&context, COMMAND, &args)?;
                    ($body)(&context, &args)
                });
            }
            raw::REDISMODULE_OK as c_int
        }
        CommandDef {
            command: entry($id),
            handler: handle,
        }
    }};
}

/// The body of a limiter command: its parser, on the one path of every limiter (a
/// macro, as the rules of RL.LOG and RL.ALL borrow the call's arguments).
macro_rules! limit {
    ($parse:path) => {
        |ctx: &Context, args: &Args| commands::limit::run(ctx, args, $parse)
    };
}

/// Every command of the table with its handler, in the table's order (checked below):
/// each limiter's command (as core lists them) on the one path of every limiter, with
/// its parser (`limiters::<module>::parse`), then the other commands.
macro_rules! rows {
    ($($id:ident $module:ident),* $(,)?) => {
        [
            $(command!(Id::$id, limit!(limiters::$module::parse)),)*
            command!(Id::All, limit!(limiters::all)),
            command!(Id::BulkExpire, commands::bulkexpire::command),
            command!(Id::Sweep, commands::sweep::command),
            command!(Id::Throttle, limit!(limiters::throttle)),
            command!(Id::Release, commands::release::command),
        ]
    };
}

const COMMANDS: [CommandDef; TABLE.len()] = ratelimit_core::limiter_commands!(rows);

// Row `i` is the command of the table's entry `i`: each command once.
const _: () = {
    let mut i = 0;
    while i < COMMANDS.len() {
        assert!(COMMANDS[i].command.id as usize == i);
        i += 1;
    }
};

/// `MODULE LOAD` of a module that is already loaded gets only the server's generic
/// "Error loading the extension": say why in the server's log. `RedisModule_Init` fills
/// in the API before it finds the name taken, so the log call is there; nothing is
/// allocated (the allocator may not be usable).
pub fn log_second_load(ctx: *mut raw::RedisModuleCtx) {
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

/// Everything the module does as it loads, after `RedisModule_Init`.
pub fn load(ctx: &Context) -> Result<(), String> {
    // Absolute expiry times are read and written with APIs that arrived in Redis 6.2;
    // command info in 7.0.
    if api::api!(RedisModule_GetAbsExpire).is_err() || api::api!(RedisModule_SetAbsExpire).is_err()
    {
        return Err("this server lacks RedisModule_GetAbsExpire/SetAbsExpire (Redis 7.0+ or Valkey 8+ is needed)".into());
    }
    propagate::take_over_modified_signal(ctx).map_err(|_| {
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
    for def in &COMMANDS {
        let name = def.command.name;
        if def.command.optional && !config::cl_throttle() {
            ctx.log_notice(&format!(
                "ratelimit: {name} not registered (ratelimit.cl-throttle is no)"
            ));
        } else if create_command(ctx, create, def)? {
            categories = describe_command(ctx, def.command, own_category)?;
        } else if def.command.optional {
            ctx.log_notice(&format!(
                "ratelimit: {name} not registered: {}; the RL.* commands are loaded, and RL.GCRA reads the same keys (see docs/redis-cell.md)",
                cl_throttle_taken_by()
            ));
        } else {
            return Err(format!(
                "could not create command {:?}",
                command_docs::c_name(name)?
            ));
        }
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
    let command = def.command;
    let (first, last, step) = keyspec::legacy_range(command.keys);
    let flags = match command.keys {
        Keys::NumKeys => format!("{} getkeys-api", command.flags),
        _ => command.flags.to_string(),
    };
    let flags = CString::new(flags).map_err(|_| "command flags".to_string())?;
    let name = command_docs::c_name(command.name)?;
    // SAFETY: called during OnLoad with the module's context; name and flags are
    // NUL-terminated strings alive for the call; the handler has the server's signature.
    let rc = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
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
    command: &Command,
    own_category: bool,
) -> Result<acl::Categories, String> {
    let name = command_docs::c_name(command.name)?;
    keyspec::set_command_info(ctx.ctx, &name, command)?;
    acl::set_categories(ctx, &name, command.acl, own_category)
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
pub static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

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

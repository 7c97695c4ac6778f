//! redis-ratelimit: rate limiting as native Redis/Valkey commands.
//!
//! This file only registers the module. The limiter logic is in the `ratelimit-core`
//! crate (pure, unit-tested); `commands/` holds the per-command glue.

mod any_key;
mod api;
mod clock;
mod commands;
mod effects;
mod keyspec;
mod open_key;
mod reply;
mod stats;
mod string_key;

use keyspec::{set_command_info, KeySpec, READ_WRITE_UPDATE, WRITE_UPDATE};
use redis_module::{redis_module, Context, RedisString, Status};

// The module allocates with the server's allocator; anything linked outside a server
// (tests, tools) uses the system one.
#[cfg(not(test))]
type ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const MODULE_ALLOCATOR: ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type ModuleAllocator = std::alloc::System;
#[cfg(test)]
const MODULE_ALLOCATOR: ModuleAllocator = std::alloc::System;

/// Arity (negative: at least), key positions and key access of every command, applied
/// on load.
const COMMAND_INFO: &[(&str, i32, KeySpec, u64)] = &[
    ("RL.FIXED", -4, KeySpec::First, READ_WRITE_UPDATE),
    ("RL.GCRA", -5, KeySpec::First, READ_WRITE_UPDATE),
    // RL.MULTI numkeys key LIMIT window limit, at least.
    ("RL.MULTI", -6, KeySpec::NumKeys, READ_WRITE_UPDATE),
    // As EXPIRE: the keys' TTLs change, their values are neither read nor returned.
    ("RL.BULKEXPIRE", -3, KeySpec::AllFrom(2), WRITE_UPDATE),
    // Node-wide like SCAN: no keys declared; it checks each key's ACL itself.
    ("RL.SWEEP", -3, KeySpec::None, 0),
];

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // Absolute expiry times are read and written with APIs that arrived in Redis 6.2;
    // command info in 7.0.
    let has_abs_expire =
        api::api!(RedisModule_GetAbsExpire).is_ok() && api::api!(RedisModule_SetAbsExpire).is_ok();
    if !has_abs_expire {
        ctx.log_warning("ratelimit: this server lacks RedisModule_GetAbsExpire/SetAbsExpire (Redis 7.0+ or Valkey 8+ is needed)");
        return Status::Err;
    }
    if effects::take_over_modified_signal(ctx).is_err() {
        ctx.log_warning("ratelimit: this server lacks RedisModule_SetModuleOptions (Redis 7.0+ or Valkey 8+ is needed)");
        return Status::Err;
    }
    for &(name, arity, keys, key_flags) in COMMAND_INFO {
        if let Err(e) = set_command_info(ctx.ctx, name, arity, keys, key_flags) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
    }
    Status::Ok
}

redis_module! {
    name: "ratelimit",
    version: 1,
    allocator: (ModuleAllocator, MODULE_ALLOCATOR),
    data_types: [],
    init: init,
    commands: [
        ["RL.FIXED", commands::fixed::command, "write deny-oom fast", 1, 1, 1, ""],
        ["RL.GCRA", commands::gcra::command, "write deny-oom fast", 1, 1, 1, ""],
        // Keys come from the numkeys key spec set in `init` (the server then marks the
        // command movablekeys); the legacy first/last/step cannot express them. Redis
        // 7.0 routes Cluster calls with the legacy range only, or by asking the command
        // (`getkeys-api`): RL.MULTI answers those requests too.
        ["RL.MULTI", commands::multi::command, "write deny-oom getkeys-api", 0, 0, 0, ""],
        // Not deny-oom: giving keys a TTL is how a full server gets its memory back
        // (EXPIRE is not deny-oom either).
        ["RL.BULKEXPIRE", commands::bulkexpire::command, "write", 2, -1, 1, ""],
        ["RL.SWEEP", commands::sweep::command, "write", 0, 0, 0, ""],
    ],
}

//! Arity, key specs and documentation through `RedisModule_SetCommandInfo` (Redis
//! 7.0+), so that `COMMAND GETKEYS`, Cluster routing, `CROSSSLOT` and ACL key patterns
//! see exactly the keys each command names, and `COMMAND DOCS` (and so `redis-cli`'s
//! hints) describes its arguments (`command_docs.rs`), all from the command's entry in
//! `ratelimit_core::commands::TABLE`; and the answer to a server that
//! asks a command where its keys are.
//!
//! Why by hand and not with redis-module's `#[command]` attribute, which builds the
//! same information: the attribute registers through an API that Redis 7.0 does not
//! have (it arrived in 7.2), so a module using it fails to load on 7.0. And Redis 7.0
//! routes module commands in Cluster by the legacy first/last/step range or by asking
//! the command (`getkeys-api`), not by key specs: the commands with `numkeys` answer
//! those requests themselves ([`report_numkeys_positions`]).

use super::command_docs::ServerText;
use crate::api::api;
use crate::argv::Args;
use ratelimit_core::commands::{Access, Command, Keys};
use ratelimit_core::limiters::windows;
use redis_module::{raw, Context};
use std::ffi::CStr;
use std::mem::{size_of, zeroed};
use std::os::raw::c_int;

/// The legacy first key, last key and step given to `RedisModule_CreateCommand`: what
/// servers that ignore key specs route by.
pub fn legacy_range(keys: Keys) -> (c_int, c_int, c_int) {
    match keys {
        Keys::First => (1, 1, 1),
        Keys::AllFrom(i) => (c_int::try_from(i).unwrap_or(0), -1, 1),
        Keys::NumKeys | Keys::None => (0, 0, 0),
    }
}

/// Where the keys of a call are among its arguments: the first one's place and how many
/// (`None`: it names none, or `numkeys` is not valid: the command then refuses the call
/// with its own error before touching a key).
pub fn positions(keys: Keys, args: &Args) -> Option<(usize, usize)> {
    match keys {
        Keys::First => Some((1, 1)),
        Keys::AllFrom(i) => Some((i, args.len().saturating_sub(i))),
        Keys::NumKeys => windows::key_positions(args.after_name())
            .map(|positions| (positions.start() + 1, positions.count())),
        Keys::None => None,
    }
}

/// The key spec flags of an access.
fn key_flags(access: Access) -> u64 {
    let flags = match access {
        // A limiter reads and changes its state.
        Access::ReadWriteUpdate => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        // Changes keys without reading or returning their values (as EXPIRE).
        Access::WriteUpdate => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        Access::None => 0,
    };
    flags as u64
}

/// Set the arity, key spec and documentation of `command`, registered as `name`. Fails
/// (the module then refuses to load) when the server lacks the API.
pub fn set_command_info(
    ctx: *mut raw::RedisModuleCtx,
    name: &CStr,
    command: &Command,
) -> Result<(), String> {
    let (Ok(get_command), Ok(set_info)) = (
        api!(RedisModule_GetCommand),
        api!(RedisModule_SetCommandInfo),
    ) else {
        return Err(
            "this server has no RedisModule_SetCommandInfo (Redis 7.0 or later is needed)".into(),
        );
    };
    // SAFETY: called from OnLoad with the module context; the name is NUL-terminated.
    let registered = unsafe { get_command(ctx, name.as_ptr()) };
    if registered.is_null() {
        return Err(format!("command {name:?} is not registered"));
    }

    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    let keys = command.keys;
    // Two specs: the real one and the all-zero terminator.
    // SAFETY: the key spec is plain C data for which all-zero is the terminator value.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { zeroed() };
    let spec = &mut specs[0];
    spec.flags = key_flags(command.access);
    match keys {
        Keys::None => {}
        Keys::First | Keys::AllFrom(_) | Keys::NumKeys => {
            spec.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            let pos = match keys {
                Keys::AllFrom(i) => c_int::try_from(i).map_err(|_| "key position")?,
                _ => 1,
            };
            spec.bs.index = raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos };
            match keys {
                Keys::NumKeys => {
                    spec.find_keys_type =
                        raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
                    spec.fk.keynum = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                        keynumidx: 0,
                        firstkey: 1,
                        keystep: 1,
                    };
                }
                _ => {
                    spec.find_keys_type =
                        raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                    let lastkey = if matches!(keys, Keys::First) { 0 } else { -1 };
                    spec.fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                        lastkey,
                        keystep: 1,
                        limit: 0,
                    };
                }
            }
        }
    }
    let mut text = ServerText::default();
    // SAFETY: all-zero is a valid "not set" value for every field of the info struct.
    let mut info: raw::RedisModuleCommandInfo = unsafe { zeroed() };
    info.version = &version;
    info.arity = command.arity;
    if !matches!(keys, Keys::None) {
        info.key_specs = specs.as_mut_ptr();
    }
    info.summary = text.c_str(command.summary)?;
    info.complexity = text.c_str(command.complexity)?;
    info.since = text.c_str(command.since)?;
    if let Some(tips) = command.tips {
        info.tips = text.c_str(tips)?;
    }
    info.args = text.args(command.args)?;
    // SAFETY: `info` and everything it points to (`text`, `specs`) live until the call
    // returns; the server copies what it keeps.
    let rc = unsafe { set_info(registered, &info) };
    if rc != raw::REDISMODULE_OK as i32 {
        return Err(format!("RedisModule_SetCommandInfo failed for {name:?}"));
    }
    Ok(())
}

/// Whether the server calls the command only to learn where its keys are
/// (`getkeys-api`): Redis 7.0 routes Cluster calls of movable-keys module commands that
/// way, while newer servers read the key spec.
pub fn is_keys_position_request(ctx: &Context) -> bool {
    match api!(RedisModule_IsKeysPositionRequest) {
        // SAFETY: ctx is the live command context.
        Ok(is_request) => (unsafe { is_request(ctx.ctx) }) != 0,
        Err(_) => false,
    }
}

/// Tell the server the positions of the keys of a `cmd numkeys key [key ...] ...`
/// call. An invalid numkeys reports nothing: the call then runs locally and gets its
/// error.
pub fn report_numkeys_positions(ctx: &Context, args: &Args) {
    let Ok(key_at_pos) = api!(RedisModule_KeyAtPos) else {
        return;
    };
    let Some(positions) = windows::key_positions(args.after_name()) else {
        return;
    };
    for pos in positions {
        // Positions count the command name; `key_positions` keeps them below argc.
        let Ok(pos) = c_int::try_from(pos + 1) else {
            return;
        };
        // SAFETY: ctx is the live context of a keys-position request; pos < argc.
        unsafe { key_at_pos(ctx.ctx, pos) };
    }
}

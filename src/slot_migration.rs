//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): the server refuses to
//! start one while a loaded module has not declared that it handles it. The module
//! declares it where the server has it, through the raw module options.
//!
//! Why the declaration is true: the module keeps no data of its own outside the keys
//! (plain strings and sorted sets, no module data type, no auxiliary RDB data, no index
//! of keys and no keyspace-event subscription), and every write reaches replicas, the
//! AOF and a slot's migration stream as plain keyed commands with absolute times (`SET
//! key value PXAT t`, `ZADD`, `ZREMRANGEBYSCORE`, `PEXPIREAT`), which the importing node
//! applies as it would from any primary. The module's own commands never run on the
//! importing side (they are routed by slot, and the slot is not the importer's until the
//! move ends); `RL.SWEEP` scans with `SCAN`, which does not show keys of a slot still
//! being imported.

use crate::api::api;
use redis_module::raw;
use std::os::raw::{c_char, c_int, c_void};

/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (Valkey 9's `valkeymodule.h`).
/// Redis has no flag of that name, and a later Redis may give the same bit another
/// meaning: it is set only on a server that is Valkey and lists the bit among its
/// options.
pub const HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// The option bits to add for slot migration on this server: the flag on Valkey 9 and
/// later, nothing elsewhere (Redis, Valkey 8).
pub fn option_flags() -> c_int {
    if valkey_supported_options() & HANDLE_ATOMIC_SLOT_MIGRATION != 0 {
        HANDLE_ATOMIC_SLOT_MIGRATION
    } else {
        0
    }
}

/// The module options this server supports when it is Valkey (which registers its API
/// under `ValkeyModule_` names too), 0 on any other server.
fn valkey_supported_options() -> c_int {
    let Ok(get_api) = api!(RedisModule_GetApi) else {
        return 0;
    };
    let mut f: *mut c_void = std::ptr::null_mut();
    // SAFETY: GetApi writes a function pointer to `f` when the server knows the name,
    // and nothing otherwise; the name is a static NUL-terminated string.
    let rc = unsafe {
        get_api(
            c"ValkeyModule_GetModuleOptionsAll".as_ptr() as *const c_char,
            (&mut f as *mut *mut c_void).cast(),
        )
    };
    if rc != raw::REDISMODULE_OK as c_int || f.is_null() {
        return 0;
    }
    // SAFETY: the server gave this pointer for `int GetModuleOptionsAll(void)`.
    let all: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    // SAFETY: takes no argument, only reads a constant.
    unsafe { all() }
}

//! ACL: the categories the commands are put in, and, on servers that cannot put module
//! commands in categories, the module's own check that the caller may write.
//!
//! Servers with `RedisModule_SetCommandACLCategories` (Redis 7.2+, Valkey 8+) get each
//! command's categories (`@write`, and `@fast`/`@slow`, `@keyspace`), and, where the
//! server lets modules add categories (`RedisModule_AddACLCategory`: Redis 7.4+, Valkey
//! 8+), the category `@ratelimit` too. The server then enforces rules such as `-@write`
//! or `+@ratelimit` itself.
//!
//! Redis 7.0 has neither: module commands are in no category, so `-@write` does not
//! name them and a user denied writes could still write through them. There the module
//! checks, before each call, that the caller may run the plain write command the call
//! stands for (`SET` for the limiters, `PEXPIRE` for the bulk TTL commands), and
//! refuses the call with `NOPERM` (and an `ACL LOG` entry) when not. The check costs
//! a few hundred nanoseconds a call; a server without ACL users can turn it off with
//! `ratelimit.acl-write-check no`.

use super::config;
use super::keyspec;
use crate::api::api;
use crate::argv::{Args, KeyName};
use crate::static_strings::{self, StaticString};
use ratelimit_core::commands::{self, Command, Id, Probe};
use ratelimit_core::Error;
use redis_module::{raw, Context};
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this server lacks command categories, so the module checks writes itself.
static SELF_CHECK: AtomicBool = AtomicBool::new(false);

/// The name of the category the module adds where the server allows it.
pub const OWN_CATEGORY: &CStr = c"ratelimit";

/// How the commands' categories were set on this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Categories {
    /// The server's categories and `@ratelimit`.
    WithOwn,
    /// The server's categories only (no `RedisModule_AddACLCategory`).
    ServerOnly,
    /// None: the module checks writes itself.
    SelfCheck,
}

/// Add `@ratelimit` where the server allows it (during OnLoad, before any command is
/// given it); whether it exists now.
pub fn add_own_category(ctx: &Context) -> bool {
    let Ok(add) = api!(RedisModule_AddACLCategory) else {
        return false;
    };
    // SAFETY: called during OnLoad with the module's context; the name is static.
    (unsafe { add(ctx.ctx, OWN_CATEGORY.as_ptr()) }) == raw::REDISMODULE_OK as c_int
}

/// Put command `name` in `categories` (space-separated, as `COMMAND INFO` lists them,
/// without `@`), plus `@ratelimit` when `own`; or, on a server without categories,
/// turn the module's own write check on.
pub fn set_categories(
    ctx: &Context,
    name: &CStr,
    categories: &str,
    own: bool,
) -> Result<Categories, String> {
    let (Ok(get_command), Ok(set)) = (
        api!(RedisModule_GetCommand),
        api!(RedisModule_SetCommandACLCategories),
    ) else {
        SELF_CHECK.store(true, Ordering::Relaxed);
        return Ok(Categories::SelfCheck);
    };
    // SAFETY: called during OnLoad with the module context; the name is NUL-terminated.
    let command = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return Err(format!("command {name:?} is not registered"));
    }
    let all = if own {
        format!("{categories} {}", OWN_CATEGORY.to_string_lossy())
    } else {
        categories.to_string()
    };
    let all = std::ffi::CString::new(all).map_err(|_| "bad category list".to_string())?;
    // SAFETY: command was returned by GetCommand; the list is NUL-terminated and the
    // server copies what it keeps.
    if unsafe { set(command, all.as_ptr()) } != raw::REDISMODULE_OK as c_int {
        return Err(format!(
            "could not set the ACL categories of {name:?} to {all:?}"
        ));
    }
    Ok(if own {
        Categories::WithOwn
    } else {
        Categories::ServerOnly
    })
}

/// The module string of the plain command a call stands for.
fn probe_string(probe: Probe) -> &'static StaticString {
    match probe {
        Probe::Set => &static_strings::SET,
        Probe::Pexpire => &static_strings::PEXPIRE,
    }
}

/// On a server without command categories: refuse the call unless the caller may run
/// the plain write command the command stands for (its `probe`: `SET key 1` or
/// `PEXPIRE key 1`) on **every** key the call names (where its `keys` says they are in
/// `args`; the command alone when it names none), with the server's NOPERM wording for
/// the command and an entry in `ACL LOG`. Elsewhere the server has already checked; and
/// an operator may turn the check off (`ratelimit.acl-write-check no`) on a server
/// without ACL users.
pub fn check_call(ctx: &Context, command: &'static Command, args: &Args) -> Result<(), Error> {
    if !SELF_CHECK.load(Ordering::Relaxed) || !config::acl_write_check() {
        return Ok(());
    }
    let caller = CallerAcl::current(ctx)?;
    let (first, n) = keyspec::positions(command.keys, args).unwrap_or((0, 0));
    let probe = probe_string(command.probe);
    let command = command.name;
    let mut checked = false;
    for key in (first..first + n).filter_map(|i| args.key(i)) {
        caller.check(ctx, command, probe, Some(key))?;
        checked = true;
    }
    if !checked {
        caller.check(ctx, command, probe, None)?;
    }
    Ok(())
}

/// Whether the module checks writes itself (a server without command categories).
pub fn self_check() -> bool {
    SELF_CHECK.load(Ordering::Relaxed)
}

/// The ACL user running the command, to check permissions with; freed on drop unless
/// it is the default user's, which is made once and kept: the server never frees or
/// moves its default user (`ACL LOAD` copies the new rules into it in place, and
/// `ACL DELUSER default` is refused), so its handle stays valid, and the call of the
/// usual user saves the lookup and the free of a handle.
/// A client without a user (one a module made) is not restricted, as the server
/// itself treats it.
pub struct CallerAcl(Option<*mut raw::RedisModuleUser>, bool);

thread_local! {
    /// The default user's handle, made on its first call (commands run on the server's
    /// main thread).
    static DEFAULT_USER: std::cell::Cell<*mut raw::RedisModuleUser> =
        const { std::cell::Cell::new(std::ptr::null_mut()) };
}

impl CallerAcl {
    pub fn current(ctx: &Context) -> Result<CallerAcl, Error> {
        let current_name = api!(RedisModule_GetCurrentUserName)?;
        let user_from_name = api!(RedisModule_GetModuleUserFromUserName)?;
        let free_string = api!(RedisModule_FreeString)?;
        // SAFETY: ctx is the live command context.
        let name = unsafe { current_name(ctx.ctx) };
        if name.is_null() {
            return Ok(CallerAcl(None, false));
        }
        let default = {
            let mut len = 0;
            let ptr = raw::string_ptr_len(name, &mut len);
            // SAFETY: the server gives `len` readable bytes at `ptr`, alive with `name`.
            !ptr.is_null()
                && unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) } == b"default"
        };
        let kept = if default {
            DEFAULT_USER.with(|u| u.get())
        } else {
            std::ptr::null_mut()
        };
        let user = if kept.is_null() {
            // SAFETY: name is a live string returned above; it is freed right after.
            unsafe { user_from_name(name) }
        } else {
            kept
        };
        // SAFETY: the string came from GetCurrentUserName and is not used again.
        unsafe { free_string(ctx.ctx, name) };
        if user.is_null() {
            return Err(Error::UnknownAclUser);
        }
        if default && kept.is_null() {
            DEFAULT_USER.with(|u| u.set(user));
        }
        Ok(CallerAcl(Some(user), default))
    }

    /// Refuse unless this user may run `probe` (`SET key 1`, `PEXPIRE key 1`, or the
    /// command alone without a key), with `command`'s NOPERM error and an `ACL LOG`
    /// entry.
    fn check(
        &self,
        ctx: &Context,
        command: &'static str,
        probe: &StaticString,
        key: Option<KeyName>,
    ) -> Result<(), Error> {
        let Some(user) = self.0 else {
            return Ok(());
        };
        let (Ok(check), Some(name), Some(value)) = (
            api!(RedisModule_ACLCheckCommandPermissions),
            probe.get(),
            static_strings::ANY_VALUE.get(),
        ) else {
            return Err(Error::Internal("ACL API"));
        };
        // The whole command, key and value included: the server may read its arguments
        // to find the keys (SET does, for its GET option). A call without a key (RL.SWEEP)
        // is checked as `PEXPIRE` alone, which the server reads no further than its key
        // specs, and then key by key.
        let mut with_key;
        let mut alone;
        let argv: &mut [*mut raw::RedisModuleString] = match key {
            Some(key) => {
                with_key = [name, key.ptr(), value];
                &mut with_key
            }
            None => {
                alone = [name];
                &mut alone
            }
        };
        let argc = argv.len() as c_int;
        // SAFETY: user is live (freed on drop); argv holds live strings, which the check
        // only reads.
        let allowed =
            unsafe { check(user, argv.as_mut_ptr(), argc) } == raw::REDISMODULE_OK as c_int;
        if allowed {
            return Ok(());
        }
        if let Ok(log) = api!(RedisModule_ACLAddLogEntry) {
            // SAFETY: ctx, user and the object string are live.
            unsafe {
                log(
                    ctx.ctx,
                    user,
                    name,
                    raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_CMD,
                )
            };
        }
        Err(Error::NoPermission { command })
    }

    /// Whether the user may change `key` (the permission `EXPIRE key` needs).
    pub fn may_write(&self, ctx: &Context, key: KeyName) -> bool {
        let Some(user) = self.0 else {
            return true;
        };
        if self_check() {
            // No categories: PEXPIRE on this key, command and key together (unless the
            // operator turned the module's own check off).
            let sweep = commands::entry(Id::Sweep);
            return !config::acl_write_check()
                || self
                    .check(ctx, sweep.name, probe_string(sweep.probe), Some(key))
                    .is_ok();
        }
        let Ok(check) = api!(RedisModule_ACLCheckKeyPermissions) else {
            return false;
        };
        // SAFETY: user is live until drop; key is a live module string.
        let rc = unsafe { check(user, key.ptr(), raw::REDISMODULE_CMD_KEY_UPDATE as c_int) };
        rc == raw::REDISMODULE_OK as c_int
    }
}

impl Drop for CallerAcl {
    fn drop(&mut self) {
        if self.1 {
            // The default user's handle is kept (see above).
            return;
        }
        if let (Some(user), Ok(free)) = (self.0, api!(RedisModule_FreeModuleUser)) {
            // SAFETY: obtained from GetModuleUserFromUserName, freed exactly once.
            unsafe { free(user) };
        }
    }
}

//! `COMMAND DOCS` from the command table: each entry's summary, complexity, version,
//! hints and argument tree (`ratelimit_core::commands`) in the layout the server reads
//! (`RedisModuleCommandArg` levels of C strings). `redis-cli` builds its hints and
//! `HELP RL.GCRA` from them, and client libraries and GUIs read them. Given to the
//! server with the key specs by `RedisModule_SetCommandInfo` (Redis 7.0+, Valkey), in
//! `keyspec.rs`; `tests/command_docs.rs` checks that each command's arguments, rendered
//! as `redis-cli` renders them, are the syntax line of the command's page in `docs/`.

use ratelimit_core::commands::{Arg, ArgType};
use redis_module::raw;
use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

/// Strings and argument levels in the server's layout, owned here so that the pointers
/// stay valid until the server has copied them (during `RedisModule_SetCommandInfo`).
#[derive(Default)]
pub struct ServerText {
    /// Every string handed out. Moving a `CString` into this list does not move its
    /// bytes, so pointers to them stay valid.
    strings: Vec<CString>,
    /// Every argument level built, each an array ended by an all-zero entry; the last
    /// one is the top level. Moving a `Vec` into this list does not move its elements.
    levels: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl ServerText {
    /// `text` as a C string that lives as long as `self` (an error if it holds NUL).
    pub fn c_str(&mut self, text: &str) -> Result<*const std::os::raw::c_char, String> {
        let s = CString::new(text).map_err(|_| format!("NUL in {text:?}"))?;
        let p = s.as_ptr();
        self.strings.push(s);
        Ok(p)
    }

    /// `args` as the server's argument tree: the top level, for
    /// `RedisModuleCommandInfo::args`.
    pub fn args(&mut self, args: &[Arg]) -> Result<*mut raw::RedisModuleCommandArg, String> {
        let mut top = self.level(args)?;
        let p = top.as_mut_ptr();
        self.levels.push(top);
        Ok(p)
    }

    fn level(&mut self, args: &[Arg]) -> Result<Vec<raw::RedisModuleCommandArg>, String> {
        let mut level: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
        for arg in args {
            let subargs = match arg.kind {
                ArgType::Block(children) | ArgType::OneOf(children) => {
                    let mut sub = self.level(children)?;
                    let p = sub.as_mut_ptr();
                    self.levels.push(sub);
                    p
                }
                _ => ptr::null_mut(),
            };
            let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
            if arg.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if arg.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            if arg.multiple_token {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE_TOKEN;
            }
            let token = match arg.token {
                Some(token) => self.c_str(token)?,
                None => ptr::null(),
            };
            level.push(raw::RedisModuleCommandArg {
                name: self.c_str(arg.name)?,
                type_: arg_type(arg.kind),
                // Every command here has one key spec; other arguments say -1.
                key_spec_index: if matches!(arg.kind, ArgType::Key) {
                    0
                } else {
                    -1
                },
                token,
                summary: self.c_str(arg.summary)?,
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs,
                display_text: ptr::null(),
            });
        }
        level.push(end_of_args());
        Ok(level)
    }
}

/// A command name as the server's C string.
pub fn c_name(name: &str) -> Result<CString, String> {
    CString::new(name).map_err(|_| format!("NUL in the command name {name:?}"))
}

fn arg_type(kind: ArgType) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgType::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgType::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgType::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgType::UnixTime => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        ArgType::Pattern => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PATTERN,
        ArgType::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ArgType::Block(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        ArgType::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
    }
}

/// The entry that ends an array of arguments: a null name.
fn end_of_args() -> raw::RedisModuleCommandArg {
    raw::RedisModuleCommandArg {
        name: ptr::null(),
        type_: 0,
        key_spec_index: 0,
        token: ptr::null(),
        summary: ptr::null(),
        since: ptr::null(),
        flags: 0,
        deprecated_since: ptr::null(),
        subargs: ptr::null_mut(),
        display_text: ptr::null(),
    }
}

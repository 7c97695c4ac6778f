//! What `COMMAND DOCS` says about each command: a summary, its complexity, the version
//! that added it, hints for clients, and its arguments as a tree (names, types, tokens,
//! optional and repeated parts). `redis-cli` builds its hints and `HELP RL.GCRA` from
//! them, and client libraries and GUIs read them. Given to the server with the key specs
//! by `RedisModule_SetCommandInfo` (Redis 7.0+, Valkey), in `keyspec.rs`.
//!
//! One entry of [`DOCS`] per command: a command registered without one fails to load
//! (`lib.rs`), and `tests/command_docs.rs` checks that each entry, rendered as
//! `redis-cli` renders it, is the syntax line of the command's page in `docs/`.

use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

/// The version of this module that added the commands below.
const FIRST: &CStr = c"0.1.0";

/// A limiter's reply depends on the time it is judged at (`AT`, or the server's clock).
const TIME_DEPENDENT: &CStr = c"nondeterministic_output";

/// The documentation of one command.
pub struct CommandDoc {
    pub name: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub since: &'static CStr,
    /// Space-separated hints for clients (`COMMAND DOCS` lists them as `doc_flags`/tips).
    pub tips: Option<&'static CStr>,
    pub args: &'static [Arg],
}

/// What an argument is, as `COMMAND DOCS` types it.
#[derive(Clone, Copy)]
pub enum Kind {
    /// A key: the command's key spec (each command here has one).
    Key,
    Integer,
    /// Any bytes: durations (`10s`), names, values.
    String,
    /// A time in Unix milliseconds.
    UnixTime,
    /// A glob-style pattern.
    Pattern,
    /// The token alone (`ALIGN`).
    PureToken,
    /// These arguments in this order (`LIMIT window limit`).
    Block(&'static [Arg]),
}

/// One argument of a command, or of a block.
pub struct Arg {
    pub name: &'static CStr,
    pub kind: Kind,
    /// The keyword before the value (`COST` in `COST n`), or the word of a pure token.
    pub token: Option<&'static CStr>,
    pub summary: &'static CStr,
    pub optional: bool,
    /// It may be repeated (`key [key ...]`).
    pub multiple: bool,
    /// Each repetition repeats the token too (`LIMIT window limit [LIMIT window limit ...]`).
    pub multiple_token: bool,
}

impl Arg {
    const fn new(name: &'static CStr, kind: Kind, summary: &'static CStr) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            summary,
            optional: false,
            multiple: false,
            multiple_token: false,
        }
    }

    /// `keyword value`, optional: `[COST n]`.
    const fn option(
        token: &'static CStr,
        name: &'static CStr,
        kind: Kind,
        summary: &'static CStr,
    ) -> Arg {
        let mut arg = Arg::new(name, kind, summary);
        arg.token = Some(token);
        arg.optional = true;
        arg
    }

    /// A keyword alone, optional: `[ALIGN]`.
    const fn flag(token: &'static CStr, name: &'static CStr, summary: &'static CStr) -> Arg {
        let mut arg = Arg::new(name, Kind::PureToken, summary);
        arg.token = Some(token);
        arg.optional = true;
        arg
    }

    const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }

    const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }
}

// The arguments several commands share, with the words of docs/common-rules.md.

const KEY: Arg = Arg::new(c"key", Kind::Key, c"the limited identity: one key");
const KEYS: Arg = Arg::new(
    c"key",
    Kind::Key,
    c"the identifiers, 1 to 64 distinct keys (one slot in Cluster)",
)
.multiple();
const NUMKEYS: Arg = Arg::new(c"numkeys", Kind::Integer, c"how many keys follow, 1 to 64");
const LIMIT: Arg = Arg::new(
    c"limit",
    Kind::Integer,
    c"the cost allowed per window, >= 1",
);
const WINDOW: Arg = Arg::new(
    c"window",
    Kind::String,
    c"a duration: 1500ms, 90 (seconds), 1m, 24h, 7d",
);
const COST: Arg = Arg::option(
    c"COST",
    c"n",
    Kind::Integer,
    c"what this request consumes (default 1); 0 peeks and writes nothing",
);
const ALIGN: Arg = Arg::flag(
    c"ALIGN",
    c"align",
    c"windows aligned to the Unix epoch instead of starting at the first request",
);
const AT: Arg = Arg::option(
    c"AT",
    c"unix_ms",
    Kind::UnixTime,
    c"judge the request at this Unix time in milliseconds instead of the server's clock",
);
/// `LIMIT window limit [LIMIT window limit ...]`.
const LIMITS: Arg = Arg {
    name: c"limits",
    kind: Kind::Block(&[
        WINDOW,
        Arg::new(
            c"limit",
            Kind::Integer,
            c"the cost allowed per window, >= 1",
        ),
    ]),
    token: Some(c"LIMIT"),
    summary: c"a window and its limit; 1 to 16 windows, none twice",
    optional: false,
    multiple: true,
    multiple_token: true,
};
const MAX_BURST: Arg = Arg::new(
    c"max_burst",
    Kind::Integer,
    c"requests allowed at once beyond the first, >= 0 (capacity max_burst + 1)",
);
const COUNT: Arg = Arg::new(
    c"count",
    Kind::Integer,
    c"requests per period in the long run, >= 1",
);
const PERIOD: Arg = Arg::new(
    c"period",
    Kind::String,
    c"a duration: 60 (seconds), 1m, 1500ms, 1d",
);
const BUCKETS: Arg = Arg::option(
    c"BUCKETS",
    c"n",
    Kind::Integer,
    c"buckets per window, 1 to 100 (default 10)",
);
const META: Arg = Arg::option(
    c"META",
    c"value",
    Kind::String,
    c"any bytes, at most 256, recorded with the request (who made it)",
);
const TTL: Arg = Arg::new(
    c"seconds",
    Kind::String,
    c"the TTL to give: a duration (60, 1500ms, 10m, 24h, 7d)",
);

/// Every command's documentation, in the order of `lib.rs`'s table. Adding a command is
/// one entry here.
pub const DOCS: &[CommandDoc] = &[
    CommandDoc {
        name: c"RL.FIXED",
        summary: c"Counts a request in a fixed window: allowed, limit, remaining, retry and reset times",
        complexity: c"O(1)",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[KEY, LIMIT, WINDOW, COST, ALIGN, AT],
    },
    CommandDoc {
        name: c"RL.GCRA",
        summary: c"Spaces requests evenly with a burst allowance (GCRA); with DELAY, books a slot and says when to act",
        complexity: c"O(1)",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[
            KEY,
            MAX_BURST,
            COUNT,
            PERIOD,
            COST,
            AT,
            Arg::option(
                c"DELAY",
                c"max_delay",
                Kind::String,
                c"queue instead of drop: book a request that fits within this duration",
            ),
        ],
    },
    CommandDoc {
        name: c"RL.MULTI",
        summary: c"Checks several keys against several fixed windows, all or nothing, in one call",
        complexity: c"O(K * W) for K keys and W windows",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[NUMKEYS, KEYS, LIMITS, COST, ALIGN, AT],
    },
    CommandDoc {
        name: c"RL.SLIDING",
        summary: c"Checks several keys against several sliding windows, all or nothing, in one call",
        complexity: c"O(K * W * B) for K keys, W windows and B buckets per window",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[NUMKEYS, KEYS, LIMITS, BUCKETS, COST, AT],
    },
    CommandDoc {
        name: c"RL.LOG",
        summary: c"An exact moving window kept as a sorted set of the requests and who made them (META)",
        complexity: c"O(log N) per entry written, for a log of N entries",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[
            KEY,
            Arg::new(
                c"limit",
                Kind::Integer,
                c"the most cost in any window, 1 to 10000",
            ),
            WINDOW,
            META,
            COST,
            AT,
        ],
    },
    CommandDoc {
        name: c"RL.BULKEXPIRE",
        summary: c"Gives a TTL to those of the named keys that have none; replies with the keys that got one",
        complexity: c"O(N) for N keys",
        since: FIRST,
        tips: None,
        args: &[
            TTL,
            Arg::new(c"key", Kind::Key, c"keys of any type").multiple(),
        ],
    },
    CommandDoc {
        name: c"RL.SWEEP",
        summary: c"Gives a TTL to the keys without one in one SCAN chunk of this node; replies next cursor, scanned, expired",
        complexity: c"O(COUNT): one chunk of at most COUNT keys",
        since: FIRST,
        tips: Some(c"nondeterministic_output request_policy:special response_policy:special"),
        args: &[
            Arg::new(
                c"cursor",
                Kind::Integer,
                c"0 to start, then the cursor of the previous reply",
            ),
            TTL,
            Arg::option(
                c"MATCH",
                c"pattern",
                Kind::Pattern,
                c"only keys matching this glob pattern",
            ),
            Arg::option(
                c"COUNT",
                c"n",
                Kind::Integer,
                c"keys to visit in this call, 1 to 5000 (default 1000)",
            ),
            Arg::option(
                c"TYPE",
                c"type",
                Kind::String,
                c"only keys of this type (string, hash, zset, ...)",
            ),
            Arg::flag(
                c"DRYRUN",
                c"dryrun",
                c"change nothing; count the keys that would get a TTL",
            ),
        ],
    },
    CommandDoc {
        name: c"RL.ALL",
        summary: c"Checks one request against limiters of different algorithms on several keys, all or nothing",
        complexity: c"O(N) for N rules, each as its own command",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[NUMKEYS, KEYS, RULES, COST, AT],
    },
    CommandDoc {
        name: c"CL.THROTTLE",
        summary: c"redis-cell's command: GCRA with its arguments and its reply (times in seconds)",
        complexity: c"O(1)",
        since: FIRST,
        tips: Some(TIME_DEPENDENT),
        args: &[
            KEY,
            MAX_BURST,
            COUNT,
            Arg::new(c"period", Kind::Integer, c"the period in whole seconds"),
            Arg::new(
                c"quantity",
                Kind::Integer,
                c"what this request consumes (default 1); 0 peeks",
            )
            .optional(),
        ],
    },
];

/// RL.ALL's rules, one per key. A plain argument rather than a one-of of five blocks:
/// `redis-cli` would write that tree out in full, twice (`x [x ...]`), as a hint of
/// several hundred characters; the forms are in the summary and on the command's page.
const RULES: Arg = Arg::new(
    c"rule",
    Kind::String,
    c"FIXED i limit window [ALIGN] | GCRA i max_burst count period | MULTI i LIMIT window limit [...] [ALIGN] | SLIDING i LIMIT window limit [...] [BUCKETS n] | LOG i limit window [META value]; i: the key's position, from 1",
)
.multiple();

/// The documentation of `name`, if it has an entry.
pub fn find(name: &CStr) -> Option<&'static CommandDoc> {
    DOCS.iter().find(|doc| doc.name == name)
}

/// An argument tree in the server's layout: every level an array ended by an all-zero
/// entry, the levels owned here so that the pointers stay valid until the server has
/// copied them (during `RedisModule_SetCommandInfo`).
pub struct ServerArgs {
    /// Every level built; the last one is the top level. Moving a `Vec` into this list
    /// does not move its elements, so pointers into them stay valid.
    levels: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl ServerArgs {
    pub fn new(args: &'static [Arg]) -> ServerArgs {
        let mut built = ServerArgs { levels: Vec::new() };
        let top = built.level(args);
        built.levels.push(top);
        built
    }

    /// The top level, for `RedisModuleCommandInfo::args`.
    pub fn as_mut_ptr(&mut self) -> *mut raw::RedisModuleCommandArg {
        match self.levels.last_mut() {
            Some(top) => top.as_mut_ptr(),
            None => ptr::null_mut(),
        }
    }

    fn level(&mut self, args: &'static [Arg]) -> Vec<raw::RedisModuleCommandArg> {
        let mut level: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
        for arg in args {
            let subargs = match arg.kind {
                Kind::Block(children) => {
                    let mut sub = self.level(children);
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
            level.push(raw::RedisModuleCommandArg {
                name: arg.name.as_ptr(),
                type_: arg_type(arg.kind),
                // Every command here has one key spec; other arguments say -1.
                key_spec_index: if matches!(arg.kind, Kind::Key) { 0 } else { -1 },
                token: arg.token.map_or(ptr::null(), CStr::as_ptr),
                summary: arg.summary.as_ptr(),
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs,
                display_text: ptr::null(),
            });
        }
        level.push(end_of_args());
        level
    }
}

fn arg_type(kind: Kind) -> raw::RedisModuleCommandArgType {
    match kind {
        Kind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Kind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        Kind::UnixTime => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        Kind::Pattern => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PATTERN,
        Kind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        Kind::Block(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
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

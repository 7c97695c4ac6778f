//! Everything about each command, one entry per command: its name and arity, its syntax
//! line (which errors about the number or the order of arguments quote, as the
//! command's page in `docs/` writes it), what `COMMAND DOCS` says of it (summary,
//! version, complexity, hints, the argument tree), where its keys are and the access it
//! has to them, its command flags and ACL categories, the plain write it stands for on
//! servers without ACL categories, and its `INFO ratelimit` counters. RL.ALL's rules
//! have their syntax lines here too.
//!
//! The module registers, documents and counts its commands from [`TABLE`] (`src/register/`,
//! `src/stats.rs`); `tests/command_docs.rs` checks the syntax lines against the pages and
//! the Lua twins' strings against this table.

/// The version of this module that added the commands below.
pub const FIRST: &str = "0.1.0";

/// A limiter's reply depends on the time it is judged at (`AT`, or the server's clock).
pub const TIME_DEPENDENT: &str = "nondeterministic_output";

/// Where a command's keys are in its argument vector (the command name is index 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// One key at index 1.
    First,
    /// `cmd numkeys key [key ...]`: the count at index 1, the keys after it.
    NumKeys,
    /// Every argument from this index to the end.
    AllFrom(usize),
    /// No keys (node-wide commands).
    None,
}

/// The access a command has to its keys (its key spec's flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads and changes the value (a limiter's state): read-write, access, update.
    ReadWriteUpdate,
    /// Changes the key without reading or returning its value (as `EXPIRE`): read-write,
    /// update.
    WriteUpdate,
    /// The command names no keys.
    None,
}

/// The plain command a call stands for, which the caller must be allowed to run on
/// servers that cannot put module commands in ACL categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `SET key 1`: the limiters.
    Set,
    /// `PEXPIRE key 1`: the bulk TTL commands.
    Pexpire,
}

/// What a command's `INFO ratelimit` counters count besides calls and errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// `_allowed` and `_denied`: a limiter.
    Verdicts,
    /// `_keys_expired`: a bulk TTL command.
    KeysExpired,
    /// `_released` and `_not_held`: RL.RELEASE (its replies 1 and 0).
    Releases,
}

/// Which counters of its flags (`REFUND`, `FORCE`) and of bans a limiter command has besides its verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagCounts {
    /// None: the command takes neither `REFUND` nor `FORCE`.
    No,
    /// `_refunds` and `_forced`: calls with `REFUND`, with `FORCE`.
    Flags,
    /// Those, and `_bans_started` and `_denied_by_ban` (RL.ALL's BAN rule).
    FlagsAndBans,
}

/// Everything about one command.
#[derive(Debug)]
pub struct Command {
    pub id: Id,
    pub name: &'static str,
    /// The arity the server checks: every command counts its own arguments (`-1`, at
    /// least its name), so that a call with too few gets its syntax in the error.
    pub arity: i32,
    /// The syntax line of its page, quoted by arity errors; `COMMAND DOCS`'s arguments
    /// render as this line (a unit test below).
    pub syntax: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// Space-separated hints for clients (`COMMAND DOCS` lists them as tips).
    pub tips: Option<&'static str>,
    pub args: &'static [Arg],
    pub keys: Keys,
    pub access: Access,
    /// `RedisModule_CreateCommand` flags.
    pub flags: &'static str,
    /// ACL categories, space-separated, where the server supports them (the module adds
    /// `@ratelimit` to all where it can).
    pub acl: &'static str,
    pub probe: Probe,
    /// The prefix of its `INFO ratelimit` fields (`fixed_calls`).
    pub info: &'static str,
    pub counts: Counts,
    /// Its `INFO ratelimit` counters of refunds, forced requests and bans.
    pub flag_counts: FlagCounts,
    /// Registered only when `ratelimit.cl-throttle` is yes and the name is free.
    pub optional: bool,
}

/// What an argument is, as `COMMAND DOCS` types it.
#[derive(Clone, Copy, Debug)]
pub enum ArgType {
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
    /// One of these (`REFUND|FORCE`).
    OneOf(&'static [Arg]),
}

/// One argument of a command, or of a block.
#[derive(Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgType,
    /// The keyword before the value (`COST` in `COST n`), or the word of a pure token.
    pub token: Option<&'static str>,
    pub summary: &'static str,
    pub optional: bool,
    /// It may be repeated (`key [key ...]`).
    pub multiple: bool,
    /// Each repetition repeats the token too (`LIMIT window limit [LIMIT window limit ...]`).
    pub multiple_token: bool,
}

impl Arg {
    pub const fn new(name: &'static str, kind: ArgType, summary: &'static str) -> Arg {
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
    pub const fn option(
        token: &'static str,
        name: &'static str,
        kind: ArgType,
        summary: &'static str,
    ) -> Arg {
        let mut arg = Arg::new(name, kind, summary);
        arg.token = Some(token);
        arg.optional = true;
        arg
    }

    /// A keyword alone, optional: `[ALIGN]`.
    pub const fn flag(token: &'static str, name: &'static str, summary: &'static str) -> Arg {
        let mut arg = Arg::new(name, ArgType::PureToken, summary);
        arg.token = Some(token);
        arg.optional = true;
        arg
    }

    pub const fn token(mut self, token: &'static str) -> Arg {
        self.token = Some(token);
        self
    }

    pub const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }

    pub const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }
}

// The arguments several commands share, with the words of docs/common-rules.md.

pub const KEY: Arg = Arg::new("key", ArgType::Key, "the limited identity: one key");
pub const KEYS: Arg = Arg::new(
    "key",
    ArgType::Key,
    "the identifiers, 1 to 64 distinct keys (one slot in Cluster)",
)
.multiple();
pub const NUMKEYS: Arg = Arg::new("numkeys", ArgType::Integer, "how many keys follow, 1 to 64");
pub const LIMIT: Arg = Arg::new(
    "limit",
    ArgType::Integer,
    "the cost allowed per window, >= 1",
);
pub const WINDOW: Arg = Arg::new(
    "window",
    ArgType::String,
    "a duration: 1500ms, 90 (seconds), 1m, 24h, 7d",
);
pub const COST: Arg = Arg::option(
    "COST",
    "n",
    ArgType::Integer,
    "what this request consumes (default 1); 0 peeks and writes nothing",
);
pub const ALIGN: Arg = Arg::flag(
    "ALIGN",
    "align",
    "windows aligned to the Unix epoch instead of starting at the first request",
);
pub const AT: Arg = Arg::option(
    "AT",
    "unix_ms",
    ArgType::UnixTime,
    "judge the request at this Unix time in milliseconds instead of the server's clock",
);
/// `[REFUND|FORCE|UPTO]`: settle a request after the fact.
pub const REFUND_OR_FORCE: Arg = Arg {
    name: "settle",
    kind: ArgType::OneOf(&[
        Arg::new(
            "refund",
            ArgType::PureToken,
            "give back cost that allowed requests took (never below empty; always allowed)",
        )
        .token("REFUND"),
        Arg::new(
            "force",
            ArgType::PureToken,
            "record cost whether it fits or not (the work is done); not with DELAY",
        )
        .token("FORCE"),
        Arg::new(
            "upto",
            ArgType::PureToken,
            "take as much of cost as fits now; the reply's last field is how much (0: denied); not with DELAY",
        )
        .token("UPTO"),
    ]),
    token: None,
    summary: "how the request settles: give back unused cost, pay an overage, or take as much as fits",
    optional: true,
    multiple: false,
    multiple_token: false,
};
/// `LIMIT window limit [LIMIT window limit ...]`.
pub const LIMITS: Arg = Arg {
    name: "limits",
    kind: ArgType::Block(&[WINDOW, LIMIT]),
    token: Some("LIMIT"),
    summary: "a window and its limit; 1 to 16 windows, none twice",
    optional: false,
    multiple: true,
    multiple_token: true,
};
pub const MAX_BURST: Arg = Arg::new(
    "max_burst",
    ArgType::Integer,
    "requests allowed at once beyond the first, >= 0 (capacity max_burst + 1)",
);
pub const COUNT: Arg = Arg::new(
    "count",
    ArgType::Integer,
    "requests per period in the long run, >= 1",
);
pub const PERIOD: Arg = Arg::new(
    "period",
    ArgType::String,
    "a duration: 60 (seconds), 1m, 1500ms, 1d",
);
pub const BUCKETS: Arg = Arg::option(
    "BUCKETS",
    "n",
    ArgType::Integer,
    "buckets per window, 1 to 100 (default 10)",
);
pub const META: Arg = Arg::option(
    "META",
    "value",
    ArgType::String,
    "any bytes, at most 256, recorded with the request (who made it)",
);
pub const TTL: Arg = Arg::new(
    "seconds",
    ArgType::String,
    "the TTL to give: a duration (60, 1500ms, 10m, 24h, 7d)",
);
/// `ID id`: a lease's name.
pub const ID: Arg = Arg::option(
    "ID",
    "id",
    ArgType::String,
    "the lease's id, 1 to 256 bytes; the same live id renews its lease; without it the module makes one",
);
/// RL.ALL's rules, one per key. A plain argument rather than a one-of of five blocks:
/// `redis-cli` would write that tree out in full, twice (`x [x ...]`), as a hint of
/// several hundred characters; the forms are in the summary and on the command's page.
pub const RULES_ARG: Arg = Arg::new("rule", ArgType::String, RULE_SUMMARY).multiple();

/// What the limiters share: flags and ACL categories are set per entry.
pub const LIMITER: Command = Command {
    id: Id::Fixed,
    name: "",
    arity: -1,
    syntax: "",
    summary: "",
    since: FIRST,
    complexity: "O(1)",
    tips: Some(TIME_DEPENDENT),
    args: &[],
    keys: Keys::First,
    access: Access::ReadWriteUpdate,
    flags: "write",
    acl: "write",
    probe: Probe::Set,
    info: "",
    counts: Counts::Verdicts,
    flag_counts: FlagCounts::No,
    optional: false,
};

// The commands that are no limiter's own. Each limiter declares its command in its
// file (`pub const COMMAND: Command`); `TABLE` lists them all (below), in the order
// `COMMAND INFO` and `INFO ratelimit` list them, entry `i` of the [`Id`] whose value is
// `i`. None is flagged `deny-oom`: a limiter must answer denials and peeks whatever the
// server's memory, so the limiters refuse only a write of a value at OOM themselves, as
// a Lua script's `SET` is refused; the bulk TTL commands are how a full server gets
// memory back (`EXPIRE` is not `deny-oom` either).

/// RL.ALL: one rule of any limiter per key, all or nothing: the keys follow numkeys
/// (as RL.MULTI's).
pub const ALL: Command = Command {
    id: Id::All,
    name: "RL.ALL",
    syntax: "RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms] [ID id] [REFUND|FORCE|UPTO]",
    summary: "Checks one request against limiters of different algorithms on several keys, all or nothing",
    complexity: "O(N) for N rules, each as its own command",
    args: &[NUMKEYS, KEYS, RULES_ARG, COST, AT, ID, REFUND_OR_FORCE],
    keys: Keys::NumKeys,
    info: "all",
    flag_counts: FlagCounts::FlagsAndBans,
    ..LIMITER
};

/// As EXPIRE: the keys' TTLs change, their values are neither read nor returned.
pub const BULK_EXPIRE: Command = Command {
    id: Id::BulkExpire,
    name: "RL.BULKEXPIRE",
    syntax: "RL.BULKEXPIRE seconds key [key ...]",
    summary:
        "Gives a TTL to those of the named keys that have none; replies with the keys that got one",
    complexity: "O(N) for N keys",
    tips: None,
    args: &[
        TTL,
        Arg::new("key", ArgType::Key, "keys of any type").multiple(),
    ],
    keys: Keys::AllFrom(2),
    access: Access::WriteUpdate,
    acl: "write keyspace",
    probe: Probe::Pexpire,
    info: "bulkexpire",
    counts: Counts::KeysExpired,
    ..LIMITER
};

/// Node-wide like SCAN: no keys declared; it checks each key's ACL itself.
pub const SWEEP: Command = Command {
    id: Id::Sweep,
    name: "RL.SWEEP",
    syntax: "RL.SWEEP cursor seconds [MATCH pattern] [COUNT n] [TYPE type] [DRYRUN]",
    summary: "Gives a TTL to the keys without one in one SCAN chunk of this node; replies next cursor, scanned, expired",
    complexity: "O(COUNT): one chunk of at most COUNT keys",
    tips: Some("nondeterministic_output request_policy:special response_policy:special"),
    args: &[
        Arg::new(
            "cursor",
            ArgType::Integer,
            "0 to start, then the cursor of the previous reply",
        ),
        TTL,
        Arg::option(
            "MATCH",
            "pattern",
            ArgType::Pattern,
            "only keys matching this glob pattern",
        ),
        Arg::option(
            "COUNT",
            "n",
            ArgType::Integer,
            "keys to visit in this call, 1 to 5000 (default 1000)",
        ),
        Arg::option(
            "TYPE",
            "type",
            ArgType::String,
            "only keys of this type (string, hash, zset, ...)",
        ),
        Arg::flag(
            "DRYRUN",
            "dryrun",
            "change nothing; count the keys that would get a TTL",
        ),
    ],
    keys: Keys::None,
    access: Access::None,
    acl: "write keyspace slow",
    probe: Probe::Pexpire,
    info: "sweep",
    counts: Counts::KeysExpired,
    ..LIMITER
};

/// redis-cell's command; key spec, flags and ACL categories as RL.GCRA's.
pub const THROTTLE: Command = Command {
    id: Id::Throttle,
    name: "CL.THROTTLE",
    syntax: "CL.THROTTLE key max_burst count period [quantity]",
    summary: "redis-cell's command: GCRA with its arguments and its reply (times in seconds)",
    args: &[
        KEY,
        MAX_BURST,
        COUNT,
        Arg::new("period", ArgType::Integer, "the period in whole seconds"),
        Arg::new(
            "quantity",
            ArgType::Integer,
            "what this request consumes (default 1); 0 peeks",
        )
        .optional(),
    ],
    flags: "write fast",
    acl: "write fast",
    info: "cl_throttle",
    optional: true,
    ..LIMITER
};

/// RL.RELEASE: not a limiter; it ends a lease, never denies.
pub const RELEASE: Command = Command {
    id: Id::Release,
    name: "RL.RELEASE",
    syntax: "RL.RELEASE key id [AT unix_ms]",
    summary: "Ends a lease of RL.LEASE: 1 if a live lease with that id was released, 0 otherwise",
    complexity: "O(log N + E) for N leases held and E expired",
    args: &[
        KEY,
        Arg::new("id", ArgType::String, "the lease's id, 1 to 256 bytes"),
        AT,
    ],
    info: "release",
    counts: Counts::Releases,
    ..LIMITER
};

include!(concat!(env!("OUT_DIR"), "/commands.rs"));

/// The entry of command `id`.
pub const fn entry(id: Id) -> &'static Command {
    &TABLE[id as usize]
}

/// The entry of the command named `name`, if it is one of the module's.
pub fn find(name: &str) -> Option<&'static Command> {
    TABLE.iter().find(|c| c.name == name)
}

/// The syntax line of `command`, if it is one of the module's.
pub fn command(command: &str) -> Option<&'static str> {
    find(command).map(|c| c.syntax)
}

/// The syntax of the RL.ALL rule `kind`.
pub fn rule(kind: &str) -> Option<&'static str> {
    RULES.iter().find(|(k, _)| *k == kind).map(|&(_, s)| s)
}

/// Whether `raw` is written as a duration with a unit (`1m`, `500ms`): in the place of
/// a count, the sign of two arguments given in the wrong order.
pub fn looks_like_a_duration(raw: &[u8]) -> bool {
    let digits = raw.iter().take_while(|b| b.is_ascii_digit()).count();
    let unit = raw.get(digits..).unwrap_or(&[]);
    digits > 0 && [&b"ms"[..], b"s", b"m", b"h", b"d"].contains(&unit)
}

/// The arguments as `redis-cli` writes them in its hints and `HELP` (`[` `]` around
/// optional parts, the token before the value, `x [x ...]` for repeated ones, with the
/// token again when each repetition takes it).
pub fn render(args: &[Arg]) -> String {
    args.iter().map(render_arg).collect::<Vec<_>>().join(" ")
}

fn render_arg(arg: &Arg) -> String {
    let repeat = match arg.kind {
        ArgType::Block(children) => render(children),
        ArgType::OneOf(children) => children
            .iter()
            .map(render_arg)
            .collect::<Vec<_>>()
            .join("|"),
        ArgType::PureToken => String::new(),
        _ => arg.name.to_string(),
    };
    let token = match (arg.token, arg.kind) {
        (Some(token), ArgType::PureToken) => token.to_string(),
        (Some(token), _) => format!("{token} "),
        (None, _) => String::new(),
    };
    let mut out = format!("{token}{repeat}");
    if arg.multiple {
        let again = if arg.multiple_token { &token[..] } else { "" };
        out = format!("{out} [{again}{repeat} ...]");
    }
    if arg.optional {
        out = format!("[{out}]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_a_unit_are_told_from_counts() {
        for yes in ["1m", "500ms", "10s", "2h", "7d"] {
            assert!(looks_like_a_duration(yes.as_bytes()), "{yes}");
        }
        for no in ["10", "", "m", "1.5s", "10y", "-1m", "1 m"] {
            assert!(!looks_like_a_duration(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn each_entry_is_at_the_place_of_its_id() {
        for (i, command) in TABLE.iter().enumerate() {
            assert_eq!(command.id as usize, i, "{}", command.name);
            assert_eq!(entry(command.id).name, command.name);
        }
        let mut names: Vec<_> = TABLE.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len(), "a name twice");
    }

    #[test]
    fn the_arguments_render_as_the_syntax_line() {
        for command in &TABLE {
            assert_eq!(
                format!("{} {}", command.name, render(command.args)),
                command.syntax,
                "{}",
                command.name
            );
        }
    }

    #[test]
    fn every_command_and_rule_has_its_syntax() {
        for command in &TABLE {
            assert!(command.syntax.starts_with(&format!("{} ", command.name)));
            assert_eq!(self::command(command.name), Some(command.syntax));
        }
        for (kind, line) in RULES {
            assert!(line.starts_with(&format!("{kind} i ")), "{line}");
            assert_eq!(rule(kind), Some(*line));
        }
    }

    #[test]
    fn key_arguments_match_the_key_positions() {
        for command in &TABLE {
            let key_args = command
                .args
                .iter()
                .filter(|a| matches!(a.kind, ArgType::Key))
                .count();
            assert_eq!(
                key_args > 0,
                command.keys != Keys::None,
                "{}: key arguments and key spec",
                command.name
            );
            assert_eq!(
                command.access == Access::None,
                command.keys == Keys::None,
                "{}",
                command.name
            );
        }
    }
}

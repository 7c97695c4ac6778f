//! Per-command counters shown by `INFO ratelimit`, so operators can see the limiter
//! working: calls, allowed, denied and errors for the limiters; calls, keys given a TTL
//! and errors for the bulk TTL commands.

use redis_module::{InfoContext, RedisResult};
use std::sync::atomic::{AtomicU64, Ordering};

/// The commands that keep counters, in the order `INFO` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Fixed,
    Gcra,
    Multi,
    Sliding,
    Log,
    All,
    BulkExpire,
    Sweep,
    /// CL.THROTTLE (counted when it is registered).
    Throttle,
}

impl Command {
    const ALL: [Command; 9] = [
        Command::Fixed,
        Command::Gcra,
        Command::Multi,
        Command::Sliding,
        Command::Log,
        Command::All,
        Command::BulkExpire,
        Command::Sweep,
        Command::Throttle,
    ];

    fn limits(self) -> bool {
        matches!(
            self,
            Command::Fixed
                | Command::Gcra
                | Command::Multi
                | Command::Sliding
                | Command::Log
                | Command::All
                | Command::Throttle
        )
    }

    fn name(self) -> &'static str {
        match self {
            Command::Fixed => "fixed",
            Command::Gcra => "gcra",
            Command::Multi => "multi",
            Command::Sliding => "sliding",
            Command::Log => "log",
            Command::All => "all",
            Command::BulkExpire => "bulkexpire",
            Command::Sweep => "sweep",
            Command::Throttle => "cl_throttle",
        }
    }
}

/// What one call came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied,
    /// A bulk TTL command gave this many keys a TTL.
    Expired(u64),
    Error,
}

struct Counters {
    calls: AtomicU64,
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
    expired: AtomicU64,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            calls: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        }
    }
}

static COUNTERS: [Counters; Command::ALL.len()] = [const { Counters::new() }; Command::ALL.len()];

pub fn record(command: Command, outcome: Outcome) {
    let c = &COUNTERS[command as usize];
    c.calls.fetch_add(1, Ordering::Relaxed);
    let (field, n) = match outcome {
        Outcome::Allowed => (&c.allowed, 1),
        Outcome::Denied => (&c.denied, 1),
        Outcome::Expired(n) => (&c.expired, n),
        Outcome::Error => (&c.errors, 1),
    };
    field.fetch_add(n, Ordering::Relaxed);
}

/// The `ratelimit` INFO section: `<command>_calls`, `_allowed`, `_denied`, `_errors`
/// for the limiters, `<command>_calls`, `_keys_expired`, `_errors` for the bulk ones.
pub fn info(ctx: &InfoContext) {
    // Nothing to do if the server refuses a field: INFO shows what it got.
    let _ = add_section(ctx);
}

fn add_section(ctx: &InfoContext) -> RedisResult<()> {
    let mut section = ctx.builder().add_section("stats");
    for command in Command::ALL {
        let c = &COUNTERS[command as usize];
        let name = command.name();
        let fields: &[(&str, &AtomicU64)] = if command.limits() {
            &[
                ("calls", &c.calls),
                ("allowed", &c.allowed),
                ("denied", &c.denied),
                ("errors", &c.errors),
            ]
        } else {
            &[
                ("calls", &c.calls),
                ("keys_expired", &c.expired),
                ("errors", &c.errors),
            ]
        };
        for &(field, counter) in fields {
            let value = counter.load(Ordering::Relaxed);
            section = section.field(&format!("{name}_{field}"), value.to_string())?;
        }
    }
    section.build_section()?.build_info()?;
    Ok(())
}

//! Per-command counters shown by `INFO ratelimit`: calls, allowed, denied and errors,
//! so operators can see the limiter working.

use redis_module::{InfoContext, RedisResult};
use std::sync::atomic::{AtomicU64, Ordering};

/// The commands that keep counters, in the order `INFO` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Fixed,
    Gcra,
    Multi,
}

impl Command {
    const ALL: [Command; 3] = [Command::Fixed, Command::Gcra, Command::Multi];

    fn name(self) -> &'static str {
        match self {
            Command::Fixed => "fixed",
            Command::Gcra => "gcra",
            Command::Multi => "multi",
        }
    }
}

/// What one call came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied,
    Error,
}

struct Counters {
    calls: AtomicU64,
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            calls: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }
}

static COUNTERS: [Counters; Command::ALL.len()] = [const { Counters::new() }; Command::ALL.len()];

pub fn record(command: Command, outcome: Outcome) {
    let c = &COUNTERS[command as usize];
    c.calls.fetch_add(1, Ordering::Relaxed);
    let field = match outcome {
        Outcome::Allowed => &c.allowed,
        Outcome::Denied => &c.denied,
        Outcome::Error => &c.errors,
    };
    field.fetch_add(1, Ordering::Relaxed);
}

/// The `ratelimit` INFO section: `<command>_calls`, `_allowed`, `_denied`, `_errors`.
#[redis_module_macros::info_command_handler]
fn info(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    let mut section = ctx.builder().add_section("stats");
    for command in Command::ALL {
        let c = &COUNTERS[command as usize];
        let name = command.name();
        for (field, counter) in [
            ("calls", &c.calls),
            ("allowed", &c.allowed),
            ("denied", &c.denied),
            ("errors", &c.errors),
        ] {
            let value = counter.load(Ordering::Relaxed);
            section = section.field(&format!("{name}_{field}"), value.to_string())?;
        }
    }
    section.build_section()?.build_info()?;
    Ok(())
}

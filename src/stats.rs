//! Per-command counters shown by `INFO ratelimit`, so operators can see the limiter
//! working: calls, allowed, denied and errors for the limiters (and the calls with
//! `REFUND`, with `FORCE`, the bans RL.ALL's BAN rules started and the calls they
//! denied); calls, keys given a TTL and errors for the bulk TTL commands. One set of counters per entry of the command
//! table (`ratelimit_core::commands::TABLE`), which names the fields and their order.

use ratelimit_core::call::limiter::Mode;
use ratelimit_core::commands::{find, Counts, FlagCounts, Id, TABLE};
use redis_module::{InfoContext, RedisResult};
use std::sync::atomic::{AtomicU64, Ordering};

/// What one call came to, as the counters count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
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
    refunds: AtomicU64,
    forced: AtomicU64,
    bans_started: AtomicU64,
    denied_by_ban: AtomicU64,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            calls: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            refunds: AtomicU64::new(0),
            forced: AtomicU64::new(0),
            bans_started: AtomicU64::new(0),
            denied_by_ban: AtomicU64::new(0),
        }
    }
}

/// The counters of the command `TABLE[i]` at `i` (its `Id`).
static COUNTERS: [Counters; TABLE.len()] = [const { Counters::new() }; TABLE.len()];

pub fn record(command: Id, tally: Tally) {
    let c = &COUNTERS[command as usize];
    c.calls.fetch_add(1, Ordering::Relaxed);
    let (field, n) = match tally {
        Tally::Allowed => (&c.allowed, 1),
        Tally::Denied => (&c.denied, 1),
        Tally::Expired(n) => (&c.expired, n),
        Tally::Error => (&c.errors, 1),
    };
    field.fetch_add(n, Ordering::Relaxed);
}

/// Count what a settled call of the command named `command` did besides its verdict:
/// its flag (`REFUND`, `FORCE`), a ban it started, a denial by a ban.
pub fn record_flags(command: &str, mode: Mode, ban_started: bool, denied_by_ban: bool) {
    if mode == Mode::Take && !ban_started && !denied_by_ban {
        return;
    }
    let Some(c) = find(command).and_then(|e| COUNTERS.get(e.id as usize)) else {
        return;
    };
    let bump = |counter: &AtomicU64, yes: bool| {
        if yes {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    };
    bump(&c.refunds, mode == Mode::Refund);
    bump(&c.forced, mode == Mode::Force);
    bump(&c.bans_started, ban_started);
    bump(&c.denied_by_ban, denied_by_ban);
}

/// The `ratelimit` INFO section: `<command>_calls`, `_allowed`, `_denied`, `_errors`
/// for the limiters, `<command>_calls`, `_keys_expired`, `_errors` for the bulk ones,
/// `release_calls`, `_released`, `_not_held`, `_errors` for RL.RELEASE (its replies 1
/// and 0).
pub fn info(ctx: &InfoContext) {
    // Nothing to do if the server refuses a field: INFO shows what it got.
    let _ = add_section(ctx);
}

fn add_section(ctx: &InfoContext) -> RedisResult<()> {
    let mut section = ctx.builder().add_section("stats");
    for (command, c) in TABLE.iter().zip(&COUNTERS) {
        let fields: &[(&str, &AtomicU64)] = match command.counts {
            Counts::Verdicts => &[
                ("calls", &c.calls),
                ("allowed", &c.allowed),
                ("denied", &c.denied),
                ("errors", &c.errors),
            ],
            Counts::Releases => &[
                ("calls", &c.calls),
                ("released", &c.allowed),
                ("not_held", &c.denied),
                ("errors", &c.errors),
            ],
            Counts::KeysExpired => &[
                ("calls", &c.calls),
                ("keys_expired", &c.expired),
                ("errors", &c.errors),
            ],
        };
        let flags: &[(&str, &AtomicU64)] = match command.flag_counts {
            FlagCounts::No => &[],
            FlagCounts::Flags => &[("refunds", &c.refunds), ("forced", &c.forced)],
            FlagCounts::FlagsAndBans => &[
                ("refunds", &c.refunds),
                ("forced", &c.forced),
                ("bans_started", &c.bans_started),
                ("denied_by_ban", &c.denied_by_ban),
            ],
        };
        for &(field, counter) in fields.iter().chain(flags) {
            let value = counter.load(Ordering::Relaxed);
            section = section.field(&format!("{}_{field}", command.info), value.to_string())?;
        }
    }
    section.build_section()?.build_info()?;
    Ok(())
}

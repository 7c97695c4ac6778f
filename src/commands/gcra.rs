//! `RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay]`.

use crate::args::Args;
use crate::clock::request_time;
use crate::effects;
use crate::reply;
use crate::stats::Outcome;
use crate::string_key::StringKey;
use ratelimit_core::gcra;
use ratelimit_core::Error;
use redis_module::Context;

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest("RL.GCRA")?;
    let (params, at) = gcra::parse_args(rest)?;
    let now = request_time(at)?;
    let key = StringKey::open(ctx, name)?;
    let stored = key.state(gcra::parse_state)?;
    let (outcome, booking) = gcra::decide_booking(stored, now, &params);
    effects::check_memory(ctx, std::slice::from_ref(&outcome.effect), &[name])?;
    key.apply(&outcome.effect)?;
    Ok(match booking {
        // With DELAY: a sixth field, the delay in ms (0: act now; -1: not booked).
        Some(b) => reply::verdict_and(ctx, &outcome.verdict, b.field()),
        None => reply::verdict(ctx, &outcome.verdict),
    })
}

//! `RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay]`.

use crate::args::{Args, KeyName};
use crate::clock::request_time;
use crate::effects;
use crate::reply;
use crate::stats::Outcome;
use crate::string_key::StringKey;
use ratelimit_core::gcra::{self, Booking, GcraParams};
use ratelimit_core::{Error, Micros};
use redis_module::Context;

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest("RL.GCRA")?;
    let (params, at) = gcra::parse_args(rest)?;
    let now = request_time(at)?;
    let (outcome, booking) = judge(ctx, name, now, &params)?;
    Ok(match booking {
        // With DELAY: a sixth field, the delay in ms (0: act now; -1: not booked).
        Some(b) => reply::verdict_and(ctx, &outcome.verdict, b.field()),
        None => reply::verdict(ctx, &outcome.verdict),
    })
}

/// Judge one request on the key `name` at `now` and write what it decides: read the
/// TAT, decide, check memory, write. RL.GCRA and CL.THROTTLE share it.
pub fn judge(
    ctx: &Context,
    name: KeyName,
    now: Micros,
    params: &GcraParams,
) -> Result<(ratelimit_core::Outcome<Micros>, Option<Booking>), Error> {
    let key = StringKey::open(ctx, name)?;
    let stored = key.state(gcra::parse_state)?;
    let (outcome, booking) = gcra::decide_booking(stored, now, params);
    effects::check_memory(ctx, std::slice::from_ref(&outcome.effect), &[name])?;
    key.apply(&outcome.effect)?;
    Ok((outcome, booking))
}

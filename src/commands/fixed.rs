//! `RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]`.

use crate::args::Args;
use crate::clock::request_time;
use crate::effects;
use crate::reply;
use crate::stats::Outcome;
use crate::string_key::StringKey;
use ratelimit_core::fixed;
use ratelimit_core::Error;
use redis_module::Context;

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest("RL.FIXED")?;
    let (params, at) = fixed::parse_args(rest)?;
    let now = request_time(at)?;
    let key = StringKey::open(ctx, name)?;
    let stored = key.state(fixed::parse_state)?;
    let outcome = fixed::decide(stored, now, &params);
    effects::check_memory(ctx, std::slice::from_ref(&outcome.effect), &[name])?;
    key.apply(&outcome.effect)?;
    Ok(reply::verdict(ctx, &outcome.verdict))
}

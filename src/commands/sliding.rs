//! `RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
//! [BUCKETS n] [COST n] [AT unix_ms]`: RL.MULTI's steps with sliding windows.

use crate::args::Args;
use crate::clock::request_time;
use crate::effects;
use crate::reply;
use crate::stats::Outcome;
use crate::string_key::StringKey;
use ratelimit_core::sliding;
use ratelimit_core::Error;
use redis_module::Context;
use smallvec::SmallVec;

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let req = sliding::parse_args(args.after_name())?;
    let now = request_time(req.at())?;
    let names = args.keys(2, req.numkeys())?;
    // Open and read every key before deciding; write only after.
    let keys = names
        .iter()
        .map(|&name| StringKey::open(ctx, name))
        .collect::<Result<SmallVec<[_; 2]>, _>>()?;
    let stored = keys
        .iter()
        .zip(&names)
        .map(|(key, name)| {
            key.state(sliding::parse_state)
                .map_err(|e| e.for_key(name.bytes()))
        })
        .collect::<Result<SmallVec<[_; 2]>, _>>()?;
    let outcome = sliding::decide(&stored, now, &req).map_err(|full| {
        let name = names.get(full.key).map_or(&[][..], |n| n.bytes());
        full.error(name, "RL.SLIDING")
    })?;
    effects::check_memory(ctx, &outcome.effects, &names)?;
    for (key, effect) in keys.iter().zip(&outcome.effects) {
        key.apply(effect)?;
    }
    let binding = names
        .get(outcome.binding.key)
        .ok_or(Error::Internal("RL.SLIDING binding key"))?;
    Ok(reply::binding_verdict(
        ctx,
        &outcome.verdict,
        *binding,
        outcome.binding.window_ms,
    ))
}

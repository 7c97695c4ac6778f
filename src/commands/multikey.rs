//! The steps RL.MULTI and RL.SLIDING share: parse, open and read every key, decide all
//! or nothing, check memory, write every key, reply with the binding pair. Each command
//! says how to parse its arguments and its state, and how to decide.

use crate::args::Args;
use crate::clock::request_time;
use crate::effects;
use crate::reply;
use crate::stats::Outcome;
use crate::string_key::StringKey;
use ratelimit_core::multikey::{KeyFull, MultiOutcome};
use ratelimit_core::state::Encode;
use ratelimit_core::{Error, Micros, Stored};
use redis_module::Context;
use smallvec::SmallVec;

/// A limiter with RL.MULTI's call shape: `numkeys key [key ...] ...`.
pub trait MultiKey {
    const NAME: &'static str;
    type Request;
    type State: Encode;
    fn parse_args(args: &[&[u8]]) -> Result<Self::Request, Error>;
    fn numkeys(req: &Self::Request) -> usize;
    fn at(req: &Self::Request) -> Option<Micros>;
    fn parse_state(raw: &[u8]) -> Result<Self::State, Error>;
    fn decide(
        stored: &[Option<Stored<Self::State>>],
        now: Micros,
        req: &Self::Request,
    ) -> Result<MultiOutcome<Self::State>, KeyFull>;
}

pub fn command<L: MultiKey>(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let req = L::parse_args(args.after_name())?;
    let now = request_time(L::at(&req))?;
    let names = args.keys(2, L::numkeys(&req))?;
    // Open and read every key before deciding; write only after.
    let keys = names
        .iter()
        .map(|&name| StringKey::open(ctx, name))
        .collect::<Result<SmallVec<[_; 2]>, _>>()?;
    let stored = keys
        .iter()
        .zip(&names)
        .map(|(key, name)| {
            key.state(L::parse_state)
                .map_err(|e| e.for_key(name.bytes()))
        })
        .collect::<Result<SmallVec<[_; 2]>, _>>()?;
    let outcome = L::decide(&stored, now, &req).map_err(|full| {
        let name = names.get(full.key).map_or(&[][..], |n| n.bytes());
        full.error(name, L::NAME)
    })?;
    effects::check_memory(ctx, &outcome.effects, &names)?;
    for (key, effect) in keys.iter().zip(&outcome.effects) {
        key.apply(effect)?;
    }
    let binding = names
        .get(outcome.binding.key)
        .ok_or(Error::Internal("binding key"))?;
    Ok(reply::binding_verdict(
        ctx,
        &outcome.verdict,
        *binding,
        outcome.binding.window_ms,
    ))
}

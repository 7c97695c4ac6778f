//! `CL.THROTTLE key max_burst count period [quantity]`: redis-cell's command, judged by
//! RL.GCRA on RL.GCRA's key and state (see `ratelimit_core::throttle`); the reply in
//! whole seconds.

use crate::args::Args;
use crate::clock::wall_clock;
use crate::commands::gcra;
use crate::reply;
use crate::stats::Outcome;
use ratelimit_core::throttle;
use ratelimit_core::Error;
use redis_module::Context;

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest(throttle::COMMAND)?;
    let call = throttle::parse_args(rest)?;
    let (outcome, _) = gcra::judge(ctx, name, wall_clock(), &call.params)?;
    let fields = call.reply(&outcome.verdict);
    reply::integers(ctx, &fields);
    Ok(if fields[0] == 0 {
        Outcome::Allowed
    } else {
        Outcome::Denied
    })
}

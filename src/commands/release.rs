//! `RL.RELEASE key id [AT unix_ms]`: ends a lease of RL.LEASE. Not a limiter (it judges
//! nothing and is no rule of RL.ALL): core says what it removes
//! (`ratelimit_core::limiters::lease::release`: the expired members, the lease, the
//! key's expiry set to its latest lease), the key carries it out as any limiter's write
//! (the one apply of `keys/limiter.rs`: each change replicated and announced as the
//! command it stands for), and the reply is 1 or 0. A key left without leases is
//! deleted by the removals.

use crate::argv::Args;
use crate::clock::request_time;
use crate::keys::limiter::LimiterKey;
use crate::stats::Tally;
use ratelimit_core::call::keys::KeyRead;
use ratelimit_core::call::limiter::Storage;
use ratelimit_core::limiters::lease;
use ratelimit_core::Error;
use redis_module::{raw, Context};

pub fn command(ctx: &Context, args: &Args) -> Result<Tally, Error> {
    let call = lease::parse_release(args.after_name())?;
    let now = request_time(call.at)?;
    let name = args.key(1).ok_or_else(|| Error::Internal("key argument"))?;
    let key = LimiterKey::open(ctx, name, Storage::SortedSet)?;
    let released = {
        let set = match key.read()? {
            KeyRead::SortedSet(set) => Some(set),
            _ => None,
        };
        lease::release(set, call.id, now)?
    };
    key.apply(&released.effect)?;
    raw::reply_with_long_long(ctx.ctx, i64::from(released.released));
    Ok(if released.released {
        Tally::Allowed
    } else {
        Tally::Denied
    })
}

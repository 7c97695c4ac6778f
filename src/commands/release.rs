//! `RL.RELEASE key id [AT unix_ms]`: ends a lease of RL.LEASE. Not a limiter (it judges
//! nothing and is no rule of RL.ALL): core says what to remove
//! (`ratelimit_core::limiters::lease::release`), this removes it — the expired members
//! (`ZREMRANGEBYSCORE key -inf now`), the lease (`ZREM key id`), the key's expiry set to
//! its latest lease (`PEXPIREAT`), each replicated and announced as that command — and
//! replies 1 or 0. A key left without leases is deleted by the removals.

use crate::argv::Args;
use crate::clock::request_time;
use crate::keys::sorted_set::SortedSetKey;
use crate::stats::Tally;
use ratelimit_core::call::limiter::SortedSet;
use ratelimit_core::limiters::lease;
use ratelimit_core::{Error, Micros};
use redis_module::{raw, Context};

pub fn command(ctx: &Context, args: &Args) -> Result<Tally, Error> {
    let call = lease::parse_release(args.after_name())?;
    let now = request_time(call.at)?;
    let name = args.key(1).ok_or(Error::Internal("key argument"))?;
    let key = SortedSetKey::open(ctx, name)?;
    let set = key.exists().then_some(&key as &dyn SortedSet);
    let released = lease::release(set, call.id, now)?;
    if released.writes() {
        if let Some(through) = released.remove_through_ms {
            key.remove_expired(Micros(through))?;
        }
        if released.released {
            key.remove_member(call.id)?;
        }
        if let Some(at) = released.expires_at {
            if !key.is_gone()? {
                key.expire_at(at)?;
            }
        }
    }
    raw::reply_with_long_long(ctx.ctx, i64::from(released.released));
    Ok(if released.released {
        Tally::Allowed
    } else {
        Tally::Denied
    })
}

//! `RL.BULKEXPIRE seconds key [key ...]`: the bulk-expire script of the article on
//! giving TTLs to keys written without one, as a command. Each named key that exists
//! and has no TTL gets one (the same absolute expiry for all: the call's millisecond
//! plus `seconds`); the reply lists those keys, in argument order. A key named twice
//! gets its TTL at its first place and is listed once.

use crate::argv::Args;
use crate::clock::wall_clock;
use crate::keys::any::{self, Found};
use crate::stats::Tally;
use ratelimit_core::bulk::{expiry_at, parse_bulkexpire};
use ratelimit_core::Error;
use redis_module::{raw, Context};
use std::os::raw::c_long;

pub fn command(ctx: &Context, args: &Args) -> Result<Tally, Error> {
    let ttl = parse_bulkexpire(args.after_name())?;
    let at = expiry_at(wall_clock(), ttl);
    let names = args.keys(2, args.after_name().len().saturating_sub(1))?;
    let mut expired = Vec::with_capacity(names.len());
    for name in names {
        if let Found::Persistent(_) = any::inspect(ctx, name)? {
            any::give_ttl(ctx, name, at)?;
            expired.push(name);
        }
    }
    raw::reply_with_array(ctx.ctx, expired.len() as c_long);
    for name in &expired {
        raw::reply_with_string(ctx.ctx, name.ptr());
    }
    Ok(Tally::Expired(expired.len() as u64))
}

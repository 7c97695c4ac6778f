//! `RL.SWEEP cursor seconds [MATCH pattern] [COUNT n] [TYPE type] [DRYRUN]`: one chunk
//! of a whole-keyspace bulk expire, server-side. The chunk is exactly what `SCAN cursor COUNT n`
//! returns on this node (run through the module API, so the cursor has SCAN's
//! semantics on every server version and in Cluster); MATCH and TYPE are applied
//! here, so that `keys_scanned` counts every key visited and a client can show
//! progress against `DBSIZE`. Each matching key without a TTL that the caller's ACL
//! user may write gets one. Reply: `[next_cursor, keys_scanned, keys_expired]`, the
//! cursor as a bulk string like SCAN's.

use crate::argv::{Args, KeyName};
use crate::clock::wall_clock;
use crate::keys::any::{self, Found};
use crate::register::acl::CallerAcl;
use crate::stats::Tally;
use ratelimit_core::bulk::{expiry_at, parse_sweep};
use ratelimit_core::Error;
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context, RedisString};

pub fn command(ctx: &Context, args: &Args) -> Result<Tally, Error> {
    let sweep = parse_sweep(args.after_name())?;
    let at = expiry_at(wall_clock(), sweep.ttl);
    let acl = CallerAcl::current(ctx)?;

    let cursor = sweep.cursor.to_string();
    let count = sweep.count.to_string();
    let opts = CallOptionsBuilder::new().errors_as_replies().build();
    let scan_args: [&[u8]; 3] = [cursor.as_bytes(), b"COUNT", count.as_bytes()];
    let reply: CallResult = ctx.call_ext("SCAN", &opts, &scan_args[..]);
    let Ok(CallReply::Array(chunk)) = reply else {
        return Err(Error::Internal("SCAN failed"));
    };
    let next = match chunk.get(0) {
        Some(Ok(CallReply::String(s))) => s.as_bytes().to_vec(),
        _ => return Err(Error::Internal("SCAN reply without cursor")),
    };
    let Some(Ok(CallReply::Array(keys))) = chunk.get(1) else {
        return Err(Error::Internal("SCAN reply without keys"));
    };

    let (mut scanned, mut expired) = (0i64, 0i64);
    for key in keys.iter() {
        scanned += 1;
        let Ok(CallReply::String(key)) = key else {
            continue;
        };
        let name = key.as_bytes();
        if !sweep.name_matches(name) {
            continue;
        }
        let name = RedisString::create_from_slice(ctx.ctx, name);
        let name = KeyName::from(&name);
        if !acl.may_write(ctx, name) {
            continue;
        }
        let Found::Persistent(key_type) = any::inspect(ctx, name)? else {
            continue;
        };
        if let Some(filter) = &sweep.type_filter {
            if !filter.accepts(key_type, || any::type_name(ctx, name)) {
                continue;
            }
        }
        if !sweep.dry_run {
            any::give_ttl(ctx, name, at)?;
        }
        expired += 1;
    }

    raw::reply_with_array(ctx.ctx, 3);
    raw::reply_with_string_buffer(ctx.ctx, next.as_ptr().cast(), next.len());
    raw::reply_with_long_long(ctx.ctx, scanned);
    raw::reply_with_long_long(ctx.ctx, expired);
    // A dry run expires nothing.
    let done = if sweep.dry_run { 0 } else { expired as u64 };
    Ok(Tally::Expired(done))
}

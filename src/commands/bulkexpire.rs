//! `RL.BULKEXPIRE seconds key [key ...]`: seed 001's `expire.lua` as a command. Each
//! named key that exists and has no TTL gets one (the same absolute expiry for all:
//! the call's millisecond plus `seconds`); the reply lists those keys, in argument
//! order. A key named twice gets its TTL at its first place and is listed once.

use crate::any_key::{self, Found};
use crate::clock::wall_clock;
use crate::reply;
use crate::stats::{Command, Outcome};
use ratelimit_core::bulk::{expiry_at, parse_bulkexpire};
use ratelimit_core::Error;
use redis_module::{raw, Context, RedisResult, RedisString};
use std::os::raw::c_long;

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    reply::run(ctx, Command::BulkExpire, || {
        let [_, _, keys @ ..] = args.as_slice() else {
            return Err(Error::WrongArity {
                command: "RL.BULKEXPIRE",
            });
        };
        let raw_args: Vec<&[u8]> = args.iter().skip(1).map(RedisString::as_slice).collect();
        let ttl = parse_bulkexpire(&raw_args)?;
        let at = expiry_at(wall_clock(), ttl);
        let mut expired: Vec<&RedisString> = Vec::new();
        for key in keys {
            if let Found::Persistent(_) = any_key::inspect(ctx, key)? {
                any_key::give_ttl(ctx, key, at)?;
                expired.push(key);
            }
        }
        raw::reply_with_array(ctx.ctx, expired.len() as c_long);
        for key in &expired {
            raw::reply_with_string(ctx.ctx, key.inner);
        }
        Ok(Outcome::Expired(expired.len() as u64))
    })
}

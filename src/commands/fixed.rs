//! `RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]`.

use crate::clock::request_time;
use crate::reply;
use crate::stats::Command;
use crate::string_key::StringKey;
use ratelimit_core::fixed::{self, Counter, Effect};
use ratelimit_core::Error;
use redis_module::{Context, RedisResult, RedisString};

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    reply::run(ctx, Command::Fixed, || {
        let [_, key, rest @ ..] = args.as_slice() else {
            return Err(Error::WrongArity {
                command: "RL.FIXED",
            });
        };
        let rest: Vec<&[u8]> = rest.iter().map(RedisString::as_slice).collect();
        let (params, at) = fixed::parse_args(&rest)?;
        let now = request_time(at);
        let key = StringKey::open(ctx, key)?;
        let stored = match &key.stored {
            None => None,
            Some(s) => Some(Counter {
                count: fixed::parse_count(&s.value).ok_or(Error::InvalidState {
                    command: "RL.FIXED",
                    expected: "a non-negative integer counter",
                })?,
                ends_at: s.expires_at,
            }),
        };
        let outcome = fixed::decide(stored, now, &params)?;
        match outcome.effect {
            Effect::None => {}
            Effect::Set { count, ends_at } => key.set_integer(count, ends_at)?,
            Effect::ExpireAt(ends_at) => key.expire_at(ends_at)?,
        }
        reply::integers(ctx, &outcome.verdict.fields());
        Ok(reply::outcome(outcome.verdict.is_allowed()))
    })
}

//! `RL.GCRA key max_burst count period [COST n] [AT unix_ms]`.

use crate::clock::request_time;
use crate::reply;
use crate::stats::Command;
use crate::string_key::StringKey;
use ratelimit_core::gcra::{self, Effect};
use ratelimit_core::Error;
use redis_module::{Context, RedisResult, RedisString};

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    reply::run(ctx, Command::Gcra, || {
        let [_, key, rest @ ..] = args.as_slice() else {
            return Err(Error::WrongArity { command: "RL.GCRA" });
        };
        let rest: Vec<&[u8]> = rest.iter().map(RedisString::as_slice).collect();
        let (params, at) = gcra::parse_args(&rest)?;
        let now = request_time(at);
        let key = StringKey::open(ctx, key)?;
        // Only the value counts: the expiry always follows the TAT.
        let stored = match &key.stored {
            None => None,
            Some(s) => Some(gcra::parse_tat(&s.value).ok_or(gcra::INVALID_STATE)?),
        };
        let outcome = gcra::decide(stored, now, &params);
        if let Effect::Set { tat, expires_at } = outcome.effect {
            key.set_integer(tat.as_u64(), expires_at)?;
        }
        reply::integers(ctx, &outcome.verdict.fields());
        Ok(reply::outcome(outcome.verdict.is_allowed()))
    })
}

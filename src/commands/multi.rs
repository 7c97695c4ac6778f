//! `RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
//! [COST n] [ALIGN] [AT unix_ms]`.

use crate::api::api;
use crate::clock::request_time;
use crate::reply;
use crate::stats::Command;
use crate::string_key::StringKey;
use ratelimit_core::multi::{self, KeyEffect, Stored};
use ratelimit_core::Error;
use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};
use std::os::raw::c_int;

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if keys_position_request(ctx) {
        report_keys(ctx, &args);
        return Ok(RedisValue::NoReply);
    }
    reply::run(ctx, Command::Multi, || {
        let [_, rest @ ..] = args.as_slice() else {
            return Err(Error::WrongArity {
                command: "RL.MULTI",
            });
        };
        let raw: Vec<&[u8]> = rest.iter().map(RedisString::as_slice).collect();
        let req = multi::parse_args(&raw)?;
        let names = rest
            .get(1..=req.numkeys)
            .ok_or(Error::Internal("RL.MULTI keys"))?;
        let now = request_time(req.at);

        // Open and read every key before deciding; write only after.
        let mut keys = Vec::with_capacity(names.len());
        let mut stored = Vec::with_capacity(names.len());
        for name in names {
            let key = StringKey::open(ctx, name)?;
            stored.push(match &key.stored {
                None => None,
                Some(s) => Some(Stored {
                    state: multi::State::parse(&s.value)
                        .ok_or_else(|| multi::invalid_state(name.as_slice()))?,
                    expires_at: s.expires_at,
                }),
            });
            keys.push(key);
        }

        let outcome = multi::decide(&stored, now, &req)?;
        for (key, effect) in keys.iter().zip(&outcome.effects) {
            match effect {
                KeyEffect::None => {}
                KeyEffect::Set { state, ends_at } => key.set(&state.encode(), *ends_at)?,
                KeyEffect::ExpireAt(ends_at) => key.expire_at(*ends_at)?,
            }
        }

        let binding = names
            .get(outcome.binding.key)
            .ok_or(Error::Internal("RL.MULTI binding key"))?;
        raw::reply_with_array(ctx.ctx, 7);
        for v in outcome.verdict.fields() {
            raw::reply_with_long_long(ctx.ctx, v);
        }
        raw::reply_with_string(ctx.ctx, binding.inner);
        raw::reply_with_long_long(
            ctx.ctx,
            i64::try_from(outcome.binding.window_ms).unwrap_or(i64::MAX),
        );
        Ok(reply::outcome(outcome.verdict.is_allowed()))
    })
}

/// Whether the server calls the command only to learn where its keys are
/// (`getkeys-api`): Redis 7.0 routes Cluster calls of movable-keys module commands that
/// way, while newer servers read the key spec.
fn keys_position_request(ctx: &Context) -> bool {
    match api!(RedisModule_IsKeysPositionRequest) {
        // SAFETY: ctx is the live command context.
        Ok(is_request) => (unsafe { is_request(ctx.ctx) }) != 0,
        Err(_) => false,
    }
}

/// Tell the server the positions of the keys (`numkeys` at index 1, keys after it).
/// An invalid numkeys reports nothing: the call then runs locally and gets its error.
fn report_keys(ctx: &Context, args: &[RedisString]) {
    let Ok(key_at_pos) = api!(RedisModule_KeyAtPos) else {
        return;
    };
    let after_name: Vec<&[u8]> = args.iter().skip(1).map(RedisString::as_slice).collect();
    let Some(positions) = multi::key_positions(&after_name) else {
        return;
    };
    for pos in positions {
        // Positions count the command name; `key_positions` keeps them below argc.
        let Ok(pos) = c_int::try_from(pos + 1) else {
            return;
        };
        // SAFETY: ctx is the live context of a keys-position request; pos < argc.
        unsafe { key_at_pos(ctx.ctx, pos) };
    }
}

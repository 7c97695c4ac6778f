//! `RL.LOG key limit window [META value] [COST n] [AT unix_ms]`.
//!
//! The state is a plain sorted set, so it is read and written with the server's own
//! commands through `RedisModule_Call`, each in O(log n): `ZCOUNT`, `ZRANGE`,
//! `ZRANGEBYSCORE` to read, `ZADD NX`, `ZREMRANGEBYSCORE`, `PEXPIREAT` to write. Each
//! write sends its own keyspace event and is replicated as it is, with absolute times
//! (the replica never reads a clock). The first `ZADD` runs under the server's OOM rule,
//! so a write refused at `maxmemory` leaves the key untouched.

use crate::api::api;
use crate::args::{Args, KeyName};
use crate::clock::request_time;
use crate::open_key::OpenKey;
use crate::reply;
use crate::stats::Outcome;
use ratelimit_core::limits::MAX_LOG_LIMIT;
use ratelimit_core::log;
use ratelimit_core::{Error, Micros};
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest("RL.LOG")?;
    let req = log::parse_args(rest)?;
    let now = request_time(req.at())?;
    let view = read(ctx, name, now, &req)?;
    let out = log::decide(&view, now, &req);
    if let Some(w) = out.write {
        let score = w.time.0.to_string();
        let mut member = Vec::with_capacity(24 + req.meta().len());
        let mut seq = w.first_seq;
        for unit in 0..req.cost() {
            // A number already taken (a log written with an earlier AT) is skipped.
            loop {
                log::member(seq, req.meta(), &mut member);
                seq += 1;
                let added = write(
                    ctx,
                    "ZADD",
                    &[name.bytes(), b"NX", score.as_bytes(), &member],
                    unit == 0,
                )?;
                if added {
                    break;
                }
            }
        }
        let cut = w.trim_through.0.to_string();
        write(
            ctx,
            "ZREMRANGEBYSCORE",
            &[name.bytes(), b"-inf", cut.as_bytes()],
            false,
        )?;
        let ms = w.expires_at.0.to_string();
        write(ctx, "PEXPIREAT", &[name.bytes(), ms.as_bytes()], false)?;
    }
    Ok(reply::verdict(ctx, &out.verdict))
}

/// What the call needs of the log, each part with one O(log n) command: `WRONGTYPE`
/// for a key that is not a sorted set, the invalid-state error for one that does not
/// hold a log.
fn read(ctx: &Context, name: KeyName, now: Micros, req: &log::Request) -> Result<log::View, Error> {
    let empty = log::View {
        counted: 0,
        newest: None,
        must_leave: None,
    };
    {
        let Some(key) = OpenKey::open(ctx, name, raw::REDISMODULE_READ)? else {
            return Ok(empty);
        };
        let key_type = api!(RedisModule_KeyType)?;
        let value_length = api!(RedisModule_ValueLength)?;
        // SAFETY: the key is open (and closed at the end of this block, before any
        // command below can change it).
        let (kind, len) = unsafe { (key_type(key.ptr()) as isize, value_length(key.ptr())) };
        match kind {
            raw::REDISMODULE_KEYTYPE_EMPTY => return Ok(empty),
            raw::REDISMODULE_KEYTYPE_ZSET => {}
            _ => return Err(Error::WrongType),
        }
        // A log holds at most one member per unit of its limit: a larger set is not one.
        if len > MAX_LOG_LIMIT as usize {
            return Err(log::STATE.invalid());
        }
    }
    let after = format!("({}", log::cutoff(now, req).0);
    let counted = match call(ctx, "ZCOUNT", &[name.bytes(), after.as_bytes(), b"+inf"]) {
        Ok(CallReply::I64(n)) => n.to_i64(),
        _ => return Err(Error::Internal("ZCOUNT")),
    };
    let newest = first_entry(ctx, "ZRANGE", &[name.bytes(), b"-1", b"-1", b"WITHSCORES"])?;
    let must_leave = match log::need(counted, req) {
        Some(k) => {
            let offset = (k - 1).to_string();
            let args: [&[u8]; 7] = [
                name.bytes(),
                after.as_bytes(),
                b"+inf",
                b"WITHSCORES",
                b"LIMIT",
                offset.as_bytes(),
                b"1",
            ];
            first_entry(ctx, "ZRANGEBYSCORE", &args)?.map(|e| e.time)
        }
        None => None,
    };
    Ok(log::View {
        counted,
        newest,
        must_leave,
    })
}

fn call(ctx: &Context, command: &str, args: &[&[u8]]) -> CallResult<'static> {
    let opts = CallOptionsBuilder::new().errors_as_replies().build();
    ctx.call_ext(command, &opts, args)
}

/// The first (member, score) pair of a `WITHSCORES` reply, read as a log member.
fn first_entry(ctx: &Context, command: &str, args: &[&[u8]]) -> Result<Option<log::Entry>, Error> {
    let Ok(CallReply::Array(items)) = call(ctx, command, args) else {
        return Err(Error::Internal("ZRANGE"));
    };
    if items.len() == 0 {
        return Ok(None);
    }
    let (Some(Ok(CallReply::String(member))), Some(Ok(CallReply::String(score)))) =
        (items.get(0), items.get(1))
    else {
        return Err(log::STATE.invalid());
    };
    log::parse_entry(member.as_bytes(), score.as_bytes())
        .map(Some)
        .ok_or(log::STATE.invalid())
}

/// Run a plain write command, replicated as it is (when it changes something); with
/// `verify_oom`, refused with the OOM error when the server is over `maxmemory`.
/// Whether it changed something (an integer reply above 0, or a status).
fn write(ctx: &Context, command: &str, args: &[&[u8]], verify_oom: bool) -> Result<bool, Error> {
    let mut opts = CallOptionsBuilder::new().replicate().errors_as_replies();
    if verify_oom {
        opts = opts.verify_oom();
    }
    match ctx.call_ext::<_, CallResult>(command, &opts.build(), args) {
        Ok(CallReply::I64(n)) => Ok(n.to_i64() > 0),
        Ok(_) => Ok(true),
        Err(e) if e.to_string().starts_with("OOM") => Err(Error::OutOfMemory),
        Err(_) => Err(Error::Internal("RL.LOG write")),
    }
}

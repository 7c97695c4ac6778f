//! `RL.LOG key limit window [META value] [COST n] [AT unix_ms]`.
//!
//! The state is a plain sorted set, so its entries are read and written with the
//! server's own commands (`ZRANGE`, `ZADD`, `ZREMRANGEBYSCORE`, `PEXPIREAT`) through
//! `RedisModule_Call`: each write sends its own keyspace event and is replicated as it
//! is, with absolute times (the replica never reads a clock). `ZADD` goes first, under
//! the server's OOM rule, so a write refused at `maxmemory` leaves the key untouched.

use crate::api::api;
use crate::args::{Args, KeyName};
use crate::clock::request_time;
use crate::open_key::OpenKey;
use crate::reply;
use crate::stats::Outcome;
use ratelimit_core::limits::MAX_LOG_LIMIT;
use ratelimit_core::log::{self, Entry};
use ratelimit_core::Error;
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    let (name, rest) = args.key_and_rest("RL.LOG")?;
    let req = log::parse_args(rest)?;
    let now = request_time(req.at())?;
    let entries = read(ctx, name)?;
    let out = log::decide(&entries, now, &req);
    if let Some(w) = out.write {
        let mut member = Vec::with_capacity(24 + req.meta().len());
        log::member(w.seq, req.cost(), req.meta(), &mut member);
        let score = w.time.0.to_string();
        write(
            ctx,
            "ZADD",
            &[name.bytes(), score.as_bytes(), &member],
            true,
        )?;
        if let Some(cut) = w.trim_through {
            let cut = cut.0.to_string();
            write(
                ctx,
                "ZREMRANGEBYSCORE",
                &[name.bytes(), b"-inf", cut.as_bytes()],
                false,
            )?;
        }
        let ms = w.expires_at.0.to_string();
        write(ctx, "PEXPIREAT", &[name.bytes(), ms.as_bytes()], false)?;
    }
    Ok(reply::verdict(ctx, &out.verdict))
}

/// The key's entries: none for a missing key, `WRONGTYPE` for a key that is not a
/// sorted set, the invalid-state error for one that does not hold a log.
fn read(ctx: &Context, name: KeyName) -> Result<Vec<Entry>, Error> {
    {
        let Some(key) = OpenKey::open(ctx, name, raw::REDISMODULE_READ)? else {
            return Ok(Vec::new());
        };
        let key_type = api!(RedisModule_KeyType)?;
        let value_length = api!(RedisModule_ValueLength)?;
        // SAFETY: the key is open (and closed at the end of this block, before any
        // command below can change it).
        let (kind, len) = unsafe { (key_type(key.ptr()) as isize, value_length(key.ptr())) };
        match kind {
            raw::REDISMODULE_KEYTYPE_EMPTY => return Ok(Vec::new()),
            raw::REDISMODULE_KEYTYPE_ZSET => {}
            _ => return Err(Error::WrongType),
        }
        // A log holds at most one entry per unit of its limit: a larger set is not one
        // (and is not read whole).
        if len > MAX_LOG_LIMIT as usize {
            return Err(log::STATE.invalid());
        }
    }
    let opts = CallOptionsBuilder::new().errors_as_replies().build();
    let args: [&[u8]; 4] = [name.bytes(), b"0", b"-1", b"WITHSCORES"];
    let reply: CallResult = ctx.call_ext("ZRANGE", &opts, &args[..]);
    let Ok(CallReply::Array(items)) = reply else {
        return Err(Error::Internal("ZRANGE"));
    };
    if items.len() % 2 != 0 {
        return Err(log::STATE.invalid());
    }
    let mut entries = Vec::with_capacity(items.len() / 2);
    for i in (0..items.len()).step_by(2) {
        let (Some(Ok(CallReply::String(member))), Some(Ok(CallReply::String(score)))) =
            (items.get(i), items.get(i + 1))
        else {
            return Err(log::STATE.invalid());
        };
        entries.push(
            log::parse_entry(member.as_bytes(), score.as_bytes()).ok_or(log::STATE.invalid())?,
        );
    }
    Ok(entries)
}

/// Run a plain write command, replicated as it is; `verify_oom`: refused with the
/// OOM error when the server is over `maxmemory`.
fn write(ctx: &Context, command: &str, args: &[&[u8]], verify_oom: bool) -> Result<(), Error> {
    let mut opts = CallOptionsBuilder::new().replicate().errors_as_replies();
    if verify_oom {
        opts = opts.verify_oom();
    }
    match ctx.call_ext::<_, CallResult>(command, &opts.build(), args) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().starts_with("OOM") => Err(Error::OutOfMemory),
        Err(_) => Err(Error::Internal("RL.LOG write")),
    }
}

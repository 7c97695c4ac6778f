//! Writing replies straight into the client buffer (no intermediate values).

use crate::api::api;
use crate::argv::KeyName;
use crate::stats::{self, Tally};
use ratelimit_core::call::limiter::Field;
use ratelimit_core::commands::Id;
use ratelimit_core::{Error, Verdict};
use redis_module::{raw, Context};
use std::os::raw::c_long;

/// Reply with the error's one-line text. The text never holds NUL (user input is
/// quoted by `ratelimit_core::error::echo`), so the conversion cannot fail; if it did,
/// a generic error is sent instead of panicking.
pub fn error(ctx: &Context, e: &Error) {
    let msg = std::ffi::CString::new(e.to_string())
        .unwrap_or_else(|_| c"ERR invalid argument".to_owned());
    if let Ok(reply_with_error) = api!(RedisModule_ReplyWithError) {
        // SAFETY: ctx is the live command context; msg is NUL-terminated.
        unsafe { reply_with_error(ctx.ctx, msg.as_ptr()) };
    }
}

/// Reply with an array of integers.
pub fn integers(ctx: &Context, values: &[i64]) {
    raw::reply_with_array(ctx.ctx, values.len() as c_long);
    for &v in values {
        raw::reply_with_long_long(ctx.ctx, v);
    }
}

/// Run a command body (which sends its own reply), send its error, if any, as the
/// reply, and count the outcome for `INFO ratelimit`.
pub fn run(ctx: &Context, command: Id, body: impl FnOnce() -> Result<Tally, Error>) {
    match body() {
        Ok(outcome) => stats::record(command, outcome),
        Err(e) => {
            stats::record(command, Tally::Error);
            error(ctx, &e);
        }
    }
}

/// Reply with a limiter's five fields and, when its command gives one, a field of its
/// own (RL.GCRA's booked delay, RL.LEASE's id or nil); the outcome to count.
pub fn verdict_and(ctx: &Context, v: &Verdict, own: Option<&Field>) -> Tally {
    raw::reply_with_array(ctx.ctx, if own.is_some() { 6 } else { 5 });
    for f in v.fields() {
        raw::reply_with_long_long(ctx.ctx, f);
    }
    if let Some(f) = own {
        field(ctx, f);
    }
    outcome(v)
}

/// A rule's own field: an integer, a bulk string, or a null.
fn field(ctx: &Context, f: &Field) {
    match f {
        Field::Int(n) => {
            raw::reply_with_long_long(ctx.ctx, *n);
        }
        Field::Bulk(bytes) => {
            raw::reply_with_string_buffer(ctx.ctx, bytes.as_ptr().cast(), bytes.len());
        }
        Field::Nil => {
            raw::reply_with_null(ctx.ctx);
        }
    }
}

/// Reply with a multi-key limiter's seven fields: the five, then the binding pair's key
/// and window in ms; the outcome to count.
pub fn binding_verdict(ctx: &Context, v: &Verdict, key: KeyName, window_ms: u64) -> Tally {
    raw::reply_with_array(ctx.ctx, 7);
    for f in v.fields() {
        raw::reply_with_long_long(ctx.ctx, f);
    }
    raw::reply_with_string(ctx.ctx, key.ptr());
    raw::reply_with_long_long(ctx.ctx, i64::try_from(window_ms).unwrap_or(i64::MAX));
    outcome(v)
}

/// Reply with RL.ALL's seven fields: the five, then the binding rule's place among the
/// rules (1-based) and its key; and an eighth, a rule's own field (a LEASE rule's id or
/// nil), when the call has one; the outcome to count.
pub fn rule_verdict(
    ctx: &Context,
    v: &Verdict,
    place: usize,
    key: KeyName,
    eighth: Option<&Field>,
) -> Tally {
    raw::reply_with_array(ctx.ctx, if eighth.is_some() { 8 } else { 7 });
    for f in v.fields() {
        raw::reply_with_long_long(ctx.ctx, f);
    }
    raw::reply_with_long_long(ctx.ctx, i64::try_from(place).unwrap_or(i64::MAX));
    raw::reply_with_string(ctx.ctx, key.ptr());
    if let Some(f) = eighth {
        field(ctx, f);
    }
    outcome(v)
}

/// The outcome of a limiter's decision.
pub fn outcome(v: &Verdict) -> Tally {
    if v.is_allowed() {
        Tally::Allowed
    } else {
        Tally::Denied
    }
}

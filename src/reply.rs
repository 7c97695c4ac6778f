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

/// What a limiter reply carries after its five fields, by the shape of its call.
pub enum Binding<'a> {
    /// A single-key command: nothing.
    None,
    /// A command of several keys: the binding pair's key and window in ms.
    Pair { key: KeyName<'a>, window_ms: u64 },
    /// RL.ALL: the binding rule's place among the rules (1-based) and its key.
    Rule { place: usize, key: KeyName<'a> },
}

/// Reply with a limiter's five fields, what its call's shape adds (`binding`), the
/// field of a rule's own when the call has one (RL.GCRA's booked delay, a lease's id or
/// nil), and with `UPTO` the units taken; the outcome to count.
pub fn verdict(
    ctx: &Context,
    v: &Verdict,
    binding: Binding,
    own: Option<&Field>,
    granted: Option<i64>,
) -> Tally {
    let shape_len = match binding {
        Binding::None => 0,
        Binding::Pair { .. } | Binding::Rule { .. } => 2,
    };
    let len = 5 + shape_len + usize::from(own.is_some()) + usize::from(granted.is_some());
    raw::reply_with_array(ctx.ctx, len as c_long);
    for f in v.fields() {
        raw::reply_with_long_long(ctx.ctx, f);
    }
    match binding {
        Binding::None => {}
        Binding::Pair { key, window_ms } => {
            raw::reply_with_string(ctx.ctx, key.ptr());
            raw::reply_with_long_long(ctx.ctx, i64::try_from(window_ms).unwrap_or(i64::MAX));
        }
        Binding::Rule { place, key } => {
            raw::reply_with_long_long(ctx.ctx, i64::try_from(place).unwrap_or(i64::MAX));
            raw::reply_with_string(ctx.ctx, key.ptr());
        }
    }
    if let Some(f) = own {
        field(ctx, f);
    }
    if let Some(k) = granted {
        raw::reply_with_long_long(ctx.ctx, k);
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

/// The outcome of a limiter's decision.
pub fn outcome(v: &Verdict) -> Tally {
    if v.is_allowed() {
        Tally::Allowed
    } else {
        Tally::Denied
    }
}

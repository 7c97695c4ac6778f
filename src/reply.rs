//! Writing replies straight into the client buffer (no intermediate values).

use crate::api::api;
use crate::stats::{self, Command, Outcome};
use ratelimit_core::Error;
use redis_module::{raw, Context, RedisResult, RedisValue};
use std::os::raw::c_long;

/// Reply with the error's one-line text. The text never holds NUL (user input is
/// quoted by `ratelimit_core::error::echo`), so the conversion cannot fail; if it did,
/// a generic error is sent instead of panicking.
pub fn error(ctx: &Context, e: &Error) -> RedisResult {
    let msg = std::ffi::CString::new(e.to_string())
        .unwrap_or_else(|_| c"ERR invalid argument".to_owned());
    if let Ok(reply_with_error) = api!(RedisModule_ReplyWithError) {
        // SAFETY: ctx is the live command context; msg is NUL-terminated.
        unsafe { reply_with_error(ctx.ctx, msg.as_ptr()) };
    }
    Ok(RedisValue::NoReply)
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
pub fn run(
    ctx: &Context,
    command: Command,
    body: impl FnOnce() -> Result<Outcome, Error>,
) -> RedisResult {
    match body() {
        Ok(outcome) => {
            stats::record(command, outcome);
            Ok(RedisValue::NoReply)
        }
        Err(e) => {
            stats::record(command, Outcome::Error);
            error(ctx, &e)
        }
    }
}

/// The outcome of a limiter's decision.
pub fn outcome(allowed: bool) -> Outcome {
    if allowed {
        Outcome::Allowed
    } else {
        Outcome::Denied
    }
}

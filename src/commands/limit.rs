//! The one path of every limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING,
//! RL.LOG, RL.LEASE, RL.ALL, CL.THROTTLE): parse the call (pure, in core), open every
//! key, run the call (core's one loop: judge, decide, check memory, write, on the keys
//! as [`CallKeys`] opens them), count it, reply with the binding rule's numbers.

use crate::api::api;
use crate::argv::Args;
use crate::clock::request_time;
use crate::keys::limiter::CallKeys;
use crate::reply;
use crate::stats::{self, Tally};
use ratelimit_core::call::limiter::{Limiter, Names, Token, TOKEN_LEN};
use ratelimit_core::call::{Call, Resolution, Shape};
use ratelimit_core::limiters::throttle;
use ratelimit_core::Error;
use redis_module::Context;
use std::cell::Cell;

/// A command's parser: the arguments after its name, as a call of its rules.
pub type Parse<'a, R> = fn(&[&'a [u8]]) -> Result<Call<R>, Error>;

/// One path for every limiter command, generic over its rule: a command of one
/// limiter runs with that limiter's own types; RL.ALL with the rule of any kind.
pub fn run<'c, 'a: 'c, R: Limiter>(
    ctx: &'c Context,
    args: &Args<'a>,
    parse: Parse<'a, R>,
) -> Result<Tally, Error> {
    let call = parse(args.after_name())?;
    let now = request_time(call.at)?;
    let mut keys = CallKeys::new(ctx);
    keys.open(args, &call)?;
    let resolution = call.run(&mut keys, now, &MadeNames::default())?;
    // Counted once the call has written all it writes.
    stats::record_flags(
        call.command,
        call.mode,
        resolution.penalized,
        resolution.gated,
    );
    let binding = keys.key_name(resolution.binding)?;
    Ok(reply(ctx, &call, &resolution, binding))
}

/// The reply of a call, with the numbers of its binding rule (on key `name`).
fn reply<R, S>(
    ctx: &Context,
    call: &Call<R>,
    r: &Resolution<S>,
    name: crate::argv::KeyName,
) -> Tally {
    let binding = match call.shape {
        Shape::Single => reply::Binding::None,
        Shape::EachKey => reply::Binding::Pair {
            key: name,
            window_ms: r.window_ms,
        },
        Shape::All => reply::Binding::Rule {
            place: r.binding + 1,
            key: name,
        },
        Shape::Throttle { over_capacity } => {
            let fields = throttle::reply(&r.verdict, over_capacity);
            reply::integers(ctx, &fields);
            return if fields[0] == 0 {
                Tally::Allowed
            } else {
                Tally::Denied
            };
        }
    };
    // A field of a rule's own (RL.GCRA's DELAY: the delay in ms, 0: act now, -1: not
    // booked; a lease's id or nil), then with UPTO the units taken.
    reply::verdict(ctx, &r.verdict, binding, r.field.as_ref(), r.granted)
}

/// The name of a call that records one it was not given (a lease without `ID`), made
/// on first use, the same for every rule of the call.
#[derive(Default)]
struct MadeNames(Cell<Option<Token>>);

impl Names for MadeNames {
    fn token(&self) -> Result<Token, Error> {
        if let Some(token) = self.0.get() {
            return Ok(token);
        }
        let made = token()?;
        self.0.set(Some(made));
        Ok(made)
    }
}

/// A name for a call that records one it was not given (a lease without `ID`): 20 hex
/// digits (80 bits) of a generator started once from the server's random bytes
/// (`RedisModule_GetRandomBytes`, which hashes for each call: a quarter of a lease's
/// cost). Unique with overwhelming odds, and checked unused on the key by the limiter;
/// ids are not secrets (whoever may release a lease may read the key).
fn token() -> Result<Token, Error> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let (hi, lo) = TOKENS.with(|state| -> Result<(u64, u64), Error> {
        let mut s = state.get();
        if s == 0 {
            let random_bytes = api!(RedisModule_GetRandomBytes)?;
            let mut start = [0u8; 8];
            // SAFETY: the server writes exactly 8 bytes into the buffer.
            unsafe { random_bytes(start.as_mut_ptr(), start.len()) };
            s = u64::from_le_bytes(start) | 1;
        }
        let hi = splitmix64(&mut s);
        let lo = splitmix64(&mut s);
        state.set(s);
        Ok((hi, lo))
    })?;
    let mut token = [0u8; TOKEN_LEN];
    let bits = (u128::from(hi) << 16) | u128::from(lo & 0xffff);
    for (i, t) in token.iter_mut().enumerate() {
        let shift = 4 * (TOKEN_LEN - 1 - i);
        *t = HEX[((bits >> shift) & 0xf) as usize];
    }
    Ok(Token(token))
}

thread_local! {
    /// The state of the token generator (0: not started yet). Commands run on the
    /// server's main thread, one at a time.
    static TOKENS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// One step of SplitMix64: a well-mixed 64-bit output of a counter.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

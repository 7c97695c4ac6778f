//! The one path of every limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING,
//! RL.LOG, RL.LEASE, RL.ALL, CL.THROTTLE): parse the call (pure, in core), open and read every
//! key, settle the call (pure, in core: judge, decide, the writes), check memory,
//! apply the writes, reply with the binding rule's numbers.

use crate::api::api;
use crate::argv::{Args, KeyName};
use crate::clock::request_time;
use crate::effects;
use crate::keys::limiter::LimiterKey;
use crate::reply;
use crate::stats::{self, Tally};
use ratelimit_core::call::limiter::{Limiter, Token, TOKEN_LEN};
use ratelimit_core::call::{Call, Settlement, Shape};
use ratelimit_core::limiters::throttle;
use ratelimit_core::Error;
use redis_module::Context;
use smallvec::SmallVec;

/// A command's parser: the arguments after its name, as a call of its rules.
pub type Parse<'a, R> = fn(&[&'a [u8]]) -> Result<Call<R>, Error>;

/// One path for every limiter command, generic over its rule: a command of one
/// limiter runs with that limiter's own types; RL.ALL with the rule of any kind.
pub fn run<'a, R: Limiter>(
    ctx: &Context,
    args: &Args<'a>,
    parse: Parse<'a, R>,
) -> Result<Tally, Error> {
    let call = parse(args.after_name())?;
    let now = request_time(call.at)?;
    let first = call.first_key();
    // Open every key as its rule keeps it (a wrong type is found before any state is
    // read), in the rules' order; core reads them as it judges them.
    let mut keys: SmallVec<[(KeyName, LimiterKey); 4]> = SmallVec::new();
    for (i, (k, rule)) in call.rules.iter().enumerate() {
        let name = args.key(first + k).ok_or(Error::Internal("rule key"))?;
        let key = LimiterKey::open(ctx, name, rule.storage())
            .map_err(|e| call.rule_error(i, name.bytes(), e))?;
        keys.push((name, key));
    }
    let read = |i: usize| match keys.get(i) {
        Some((_, key)) => key.read(),
        None => Err(Error::Internal("rule key")),
    };
    let name_of = |i: usize| keys.get(i).map_or(&b""[..], |(name, _)| name.bytes());
    let token = if call.wants_token() {
        Some(token()?)
    } else {
        None
    };
    let settlement = call.settle_request(&call.request(now, token), read, name_of)?;
    let first_set = settlement
        .first_set
        .and_then(|i| keys.get(i).map(|(name, _)| *name));
    effects::check_memory(ctx, first_set)?;
    for (i, effect) in &settlement.writes {
        let (_, key) = keys.get(*i).ok_or(Error::Internal("written key"))?;
        key.apply(effect)?;
    }
    // Counted once the call has written all it writes.
    stats::settled(
        call.command,
        call.mode,
        settlement.penalized,
        settlement.gated,
    );
    let binding = keys
        .get(settlement.binding)
        .map(|(name, _)| *name)
        .ok_or(Error::Internal("binding rule"))?;
    Ok(reply(ctx, &call, &settlement, binding))
}

/// The reply of a call, with the numbers of its binding rule (on key `name`).
fn reply<R, S>(ctx: &Context, call: &Call<R>, s: &Settlement<S>, name: KeyName) -> Tally {
    match call.shape {
        Shape::Single => match (s.extra, &s.field) {
            // A sixth field of the limiter's own (RL.GCRA's DELAY: the delay in ms, 0:
            // act now, -1: not booked; RL.LEASE's id or nil).
            (Some(extra), _) => reply::verdict_and(ctx, &s.verdict, extra),
            (None, Some(field)) => reply::verdict_and_field(ctx, &s.verdict, field),
            (None, None) => reply::verdict(ctx, &s.verdict),
        },
        Shape::EachKey => reply::binding_verdict(ctx, &s.verdict, name, s.window_ms),
        Shape::All => reply::rule_verdict(ctx, &s.verdict, s.binding + 1, name, s.field.as_ref()),
        Shape::Throttle { over_capacity } => {
            let fields = throttle::reply(&s.verdict, over_capacity);
            reply::integers(ctx, &fields);
            if fields[0] == 0 {
                Tally::Allowed
            } else {
                Tally::Denied
            }
        }
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

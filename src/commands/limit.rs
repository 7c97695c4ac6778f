//! The one path of every limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING,
//! RL.LOG, RL.ALL, CL.THROTTLE): parse the call (pure, in core), open and read every key, judge
//! each with its rule, decide all or nothing, check memory, write every key, reply
//! with the binding rule's numbers.

use crate::argv::{Args, KeyName};
use crate::clock::request_time;
use crate::effects;
use crate::limiter_key::LimiterKey;
use crate::reply;
use crate::stats::Tally;
use ratelimit_core::call::{Call, Shape};
use ratelimit_core::gcra::Booking;
use ratelimit_core::limiter::{self, Judge, Judgement, Settled};
use ratelimit_core::{throttle, Effect, Error, Micros, Verdict};
use redis_module::Context;
use smallvec::SmallVec;

/// A command's parser: the arguments after its name, as a call of its rules.
pub type Parse<'a, R> = fn(&[&'a [u8]]) -> Result<Call<R>, Error>;

/// One path for every limiter command, generic over its rule: a command of one
/// limiter runs with that limiter's own types; RL.ALL with the rule of any kind.
pub fn run<'a, R: Judge>(
    ctx: &Context,
    args: &Args<'a>,
    parse: Parse<'a, R>,
) -> Result<Tally, Error> {
    let call = parse(args.after_name())?;
    let now = request_time(call.at)?;
    if let ([(0, rule)], Some(name)) = (call.rules.as_slice(), args.key(call.first_key())) {
        if call.numkeys == 1 {
            return run_one(ctx, &call, rule, name, now);
        }
    }
    let names = args.keys(call.first_key(), call.numkeys)?;
    // Every key has one rule. In the rules' order: open every key as its rule keeps
    // it (a wrong type is found before any state is read), then read and judge every
    // key, then (all allowed, or a single command's TTL repair) what each gets.
    let mut keys: SmallVec<[(KeyName, LimiterKey); 4]> = SmallVec::new();
    for (i, (k, rule)) in call.rules.iter().enumerate() {
        let Some(&name) = names.get(*k) else {
            return Err(Error::Internal("rule key"));
        };
        let key = LimiterKey::open(ctx, name, rule.storage())
            .map_err(|e| call.rule_error(i, name.bytes(), e))?;
        keys.push((name, key));
    }
    let mut judgements: SmallVec<[Judgement<R::Pending>; 4]> = SmallVec::new();
    for (i, ((_, rule), (name, key))) in call.rules.iter().zip(&keys).enumerate() {
        let judgement = key
            .read()
            .and_then(|read| rule.judge(read, now, call.cost))
            .map_err(|e| call.rule_error(i, name.bytes(), e))?;
        judgements.push(judgement);
    }
    let Some(decided) = limiter::decide(&judgements) else {
        return Err(Error::Internal("no rule"));
    };
    let (Some(binding), Some((binding_name, _))) =
        (judgements.get(decided.binding), keys.get(decided.binding))
    else {
        return Err(Error::Internal("binding rule"));
    };
    let (verdict, window_ms, booking, binding_name) = (
        binding.verdict,
        binding.window_ms,
        binding.booking,
        *binding_name,
    );
    let mut writes: SmallVec<[Effect<R::State>; 4]> = SmallVec::new();
    if decided.settled == Settled::Allowed || call.shape != Shape::All {
        let rules = call.rules.iter().zip(judgements).zip(&keys);
        for (i, (((_, rule), j), (name, _))) in rules.enumerate() {
            let effect = rule
                .write(j.pending, decided.settled, now, call.cost)
                .map_err(|_| key_full(&call, i, rule, *name))?;
            writes.push(effect);
        }
    }
    let first_set = writes
        .iter()
        .zip(&keys)
        .find_map(|(e, (name, _))| matches!(e, Effect::Set { .. }).then_some(*name));
    effects::check_memory(ctx, first_set)?;
    // Written in key order (RL.ALL's rules may name their keys in any order), so that
    // replicas and the AOF get the effects in the order of the keys.
    let mut order: SmallVec<[usize; 4]> = (0..keys.len()).collect();
    order.sort_unstable_by_key(|&i| call.rules.get(i).map(|(k, _)| *k));
    for i in order {
        if let (Some((_, key)), Some(effect)) = (keys.get(i), writes.get(i)) {
            key.apply(effect)?;
        }
    }
    Ok(reply(
        ctx,
        &call,
        &verdict,
        booking,
        window_ms,
        decided.binding,
        binding_name,
    ))
}

/// The same steps for a call of one key and one rule (every single-key command, and
/// RL.ALL with one key), without the lists of keys, judgements and writes.
fn run_one<R: Judge>(
    ctx: &Context,
    call: &Call<R>,
    rule: &R,
    name: KeyName,
    now: Micros,
) -> Result<Tally, Error> {
    let key = LimiterKey::open(ctx, name, rule.storage())
        .map_err(|e| call.rule_error(0, name.bytes(), e))?;
    let judgement = key
        .read()
        .and_then(|read| rule.judge(read, now, call.cost))
        .map_err(|e| call.rule_error(0, name.bytes(), e))?;
    let (verdict, window_ms, booking) = (judgement.verdict, judgement.window_ms, judgement.booking);
    let settled = if verdict.is_allowed() {
        Settled::Allowed
    } else {
        Settled::Denied
    };
    if settled == Settled::Allowed || call.shape != Shape::All {
        let effect = rule
            .write(judgement.pending, settled, now, call.cost)
            .map_err(|_| key_full(call, 0, rule, name))?;
        effects::check_memory(ctx, matches!(effect, Effect::Set { .. }).then_some(name))?;
        key.apply(&effect)?;
    }
    Ok(reply(ctx, call, &verdict, booking, window_ms, 0, name))
}

/// The error of rule `i`, whose write would leave key `name` with more windows than a
/// key keeps.
fn key_full<R: Judge>(call: &Call<R>, i: usize, rule: &R, name: KeyName) -> Error {
    let full = Error::KeyFull {
        key: name.bytes().to_vec(),
        command: rule.state_kind().command,
    };
    call.rule_error(i, name.bytes(), full)
}

/// The reply of a call, with the numbers of its binding rule (`binding`, 0-based, on
/// key `name`).
fn reply<R>(
    ctx: &Context,
    call: &Call<R>,
    verdict: &Verdict,
    booking: Option<Booking>,
    window_ms: u64,
    binding: usize,
    name: KeyName,
) -> Tally {
    match call.shape {
        Shape::Single => match booking {
            // With DELAY: a sixth field, the delay in ms (0: act now; -1: not booked).
            Some(b) => reply::verdict_and(ctx, verdict, b.field()),
            None => reply::verdict(ctx, verdict),
        },
        Shape::EachKey => reply::binding_verdict(ctx, verdict, name, window_ms),
        Shape::All => reply::rule_verdict(ctx, verdict, binding + 1, name),
        Shape::Throttle { over_capacity } => {
            let fields = throttle::reply(verdict, over_capacity);
            reply::integers(ctx, &fields);
            if fields[0] == 0 {
                Tally::Allowed
            } else {
                Tally::Denied
            }
        }
    }
}

//! The one path of every limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING,
//! RL.LOG, RL.ALL, CL.THROTTLE): parse the call (pure, in core), open and read every key, judge
//! each with its rule, decide all or nothing, check memory, write every key, reply
//! with the binding rule's numbers.

use crate::args::Args;
use crate::clock::request_time;
use crate::effects;
use crate::limiter_key::LimiterKey;
use crate::reply;
use crate::stats::Outcome;
use ratelimit_core::call::{Call, Shape};
use ratelimit_core::limiter::{self, Settled};
use ratelimit_core::{throttle, Effect, Error};
use redis_module::Context;
use smallvec::SmallVec;

/// A command's parser: the arguments after its name, as a call.
pub type Parse = for<'a> fn(&[&'a [u8]]) -> Result<Call<'a>, Error>;

pub fn run(ctx: &Context, args: &Args, parse: Parse) -> Result<Outcome, Error> {
    let call = parse(args.after_name())?;
    let now = request_time(call.at)?;
    let names = args.keys(call.first_key(), call.numkeys)?;
    // Open every key as its rule keeps it, read and judge every key, then write.
    let mut keys: SmallVec<[Option<LimiterKey>; 2]> = names.iter().map(|_| None).collect();
    for (i, (k, rule)) in call.rules.iter().enumerate() {
        let (Some(slot), Some(&name)) = (keys.get_mut(*k), names.get(*k)) else {
            return Err(Error::Internal("rule key"));
        };
        *slot = Some(
            LimiterKey::open(ctx, name, rule.storage())
                .map_err(|e| call.rule_error(i, name.bytes(), e))?,
        );
    }
    let judgements = call
        .rules
        .iter()
        .enumerate()
        .map(|(i, (k, rule))| {
            let name = names.get(*k).map_or(&[][..], |n| n.bytes());
            let key = keys
                .get(*k)
                .and_then(Option::as_ref)
                .ok_or(Error::Internal("rule key"))?;
            key.read()
                .and_then(|read| rule.judge(read, now, call.cost))
                .map_err(|e| call.rule_error(i, name, e))
        })
        .collect::<Result<SmallVec<[_; 2]>, _>>()?;
    let decided = limiter::decide(&judgements).ok_or(Error::Internal("no rule"))?;
    let (verdict, window_ms, booking, binding_key) = judgements
        .get(decided.binding)
        .zip(call.rules.get(decided.binding))
        .map(|(j, (k, _))| (j.verdict, j.window_ms, j.booking, *k))
        .ok_or(Error::Internal("binding rule"))?;
    // What each key gets, in key order: its rule's write when every rule allowed; when
    // one denied, a single command's TTL repair, and nothing at all for RL.ALL.
    let mut writes: SmallVec<[Effect<_>; 2]> = names.iter().map(|_| Effect::None).collect();
    if decided.settled == Settled::Allowed || call.shape != Shape::All {
        for (i, ((k, rule), j)) in call.rules.iter().zip(judgements).enumerate() {
            let name = names.get(*k).map_or(&[][..], |n| n.bytes());
            let effect = rule
                .write(j.pending, decided.settled, now, call.cost)
                .map_err(|_| {
                    let full = Error::KeyFull {
                        key: name.to_vec(),
                        command: rule.state_kind().command,
                    };
                    call.rule_error(i, name, full)
                })?;
            if let Some(slot) = writes.get_mut(*k) {
                *slot = effect;
            }
        }
    }
    effects::check_memory(ctx, &writes, &names)?;
    for (key, effect) in keys.iter().zip(&writes) {
        if let Some(key) = key {
            key.apply(effect)?;
        }
    }
    let binding_name = names
        .get(binding_key)
        .ok_or(Error::Internal("binding key"))?;
    Ok(match call.shape {
        Shape::Single => match booking {
            // With DELAY: a sixth field, the delay in ms (0: act now; -1: not booked).
            Some(b) => reply::verdict_and(ctx, &verdict, b.field()),
            None => reply::verdict(ctx, &verdict),
        },
        Shape::EachKey => reply::binding_verdict(ctx, &verdict, *binding_name, window_ms),
        Shape::All => reply::rule_verdict(ctx, &verdict, decided.binding + 1, *binding_name),
        Shape::Throttle { over_capacity } => {
            let fields = throttle::reply(&verdict, over_capacity);
            reply::integers(ctx, &fields);
            if fields[0] == 0 {
                Outcome::Allowed
            } else {
                Outcome::Denied
            }
        }
    })
}

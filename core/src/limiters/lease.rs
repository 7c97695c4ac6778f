//! RL.LEASE and RL.RELEASE: a concurrency limiter. At most `limit` leases are held on
//! a key at once; a lease is held until it is released or until `ttl` has passed since
//! it was last acquired or renewed, so a client that dies frees its slot by itself.
//!
//! The key is a sorted set with **one member per lease**: the member is the lease id
//! (binary-safe, 1 to [`MAX_ID_LEN`] bytes), its score the lease's expiry in Unix
//! milliseconds. `ZRANGE key 0 -1 WITHSCORES` shows who holds what until when.
//!
//! Everything is judged at the call's time in whole milliseconds (its µs time rounded
//! down), `now`: a member scored at or before `now` has expired, is not counted, and is
//! removed by the next write. A call
//!
//! - whose id holds a live lease **renews** it (`expiry = now + ttl`), always allowed;
//! - otherwise is allowed iff `live + 1 <= limit`, and adds its id scored `now + ttl`;
//! - with `COST 0` peeks: whether a new lease would be granted now, writing nothing.
//!
//! A denied call waits for the (live − limit + 1)-th earliest live expiry. A write is one
//! `ZADD`, a `ZREMRANGEBYSCORE key -inf now` when members have expired, and a
//! `PEXPIREAT` at the latest live expiry. Counting is O(log n): the expired members
//! are counted by score range, not read (a write removes them); a denial reads the
//! earliest live members it must wait for (one, while the limit stays the same). A
//! score that is not a whole number of ms from 0 to the latest expiry a call can write
//! ([`MAX_END_MS`]) is not a lease: the key is invalid state.
//!
//! Without `ID`, a lease gets a name the glue made for the call ([`Token`]: 20 random
//! hex digits), checked unused on the key.
//!
//! RL.RELEASE is a command of its own, not a limiter: it judges nothing, is no rule of
//! RL.ALL and replies 1 or 0. [`release`] says what it removes and the key's new expiry.

use crate::call::keys::{KeyRead, SetOp, SetOps, SortedSet, Value, Walk, Written};
use crate::call::limiter::{
    Field, Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax, Token,
};
use crate::call::state::{Effect, Encode, StateName};
use crate::call::verdict::{Decision, Verdict};
use crate::error::{Error, Result};
use crate::limits::{MAX_END_MS, MAX_ID_LEN, MAX_LEASE_LIMIT};
use crate::parse::args::{in_order, parse_int, Options};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::Opt;
use crate::units::{Micros, UnixMillis};
use crate::call::Call;
use crate::commands::{AT, Arg, ArgType, Command, ID, Id, KEY, LIMITER};

const NAME: &str = "RL.LEASE";
/// The command that ends a lease.
pub const RELEASE: &str = "RL.RELEASE";

/// What an RL.LEASE key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: NAME,
    expected: "a sorted set of lease ids scored by their expiry in Unix milliseconds",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "LEASE",
    syntax: "LEASE i limit ttl",
    state: STATE,
    storage: Storage::SortedSet,
    gate: false,
    field: true,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
// A write removes every lease that has expired (up to its limit at once): not
// `fast`, as RL.LOG.
pub const COMMAND: Command = Command {
    id: Id::Lease,
    name: "RL.LEASE",
    syntax: "RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms]",
    summary: "Holds one of limit slots at once (a concurrency limit) until released or ttl after it was last renewed; replies with the lease id",
    complexity: "O(log N + E) for N leases held and E expired",
    args: &[
        KEY,
        Arg::new("limit", ArgType::Integer, "leases held at once, 1 to 10000"),
        Arg::new(
            "ttl",
            ArgType::String,
            "how long a lease lasts unless renewed: a duration (30s, 1500ms, 5m)",
        ),
        ID,
        Arg::option(
            "COST",
            "n",
            ArgType::Integer,
            "1 (the default) takes a lease; 0 peeks and writes nothing",
        ),
        AT,
    ],
    info: "lease",
    ..LIMITER
};

/// `RL.LEASE key limit ttl [ID id] [COST n] [AT unix_ms]`.
pub fn parse<'a>(args: &[&'a [u8]]) -> Result<Call<Lease<'a>>> {
    Call::single(args)
}

/// A lease id as given (`ID`, RL.RELEASE's argument): 1 to [`MAX_ID_LEN`] bytes.
pub fn check_id(raw: &[u8]) -> Result<&[u8]> {
    if raw.is_empty() || raw.len() > MAX_ID_LEN {
        return Err(Error::InvalidId { len: raw.len() });
    }
    Ok(raw)
}

/// RL.LEASE's rule on one key: at most `limit` leases at once, each held for `ttl`
/// after it was last acquired or renewed; `id` names the call's lease (`ID`), or the
/// call gets a [`Token`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease<'a> {
    limit: i64,
    ttl_ms: u64,
    id: Option<&'a [u8]>,
}

impl<'a> Lease<'a> {
    pub fn limit(&self) -> i64 {
        self.limit
    }
    pub fn ttl(&self) -> Micros {
        Micros::from_millis(self.ttl_ms)
    }
    pub fn id(&self) -> Option<&'a [u8]> {
        self.id
    }
}

impl<'a> Syntax<'a> for Lease<'a> {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 2;
    const OPTIONS: &'static [Opt] = &[];
    const COMMAND_OPTIONS: &'static [Opt] = &[Opt::Id];
    const CALL_OPTIONS: &'static [Opt] = &[Opt::Id];
    type Args = (i64, Micros);

    fn parse_args(args: &[&'a [u8]]) -> Result<(i64, Micros)> {
        let [raw_limit, raw_ttl] = args else {
            return Err(Error::WrongArity { command: NAME });
        };
        let limit = match parse_int("limit", raw_limit, 1) {
            Ok(l) if l <= MAX_LEASE_LIMIT => l,
            _ => {
                let e = Error::InvalidLeaseLimit {
                    value: raw_limit.to_vec(),
                };
                let order = "RL.LEASE key limit ttl: the limit comes first";
                return Err(in_order(e, raw_limit, order));
            }
        };
        Ok((limit, parse_duration("ttl", raw_ttl)?))
    }

    fn build((limit, ttl): (i64, Micros), opts: &Options<'a>) -> Result<Lease<'a>> {
        Ok(Lease {
            limit,
            ttl_ms: ttl.floor_millis(),
            id: opts.id.map(check_id).transpose()?,
        })
    }

    fn call_options(&mut self, opts: &Options<'a>) -> Result<()> {
        self.id = opts.id.map(check_id).transpose()?;
        Ok(())
    }
}

/// The id of a lease a call holds: given (`ID`), or made for the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseId<'a> {
    Given(&'a [u8]),
    Made(Token),
}

impl LeaseId<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            LeaseId::Given(id) => id,
            LeaseId::Made(token) => &token.0,
        }
    }
}

/// A member's bytes: the id.
impl Encode for LeaseId<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.bytes());
    }
}

/// What an allowed lease writes: its member scored by its expiry (added, or its score
/// updated), and the expired members removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant<'a> {
    pub id: LeaseId<'a>,
    /// Its expiry, Unix ms: the call's time plus the ttl.
    pub expiry_ms: u64,
    /// `ZREMRANGEBYSCORE key -inf now`, when members have expired.
    pub remove_through_ms: Option<u64>,
}

impl Written for Grant<'_> {
    fn value(&self) -> Value<'_> {
        // A lease's scores are Unix milliseconds, passed as the whole numbers they are.
        let mut ops = SetOps::new();
        ops.push(SetOp::Add {
            member: &self.id,
            score: self.expiry_ms,
        });
        if let Some(through) = self.remove_through_ms {
            ops.push(SetOp::RemoveThrough {
                through,
                at_most: MAX_LEASE_LIMIT as usize,
            });
        }
        Value::SortedSet(ops)
    }
}

/// What an allowed lease keeps for its write: the grant, and the key's new expiry (the
/// latest live expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending<'a> {
    pub grant: Grant<'a>,
    pub key_expiry_ms: u64,
}

/// A score as a lease's expiry: a whole number of ms from 0 to [`MAX_END_MS`], the
/// latest expiry a call can write (the latest `AT` plus the longest ttl). Anything else
/// (a log's µs times, `inf`, a fraction) is not a lease.
fn expiry_of(score: f64) -> Result<u64> {
    if !(0.0..=MAX_END_MS as f64).contains(&score) || score.fract() != 0.0 {
        return Err(STATE.invalid());
    }
    Ok(score as u64)
}

/// A member and its score as a lease: an id of 1 to [`MAX_ID_LEN`] bytes and an expiry.
fn lease_of(member: &[u8], score: f64) -> Result<u64> {
    if member.is_empty() || member.len() > MAX_ID_LEN {
        return Err(STATE.invalid());
    }
    expiry_of(score)
}

/// What a key's leases come to at `now`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Held {
    /// Members scored at or before now.
    expired: usize,
    /// Members scored after now.
    live: usize,
    /// The latest live expiry.
    latest: Option<u64>,
}

/// Count a key's live and expired leases at `now_ms` by score range (O(log n): the
/// expired members are counted, not read), and find the latest expiry. The lowest and
/// the highest scored members are read and checked, so every score lies between two
/// valid expiries.
fn held(set: &dyn SortedSet, now_ms: u64) -> Result<Held> {
    let len = set.len();
    // Every write keeps at most the limit's bound of members: a larger set is not one.
    if len > MAX_LEASE_LIMIT as usize {
        return Err(STATE.invalid());
    }
    if len == 0 {
        return Ok(Held::default());
    }
    set.walk(Walk::All, &mut |member, score| {
        lease_of(member, score)?;
        Ok(false)
    })?;
    let mut latest = None;
    set.walk(Walk::Down, &mut |member, score| {
        let expiry = lease_of(member, score)?;
        latest = (expiry > now_ms).then_some(expiry);
        Ok(false)
    })?;
    let expired = set.count_through(Micros(now_ms))?;
    Ok(Held {
        expired,
        live: len.saturating_sub(expired),
        latest,
    })
}

/// The latest live expiry of a member other than `except`.
fn latest_except(set: &dyn SortedSet, now_ms: u64, except: Option<&[u8]>) -> Result<Option<u64>> {
    let mut latest = None;
    set.walk(Walk::Down, &mut |member, score| {
        let expiry = lease_of(member, score)?;
        if expiry <= now_ms {
            return Ok(false);
        }
        if Some(member) == except {
            return Ok(true);
        }
        latest = Some(expiry);
        Ok(false)
    })?;
    Ok(latest)
}

/// The expiry of the `k`-th earliest live lease (1-based).
fn kth_live(set: &dyn SortedSet, now_ms: u64, k: usize) -> Result<u64> {
    let mut seen = 0;
    let mut found = None;
    set.walk(Walk::After(Micros(now_ms)), &mut |member, score| {
        let expiry = lease_of(member, score)?;
        seen += 1;
        if seen >= k {
            found = Some(expiry);
        }
        Ok(found.is_none())
    })?;
    found.ok_or_else(|| Error::Internal("lease count"))
}

impl<'a> Limiter for Lease<'a> {
    type State = Grant<'a>;
    type Pending = Option<Pending<'a>>;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// A lease is one slot: COST 1, or 0 to peek, whatever the call's flag.
    fn check_cost(&self, cost: i64, _mode: Mode) -> Result<()> {
        if !(0..=1).contains(&cost) {
            return Err(Error::LeaseCost { cost });
        }
        Ok(())
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Self::Pending>> {
        let set = key.sorted_set()?;
        let now_ms = req.now.floor_millis();
        let held = match set {
            Some(set) => held(set, now_ms)?,
            None => Held::default(),
        };
        let live = i64::try_from(held.live).map_err(|_| STATE.invalid())?;
        let limit = self.limit;
        let until = |t: u64| Micros::from_millis(t.saturating_sub(now_ms));
        let free = (limit - live).max(0);
        let expiry_ms = now_ms.saturating_add(self.ttl_ms);
        let remove_through_ms = (held.expired > 0).then_some(now_ms);
        // Field 6 (RL.ALL's 8): the lease id when the call holds a lease, nil otherwise
        // (a denial, a peek, a refund).
        let judgement = |verdict: Verdict, pending: Option<Pending<'a>>| Judgement {
            field: Some(match &pending {
                Some(p) => Field::Bulk(p.grant.id.bytes().into()),
                None => Field::Nil,
            }),
            ..Judgement::plain(verdict, self.ttl_ms, pending)
        };
        let allowed = |remaining: i64, key_expiry_ms: u64, id: LeaseId<'a>| {
            let verdict = Verdict {
                decision: Decision::Allowed,
                limit,
                remaining,
                reset_after: until(key_expiry_ms),
            };
            let grant = Grant {
                id,
                expiry_ms,
                remove_through_ms,
            };
            judgement(
                verdict,
                Some(Pending {
                    grant,
                    key_expiry_ms,
                }),
            )
        };
        if req.mode == Mode::Refund {
            // RL.ALL's REFUND gives back what its other rules took: the lease rule takes,
            // renews and denies nothing (a call with REFUND is never denied); its
            // numbers are a peek's. A lease ends with RL.RELEASE.
            let verdict = Verdict {
                decision: Decision::Allowed,
                limit,
                remaining: free,
                reset_after: held.latest.map_or(Micros::ZERO, until),
            };
            return Ok(judgement(verdict, None));
        }
        // FORCE is ignored: a forced call takes or renews a lease as any other.
        if req.cost > 0 {
            // The call's id holds a live lease: a renewal, always allowed.
            if let (Some(id), Some(set)) = (self.id, set) {
                if let Some(score) = set.score(id)? {
                    if lease_of(id, score)? > now_ms {
                        let others = latest_except(set, now_ms, Some(id))?;
                        let key_expiry = others.map_or(expiry_ms, |o| o.max(expiry_ms));
                        return Ok(allowed(free, key_expiry, LeaseId::Given(id)));
                    }
                }
            }
            if live < limit {
                let id = match self.id {
                    Some(id) => LeaseId::Given(id),
                    None => LeaseId::Made(req.names.token()?),
                };
                if let (LeaseId::Made(token), Some(set)) = (id, set) {
                    if set.score(&token.0)?.is_some() {
                        return Err(Error::Internal("lease id taken"));
                    }
                }
                let key_expiry = held.latest.map_or(expiry_ms, |l| l.max(expiry_ms));
                return Ok(allowed(limit - live - 1, key_expiry, id));
            }
        }
        let reset_after = held.latest.map_or(Micros::ZERO, until);
        if live < limit {
            // A peek that a new lease would be granted.
            let verdict = Verdict {
                decision: Decision::Allowed,
                limit,
                remaining: free,
                reset_after,
            };
            return Ok(judgement(verdict, None));
        }
        // Denied: until the (live - limit + 1)-th earliest live lease has expired.
        let k = usize::try_from(live - limit + 1).map_err(|_| STATE.invalid())?;
        let retry_at = match set {
            Some(set) => kth_live(set, now_ms, k)?,
            None => return Err(Error::Internal("lease count")),
        };
        let verdict = Verdict {
            decision: Decision::Denied {
                retry_after: until(retry_at),
            },
            limit,
            remaining: free,
            reset_after,
        };
        Ok(judgement(verdict, None))
    }

    fn write(
        &self,
        pending: Option<Pending<'a>>,
        outcome: Outcome,
        _req: &Request,
    ) -> std::result::Result<Effect<Grant<'a>>, Full> {
        Ok(match (outcome, pending) {
            (Outcome::Allowed, Some(p)) => Effect::Set {
                state: p.grant,
                expires_at: UnixMillis(p.key_expiry_ms),
            },
            _ => Effect::None,
        })
    }
}

/// `RL.RELEASE key id [AT unix_ms]`, after the command name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release<'a> {
    pub id: &'a [u8],
    pub at: Option<Micros>,
}

/// Parse `key id [AT unix_ms]` (the arguments after the command name).
pub fn parse_release<'a>(args: &[&'a [u8]]) -> Result<Release<'a>> {
    let [_key, id, rest @ ..] = args else {
        return Err(Error::WrongArity { command: RELEASE });
    };
    let id = check_id(id)?;
    let opts = Options::parse(rest, Opt::set(&[Opt::At]))?;
    Ok(Release { id, at: opts.at })
}

/// What RL.RELEASE removes from a key: the expired members, then the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removal<'a> {
    /// `ZREMRANGEBYSCORE key -inf now`, when members have expired.
    pub expired_through_ms: Option<u64>,
    /// `ZREM key id`, when the id held a live lease.
    pub lease: Option<&'a [u8]>,
}

impl Written for Removal<'_> {
    fn value(&self) -> Value<'_> {
        let mut ops = SetOps::new();
        if let Some(through) = self.expired_through_ms {
            ops.push(SetOp::RemoveThrough {
                through,
                at_most: MAX_LEASE_LIMIT as usize,
            });
        }
        if let Some(id) = self.lease {
            ops.push(SetOp::Remove(id));
        }
        Value::SortedSet(ops)
    }
}

/// What RL.RELEASE does to a key: whether a live lease was released (the reply: 1),
/// and its write (a key left with no lease is deleted by the removals; otherwise it
/// expires at its latest lease).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released<'a> {
    pub released: bool,
    pub effect: Effect<Removal<'a>>,
}

/// Release the lease `id` of a key (`None`: no key) at `now`: the live lease removed,
/// the expired members removed, the key's expiry its latest live lease. An unknown or
/// expired id is not an error; a key that is not a lease set is.
pub fn release<'a>(set: Option<&dyn SortedSet>, id: &'a [u8], now: Micros) -> Result<Released<'a>> {
    let Some(set) = set else {
        return Ok(Released {
            released: false,
            effect: Effect::None,
        });
    };
    let now_ms = now.floor_millis();
    let held = held(set, now_ms)?;
    let released = match set.score(id)? {
        Some(score) => lease_of(id, score)? > now_ms,
        None => false,
    };
    let removal = Removal {
        expired_through_ms: (held.expired > 0).then_some(now_ms),
        lease: released.then_some(id),
    };
    let left = held.live - usize::from(released);
    let effect = if !released && removal.expired_through_ms.is_none() {
        Effect::None
    } else {
        // With no lease left the removals empty the key, which is then gone.
        let latest = match left {
            0 => None,
            _ => latest_except(set, now_ms, removal.lease)?,
        };
        Effect::Set {
            state: removal,
            expires_at: UnixMillis(latest.unwrap_or(now_ms)),
        }
    };
    Ok(Released { released, effect })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::memory::{self, Key};
    use crate::call::Call;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const T0: u64 = 1_900_000_000_000; // ms

    fn at(ms: u64) -> Micros {
        Micros::from_millis(T0 + ms)
    }

    fn parse(args: &[&'static str]) -> Result<Call<Lease<'static>>> {
        let raw: Vec<&[u8]> = std::iter::once("k")
            .chain(args.iter().copied())
            .map(str::as_bytes)
            .collect();
        crate::limiters::lease::parse(&raw)
    }

    /// `RL.LEASE k <args>` at `+ms` on `key`: the five fields and field 6.
    fn lease(key: &mut Option<Key>, ms: u64, args: &[&'static str]) -> ([i64; 5], Option<String>) {
        let call = parse(args).expect("a valid call");
        let mut keys = [key.take()];
        let s = memory::run(&call, &mut keys, at(ms)).expect("a lease set");
        *key = keys[0].take();
        let id = match s.field {
            Some(Field::Bulk(b)) => Some(String::from_utf8(b.to_vec()).unwrap()),
            Some(Field::Nil) => None,
            other => panic!("RL.LEASE gives an id or nil as field 6, not {other:?}"),
        };
        (s.verdict.fields(), id)
    }

    /// `RL.RELEASE k id` at `+ms`, applied as the module applies it: 1 or 0.
    fn release_at(key: &mut Option<Key>, ms: u64, id: &str) -> i64 {
        let r = {
            let set = match key {
                Some(Key::SortedSet { members, .. }) => Some(members as &dyn SortedSet),
                _ => None,
            };
            release(set, id.as_bytes(), at(ms)).expect("a lease set")
        };
        memory::apply(key, &r.effect);
        i64::from(r.released)
    }

    fn members(key: &Option<Key>) -> Vec<(u64, String)> {
        match key {
            Some(Key::SortedSet { members, .. }) => members
                .iter()
                .map(|(s, m)| (s - T0, String::from_utf8_lossy(m).into_owned()))
                .collect(),
            _ => vec![],
        }
    }

    fn expiry(key: &Option<Key>) -> Option<u64> {
        match key {
            Some(Key::SortedSet { expires_at, .. }) => expires_at.map(|e| e.0 - T0),
            _ => None,
        }
    }

    #[test]
    fn leases_up_to_the_limit_renewals_and_expiry_at_the_ms() {
        let mut key = None;
        type Case = (u64, &'static [&'static str], [i64; 5], Option<&'static str>);
        let cases: &[Case] = &[
            // 2 at a time, each held 10 s.
            (
                0,
                &["2", "10s", "ID", "a"],
                [0, 2, 1, -1, 10_000],
                Some("a"),
            ),
            (
                1_000,
                &["2", "10s", "ID", "b"],
                [0, 2, 0, -1, 10_000],
                Some("b"),
            ),
            // Full: c waits for a, the earliest, at +10 000.
            (
                2_000,
                &["2", "10s", "ID", "c"],
                [1, 2, 0, 8_000, 9_000],
                None,
            ),
            // A peek says the same and writes nothing.
            (
                2_000,
                &["2", "10s", "COST", "0"],
                [1, 2, 0, 8_000, 9_000],
                None,
            ),
            // a renews (always allowed): now held until +13 000; b is the earliest.
            (
                3_000,
                &["2", "10s", "ID", "a"],
                [0, 2, 0, -1, 10_000],
                Some("a"),
            ),
            (
                3_000,
                &["2", "10s", "ID", "c"],
                [1, 2, 0, 8_000, 10_000],
                None,
            ),
            // A peek with a live id does not renew it.
            (
                4_000,
                &["2", "10s", "ID", "a", "COST", "0"],
                [1, 2, 0, 7_000, 9_000],
                None,
            ),
            // b expires at exactly +11 000: one ms before, still held; at it, gone.
            (10_999, &["2", "10s", "ID", "c"], [1, 2, 0, 1, 2_001], None),
            (
                11_000,
                &["2", "10s", "ID", "c"],
                [0, 2, 0, -1, 10_000],
                Some("c"),
            ),
        ];
        for (ms, args, want, id) in cases {
            let (fields, got) = lease(&mut key, *ms, args);
            assert_eq!(fields, *want, "+{ms} {args:?}");
            assert_eq!(got.as_deref(), *id, "+{ms} {args:?}");
        }
        // b was removed by c's write; the key expires with its latest lease.
        assert_eq!(
            members(&key),
            [(13_000, "a".to_string()), (21_000, "c".to_string())]
        );
        assert_eq!(expiry(&key), Some(21_000));
    }

    #[test]
    fn retry_after_is_the_earliest_expiry_that_makes_room() {
        // 3 live leases, then the limit lowered to 1: a new lease needs 3 to go, so it
        // waits for the 3rd earliest ((live - limit + 1)-th).
        let mut key = None;
        for (ms, id) in [(0, "a"), (100, "b"), (200, "c")] {
            let ttl = "1s";
            let call = ["3", ttl, "ID", id];
            assert_eq!(lease(&mut key, ms, &call).0[0], 0);
        }
        assert_eq!(
            lease(&mut key, 300, &["1", "1s", "ID", "d"]).0,
            [1, 1, 0, 900, 900]
        );
        assert_eq!(
            lease(&mut key, 300, &["2", "1s", "ID", "d"]).0,
            [1, 2, 0, 800, 900]
        );
        // Renewal is allowed however far over the limit the key is.
        assert_eq!(
            lease(&mut key, 300, &["1", "5s", "ID", "a"]).0,
            [0, 1, 0, -1, 5_000]
        );
        // A shorter ttl on renewal moves the lease's expiry back, and the key's with it.
        assert_eq!(
            lease(&mut key, 400, &["3", "1s", "ID", "a"]).0,
            [0, 3, 0, -1, 1_000]
        );
        assert_eq!(expiry(&key), Some(1_400));
    }

    #[test]
    fn ids_are_made_when_none_is_given_and_are_unique_on_the_key() {
        let mut key = None;
        let (f, a) = lease(&mut key, 0, &["3", "1m"]);
        let (_, b) = lease(&mut key, 0, &["3", "1m"]);
        assert_eq!(f, [0, 3, 2, -1, 60_000]);
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), crate::call::limiter::TOKEN_LEN);
        // The made id renews as a given one.
        let call = ["3", "2m", "ID", &*Box::leak(a.clone().into_boxed_str())];
        assert_eq!(
            lease(&mut key, 10, &call),
            ([0, 3, 1, -1, 120_000], Some(a.clone()))
        );
        // A peek makes none.
        assert_eq!(lease(&mut key, 10, &["3", "1m", "COST", "0"]).1, None);
        assert_eq!(members(&key).len(), 2);
        // A made id already on the key is never handed out twice.
        let token = memory::next_token();
        let mut taken = BTreeSet::new();
        let next = memory::next_token();
        taken.insert((T0 + 99_000, next.0.to_vec()));
        let _ = token;
        let set = &taken;
        let rule = parse(&["3", "1m"]).unwrap().rules[0].1;
        struct Made(Token);
        impl crate::call::limiter::Names for Made {
            fn token(&self) -> Result<Token> {
                Ok(self.0)
            }
        }
        let req = Request {
            names: &Made(next),
            ..Request::take(at(0), 1)
        };
        assert_eq!(
            rule.judge(KeyRead::SortedSet(set), &req).err(),
            Some(Error::Internal("lease id taken"))
        );
    }

    #[test]
    fn release_frees_a_slot_removes_expired_and_deletes_an_empty_key() {
        let mut key = None;
        lease(&mut key, 0, &["2", "10s", "ID", "a"]);
        lease(&mut key, 5_000, &["2", "10s", "ID", "b"]);
        assert_eq!(lease(&mut key, 6_000, &["2", "10s", "ID", "c"]).0[0], 1);
        // Unknown: 0, nothing changes.
        assert_eq!(release_at(&mut key, 6_000, "zz"), 0);
        assert_eq!(members(&key).len(), 2);
        // b released: the key keeps a and expires with it.
        assert_eq!(release_at(&mut key, 6_000, "b"), 1);
        assert_eq!(release_at(&mut key, 6_000, "b"), 0, "released once");
        assert_eq!(members(&key), [(10_000, "a".to_string())]);
        assert_eq!(expiry(&key), Some(10_000));
        assert_eq!(lease(&mut key, 6_000, &["2", "10s", "ID", "c"]).0[0], 0);
        // a has expired at +10 000: releasing it is 0, and removes it.
        assert_eq!(release_at(&mut key, 10_000, "a"), 0);
        assert_eq!(members(&key), [(16_000, "c".to_string())]);
        // The last live lease released: the key is gone.
        assert_eq!(release_at(&mut key, 10_000, "c"), 1);
        assert_eq!(key, None);
        assert_eq!(release_at(&mut key, 10_000, "c"), 0, "no key");
    }

    #[test]
    fn a_key_of_other_members_is_refused() {
        let rule = parse(&["3", "1m", "ID", "a"]).unwrap().rules[0].1;
        let long = vec![b'x'; MAX_ID_LEN + 1];
        let t = (T0 + 5_000) as f64;
        for (member, score) in [
            (&b"a"[..], 1.5),
            (b"a", -1.0),
            (b"a", f64::NAN),
            (b"a", 9_007_199_254_740_992.0),
            (b"", 1.0),
            (&long, 1.0),
            // A log's entry: a time in µs, far past any lease's expiry.
            (b"0000000001:1:u1", t * 1_000.0),
            (b"ghost", f64::INFINITY),
            (b"ghost", f64::NEG_INFINITY),
            (b"a", (MAX_END_MS + 1) as f64),
        ] {
            let bad = ScoredSet::of(&[(member, score)]);
            let req = Request::take(at(0), 1);
            assert_eq!(
                rule.judge(KeyRead::SortedSet(&bad), &req).err(),
                Some(STATE.invalid()),
                "{member:?} {score}"
            );
            assert_eq!(
                release(Some(&bad), b"a", at(0)).err(),
                Some(STATE.invalid())
            );
            // Beside a valid lease, as the lowest or the highest member.
            let beside = ScoredSet::of(&[(b"ok", t), (member, score)]);
            assert_eq!(
                rule.judge(KeyRead::SortedSet(&beside), &req).err(),
                Some(STATE.invalid()),
                "{member:?} {score} beside a lease"
            );
        }
        assert!(ScoredSet::of(&[(b"a", MAX_END_MS as f64)])
            .judged(&rule, 0)
            .is_ok());
        assert_eq!(
            rule.judge(
                KeyRead::String {
                    value: b"1",
                    expires_at: None
                },
                &Request::take(at(0), 1)
            )
            .err(),
            Some(Error::WrongType)
        );
    }

    /// A key of 9 999 expired leases and one live one, at a limit of 1: a denial, a
    /// peek and a release read a few members (the lowest, the highest, the one they
    /// wait for), never the expired ones (a denial once read all of them).
    #[test]
    fn a_denial_reads_none_of_the_expired_leases() {
        let mut members: Vec<(Vec<u8>, f64)> = (0..9_999u64)
            .map(|i| (format!("old{i}").into_bytes(), (T0 - 10_000 + i) as f64))
            .collect();
        members.push((b"live".to_vec(), (T0 + 5_000) as f64));
        let set = ScoredSet::owned(members);
        let rule = parse(&["1", "1m", "ID", "a"]).unwrap().rules[0].1;
        for cost in [1, 0] {
            let j = set.judged(&rule, cost).expect("a lease set");
            assert_eq!(
                j.verdict.decision,
                Decision::Denied {
                    retry_after: Micros::from_millis(5_000)
                }
            );
            assert!(set.reads.get() <= 4, "read {} members", set.reads.get());
            set.reads.set(0);
        }
        release(Some(&set), b"live", at(0)).unwrap();
        assert!(set.reads.get() <= 4, "read {} members", set.reads.get());
    }

    /// A sorted set of any scores, which counts the members its walks read.
    struct ScoredSet {
        /// (score, member), in score order.
        members: Vec<(f64, Vec<u8>)>,
        reads: std::cell::Cell<usize>,
    }

    impl ScoredSet {
        fn of(members: &[(&[u8], f64)]) -> ScoredSet {
            ScoredSet::owned(members.iter().map(|(m, s)| (m.to_vec(), *s)).collect())
        }

        fn owned(members: Vec<(Vec<u8>, f64)>) -> ScoredSet {
            let mut members: Vec<(f64, Vec<u8>)> =
                members.into_iter().map(|(m, s)| (s, m)).collect();
            members.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            ScoredSet {
                members,
                reads: std::cell::Cell::new(0),
            }
        }

        fn judged<'r>(
            &self,
            rule: &Lease<'r>,
            cost: i64,
        ) -> Result<Judgement<Option<Pending<'r>>>> {
            rule.judge(KeyRead::SortedSet(self), &Request::take(at(0), cost))
        }
    }

    impl SortedSet for ScoredSet {
        fn len(&self) -> usize {
            self.members.len()
        }
        fn walk(&self, walk: Walk, f: &mut dyn FnMut(&[u8], f64) -> Result<bool>) -> Result<()> {
            let visit = |(score, member): &(f64, Vec<u8>)| {
                self.reads.set(self.reads.get() + 1);
                f(member, *score)
            };
            let mut visit = visit;
            let all = self.members.iter();
            let order: Box<dyn Iterator<Item = &(f64, Vec<u8>)>> = match walk {
                Walk::After(a) => Box::new(all.filter(move |(s, _)| *s > a.0 as f64)),
                Walk::Through(t) => Box::new(all.rev().filter(move |(s, _)| *s <= t.0 as f64)),
                Walk::All => Box::new(all),
                Walk::Down => Box::new(all.rev()),
            };
            for m in order {
                if !visit(m)? {
                    break;
                }
            }
            Ok(())
        }
        fn score(&self, member: &[u8]) -> Result<Option<f64>> {
            Ok(self
                .members
                .iter()
                .find(|(_, m)| m == member)
                .map(|(s, _)| *s))
        }
        fn count_through(&self, through: Micros) -> Result<usize> {
            Ok(self
                .members
                .iter()
                .filter(|(s, _)| *s <= through.0 as f64)
                .count())
        }
    }

    #[test]
    fn argument_errors() {
        let long = "x".repeat(257);
        let long: &'static str = Box::leak(long.into_boxed_str());
        let cases: &[(&[&'static str], Error)] = &[
            (
                &["0", "1s"],
                Error::InvalidLeaseLimit {
                    value: b"0".to_vec(),
                },
            ),
            (
                &["10001", "1s"],
                Error::InvalidLeaseLimit {
                    value: b"10001".to_vec(),
                },
            ),
            (
                &["5", "0s"],
                Error::InvalidDuration {
                    what: "ttl",
                    value: b"0s".to_vec(),
                    reason: crate::error::DurationProblem::NotPositive,
                },
            ),
            (&["5", "1s", "COST", "2"], Error::LeaseCost { cost: 2 }),
            (&["5", "1s", "ID", ""], Error::InvalidId { len: 0 }),
            (&["5", "1s", "ID", long], Error::InvalidId { len: 257 }),
            (&["5", "1s", "ID"], Error::MissingOptionValue { name: "ID" }),
            (
                &["5"],
                Error::WrongArity {
                    command: "RL.LEASE",
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args).err().as_ref(), Some(want), "{args:?}");
        }
        assert_eq!(
            parse(&["5", "1s", "META", "x"])
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("ERR unknown option 'META' (options here: COST, AT, ID)")
        );
        assert_eq!(
            parse(&["10s", "5"]).err().map(|e| e.to_string()).as_deref(),
            Some("ERR invalid limit '10s': must be an integer from 1 to 10000 (leases held at once) (RL.LEASE key limit ttl: the limit comes first)")
        );
        assert!(parse(&["10000", "1s", "ID", &long[1..]]).is_ok());
        let rel = |a: &[&'static str]| {
            let raw: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            parse_release(&raw)
        };
        assert_eq!(rel(&["k", "a"]), Ok(Release { id: b"a", at: None }));
        assert_eq!(
            rel(&["k", "a", "at", "1900000000000"]),
            Ok(Release {
                id: b"a",
                at: Some(Micros::from_millis(T0))
            })
        );
        assert_eq!(rel(&["k", ""]), Err(Error::InvalidId { len: 0 }));
        assert_eq!(rel(&["k"]), Err(Error::WrongArity { command: RELEASE }));
        assert!(matches!(
            rel(&["k", "a", "COST", "1"]),
            Err(Error::UnknownOption { .. })
        ));
    }

    fn all(args: &[&'static str]) -> Result<Call<crate::limiters::AnyRule<'static>>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        crate::limiters::all(&raw)
    }

    #[test]
    fn in_rl_all_a_refused_call_takes_no_slot_and_the_id_is_the_eighth_field() {
        // A slot of 2 per account and 1 per second per user.
        let call = |id: &'static str| {
            all(&[
                "2", "acct", "user", "LEASE", "1", "2", "30s", "FIXED", "2", "1", "1s", "ID", id,
            ])
            .unwrap()
        };
        let mut keys: Vec<Option<Key>> = vec![None, None];
        let s = memory::run(&call("r1"), &mut keys, at(0)).unwrap();
        assert_eq!(s.verdict.fields(), [0, 1, 0, -1, 1_000]);
        assert_eq!(s.field, Some(Field::Bulk(b"r1"[..].into())));
        // The rate denies: no slot taken, field 8 nil.
        let s = memory::run(&call("r2"), &mut keys, at(10)).unwrap();
        assert_eq!((s.verdict.fields()[0], s.binding), (1, 1));
        assert_eq!(s.field, Some(Field::Nil));
        assert_eq!(members(&keys[0]), [(30_000, "r1".to_string())]);
        // A renewal of r1 is judged by the rate too (all or nothing).
        let s = memory::run(&call("r1"), &mut keys, at(20)).unwrap();
        assert_eq!(s.field, Some(Field::Nil));
        let s = memory::run(&call("r2"), &mut keys, at(1_000)).unwrap();
        assert_eq!(s.field, Some(Field::Bulk(b"r2"[..].into())));
        assert_eq!(s.verdict.fields(), [0, 2, 0, -1, 30_000], "the lease binds");
        // Without ID the call gets a made id; several LEASE rules share it.
        let two = all(&[
            "2", "a", "b", "LEASE", "1", "5", "1m", "LEASE", "2", "5", "1m",
        ])
        .unwrap();
        let mut keys: Vec<Option<Key>> = vec![None, None];
        let s = memory::run(&two, &mut keys, at(0)).unwrap();
        let Some(Field::Bulk(id)) = s.field else {
            panic!("no id")
        };
        let id = String::from_utf8(id.to_vec()).unwrap();
        assert_eq!(members(&keys[0]), [(60_000, id.clone())]);
        assert_eq!(members(&keys[1]), [(60_000, id)]);
        // A call without LEASE has no eighth field and takes no ID.
        let fixed = all(&["1", "a", "FIXED", "1", "5", "1m"]).unwrap();
        assert_eq!(memory::run(&fixed, &mut [None], at(0)).unwrap().field, None);
        let err = |args: &[&'static str]| all(args).err().map(|e| e.to_string());
        assert_eq!(
            err(&["1", "a", "FIXED", "1", "5", "1m", "ID", "x"]).as_deref(),
            Some("ERR unknown option 'ID' (options here: COST, AT, REFUND, FORCE, UPTO)")
        );
        assert_eq!(
            err(&["1", "a", "LEASE", "1", "5", "1m", "ID", ""]).as_deref(),
            Some("ERR rule 1 (LEASE): invalid ID '': a lease id is 1 to 256 bytes")
        );
        assert_eq!(
            err(&["1", "a", "LEASE", "1", "5", "1m", "COST", "3"]).as_deref(),
            Some("ERR rule 1 (LEASE): invalid cost 3: a lease takes COST 1 (the default) or COST 0 to peek")
        );
        assert_eq!(
            err(&["1", "a", "LEASE", "1", "5", "1m", "ID", "x", "FIXED"]).as_deref(),
            Some("ERR COST and AT come after every rule")
        );
        assert_eq!(
            err(&["1", "a", "LEASE", "1", "0", "1m"]).as_deref(),
            Some("ERR rule 1 (LEASE): invalid limit '0': must be an integer from 1 to 10000 (leases held at once)")
        );
        assert_eq!(
            err(&["1", "a", "LEASE", "1", "5", "1m", "ID"]).as_deref(),
            Some("ERR option ID needs a value")
        );
    }

    #[test]
    fn a_lease_rule_ignores_refund_and_force_and_a_ban_ends_the_call_before_it() {
        // A slot of 1 per account, 10 per minute per user.
        let call = |extra: &[&'static str]| {
            let mut args = vec![
                "2", "acct", "user", "LEASE", "1", "1", "30s", "FIXED", "2", "10", "1m",
            ];
            args.extend_from_slice(extra);
            all(&args).unwrap()
        };
        let mut keys: Vec<Option<Key>> = vec![None, None];
        let s = memory::run(&call(&["ID", "r1"]), &mut keys, at(0)).unwrap();
        assert_eq!(s.field, Some(Field::Bulk(b"r1"[..].into())));
        // The slot is full; a refund of the rate is allowed all the same, takes no slot
        // and renews nothing; field 8 is nil.
        let s = memory::run(&call(&["ID", "r2", "REFUND"]), &mut keys, at(10)).unwrap();
        assert_eq!(s.outcome, Outcome::Allowed);
        assert_eq!(s.field, Some(Field::Nil));
        assert_eq!(members(&keys[0]), [(30_000, "r1".to_string())]);
        let s = memory::run(&call(&["ID", "r1", "REFUND"]), &mut keys, at(20)).unwrap();
        assert_eq!((s.outcome, s.field), (Outcome::Allowed, Some(Field::Nil)));
        assert_eq!(members(&keys[0]), [(30_000, "r1".to_string())]);
        // Without ID a refund needs no made id.
        let refund = call(&["REFUND"]);
        let mut copy = keys.clone();
        let mut in_memory = memory::InMemory::new(&refund, &mut copy);
        let unnamed = crate::call::limiter::Unnamed;
        assert!(refund.run(&mut in_memory, at(25), &unnamed).is_ok());
        // FORCE is ignored by the lease: a full key refuses the forced call, nothing written.
        let before = keys.clone();
        let s = memory::run(&call(&["ID", "r2", "FORCE"]), &mut keys, at(30)).unwrap();
        assert_eq!(
            (s.outcome, s.binding, s.field),
            (Outcome::Denied { repair: false }, 0, Some(Field::Nil))
        );
        assert_eq!(keys, before);
        // ... and a forced call of its live id renews it.
        let s = memory::run(&call(&["ID", "r1", "FORCE"]), &mut keys, at(40)).unwrap();
        assert_eq!(s.field, Some(Field::Bulk(b"r1"[..].into())));
        assert_eq!(members(&keys[0]), [(30_040, "r1".to_string())]);
        // A BAN rule and a LEASE rule in one call: while banned, the lease is not read.
        let banned = |id: &'static str| {
            all(&[
                "3", "acct", "user", "ban", "LEASE", "1", "1", "30s", "FIXED", "2", "10", "1m",
                "BAN", "3", "1", "1m", "1h", "ID", id,
            ])
            .unwrap()
        };
        let mut keys: Vec<Option<Key>> = vec![None, None, None];
        let s = memory::run(&banned("r1"), &mut keys, at(0)).unwrap();
        assert_eq!(s.field, Some(Field::Bulk(b"r1"[..].into())));
        // r2 is refused by the lease: a strike that starts the ban.
        let s = memory::run(&banned("r2"), &mut keys, at(10)).unwrap();
        assert_eq!(
            (s.outcome, s.binding, s.penalized),
            (Outcome::Denied { repair: false }, 2, true)
        );
        assert_eq!(s.field, Some(Field::Nil));
        // r1's renewal is refused by the ban, its lease left as it was.
        let s = memory::run(&banned("r1"), &mut keys, at(20)).unwrap();
        assert_eq!(
            (s.outcome, s.gated, s.field),
            (Outcome::Denied { repair: false }, true, Some(Field::Nil))
        );
        assert_eq!(members(&keys[0]), [(30_000, "r1".to_string())]);
    }

    #[test]
    fn rl_lease_takes_neither_refund_nor_force() {
        for flag in ["REFUND", "FORCE"] {
            assert_eq!(
                parse(&["5", "1m", flag]).err().map(|e| e.to_string()),
                Some(format!(
                    "ERR unknown option '{flag}' (options here: COST, AT, ID)"
                ))
            );
        }
    }

    /// One step of a random walk.
    #[derive(Clone, Debug)]
    enum Step {
        /// Acquire or renew id `n` (`None`: a made id), with the ttl in ms.
        Lease(Option<u8>, u64),
        Peek,
        Release(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (proptest::option::weighted(0.8, 0u8..8), 1u64..50).prop_map(|(i, t)| Step::Lease(i, t)),
            1 => Just(Step::Peek),
            2 => (0u8..8).prop_map(Step::Release),
        ]
    }

    proptest! {
        /// Never more than `limit` live leases after any sequence of acquires, renewals,
        /// releases and times; a renewal of a live lease is never denied; a lease
        /// expires exactly at its ms; a denial means the key was full, and retry_after
        /// is exactly when a new lease fits; the key expires with its latest lease.
        #[test]
        fn invariants(
            limit in 1i64..6,
            steps in proptest::collection::vec((0u64..20, step()), 1..120),
        ) {
            let mut key: Option<Key> = None;
            let mut ms = 0u64;
            // The model: id -> expiry (ms since T0).
            let mut model: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
            let limit_s: &'static str = Box::leak(limit.to_string().into_boxed_str());
            for (dt, step) in steps {
                ms += dt;
                model.retain(|_, e| *e > ms);
                match step {
                    Step::Lease(id, ttl) => {
                        let ttl_s: &'static str = Box::leak(format!("{ttl}ms").into_boxed_str());
                        let name = id.map(|i| format!("id{i}"));
                        let mut args = vec![limit_s, ttl_s];
                        if let Some(n) = &name {
                            args.extend(["ID", Box::leak(n.clone().into_boxed_str())]);
                        }
                        let renewal = name.as_ref().is_some_and(|n| model.contains_key(n.as_bytes()));
                        let (f, got) = lease(&mut key, ms, &args);
                        if renewal {
                            prop_assert_eq!(f[0], 0, "renewal denied");
                        } else {
                            prop_assert_eq!(f[0] == 0, (model.len() as i64) < limit);
                        }
                        if f[0] == 0 {
                            let got = got.expect("an id");
                            if let Some(n) = &name { prop_assert_eq!(&got, n); }
                            model.insert(got.into_bytes(), ms + ttl);
                        } else {
                            prop_assert_eq!(got, None);
                            // After retry_after a new lease fits, not a ms before.
                            let mut copy = key.clone();
                            let r = f[3] as u64;
                            prop_assert!(r >= 1);
                            let fits = |copy: &mut Option<Key>, at: u64| lease(copy, at, &[limit_s, "1ms", "COST", "0"]).0[0] == 0;
                            prop_assert!(fits(&mut copy, ms + r));
                            prop_assert!(!fits(&mut copy, ms + r - 1));
                        }
                        let live = model.len() as i64;
                        prop_assert_eq!(f[2], (limit - live).max(0));
                    }
                    Step::Peek => {
                        let before = key.clone();
                        let (f, got) = lease(&mut key, ms, &[limit_s, "1s", "COST", "0"]);
                        prop_assert_eq!(got, None);
                        prop_assert_eq!(&key, &before, "a peek writes nothing");
                        prop_assert_eq!(f[0] == 0, (model.len() as i64) < limit);
                    }
                    Step::Release(i) => {
                        let n = format!("id{i}");
                        let was = model.remove(n.as_bytes()).is_some();
                        let n: &'static str = Box::leak(n.into_boxed_str());
                        prop_assert_eq!(release_at(&mut key, ms, n), i64::from(was));
                    }
                }
                // The key's live members are the model's leases, never more than the
                // limit (a renewal does not add one).
                let live: Vec<(Vec<u8>, u64)> = match &key {
                    Some(Key::SortedSet { members, .. }) => members
                        .iter()
                        .filter(|(s, _)| *s > T0 + ms)
                        .map(|(s, m)| (m.clone(), s - T0))
                        .collect(),
                    _ => vec![],
                };
                let mut want: Vec<(Vec<u8>, u64)> = model.iter().map(|(m, e)| (m.clone(), *e)).collect();
                let mut got = live.clone();
                want.sort();
                got.sort();
                prop_assert_eq!(got, want);
                prop_assert!(live.len() as i64 <= limit, "{} live", live.len());
                if let Some(latest) = live.iter().map(|(_, e)| *e).max() {
                    prop_assert_eq!(expiry(&key), Some(latest));
                }
            }
        }
    }
}

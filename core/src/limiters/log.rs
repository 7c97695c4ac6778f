//! RL.LOG: an exact moving window that remembers who used it.
//!
//! The key is a sorted set with **one member per allowed request**, whatever its cost,
//! scored by the request's time in microseconds since the Unix epoch and named
//! `seq:cost:meta`:
//!
//! - `seq`, 16 decimal digits: the running total of the cost the log has allowed,
//!   through this request (its units are numbered `seq - cost + 1` to `seq`);
//!   zero-padded so that members of the same score sort in the order they were added;
//! - `cost`: the request's cost, 1 to [`MAX_LOG_LIMIT`];
//! - `meta`: the request's `META` value, binary-safe, up to [`MAX_META_LEN`] bytes.
//!
//! E.g. `0000000000000042:1:user:7`. Sequence numbers grow with scores: a call whose
//! time is older than the newest entry is judged, and recorded, at the newest entry's
//! time. So the cost counted in a window `(t - window, +inf)` is the newest member's
//! `seq` minus the first counted member's `seq - cost`: two O(log n) lookups, whatever
//! the costs and however many entries the window holds. A request of cost `c` at `t`
//! is allowed iff that count plus `c` is at most `limit`. No buckets, no approximation.
//!
//! An allowed request with `c > 0` adds its member, removes the members that left the
//! window, and sets the key to expire when its newest member leaves the window: one
//! `ZADD`, at most one `ZREMRANGEBYSCORE`, one `PEXPIREAT`, whatever the cost. A denial
//! finds when enough of the oldest members have left: it reads the first few counted
//! members, then searches by score, each step O(log n). Denials, peeks and errors
//! write nothing.

use crate::call::keys::{KeyRead, SetOp, SetOps, SortedSet, Value, Walk, Written};
use crate::call::limiter::{
    Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{Effect, Encode, StateName};
use crate::call::verdict::{Decision, Verdict};
use crate::error::{Error, Result};
use crate::limits::{
    MAX_AT_MS, MAX_LOG_LIMIT, MAX_LOG_MEMBERS, MAX_LOG_TRIM, MAX_META_LEN, MAX_SAFE_INTEGER,
};
use crate::parse::args::{in_order, parse_int, Options};
use crate::parse::duration::parse_duration;
use crate::parse::keyword::{Opt, SETTLE};
use crate::units::{Micros, UnixMillis, MICROS_PER_MS};
use crate::call::Call;
use crate::commands::{AT, Arg, ArgType, COST, Command, FlagCounts, Id, KEY, LIMITER, META, REFUND_OR_FORCE, WINDOW};

const NAME: &str = "RL.LOG";

/// What an RL.LOG key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: NAME,
    expected: "a sorted set of seq:cost:meta members scored by microseconds since the Unix epoch",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "LOG",
    syntax: "LOG i limit window [META value]",
    state: STATE,
    storage: Storage::SortedSet,
    gate: false,
    field: false,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
// Counting is O(log n), but a write removes every entry that has left the window
// (up to its limit at once): not `fast`.
pub const COMMAND: Command = Command {
    id: Id::Log,
    name: "RL.LOG",
    syntax: "RL.LOG key limit window [META value] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]",
    summary: "An exact moving window kept as a sorted set of the requests and who made them (META)",
    complexity: "O(log N) per entry written, for a log of N entries",
    args: &[
        KEY,
        Arg::new("limit", ArgType::Integer, "the most cost in any window, 1 to 10000"),
        WINDOW,
        META,
        COST,
        AT,
        REFUND_OR_FORCE,
    ],
    info: "log",
    flag_counts: FlagCounts::Flags,
    ..LIMITER
};

/// `RL.LOG key limit window [META value] [COST n] [AT unix_ms]`.
pub fn parse<'a>(args: &[&'a [u8]]) -> Result<Call<Log<'a>>> {
    Call::single(args)
}

/// The digits of a member's sequence number (2^53 - 1 has 16).
pub const SEQ_DIGITS: usize = 16;

/// How many counted members a denial reads one by one before it searches by score.
pub const SCAN_STEPS: usize = 8;

/// One member of a log, as a call reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its score: the request's time.
    pub time: Micros,
    /// The running total of allowed cost through this request.
    pub seq: u64,
    pub cost: u64,
}

impl Entry {
    /// The running total before this request.
    fn before(&self) -> u64 {
        self.seq - self.cost
    }
}

/// The latest time an entry can have: a log records a request at its time (the latest
/// `AT`, or the server clock) or at its newest entry's, never later.
pub const MAX_ENTRY_TIME: Micros = Micros(MAX_AT_MS * MICROS_PER_MS);

/// Read a member and its score: a score that is a whole number of µs from 0 to
/// [`MAX_ENTRY_TIME`] (a later one was not written by RL.LOG),
/// a member `seq:cost:meta` with `seq` of 16 digits, `cost` from 1 to
/// [`MAX_LOG_LIMIT`], `seq` at least `cost`, and a META of at most [`MAX_META_LEN`]
/// bytes. Anything else was not written by RL.LOG.
pub fn parse_entry(member: &[u8], score: f64) -> Option<Entry> {
    if !(0.0..=MAX_ENTRY_TIME.0 as f64).contains(&score) || score.fract() != 0.0 {
        return None;
    }
    let seq = member.get(..SEQ_DIGITS)?;
    let rest = member.get(SEQ_DIGITS..)?.strip_prefix(b":")?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let (cost, meta) = (rest.get(..colon)?, rest.get(colon + 1..)?);
    let seq = digits(seq)?;
    let cost = digits(cost).filter(|c| (1..=MAX_LOG_MEMBERS as u64).contains(c))?;
    if cost.to_string().len() != colon || seq < cost || seq > MAX_SAFE_INTEGER {
        return None;
    }
    if meta.len() > MAX_META_LEN {
        return None;
    }
    Some(Entry {
        time: Micros(score as u64),
        seq,
        cost,
    })
}

/// 1 to 16 decimal digits, nothing else.
fn digits(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > SEQ_DIGITS || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(raw.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// A log, read in O(log n) steps: the sorted set through the module's key API, or the
/// same through `ZRANGE` in the twin, or a model in the tests. Every member a method
/// returns has been read with [`parse_entry`]; one that does not parse is the
/// invalid-state error.
pub trait Index {
    /// How many members the set holds.
    fn members(&self) -> usize;
    /// The member with the highest score (the last of `ZRANGE key 0 -1`).
    fn last(&self) -> Result<Option<Entry>>;
    /// The member before the last one (`ZRANGE key -2 -2`).
    fn before_last(&self) -> Result<Option<Entry>>;
    /// The member with the lowest score (`ZRANGE key 0 0`).
    fn first(&self) -> Result<Option<Entry>>;
    /// The first member with a score above `after`.
    fn first_after(&self, after: Micros) -> Result<Option<Entry>>;
    /// The last member with a score at or below `through`.
    fn last_through(&self, through: Micros) -> Result<Option<Entry>>;
    /// The members with a score above `after`, in order, while `f` asks for more.
    fn scan_after(&self, after: Micros, f: &mut dyn FnMut(Entry) -> bool) -> Result<()>;
}

/// RL.LOG's rule on one key: `limit` per moving `window`, each entry recording `meta`.
/// Each call brings its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Log<'a> {
    limit: i64,
    window: Micros,
    meta: &'a [u8],
}

impl<'a> Log<'a> {
    pub fn limit(&self) -> i64 {
        self.limit
    }
    pub fn window(&self) -> Micros {
        self.window
    }
    pub fn meta(&self) -> &'a [u8] {
        self.meta
    }
}

impl<'a> Syntax<'a> for Log<'a> {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 2;
    const OPTIONS: &'static [Opt] = &[Opt::Meta];
    const COMMAND_OPTIONS: &'static [Opt] = &SETTLE;
    type Args = (i64, Micros);

    fn parse_args(args: &[&'a [u8]]) -> Result<(i64, Micros)> {
        let [raw_limit, raw_window] = args else {
            return Err(Error::WrongArity { command: NAME });
        };
        let limit = match parse_int("limit", raw_limit, 1) {
            Ok(l) if l <= MAX_LOG_LIMIT => l,
            _ => {
                let e = Error::InvalidLogLimit {
                    value: raw_limit.to_vec(),
                };
                let order = "RL.LOG key limit window: the limit comes first";
                return Err(in_order(e, raw_limit, order));
            }
        };
        Ok((limit, parse_duration("window", raw_window)?))
    }

    fn build((limit, window): (i64, Micros), opts: &Options<'a>) -> Result<Log<'a>> {
        Ok(Log {
            limit,
            window,
            meta: opts.meta.unwrap_or(&[]),
        })
    }
}

/// What an allowed request adds to its log: one member, and the members that left the
/// window removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Append<'a> {
    /// The member's score: the time the request is recorded at.
    pub time: Micros,
    /// The running total through this request.
    pub seq: u64,
    pub cost: i64,
    pub meta: &'a [u8],
    /// Remove the members with a score at or below this (they left the window):
    /// `ZREMRANGEBYSCORE key -inf trim_through`.
    pub trim_through: Micros,
}

impl Append<'_> {
    /// The member's bytes, `seq:cost:meta`, into `out` (cleared first).
    pub fn member(&self, out: &mut Vec<u8>) {
        out.clear();
        let seq = itoa::Buffer::new().format(self.seq).as_bytes().to_vec();
        out.resize(SEQ_DIGITS.saturating_sub(seq.len()), b'0');
        out.extend_from_slice(&seq);
        out.push(b':');
        out.extend_from_slice(itoa::Buffer::new().format(self.cost).as_bytes());
        out.push(b':');
        out.extend_from_slice(self.meta);
    }
}

/// A member's bytes, as the set holds them.
impl Encode for Append<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let mut member = Vec::new();
        self.member(&mut member);
        out.truncate(start);
        out.extend_from_slice(&member);
    }
}

/// One member added, the members that left the window removed (the oldest first, at
/// most [`MAX_LOG_TRIM`] a write).
impl Written for Append<'_> {
    fn value(&self) -> Value<'_> {
        let mut ops = SetOps::new();
        ops.push(SetOp::Add {
            member: self,
            score: self.time.0,
        });
        ops.push(SetOp::RemoveOldest {
            through: self.trim_through.0,
            at_most: MAX_LOG_TRIM,
        });
        Value::SortedSet(ops)
    }
}

/// What a `REFUND` does to a log: the newest members whose whole cost is given back
/// removed, the one partly given back replaced by a member of the same time and META
/// with the rest of its cost (its units keep their numbers), the members that left the
/// window removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refund {
    pub remove: Vec<Vec<u8>>,
    /// The replacement member's bytes and its score.
    pub rest: Option<(Member, Micros)>,
    pub trim_through: Micros,
}

/// A member's bytes, as a write adds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member(pub Vec<u8>);

impl Encode for Member {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

/// What a judgement of a log keeps for its write: the write and the time the state is
/// full again (the newest counted member leaves the window; `None`: it is full now,
/// and the key goes).
pub type Pending<'a> = Option<(LogWrite<'a>, Option<Micros>)>;

/// What a call writes to a log: a request recorded, or a refund.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogWrite<'a> {
    Append(Append<'a>),
    Refund(Box<Refund>),
}

impl Written for LogWrite<'_> {
    fn value(&self) -> Value<'_> {
        match self {
            LogWrite::Append(a) => a.value(),
            LogWrite::Refund(r) => {
                let mut ops = SetOps::new();
                if let Some((member, time)) = &r.rest {
                    ops.push(SetOp::Add {
                        member: member as &dyn Encode,
                        score: time.0,
                    });
                }
                ops.extend(r.remove.iter().map(|m| SetOp::Remove(m)));
                ops.push(SetOp::RemoveOldest {
                    through: r.trim_through.0,
                    at_most: MAX_LOG_TRIM,
                });
                Value::SortedSet(ops)
            }
        }
    }
}

/// A log whose running total would pass 2^53 - 1 (which takes 28 years at ten million
/// allowed units a second): the error of a call that would record past it.
fn numbers_spent() -> Error {
    Error::LogNumbersSpent
}

impl<'a> Limiter for Log<'a> {
    type State = LogWrite<'a>;
    type Pending = Pending<'a>;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
        if mode == Mode::Take && cost > self.limit {
            return Err(Error::CostOverCapacity {
                cost,
                capacity: self.limit,
                what: "limit",
            });
        }
        Ok(())
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Self::Pending>> {
        let (now, cost) = (req.now, req.cost);
        let set = key.sorted_set()?;
        let index: &dyn Index = match &set {
            None => &Empty,
            Some(set) => &SetIndex(*set),
        };
        let appended = |j: Judgement<Option<Append<'a>>>| {
            j.map(|pending| {
                pending.map(|a| {
                    (
                        LogWrite::Append(a),
                        Some(a.time.saturating_add(self.window)),
                    )
                })
            })
        };
        match req.mode {
            Mode::Take | Mode::UpTo => self.judge_index(index, now, cost).map(appended),
            Mode::Force => self.force_index(index, now, cost).map(appended),
            Mode::Refund => match set {
                None => Ok(Judgement::plain(
                    Verdict::untouched(self.limit),
                    self.window.floor_millis(),
                    None,
                )),
                Some(set) => self.refund_set(set, now, cost),
            },
        }
    }

    fn write(
        &self,
        pending: Self::Pending,
        outcome: Outcome,
        _req: &Request,
    ) -> std::result::Result<Effect<LogWrite<'a>>, Full> {
        Ok(match (outcome, pending) {
            (Outcome::Allowed, Some((_, None))) => Effect::Delete,
            (Outcome::Allowed, Some((state, Some(full_at)))) => Effect::Set {
                expires_at: UnixMillis::covering(full_at),
                state,
            },
            _ => Effect::None,
        })
    }
}

impl<'a> Log<'a> {
    /// `FORCE`: record `cost` at the log's time whether it fits or not, unless the
    /// window would then hold more than twice the limit (an error). Over the limit,
    /// field 1 is 1 and the wait is until enough of the oldest members have left for a
    /// request of cost 1 to fit.
    pub fn force_index(
        &self,
        index: &dyn Index,
        now: Micros,
        cost: i64,
    ) -> Result<Judgement<Option<Append<'a>>>> {
        if index.members() > MAX_LOG_MEMBERS {
            return Err(STATE.invalid());
        }
        let newest = index.last()?;
        let t = newest.map_or(now, |n| n.time.max(now));
        let cutoff = Micros(t.0.saturating_sub(self.window.0));
        let first = index.first_after(cutoff)?;
        let (counted, base) = match (first, newest) {
            (Some(f), Some(n)) if n.seq >= f.before() => (n.seq - f.before(), f.before()),
            (Some(_), _) => return Err(STATE.invalid()),
            (None, _) => (0, 0),
        };
        let counted = i64::try_from(counted).map_err(|_| STATE.invalid())?;
        let after = counted.saturating_add(cost);
        if after > self.limit.saturating_mul(2) {
            return Err(Error::LogForceOverTwice { limit: self.limit });
        }
        let append = if cost > 0 {
            let seq = newest
                .map_or(0, |n| n.seq)
                .checked_add(cost as u64)
                .filter(|&s| s <= MAX_SAFE_INTEGER)
                .ok_or_else(numbers_spent)?;
            Some(Append {
                time: t,
                seq,
                cost,
                meta: self.meta,
                trim_through: cutoff,
            })
        } else {
            None
        };
        let window = self.window.0;
        let leaves = |time: Micros| time.0.saturating_add(window);
        let newest_counted = if cost > 0 {
            Some(t)
        } else {
            newest.filter(|_| counted > 0).map(|n| n.time)
        };
        let reset = Micros(newest_counted.map_or(0, |n| leaves(n).saturating_sub(now.0)));
        let decision = if after <= self.limit {
            Decision::Allowed
        } else {
            // The units that must leave for a cost of 1 to fit: through `target`.
            let target = base + (after + 1 - self.limit) as u64;
            let must_leave = match newest {
                Some(n) if counted > 0 && target <= n.seq => {
                    self.must_leave(index, cutoff, target, newest)?
                }
                // The forced request's own units must leave.
                _ => t,
            };
            Decision::Over {
                retry_after: Micros(leaves(must_leave).saturating_sub(now.0).max(1)),
            }
        };
        let verdict = Verdict {
            decision,
            limit: self.limit,
            remaining: self.limit.saturating_sub(after).max(0),
            reset_after: reset,
        };
        Ok(Judgement::plain(
            verdict,
            self.window.floor_millis(),
            append,
        ))
    }

    /// `REFUND`: `cost` units leave the newest counted members first (a member whose
    /// whole cost is given back is removed; one partly given back keeps its time, META
    /// and the rest of its cost), never below empty. The key then expires when its
    /// newest counted member leaves the window, and is deleted when none is left.
    fn refund_set(
        &self,
        set: &dyn SortedSet,
        now: Micros,
        cost: i64,
    ) -> Result<Judgement<Pending<'a>>> {
        let index = SetIndex(set);
        if index.members() > MAX_LOG_MEMBERS {
            return Err(STATE.invalid());
        }
        let newest = index.last()?;
        let t = newest.map_or(now, |n| n.time.max(now));
        let cutoff = Micros(t.0.saturating_sub(self.window.0));
        let counted = match (index.first_after(cutoff)?, newest) {
            (Some(f), Some(n)) if n.seq >= f.before() => n.seq - f.before(),
            (Some(_), _) => return Err(STATE.invalid()),
            (None, _) => 0,
        };
        let mut give = cost.max(0) as u64;
        let mut refund = Refund {
            remove: Vec::new(),
            rest: None,
            trim_through: cutoff,
        };
        let mut given = 0u64;
        // The newest counted member left, if any.
        let mut newest_left: Option<Micros> = None;
        set.walk(Walk::Down, &mut |member, score| {
            let e = entry(member, score)?;
            if e.time <= cutoff {
                return Ok(false);
            }
            if give == 0 {
                newest_left = Some(e.time);
                return Ok(false);
            }
            let back = give.min(e.cost);
            give -= back;
            given += back;
            refund.remove.push(member.to_vec());
            if back < e.cost {
                let meta = member
                    .get(SEQ_DIGITS + 2 + e.cost.to_string().len()..)
                    .unwrap_or(&[]);
                let rest = Append {
                    time: e.time,
                    seq: e.seq - back,
                    cost: (e.cost - back) as i64,
                    meta,
                    trim_through: cutoff,
                };
                let mut bytes = Vec::new();
                rest.member(&mut bytes);
                refund.rest = Some((Member(bytes), e.time));
                newest_left = Some(e.time);
                return Ok(false);
            }
            Ok(true)
        })?;
        let left = counted.saturating_sub(given);
        let window = self.window.0;
        let reset = newest_left.map_or(0, |n| n.0.saturating_add(window).saturating_sub(now.0));
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: self.limit,
            remaining: self
                .limit
                .saturating_sub(i64::try_from(left).unwrap_or(i64::MAX))
                .max(0),
            reset_after: Micros(reset),
        };
        let pending = match (given, newest_left) {
            (0, _) => None,
            // Nothing counted is left: the log is full again, the key goes.
            (_, None) => Some((LogWrite::Refund(Box::new(refund)), None)),
            (_, Some(n)) => Some((
                LogWrite::Refund(Box::new(refund)),
                Some(n.saturating_add(self.window)),
            )),
        };
        Ok(Judgement::plain(
            verdict,
            self.window.floor_millis(),
            pending,
        ))
    }

    /// Judge a log at `now` for `cost`, reading what it needs of `index`.
    pub fn judge_index(
        &self,
        index: &dyn Index,
        now: Micros,
        cost: i64,
    ) -> Result<Judgement<Option<Append<'a>>>> {
        // A log holds at most one member per unit of twice its limit (a forced log):
        // a larger set is not one.
        if index.members() > MAX_LOG_MEMBERS {
            return Err(STATE.invalid());
        }
        let newest = index.last()?;
        if let Some(n) = newest {
            check_members(index, n)?;
        }
        // Time does not go back inside a log: a call older than its newest entry is
        // judged, and recorded, at that entry's time.
        let t = newest.map_or(now, |n| n.time.max(now));
        let cutoff = Micros(t.0.saturating_sub(self.window.0));
        // The first counted member, and the one after it: their numbers follow.
        let (mut first, mut broken) = (None, false);
        index.scan_after(cutoff, &mut |e| match first {
            None => {
                first = Some(e);
                true
            }
            Some(f) => {
                broken = e.before() != f.seq;
                false
            }
        })?;
        if broken {
            return Err(STATE.invalid());
        }
        let (counted, base) = match (first, newest) {
            (Some(f), Some(n)) if n.seq >= f.before() => (n.seq - f.before(), f.before()),
            (Some(_), _) => return Err(STATE.invalid()),
            (None, _) => (0, 0),
        };
        let counted = i64::try_from(counted).map_err(|_| STATE.invalid())?;
        let window = self.window.0;
        let leaves = |time: Micros| time.0.saturating_add(window);
        // The newest counted member, if any (it has the highest score).
        let newest_counted = newest.filter(|_| counted > 0).map(|n| n.time);
        let reset =
            |newest: Option<Micros>| Micros(newest.map_or(0, |n| leaves(n).saturating_sub(now.0)));
        let over = counted.saturating_add(cost).saturating_sub(self.limit);
        if over <= 0 {
            let append = if cost > 0 {
                let seq = newest
                    .map_or(0, |n| n.seq)
                    .checked_add(cost as u64)
                    .filter(|&s| s <= MAX_SAFE_INTEGER)
                    .ok_or_else(numbers_spent)?;
                Some(Append {
                    time: t,
                    seq,
                    cost,
                    meta: self.meta,
                    trim_through: cutoff,
                })
            } else {
                None
            };
            let verdict = Verdict {
                decision: Decision::Allowed,
                limit: self.limit,
                remaining: self.limit - counted - cost,
                reset_after: reset(if cost > 0 { Some(t) } else { newest_counted }),
            };
            return Ok(Judgement::plain(
                verdict,
                self.window.floor_millis(),
                append,
            ));
        }
        // Denied: when the counted members that must leave for `cost` to fit have left,
        // that is the first member whose running total reaches `base + over`.
        let target = base + over as u64;
        let must_leave = self.must_leave(index, cutoff, target, newest)?;
        let retry = leaves(must_leave).saturating_sub(now.0).max(1);
        let verdict = Verdict {
            decision: Decision::Denied {
                retry_after: Micros(retry),
            },
            limit: self.limit,
            remaining: (self.limit - counted).max(0),
            reset_after: reset(newest_counted),
        };
        Ok(Judgement::plain(verdict, self.window.floor_millis(), None))
    }

    /// The time of the first member after `cutoff` whose running total reaches
    /// `target`: the first [`SCAN_STEPS`] members one by one, then a search by score
    /// (running totals grow with scores), each step O(log n).
    fn must_leave(
        &self,
        index: &dyn Index,
        cutoff: Micros,
        target: u64,
        newest: Option<Entry>,
    ) -> Result<Micros> {
        let mut found = None;
        let mut last_seen = None;
        let mut steps = 0;
        let mut previous: Option<Entry> = None;
        let mut broken = false;
        index.scan_after(cutoff, &mut |e| {
            steps += 1;
            if previous.is_some_and(|p| e.before() != p.seq) {
                broken = true;
                return false;
            }
            previous = Some(e);
            last_seen = Some(e.time);
            if e.seq >= target {
                found = Some(e.time);
            }
            found.is_none() && steps < SCAN_STEPS
        })?;
        if broken {
            return Err(STATE.invalid());
        }
        if let Some(time) = found {
            return Ok(time);
        }
        // The newest member reaches any target a denial can have.
        let Some(newest) = newest else {
            return Err(STATE.invalid());
        };
        // Invariant: the running total through `lo` is below target, through `hi` not.
        // Members scanned are below target, so is everything through the µs before the
        // last of them (members after it at its own time may not be).
        let lo = last_seen.map_or(cutoff.0, |t| t.0.saturating_sub(1).max(cutoff.0));
        let (mut lo, mut hi) = (lo, newest.time.0);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            match index.last_through(Micros(mid))? {
                Some(e) if e.seq >= target => hi = mid,
                _ => lo = mid,
            }
        }
        Ok(Micros(hi))
    }
}

/// Whether the members a call reads agree with each other, as the module writes them:
/// every member's units follow the member before it (`seq - cost` is the previous
/// member's `seq`, so numbers grow with scores and none repeats), and the set holds no
/// more members than the units from its first member to its newest (`n`): each member
/// has a cost of at least 1. A log that fails either would count fewer requests than it
/// holds: it is refused as invalid state.
fn check_members(index: &dyn Index, n: Entry) -> Result<()> {
    if let Some(p) = index.before_last()? {
        if p.seq != n.before() {
            return Err(STATE.invalid());
        }
    }
    let first = index.first()?.ok_or_else(|| STATE.invalid())?;
    let units = n
        .seq
        .checked_sub(first.before())
        .ok_or_else(|| STATE.invalid())?;
    if index.members() as u64 > units {
        return Err(STATE.invalid());
    }
    Ok(())
}

/// A log as its sorted set holds it: each member read as an entry.
struct SetIndex<'s>(&'s dyn SortedSet);

impl SetIndex<'_> {
    /// The first entry `walk` visits.
    fn one(&self, walk: Walk) -> Result<Option<Entry>> {
        let mut found = None;
        self.0.walk(walk, &mut |member, score| {
            found = Some(entry(member, score)?);
            Ok(false)
        })?;
        Ok(found)
    }
}

/// A member and its score as an entry, or the invalid-state error.
fn entry(member: &[u8], score: f64) -> Result<Entry> {
    parse_entry(member, score).ok_or_else(|| STATE.invalid())
}

impl Index for SetIndex<'_> {
    fn members(&self) -> usize {
        self.0.len()
    }
    fn last(&self) -> Result<Option<Entry>> {
        self.one(Walk::Down)
    }
    fn before_last(&self) -> Result<Option<Entry>> {
        let mut seen = 0;
        let mut found = None;
        self.0.walk(Walk::Down, &mut |member, score| {
            seen += 1;
            if seen == 2 {
                found = Some(entry(member, score)?);
            }
            Ok(seen < 2)
        })?;
        Ok(found)
    }
    fn first(&self) -> Result<Option<Entry>> {
        self.one(Walk::All)
    }
    fn first_after(&self, after: Micros) -> Result<Option<Entry>> {
        self.one(Walk::After(after))
    }
    fn last_through(&self, through: Micros) -> Result<Option<Entry>> {
        self.one(Walk::Through(through))
    }
    fn scan_after(&self, after: Micros, f: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        self.0.walk(Walk::After(after), &mut |member, score| {
            Ok(f(entry(member, score)?))
        })
    }
}

/// A log that does not exist.
struct Empty;

impl Index for Empty {
    fn members(&self) -> usize {
        0
    }
    fn last(&self) -> Result<Option<Entry>> {
        Ok(None)
    }
    fn before_last(&self) -> Result<Option<Entry>> {
        Ok(None)
    }
    fn first(&self) -> Result<Option<Entry>> {
        Ok(None)
    }
    fn first_after(&self, _: Micros) -> Result<Option<Entry>> {
        Ok(None)
    }
    fn last_through(&self, _: Micros) -> Result<Option<Entry>> {
        Ok(None)
    }
    fn scan_after(&self, _: Micros, _: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const T0: u64 = 1_700_000_000_000; // ms

    fn at(ms: u64) -> Micros {
        Micros::from_millis(T0 + ms)
    }

    fn rule(limit: i64, window_ms: u64) -> Log<'static> {
        Log {
            limit,
            window: Micros::from_millis(window_ms),
            meta: b"",
        }
    }

    /// A log as the server keeps it: members sorted by score, then by their bytes.
    #[derive(Default, Clone)]
    struct LogKey(BTreeSet<(u64, Vec<u8>)>);

    impl LogKey {
        fn entries(&self) -> impl DoubleEndedIterator<Item = Result<Entry>> + '_ {
            self.0.iter().map(|(score, member)| {
                parse_entry(member, *score as f64).ok_or_else(|| STATE.invalid())
            })
        }

        /// Judge and write, as the glue does.
        fn call(&mut self, now: Micros, r: &Log<'static>, cost: i64) -> Verdict {
            let j = r.judge_index(self, now, cost).expect("a log");
            let allowed = j.verdict.is_allowed();
            let outcome = if allowed {
                Outcome::Allowed
            } else {
                Outcome::Denied { repair: true }
            };
            if let (Outcome::Allowed, Some(state)) = (outcome, j.pending) {
                let mut m = Vec::new();
                state.member(&mut m);
                self.0.insert((state.time.0, m));
                let leaving: Vec<(u64, Vec<u8>)> = self
                    .0
                    .iter()
                    .take_while(|(t, _)| *t <= state.trim_through.0)
                    .take(crate::limits::MAX_LOG_TRIM)
                    .cloned()
                    .collect();
                for m in &leaving {
                    self.0.remove(m);
                }
            }
            j.verdict
        }
    }

    impl Index for LogKey {
        fn members(&self) -> usize {
            self.0.len()
        }
        fn last(&self) -> Result<Option<Entry>> {
            self.entries().next_back().transpose()
        }
        fn before_last(&self) -> Result<Option<Entry>> {
            self.entries().rev().nth(1).transpose()
        }
        fn first(&self) -> Result<Option<Entry>> {
            self.entries().next().transpose()
        }
        fn first_after(&self, after: Micros) -> Result<Option<Entry>> {
            self.entries()
                .find(|e| e.as_ref().map_or(true, |e| e.time > after))
                .transpose()
        }
        fn last_through(&self, through: Micros) -> Result<Option<Entry>> {
            self.entries()
                .rev()
                .find(|e| e.as_ref().map_or(true, |e| e.time <= through))
                .transpose()
        }
        fn scan_after(&self, after: Micros, f: &mut dyn FnMut(Entry) -> bool) -> Result<()> {
            for e in self.entries() {
                let e = e?;
                if e.time > after && !f(e) {
                    break;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn exact_moving_window_and_retry() {
        // 3 per second.
        let mut log = LogKey::default();
        let r = rule(3, 1_000);
        for (t, want) in [
            (0, [0, 3, 2, -1, 1_000]),
            (300, [0, 3, 1, -1, 1_000]),
            (600, [0, 3, 0, -1, 1_000]),
            // The oldest (at 0) leaves at 1000: exactly then one more fits.
            (999, [1, 3, 0, 1, 601]),
            (1_000, [0, 3, 0, -1, 1_000]),
            (1_000, [1, 3, 0, 300, 1_000]),
        ] {
            assert_eq!(log.call(at(t), &r, 1).fields(), want, "at {t}");
        }
        // Members that left the window are removed at the next write; running totals.
        let seqs: Vec<u64> = log.entries().map(|e| e.unwrap().seq).collect();
        assert_eq!(seqs, [2, 3, 4]);
    }

    /// A log of hand-written members `(time ms after T0, seq, cost)`.
    fn written(members: &[(u64, u64, u64)]) -> LogKey {
        let mut log = LogKey::default();
        for (i, &(t, seq, cost)) in members.iter().enumerate() {
            let member = format!("{seq:016}:{cost}:m{i}").into_bytes();
            log.0.insert((at(t).0, member));
        }
        log
    }

    #[test]
    fn members_that_contradict_each_other_are_invalid_state() {
        let r = rule(3, 3_600_000);
        for (what, members) in [
            ("three numbered 1", vec![(0, 1, 1), (0, 1, 1), (0, 1, 1)]),
            ("reversed", vec![(0, 3, 1), (1, 2, 1), (2, 1, 1)]),
            (
                "repeated in the middle",
                vec![(0, 1, 1), (1, 2, 1), (2, 2, 1), (3, 3, 1)],
            ),
            (
                "a gap after the first",
                vec![(0, 1, 1), (1, 5, 1), (2, 6, 1)],
            ),
            (
                "a gap before the newest",
                vec![(0, 1, 1), (1, 2, 1), (2, 9, 1)],
            ),
            (
                "a cost hiding a repeat",
                vec![(0, 5, 5), (1, 5, 1), (2, 6, 1)],
            ),
        ] {
            let log = written(&members);
            assert_eq!(
                r.judge_index(&log, at(10), 1).map(|_| ()),
                Err(STATE.invalid()),
                "{what}"
            );
        }
        // As RL.LOG numbers them: fine, and one more fits.
        let log = written(&[(0, 1, 1), (1, 3, 2)]);
        let j = r.judge_index(&log, at(10), 0).expect("a log");
        assert_eq!(j.verdict.remaining, 0);
        let log = written(&[(0, 1, 1), (1, 2, 1)]);
        assert!(r.judge_index(&log, at(10), 1).unwrap().verdict.is_allowed());
    }

    #[test]
    fn an_entry_later_than_the_latest_at_is_invalid_state() {
        let member = b"0000000000000001:1:x";
        assert!(parse_entry(member, MAX_ENTRY_TIME.0 as f64).is_some());
        assert!(parse_entry(member, (MAX_ENTRY_TIME.0 + 1) as f64).is_none());
        // 2255-01-01, which a hand-written member once made the next call's time.
        assert!(parse_entry(member, 8_993_462_400_000_000.0).is_none());
    }

    #[test]
    fn a_write_removes_at_most_64_leaving_entries_and_never_counts_the_rest() {
        let r = rule(200, 1_000);
        let mut log = LogKey::default();
        for _ in 0..150 {
            assert!(log.call(at(0), &r, 1).is_allowed());
        }
        // A second later all 150 have left: each write removes the oldest 64.
        for (n, left) in [(1, 150 - 64), (2, 150 - 128), (3, 0)] {
            let v = log.call(at(1_000 + n), &r, 1);
            assert!(v.is_allowed());
            assert_eq!(v.remaining, 200 - n as i64, "only the new entries count");
            assert_eq!(log.0.len() as u64, left + n, "after write {n}");
        }
    }

    #[test]
    fn one_member_per_request_whatever_its_cost() {
        let mut log = LogKey::default();
        let r = Log {
            meta: b"user:\x00:42",
            ..rule(10, 60_000)
        };
        let j = r.judge_index(&log, at(0), 4).unwrap();
        assert_eq!(
            j.pending,
            Some(Append {
                time: at(0),
                seq: 4,
                cost: 4,
                meta: b"user:\x00:42",
                trim_through: Micros::from_millis(T0 - 60_000),
            })
        );
        assert_eq!(
            r.write(
                j.pending
                    .map(|a| (LogWrite::Append(a), Some(a.time.saturating_add(r.window)))),
                Outcome::Allowed,
                &Request::take(at(0), 4)
            ),
            Ok(Effect::Set {
                state: LogWrite::Append(j.pending.unwrap()),
                expires_at: UnixMillis(T0 + 60_000),
            })
        );
        log.call(at(0), &r, 4);
        assert_eq!(
            log.0.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(),
            [b"0000000000000004:4:user:\x00:42".to_vec()],
            "one member for a cost of 4"
        );
        // A peek writes nothing and counts the 4.
        let peek = r.judge_index(&log, at(10), 0).unwrap();
        assert_eq!(peek.pending, None);
        assert_eq!(peek.verdict.fields(), [0, 10, 6, -1, 59_990]);
        // 7 more do not fit until the 4 units leave.
        let out = r.judge_index(&log, at(10), 7).unwrap();
        assert_eq!(out.verdict.fields(), [1, 10, 6, 59_990, 59_990]);
        assert_eq!(out.pending, None);
        log.call(at(20), &r, 6);
        assert_eq!(log.0.len(), 2);
        assert_eq!(log.last().unwrap().map(|e| (e.seq, e.cost)), Some((10, 6)));
    }

    /// Calls at AT +72, +73, +75, +86, then +66, +67 with 3 per 10 ms were all allowed
    /// and recorded at their own times: five in [+66, +76). Now the late ones are
    /// judged and recorded at the newest entry's time, and no 10 ms of recorded times
    /// holds more than 3.
    #[test]
    fn an_older_at_is_judged_at_the_newest_entry() {
        let mut log = LogKey::default();
        let r = rule(3, 10);
        for t in [72, 73, 75, 86, 66, 67] {
            assert!(log.call(at(t), &r, 1).is_allowed(), "+{t}");
        }
        // The late ones are recorded at +86; the entries that left the window at +86
        // (at or before +76) were removed by the writes.
        let times: Vec<u64> = log.0.iter().map(|(t, _)| (*t - at(0).0) / 1000).collect();
        assert_eq!(times, [86, 86, 86]);
        // A third late call finds the window at +86 full: it waits until +96.
        let late = r.judge_index(&log, at(66), 1).unwrap();
        assert_eq!(late.verdict.fields(), [1, 3, 0, 30, 30]);
    }

    #[test]
    fn a_denial_finds_when_enough_has_left_by_searching_scores() {
        // 100 requests of cost 1 over 100 ms, then a request of cost 50 with limit 100:
        // the 50th oldest must leave first (beyond the first few members read one by
        // one, found by the search).
        let mut log = LogKey::default();
        let r = rule(100, 1_000);
        for i in 0..100 {
            assert!(log.call(at(i), &r, 1).is_allowed());
        }
        let j = r.judge_index(&log, at(500), 50).unwrap();
        // Member i (at +i ms) leaves at +1000 + i; the 50th is i = 49.
        assert_eq!(j.verdict.fields(), [1, 100, 0, 549, 599]);
        // Equal scores: 30 requests at one instant count as one step of the search.
        let mut log = LogKey::default();
        for _ in 0..30 {
            log.call(at(0), &r, 1);
        }
        for i in 1..=70 {
            log.call(at(i), &r, 1);
        }
        let j = r.judge_index(&log, at(100), 20).unwrap();
        assert_eq!(
            j.verdict.fields()[3],
            900,
            "the 20 oldest share the time +0"
        );
        let j = r.judge_index(&log, at(100), 40).unwrap();
        assert_eq!(j.verdict.fields()[3], 910, "the 40th oldest is at +10");
    }

    #[test]
    fn members_of_the_same_time_sort_by_their_running_total() {
        let mut log = LogKey::default();
        let r = rule(10_000, 1_000);
        for _ in 0..11 {
            log.call(at(0), &r, 1);
        }
        // Unpadded, "10:1:" would sort before "9:1:".
        assert_eq!(log.last().unwrap().map(|e| e.seq), Some(11));
        assert_eq!(
            r.judge_index(&log, at(0), 0).unwrap().verdict.remaining,
            10_000 - 11
        );
    }

    #[test]
    fn members_read_back_exactly_as_written() {
        let mut m = Vec::new();
        Append {
            time: at(0),
            seq: 12,
            cost: 3,
            meta: b"user:\x00:42",
            trim_through: Micros::ZERO,
        }
        .member(&mut m);
        assert_eq!(m, b"0000000000000012:3:user:\x00:42");
        assert_eq!(
            parse_entry(&m, 1_700_000_000_000_000.0),
            Some(Entry {
                time: Micros(1_700_000_000_000_000),
                seq: 12,
                cost: 3
            })
        );
        let mut m = Vec::new();
        Append {
            time: at(0),
            seq: MAX_SAFE_INTEGER,
            cost: 10_000,
            meta: &[b'x'; MAX_META_LEN],
            trim_through: Micros::ZERO,
        }
        .member(&mut m);
        assert!(parse_entry(&m, 0.0).is_some());
    }

    #[test]
    fn foreign_members_are_refused() {
        let ok = b"0000000000000005:2:m";
        assert!(parse_entry(ok, 1.0).is_some());
        for (member, score) in [
            (&b"x"[..], 1.0),
            (b"1:m", 1.0),
            (b"5:2:m", 1.0),
            (b"000000000000005:2:m", 1.0),
            (b"0000000000000005:0:m", 1.0),
            (b"0000000000000005:02:m", 1.0),
            (b"0000000000000005:10001:m", 1.0),
            (b"0000000000000001:2:m", 1.0),
            (b"0000000000000005:2", 1.0),
            (b"00000000000000a5:2:m", 1.0),
            (b"9007199254740992:2:m", 1.0),
            (ok, 1.5),
            (ok, -1.0),
            (ok, f64::INFINITY),
            (ok, f64::NAN),
            (ok, 9_007_199_254_740_992.0),
        ] {
            assert_eq!(parse_entry(member, score), None, "{member:?} {score}");
        }
        let mut long = b"0000000000000005:2:".to_vec();
        long.extend([b'x'; MAX_META_LEN + 1]);
        assert_eq!(parse_entry(&long, 1.0), None);
        // A set of another kind is refused as a whole.
        let mut log = LogKey::default();
        log.0.insert((1, b"x".to_vec()));
        assert_eq!(
            rule(5, 1_000).judge_index(&log, at(0), 1).err(),
            Some(STATE.invalid())
        );
    }

    #[test]
    fn a_log_whose_numbers_are_spent_refuses_to_record() {
        let mut log = LogKey::default();
        let mut m = Vec::new();
        Append {
            time: at(0),
            seq: MAX_SAFE_INTEGER - 1,
            cost: 1,
            meta: b"",
            trim_through: Micros::ZERO,
        }
        .member(&mut m);
        log.0.insert((at(0).0, m));
        let r = rule(5, 1_000);
        assert!(r.judge_index(&log, at(1), 1).is_ok());
        assert_eq!(
            r.judge_index(&log, at(1), 2).err(),
            Some(Error::LogNumbersSpent)
        );
        assert!(
            r.judge_index(&log, at(1), 0).is_ok(),
            "a peek still answers"
        );
    }

    #[test]
    fn argument_errors() {
        let p = |a: &[&str]| {
            let raw: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            let raw: Vec<&[u8]> = std::iter::once(&b"key"[..]).chain(raw).collect();
            crate::limiters::log::parse(&raw).map(|_| ())
        };
        assert_eq!(
            p(&["10001", "1m"]),
            Err(Error::InvalidLogLimit {
                value: b"10001".to_vec()
            })
        );
        assert_eq!(
            p(&["0", "1m"]),
            Err(Error::InvalidLogLimit {
                value: b"0".to_vec()
            })
        );
        let long = "x".repeat(257);
        assert_eq!(
            p(&["5", "1m", "META", &long]),
            Err(Error::MetaTooLong { len: 257 })
        );
        assert!(p(&["5", "1m", "META", &"x".repeat(256)]).is_ok());
        assert_eq!(
            p(&["5", "1m", "META", "a", "meta", "b"]),
            Err(Error::RepeatedOption { name: "META" })
        );
        assert_eq!(
            p(&["5", "1m", "META"]),
            Err(Error::MissingOptionValue { name: "META" })
        );
        assert_eq!(
            p(&["5", "1m", "COST", "6"]),
            Err(Error::CostOverCapacity {
                cost: 6,
                capacity: 5,
                what: "limit"
            })
        );
        assert_eq!(p(&["5"]), Err(Error::WrongArity { command: "RL.LOG" }));
    }

    proptest! {
        /// Never more than the limit in any window-long interval of recorded times,
        /// whatever order the times come in; a denial means the window (at the time
        /// the call is judged) really had no room; retry_after exact; one member per
        /// allowed request; running totals grow with scores.
        #[test]
        fn invariants(
            limit in 1i64..12,
            window_ms in prop_oneof![Just(1u64), Just(100), Just(1_000), Just(60_000)],
            steps in proptest::collection::vec((0u64..4, 0u64..3_000, 0i64..5), 1..150),
        ) {
            let window = window_ms * 1000;
            let r = rule(limit, window_ms);
            let mut log = LogKey::default();
            let mut recorded: Vec<(u64, i64)> = Vec::new();
            let mut clock = at(0).0 + 5;
            for (scale, dt, c) in steps {
                clock += match scale { 0 => dt % 3, 1 => dt * 37, _ => dt * 1000 };
                // Now and then a call from the past (an older AT).
                let now = if scale == 3 { clock.saturating_sub(dt * 7) } else { clock };
                let cost = c % (limit + 1);
                let judged_at = log.last().unwrap().map_or(now, |n| n.time.0.max(now));
                let in_window: i64 = recorded
                    .iter()
                    .filter(|&&(t, _)| t + window > judged_at)
                    .map(|&(_, c)| c)
                    .sum();
                let before = log.0.len();
                let v = log.call(Micros(now), &r, cost);
                let f = v.fields();
                prop_assert!((0..=limit).contains(&f[2]));
                prop_assert_eq!(f[0] == 1, f[3] > 0);
                if v.is_allowed() {
                    prop_assert!(in_window + cost <= limit);
                    if cost > 0 {
                        recorded.push((judged_at, cost));
                        prop_assert!(log.0.len() <= before + 1, "one member per request");
                    }
                } else {
                    prop_assert!(in_window + cost > limit, "denied with room");
                    let Decision::Denied { retry_after } = v.decision else { unreachable!() };
                    let later = Micros(now + retry_after.0);
                    prop_assert!(r.judge_index(&log, later, cost).unwrap().verdict.is_allowed());
                    if retry_after.0 > 1 {
                        let early = Micros(now + retry_after.0 - 1);
                        prop_assert!(!r.judge_index(&log, early, cost).unwrap().verdict.is_allowed());
                    }
                }
                // Any window-long interval of recorded times holds at most the limit.
                for &(t, _) in &recorded {
                    let held: i64 = recorded
                        .iter()
                        .filter(|&&(u, _)| u >= t && u < t + window)
                        .map(|&(_, c)| c)
                        .sum();
                    prop_assert!(held <= limit, "{held} in [{t}, +{window})");
                }
                let seqs: Vec<u64> = log.entries().map(|e| e.unwrap().seq).collect();
                prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
            }
        }
    }
}

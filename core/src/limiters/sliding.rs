//! RL.SLIDING: several identifiers (keys) against several sliding windows, all or
//! nothing, with RL.MULTI's call shape and reply.
//!
//! Each window of width `w` is cut into `n` buckets of width `b = w / n` (whole µs),
//! aligned to the Unix epoch: bucket `i` covers `[i * b, (i + 1) * b)`. At time `t` a
//! window counts every bucket that overlaps `(t - w, t]`, that is every bucket from
//! `lo = floor((t - w) / b)` on (conservative counting). A request of cost `c` is
//! allowed iff, for every (key, window) pair, `counted + c <= limit`; then `c` is added
//! to the current bucket `floor(t / b)` of every pair. So:
//!
//! - for every request allowed at `t`, the cost allowed in `(t - w, t]` is at most the
//!   limit (the counted buckets cover that interval);
//! - a request is never denied when the cost allowed in `(t - w - b, t]` plus its own
//!   fits (the counted buckets start after `t - w - b`).
//!
//! State: one string per key, its windows' buckets as entries separated by commas,
//! sorted by window: `window_ms:n:first:c0.c1...`, the counts of the buckets numbered
//! `first`, `first + 1`, ... (at most `n + 1` of them; leading and trailing empty
//! buckets are not written). E.g. `1000:10:17000000000:3.0.1`. The key expires when its
//! last counted bucket leaves its window; windows a call does not name are kept until
//! then.

use crate::call::binding::Binding;
use crate::call::keys::{KeyRead, Value, Written};
use crate::call::limiter::{
    Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{parse_decimal, push_decimal, Effect, Encode, StateName, Stored};
use crate::call::verdict::{Decision, Verdict};
use crate::call::Call;
use crate::error::{Error, Result};
use crate::limiters::windows;
use crate::limits::{
    DEFAULT_BUCKETS, MAX_AT_US, MAX_BUCKETS, MAX_BUCKETS_PER_KEY, MAX_DURATION, MAX_SAFE_INTEGER,
};
use crate::parse::args::{check_count, Limit, Options};
use crate::parse::keyword::Opt;
use crate::units::Micros;
use smallvec::SmallVec;
use std::rc::Rc;
use crate::commands::{AT, BUCKETS, COST, Command, FlagCounts, Id, KEYS, Keys, LIMITER, LIMITS, NUMKEYS, REFUND_OR_FORCE};

const NAME: &str = "RL.SLIDING";

/// What an RL.SLIDING key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: NAME,
    expected: "window_ms:buckets:first:counts entries separated by commas",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "SLIDING",
    syntax: "SLIDING i LIMIT window limit [LIMIT window limit ...] [BUCKETS n]",
    state: STATE,
    storage: Storage::String,
    gate: false,
    field: false,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
// The call shape of RL.MULTI.
pub const COMMAND: Command = Command {
    id: Id::Sliding,
    name: "RL.SLIDING",
    syntax: "RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms] [REFUND|FORCE|UPTO]",
    summary: "Checks several keys against several sliding windows, all or nothing, in one call",
    complexity: "O(K * W * B) for K keys, W windows and B buckets per window",
    args: &[NUMKEYS, KEYS, LIMITS, BUCKETS, COST, AT, REFUND_OR_FORCE],
    keys: Keys::NumKeys,
    info: "sliding",
    flag_counts: FlagCounts::Flags,
    ..LIMITER
};

/// One LIMIT of a checked request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub window: Micros,
    pub limit: i64,
}

/// The call of `RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT ...]
/// [BUCKETS n] [COST n] [AT ms]`, checked: 1 to [`MAX_KEYS`](crate::limits::MAX_KEYS)
/// keys, 1 to [`MAX_WINDOWS`](crate::limits::MAX_WINDOWS) windows with no window twice,
/// each split by `buckets` into whole microseconds, `buckets` from 1 to
/// [`MAX_BUCKETS`], and a cost from 0 to the smallest limit.
pub fn call(
    numkeys: usize,
    limits: &[Limit],
    buckets: u64,
    cost: i64,
    at: Option<Micros>,
) -> Result<Call<Sliding>> {
    windows::check_shape(numkeys, limits)?;
    let rule = Sliding::new(limits, buckets)?;
    windows::check_cost(limits, cost)?;
    check_count("cost", cost, 0)?;
    Ok(Call::each_key(NAME, numkeys, rule, cost, at))
}

/// Parse the arguments after the command name; every check that needs no key (an
/// error that a wrong numkeys explains says so: [`windows::numkeys_hint`]).
pub fn parse(args: &[&[u8]]) -> Result<Call<Sliding>> {
    parse_as_given(args).map_err(|e| {
        windows::numkeys_hint(args, e, crate::limits::MAX_KEYS, |a| {
            parse_as_given(a).is_ok()
        })
    })
}

fn parse_as_given(args: &[&[u8]]) -> Result<Call<Sliding>> {
    let (numkeys, opts, mode) = windows::parse_call(args, NAME, <Sliding as Syntax>::OPTIONS)?;
    // A refund, a forced request or UPTO of any cost can be settled: no capacity
    // check.
    let checked = if mode == Mode::Take { opts.cost } else { 0 };
    let call = call(
        numkeys,
        &opts.limits,
        opts.buckets.unwrap_or(DEFAULT_BUCKETS),
        checked,
        opts.at,
    )?;
    Ok(Call {
        cost: opts.cost,
        ..call.settling(mode)
    })
}

/// RL.SLIDING's rule on one key: its LIMITs, each window cut into `buckets`. Each call
/// brings its cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sliding {
    /// Shared, as RL.MULTI's (see there).
    windows: Rc<[Span]>,
    buckets: u64,
}

impl Sliding {
    /// 1 to [`MAX_WINDOWS`](crate::limits::MAX_WINDOWS) LIMITs, no window twice, `buckets`
    /// from 1 to [`MAX_BUCKETS`] splitting every window into whole microseconds.
    pub fn new(limits: &[Limit], buckets: u64) -> Result<Sliding> {
        windows::check_limits(limits)?;
        if buckets == 0 || buckets > MAX_BUCKETS {
            return Err(Error::InvalidBuckets {
                value: buckets.to_string().into_bytes(),
            });
        }
        if let Some(l) = limits.iter().find(|l| l.window.0 % buckets != 0) {
            return Err(Error::UnevenBuckets {
                window_ms: l.window.floor_millis(),
                buckets,
            });
        }
        Ok(Sliding {
            windows: limits
                .iter()
                .map(|l| Span {
                    window: l.window,
                    limit: l.limit,
                })
                .collect(),
            buckets,
        })
    }

    fn limits(&self) -> SmallVec<[Limit; 4]> {
        self.windows
            .iter()
            .map(|w| Limit {
                window: w.window,
                limit: w.limit,
            })
            .collect()
    }

    fn names(&self, window_ms: u64) -> bool {
        self.windows
            .iter()
            .any(|w| w.window.floor_millis() == window_ms)
    }

    /// The reply for a rule without windows (never built): full capacity.
    /// Buckets per window.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    fn untouched(&self) -> (Verdict, u64) {
        let first = self.windows.first();
        (
            Verdict::untouched(first.map_or(0, |w| w.limit)),
            first.map_or(0, |w| w.window.floor_millis()),
        )
    }

    /// Judge a key's decoded state: every window, counted in its buckets.
    pub fn judge_stored(
        &self,
        stored: Option<Stored<State>>,
        req: &Request,
    ) -> Result<Judgement<Pending>> {
        let mut binding = Binding::default();
        let mut updated = Vec::with_capacity(self.windows.len());
        for w in self.windows.iter() {
            let window_ms = w.window.floor_millis();
            let old = stored.as_ref().and_then(|s| s.state.get(window_ms));
            let pair = match req.mode {
                Mode::Take | Mode::UpTo => judge(old, req.now, w, self.buckets, req.cost),
                Mode::Refund => refund(old, req.now, w, self.buckets, req.cost),
                Mode::Force => force(old, req.now, w, self.buckets, req.cost)?,
            };
            binding.offer(pair.verdict, window_ms);
            updated.push(pair.updated);
        }
        let (verdict, window_ms) = binding.finish().unwrap_or_else(|| self.untouched());
        Ok(Judgement::plain(
            verdict,
            window_ms,
            Pending { stored, updated },
        ))
    }
}

/// What a judgement of one RL.SLIDING key keeps for its write: the state it read and
/// its named windows after an allowed request. On the heap, as [`State`]'s entries: a
/// pending write of any limiter is moved as the largest one, so RL.SLIDING's buckets
/// stay out of the enums every command's call moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    stored: Option<Stored<State>>,
    updated: Vec<Entry>,
}

impl<'a> Syntax<'a> for Sliding {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 0;
    const OPTIONS: &'static [Opt] = &[Opt::Limit, Opt::Buckets];
    type Args = ();

    fn parse_args(_: &[&'a [u8]]) -> Result<()> {
        Ok(())
    }

    fn build((): (), opts: &Options<'a>) -> Result<Sliding> {
        Sliding::new(&opts.limits, opts.buckets.unwrap_or(DEFAULT_BUCKETS))
    }
}

impl Limiter for Sliding {
    type State = State;
    type Pending = Pending;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
        if mode != Mode::Take {
            return Ok(());
        }
        windows::check_cost(&self.limits(), cost)
    }

    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Pending>> {
        let stored = key.string_state(parse_state)?;
        self.judge_stored(stored, req)
    }

    fn write(
        &self,
        Pending { stored, updated }: Pending,
        outcome: Outcome,
        req: &Request,
    ) -> std::result::Result<Effect<State>, Full> {
        let (now, cost) = (req.now, req.cost);
        let stored = stored.as_ref().map(|s| (s.state.entries(), s.expires_at));
        let names = |w| self.names(w);
        let state = |entries: Vec<Entry>| {
            Some(State {
                entries,
            })
        };
        windows::write_windows(stored, updated, names, (outcome, now, cost), state)
    }
}

impl windows::WindowEntry for Entry {
    fn window_ms(&self) -> u64 {
        self.window_ms
    }

    fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Buckets count until the newest one leaves the window.
    fn ends_at(&self) -> Option<Micros> {
        Entry::ends_at(self)
    }
}

impl Written for State {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

/// The buckets of one window in a key's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub window_ms: u64,
    pub buckets: u64,
    /// The number of the first bucket in `counts`.
    pub first: u64,
    pub counts: SmallVec<[i64; 12]>,
}

impl Entry {
    /// The bucket width in µs.
    fn width(&self) -> u64 {
        self.window_ms * 1000 / self.buckets
    }

    fn window(&self) -> u64 {
        self.window_ms * 1000
    }

    /// The number of the newest bucket with a count, if any.
    fn newest(&self) -> Option<u64> {
        let i = self.counts.iter().rposition(|&c| c != 0)?;
        Some(self.first + i as u64)
    }

    /// When the newest counted bucket leaves the window: no bucket counts after it.
    fn ends_at(&self) -> Option<Micros> {
        self.newest().map(|m| {
            Micros(
                (m + 1)
                    .saturating_mul(self.width())
                    .saturating_add(self.window()),
            )
        })
    }

    /// The same counts in buckets of another number `n`: each count goes to the new
    /// bucket that holds the last microsecond of its old one, so it leaves the window
    /// no earlier than it did.
    fn rebucketed(&self, n: u64) -> Entry {
        let (old, new) = (self.width(), self.window_ms * 1000 / n);
        let mut out = Entry {
            window_ms: self.window_ms,
            buckets: n,
            first: 0,
            counts: SmallVec::new(),
        };
        for (i, &c) in self.counts.iter().enumerate() {
            if c != 0 {
                let j = ((self.first + i as u64 + 1) * old - 1) / new;
                out.add(j, c);
            }
        }
        out
    }

    /// Add `c` to bucket `j`, growing the list as needed.
    fn add(&mut self, j: u64, c: i64) {
        if self.counts.is_empty() {
            self.first = j;
        }
        if j < self.first {
            let grow = (self.first - j) as usize;
            self.counts.insert_many(0, std::iter::repeat_n(0, grow));
            self.first = j;
        }
        let i = (j - self.first) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        if let Some(slot) = self.counts.get_mut(i) {
            *slot = slot.saturating_add(c);
        }
    }

    /// Drop the buckets before `lo` and the empty ones at both ends.
    fn trim(&mut self, lo: u64) {
        let drop = lo.saturating_sub(self.first).min(self.counts.len() as u64) as usize;
        let lead = drop
            + self
                .counts
                .iter()
                .skip(drop)
                .take_while(|&&c| c == 0)
                .count();
        self.counts.drain(..lead);
        self.first += lead as u64;
        while self.counts.last() == Some(&0) {
            self.counts.pop();
        }
    }
}

/// A key's state: its entries, sorted by window, one per window (on the heap: see
/// [`Pending`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    entries: Vec<Entry>,
}

impl State {
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn get(&self, window_ms: u64) -> Option<&Entry> {
        self.entries.iter().find(|e| e.window_ms == window_ms)
    }

    /// Read a stored value (the format of [`Encode`] below).
    pub fn parse(raw: &[u8]) -> Option<State> {
        if raw.is_empty() {
            return None;
        }
        let mut entries: Vec<Entry> = Vec::new();
        let mut total_buckets = 0;
        for item in raw.split(|&b| b == b',') {
            let mut parts = item.split(|&b| b == b':');
            let (Some(w), Some(n), Some(first), Some(counts), None) = (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                return None;
            };
            let window_ms = parse_decimal(w)?;
            let buckets = parse_decimal(n)?;
            let first = parse_decimal(first)?;
            if window_ms == 0
                || window_ms > MAX_DURATION.floor_millis()
                || buckets == 0
                || buckets > MAX_BUCKETS
                || (window_ms * 1000) % buckets != 0
                || first > MAX_SAFE_INTEGER
            {
                return None;
            }
            // Counts and their sum below 2^53, as the Lua twin reads them exactly.
            let mut list = SmallVec::new();
            let mut sum = 0u64;
            for c in counts.split(|&b| b == b'.') {
                let c = parse_decimal(c)?;
                sum += c;
                if sum > MAX_SAFE_INTEGER {
                    return None;
                }
                list.push(c as i64);
            }
            if list.len() as u64 > buckets + 1 {
                return None;
            }
            // Its buckets no later than a call writes into: the one holding the latest
            // AT (so every time derived from it stays below 2^53 µs).
            let width = window_ms * 1000 / buckets;
            let end = (first + list.len() as u64).checked_mul(width);
            if !matches!(end, Some(end) if end <= MAX_AT_US + width) {
                return None;
            }
            total_buckets += buckets;
            if total_buckets > MAX_BUCKETS_PER_KEY {
                return None;
            }
            if entries.last().is_some_and(|e| e.window_ms >= window_ms) {
                return None; // unsorted or a window twice
            }
            entries.push(Entry {
                window_ms,
                buckets,
                first,
                counts: list,
            });
        }
        Some(State { entries })
    }
}

/// `window_ms:n:first:c0.c1...` entries separated by commas, in window order.
impl Encode for State {
    fn encode(&self, out: &mut Vec<u8>) {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_decimal(out, e.window_ms);
            out.push(b':');
            push_decimal(out, e.buckets);
            out.push(b':');
            push_decimal(out, e.first);
            out.push(b':');
            for (j, c) in e.counts.iter().enumerate() {
                if j > 0 {
                    out.push(b'.');
                }
                c.encode(out);
            }
        }
    }
}

/// Read a stored value; the glue names the key in the error.
pub fn parse_state(raw: &[u8]) -> Result<State> {
    State::parse(raw).ok_or_else(|| STATE.invalid())
}

/// One (key, window) pair judged at `now`: what it counts and what it would become.
struct Pair {
    verdict: Verdict,
    /// The entry after an allowed request (counted buckets only, the cost added).
    updated: Entry,
}

/// A pair's entry at `now`: in `n` buckets, its buckets that no longer count dropped;
/// the time it is judged at (never before its newest bucket starts).
fn counted_entry(stored: Option<&Entry>, now: Micros, w: &Span, n: u64) -> (Entry, u64) {
    let window = w.window.0;
    let width = window / n;
    let mut e = match stored {
        Some(e) if e.buckets == n => e.clone(),
        Some(e) => e.rebucketed(n),
        None => Entry {
            window_ms: w.window.floor_millis(),
            buckets: n,
            first: 0,
            counts: SmallVec::new(),
        },
    };
    // A call judged before the newest bucket starts is judged at its start (time does
    // not go back inside a key: the state stays within n + 1 buckets).
    let newest_start = e.newest().map_or(0, |m| m * width);
    let t = now.0.max(newest_start);
    let lo = t.saturating_sub(window) / width;
    e.trim(lo);
    (e, t)
}

fn judge(stored: Option<&Entry>, now: Micros, w: &Span, n: u64, cost: i64) -> Pair {
    let window = w.window.0;
    let width = window / n;
    let (mut e, t) = counted_entry(stored, now, w, n);
    let current = t / width;
    let counted: i64 = e.counts.iter().fold(0i64, |s, &c| s.saturating_add(c));
    // When bucket j stops counting.
    let leaves = |j: u64| (j + 1).saturating_mul(width).saturating_add(window);
    if counted.saturating_add(cost) <= w.limit {
        if cost > 0 {
            e.add(current, cost);
        }
        let reset = e.newest().map_or(0, |m| leaves(m).saturating_sub(now.0));
        let verdict = Verdict {
            decision: Decision::Allowed,
            limit: w.limit,
            remaining: w.limit - counted - cost,
            reset_after: Micros(reset),
        };
        return Pair {
            verdict,
            updated: e,
        };
    }
    // Denied: the first moment enough of the oldest buckets have left.
    let retry = fits_at(&e, counted, cost, w.limit, leaves);
    let reset = e.newest().map_or(0, |m| leaves(m).saturating_sub(now.0));
    let verdict = Verdict {
        decision: Decision::Denied {
            retry_after: Micros(retry.saturating_sub(now.0)),
        },
        limit: w.limit,
        remaining: (w.limit - counted).max(0),
        reset_after: Micros(reset),
    };
    Pair {
        verdict,
        updated: e,
    }
}

/// The first moment enough of the oldest of `e`'s buckets (which count `counted`) have
/// left for `cost` to fit under `limit`; `leaves(j)` is when bucket `j` leaves.
fn fits_at(e: &Entry, counted: i64, cost: i64, limit: i64, leaves: impl Fn(u64) -> u64) -> u64 {
    let mut left = counted;
    let mut at = leaves(e.first + e.counts.len().saturating_sub(1) as u64);
    for (i, &c) in e.counts.iter().enumerate() {
        left -= c;
        if left + cost <= limit {
            at = leaves(e.first + i as u64);
            break;
        }
    }
    at
}

/// `REFUND`: `cost` leaves the counted buckets newest first, never below 0; the entry
/// keeps its newest counted bucket's leaving time (none left: the window is dropped).
fn refund(stored: Option<&Entry>, now: Micros, w: &Span, n: u64, cost: i64) -> Pair {
    let window = w.window.0;
    let width = window / n;
    let (mut e, _) = counted_entry(stored, now, w, n);
    let mut give = cost;
    for c in e.counts.iter_mut().rev() {
        if give == 0 {
            break;
        }
        let back = give.min(*c);
        *c -= back;
        give -= back;
    }
    while e.counts.last() == Some(&0) {
        e.counts.pop();
    }
    e.trim(e.first);
    let counted: i64 = e.counts.iter().fold(0i64, |s, &c| s.saturating_add(c));
    let leaves = |j: u64| (j + 1).saturating_mul(width).saturating_add(window);
    let reset = e.newest().map_or(0, |m| leaves(m).saturating_sub(now.0));
    let verdict = Verdict {
        decision: Decision::Allowed,
        limit: w.limit,
        remaining: w.limit.saturating_sub(counted).max(0),
        reset_after: Micros(reset),
    };
    Pair {
        verdict,
        updated: e,
    }
}

/// `FORCE`: `cost` is added to the current bucket whether it fits or not (the counted
/// cost stays at most 2^53 - 1). Over the limit, field 1 is 1 and the wait is until
/// enough of the oldest buckets have left for a request of cost 1 to fit.
fn force(stored: Option<&Entry>, now: Micros, w: &Span, n: u64, cost: i64) -> Result<Pair> {
    let window = w.window.0;
    let width = window / n;
    let (mut e, t) = counted_entry(stored, now, w, n);
    let counted: i64 = e.counts.iter().fold(0i64, |s, &c| s.saturating_add(c));
    let after = counted
        .checked_add(cost)
        .filter(|a| *a as u64 <= MAX_SAFE_INTEGER)
        .ok_or(Error::ForceOutOfBounds {
            what: "a count above 9007199254740991",
        })?;
    if cost > 0 {
        e.add(t / width, cost);
    }
    let leaves = |j: u64| (j + 1).saturating_mul(width).saturating_add(window);
    let reset = e.newest().map_or(0, |m| leaves(m).saturating_sub(now.0));
    let decision = if after <= w.limit {
        Decision::Allowed
    } else {
        let at = fits_at(&e, after, 1, w.limit, leaves);
        Decision::Over {
            retry_after: Micros(at.saturating_sub(now.0)),
        }
    };
    let verdict = Verdict {
        decision,
        limit: w.limit,
        remaining: w.limit.saturating_sub(after).max(0),
        reset_after: Micros(reset),
    };
    Ok(Pair {
        verdict,
        updated: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiters::windows::testing::{decide, Binding};
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000_000; // ms, on a second boundary

    fn at(ms: u64) -> Micros {
        Micros::from_millis(T0 + ms)
    }

    fn req(numkeys: usize, limits: &[(u64, i64)], buckets: u64, cost: i64) -> Call<Sliding> {
        let limits: Vec<Limit> = limits
            .iter()
            .map(|&(w, l)| Limit {
                window: Micros::from_millis(w),
                limit: l,
            })
            .collect();
        call(numkeys, &limits, buckets, cost, None).unwrap()
    }

    /// Run calls (ms after T0, cost) on keys sharing the request shape; the replies.
    struct Keys(Vec<Option<Stored<State>>>);

    impl Keys {
        fn new(n: usize) -> Self {
            Keys(vec![None; n])
        }

        fn call(&mut self, t_ms: u64, r: &Call<Sliding>) -> (Verdict, Binding) {
            let out = decide(&self.0, at(t_ms), r).unwrap();
            for (k, e) in out.effects.iter().enumerate() {
                match e {
                    Effect::Delete => self.0[k] = None,
                    Effect::Set { state, expires_at } => {
                        self.0[k] = Some(Stored {
                            state: state.clone(),
                            expires_at: Some(*expires_at),
                        })
                    }
                    Effect::ExpireAt(x) => {
                        if let Some(s) = &mut self.0[k] {
                            s.expires_at = Some(*x)
                        }
                    }
                    Effect::None => {}
                }
            }
            (out.verdict, out.binding)
        }

        fn encoded(&self, k: usize) -> String {
            self.0[k].as_ref().map_or(String::new(), |s| {
                let mut v = Vec::new();
                s.state.encode(&mut v);
                String::from_utf8(v).unwrap()
            })
        }
    }

    #[test]
    fn limit_per_window_and_exact_retry() {
        // 3 per second in 10 buckets of 100 ms.
        let r = req(1, &[(1_000, 3)], 10, 1);
        let mut k = Keys::new(1);
        for i in 0..3 {
            let (v, _) = k.call(0, &r);
            assert_eq!(v.fields(), [0, 3, 2 - i, -1, 1_100], "{i}");
        }
        // The bucket [T0, T0 + 100 ms) counts until T0 + 1100 ms.
        assert_eq!(k.call(0, &r).0.fields(), [1, 3, 0, 1_100, 1_100]);
        assert_eq!(k.call(1_099, &r).0.fields(), [1, 3, 0, 1, 1]);
        assert_eq!(k.call(1_100, &r).0.fields(), [0, 3, 2, -1, 1_100]);
        assert_eq!(k.encoded(0), format!("1000:10:{}:1", (T0 + 1_100) / 100));
    }

    #[test]
    fn no_double_burst_around_a_boundary() {
        // A fixed window of 1 s lets 3 through at 0.9 s and 3 more at 1.0 s; sliding
        // windows refuse until the first three have left (1.0 s + 1 s).
        let r = req(1, &[(1_000, 3)], 10, 1);
        let mut k = Keys::new(1);
        for _ in 0..3 {
            assert!(k.call(900, &r).0.is_allowed());
        }
        let (v, _) = k.call(1_000, &r);
        assert_eq!(v.fields(), [1, 3, 0, 1_000, 1_000]);
        assert!(!k.call(1_999, &r).0.is_allowed());
        assert!(k.call(2_000, &r).0.is_allowed());
    }

    #[test]
    fn article_configuration_all_or_nothing_with_the_binding_pair() {
        // 1000/s, 5000/10 s, 7000/15 s for an address and a user.
        let r = req(
            2,
            &[(1_000, 1_000), (10_000, 5_000), (15_000, 7_000)],
            10,
            1,
        );
        let burst = req(
            2,
            &[(1_000, 1_000), (10_000, 5_000), (15_000, 7_000)],
            10,
            1_000,
        );
        let mut k = Keys::new(2);
        // A burst of 1000 is fine once a second, plus one bucket (100 ms): the second's
        // window counts every bucket that overlaps it.
        for s in 0..5 {
            let (v, b) = k.call(s * 1_100, &burst);
            assert!(v.is_allowed(), "burst {s}");
            // The second's window is used up: the least remaining, first LIMIT on ties.
            assert_eq!((b.key, b.window_ms, v.fields()[2]), (0, 1_000, 0));
        }
        // 5000 in the last 10 s already: the 10 s window refuses, on the first key;
        // nothing is counted anywhere.
        let before = (k.encoded(0), k.encoded(1));
        let (v, b) = k.call(5_500, &r);
        assert_eq!((v.fields()[0], b.key, b.window_ms), (1, 0, 10_000));
        assert_eq!((k.encoded(0), k.encoded(1)), before);
        // The first burst's bucket [0 s, 1 s) leaves the 10 s window at 11 s.
        assert_eq!(v.fields()[3], 11_000 - 5_500);
        // State: one key per identifier, three windows.
        assert_eq!(k.0[0].as_ref().unwrap().state.entries().len(), 3);
    }

    #[test]
    fn peeks_and_unnamed_windows() {
        let r = req(1, &[(1_000, 2)], 10, 1);
        let other = req(1, &[(60_000, 5)], 6, 1);
        let peek = req(1, &[(1_000, 2)], 10, 0);
        let mut k = Keys::new(1);
        k.call(0, &other);
        k.call(0, &r);
        let s = k.encoded(0);
        assert_eq!(k.call(10, &peek).0.fields(), [0, 2, 1, -1, 1_090]);
        assert_eq!(k.encoded(0), s, "a peek writes nothing");
        // The minute window is kept by calls that do not name it.
        k.call(500, &r);
        assert!(k.encoded(0).contains("60000:6:"), "{}", k.encoded(0));
        // ...until its bucket has left: then it is dropped.
        k.call(80_000, &r);
        assert!(!k.encoded(0).contains("60000:6:"), "{}", k.encoded(0));
    }

    #[test]
    fn changing_buckets_keeps_the_counts_conservatively() {
        let ten = req(1, &[(1_000, 3)], 10, 1);
        let four = req(1, &[(1_000, 3)], 4, 1);
        let mut k = Keys::new(1);
        for _ in 0..3 {
            k.call(120, &ten); // bucket [100, 200) ms
        }
        // With 4 buckets of 250 ms the three requests land in [0, 250): they leave at
        // 1250 ms, never before the 1200 ms of their old bucket.
        assert_eq!(k.call(1_199, &four).0.fields()[0], 1);
        assert_eq!(k.call(1_249, &four).0.fields()[0], 1);
        assert_eq!(k.call(1_250, &four).0.fields()[0], 0);
    }

    #[test]
    fn state_format() {
        let raw = b"1000:10:17000000000:3.0.1,60000:6:28333333:2";
        let st = State::parse(raw).unwrap();
        let mut out = Vec::new();
        st.encode(&mut out);
        assert_eq!(out, raw);
        for bad in [
            &b""[..],
            b"1000:10:1:1,1000:10:1:1",           // a window twice
            b"60000:6:1:1,1000:10:1:1",           // unsorted
            b"1000:7:1:1",                        // 7 does not divide 1 000 000 µs
            b"1000:10:1:1.1.1.1.1.1.1.1.1.1.1.1", // 12 buckets of 10
            b"1000:0:1:1",
            b"1000:101:1:1",
            b"0:10:1:1",
            b"1000:10:1:",
            b"1000:10:1:-1",
            b"1000:10:x:1",
            b"1000:10:9007199254740991:1", // ends beyond 2^53
            b"1000:10:1",
            b"1000:10:1:1:1",
            b"12",
        ] {
            assert!(
                State::parse(bad).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn argument_errors() {
        let p = |args: &[&str]| {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse(&raw)
        };
        assert_eq!(
            p(&["1", "k", "LIMIT", "1s", "5", "BUCKETS", "7"]),
            Err(Error::UnevenBuckets {
                window_ms: 1_000,
                buckets: 7
            })
        );
        for bad in ["0", "101", "x", "-1"] {
            assert_eq!(
                p(&["1", "k", "LIMIT", "1s", "5", "BUCKETS", bad]),
                Err(Error::InvalidBuckets {
                    value: bad.as_bytes().to_vec()
                })
            );
        }
        assert_eq!(
            p(&["1", "k", "LIMIT", "1s", "5", "BUCKETS", "5", "buckets", "5"]),
            Err(Error::RepeatedOption { name: "BUCKETS" })
        );
        assert_eq!(
            p(&["1", "k", "LIMIT", "1s", "5", "ALIGN"]),
            Err(Error::UnknownOption {
                value: b"ALIGN".to_vec(),
                accepted: Opt::set(&[
                    Opt::Cost,
                    Opt::At,
                    Opt::Limit,
                    Opt::Buckets,
                    Opt::Refund,
                    Opt::Force,
                    Opt::UpTo
                ]),
            })
        );
        let ok = p(&[
            "2", "a", "b", "buckets", "4", "LIMIT", "1s", "5", "COST", "2",
        ])
        .unwrap();
        assert_eq!((ok.numkeys, ok.rules[0].1.buckets(), ok.cost), (2, 4, 2));
        assert_eq!(
            p(&["1", "k", "LIMIT", "1s", "5"]).unwrap().rules[0]
                .1
                .buckets(),
            10
        );
    }

    fn config() -> impl Strategy<Value = (Vec<(u64, i64)>, u64)> {
        (
            proptest::collection::btree_map(
                prop_oneof![Just(100u64), Just(1_000), Just(3_000), Just(10_000)],
                1i64..12,
                1..3,
            ),
            prop_oneof![Just(1u64), Just(2), Just(4), Just(5), Just(10), Just(20)],
        )
            .prop_map(|(m, n)| (m.into_iter().collect(), n))
    }

    proptest! {
        /// For every allowed request at t, the cost allowed in (t - w, t] is at most the
        /// limit; a denied request did not fit in (t - w - w/n, t] in some window;
        /// remaining within the limit; retry_after exact: 1 µs earlier it is still
        /// denied, at it the same request is allowed.
        #[test]
        fn invariants(
            (limits, n) in config(),
            steps in proptest::collection::vec((0u64..4, 0u64..5_000, 0i64..4), 1..120),
        ) {
            let min_limit = limits.iter().map(|l| l.1).min().unwrap();
            let mut stored: Vec<Option<Stored<State>>> = vec![None];
            let mut now = Micros::from_millis(T0) .0 + 7;
            let mut allowed: Vec<(u64, i64)> = Vec::new();
            for (scale, dt, c) in steps {
                now += match scale { 0 => dt % 3, 1 => dt * 10, 2 => dt * 1_000, _ => dt * 37 };
                let cost = c % (min_limit + 1);
                let r = req(1, &limits, n, cost);
                let out = decide(&stored, Micros(now), &r).unwrap();
                let f = out.verdict.fields();
                prop_assert!((0..=f[1]).contains(&f[2]));
                prop_assert_eq!(f[0] == 1, f[3] > 0);
                match out.verdict.decision {
                    Decision::Over { .. } => prop_assert!(false, "only FORCE goes over"),
                    Decision::Allowed => {
                        if cost > 0 { allowed.push((now, cost)); }
                        for &(w, l) in &limits {
                            let w = w * 1000;
                            let sum: i64 = allowed.iter().filter(|&&(t, _)| t + w > now).map(|&(_, c)| c).sum();
                            prop_assert!(sum <= l, "{} in ({}, {}] over {}", sum, now - w.min(now), now, l);
                        }
                        if let Some(Effect::Set { state, expires_at }) = out.effects.first() {
                            stored[0] = Some(Stored { state: state.clone(), expires_at: Some(*expires_at) });
                        }
                    }
                    Decision::Denied { retry_after } => {
                        prop_assert!(out.effects.iter().all(|e| matches!(e, Effect::None)));
                        let over = limits.iter().any(|&(w, l)| {
                            let reach = w * 1000 + w * 1000 / n;
                            let sum: i64 = allowed.iter().filter(|&&(t, _)| t + reach > now).map(|&(_, c)| c).sum();
                            sum + cost > l
                        });
                        prop_assert!(over, "denied at {} though every window had room one bucket back", now);
                        let later = decide(&stored, Micros(now + retry_after.0), &r).unwrap();
                        prop_assert!(later.verdict.is_allowed(), "not allowed after retry_after");
                        let before = decide(&stored, Micros(now + retry_after.0 - 1), &r).unwrap();
                        prop_assert!(!before.verdict.is_allowed(), "allowed before retry_after");
                    }
                }
            }
        }

        #[test]
        fn arbitrary_state_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..80),
                                        digits in "[0-9:.,]{0,60}") {
            let r = req(1, &[(1_000, 3), (60_000, 9)], 4, 1);
            for bytes in [raw.as_slice(), digits.as_bytes()] {
                if let Ok(state) = parse_state(bytes) {
                    let stored = vec![Some(Stored { state, expires_at: None })];
                    let _ = decide(&stored, Micros::from_millis(T0), &r);
                }
            }
        }
    }
}

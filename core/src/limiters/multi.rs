//! RL.MULTI: several identifiers (keys) against several fixed windows, all or nothing.
//!
//! Each (key, window) pair is a fixed-window counter with RL.FIXED's rules (this module
//! judges every pair as RL.FIXED judges its counter). A request is allowed iff every pair has room
//! for its cost; then every pair consumes it. Otherwise nothing changes.
//!
//! State: one string per key holding the counters of all its windows as
//! `window_ms:count:end_ms` entries separated by commas, sorted by window, e.g.
//! `1000:3:1700000001000,60000:7:1700000060000`. `end_ms` is the absolute end of the
//! window in Unix milliseconds. The key expires at the latest end. Windows a call does
//! not name are kept until they end; ended windows are dropped when the key is written.

use crate::call::binding::Binding;
use crate::call::keys::{KeyRead, Value, Written};
use crate::call::limiter::{
    Full, Judgement, Kind, Limiter, Mode, Outcome, Request, Storage, Syntax,
};
use crate::call::state::{parse_decimal, push_decimal, Effect, Encode, StateName, Stored};
use crate::call::verdict::Verdict;
use crate::call::Call;
use crate::commands::{ALIGN, AT, COST, Command, FlagCounts, Id, KEYS, Keys, LIMITER, LIMITS, NUMKEYS, REFUND_OR_FORCE};
#[cfg(test)]
use crate::error::Error;
use crate::error::Result;
use crate::limiters::fixed;
use crate::limiters::windows;
use crate::limits::{MAX_DURATION, MAX_END_MS};
use crate::parse::args::{check_count, Limit, Options};
use crate::parse::keyword::Opt;
use crate::units::{Micros, UnixMillis};
use smallvec::SmallVec;
use std::rc::Rc;

/// What an RL.MULTI key holds, as error replies word it.
pub const STATE: StateName = StateName {
    command: NAME,
    expected: "window_ms:count:end_ms entries separated by commas",
};

/// What kind of limiter this is: its RL.ALL keyword, its state, its key type.
pub static KIND: Kind = Kind {
    keyword: "MULTI",
    syntax: "MULTI i LIMIT window limit [LIMIT window limit ...] [ALIGN]",
    state: STATE,
    storage: Storage::String,
    gate: false,
    field: false,
};

/// Its command: syntax, COMMAND DOCS, keys, flags, ACL, INFO counters.
// Keys come from the numkeys key spec (the server then marks the command
// movablekeys); the legacy first/last/step cannot express them. Redis 7.0 routes
// Cluster calls with the legacy range only, or by asking the command
// (`getkeys-api`): the module answers those requests too.
pub const COMMAND: Command = Command {
    id: Id::Multi,
    name: "RL.MULTI",
    syntax: "RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms] [REFUND|FORCE|UPTO]",
    summary: "Checks several keys against several fixed windows, all or nothing, in one call",
    complexity: "O(K * W) for K keys and W windows",
    args: &[NUMKEYS, KEYS, LIMITS, COST, ALIGN, AT, REFUND_OR_FORCE],
    keys: Keys::NumKeys,
    info: "multi",
    flag_counts: FlagCounts::Flags,
    ..LIMITER
};

const NAME: &str = "RL.MULTI";

/// The call of `RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT ...] [COST n]
/// [ALIGN] [AT ms]`, checked: 1 to [`MAX_KEYS`](crate::limits::MAX_KEYS) keys, 1 to
/// [`MAX_WINDOWS`](crate::limits::MAX_WINDOWS) windows with no window twice, and a cost
/// from 0 to the smallest limit (refused before any key is read).
pub fn call(
    numkeys: usize,
    limits: &[Limit],
    cost: i64,
    align: bool,
    at: Option<Micros>,
) -> Result<Call<Multi>> {
    windows::check_shape(numkeys, limits)?;
    windows::check_cost(limits, cost)?;
    check_count("cost", cost, 0)?;
    let rule = Multi::new(limits, align)?;
    Ok(Call::each_key(NAME, numkeys, rule, cost, at))
}

/// Parse the arguments after the command name (an error that a wrong numkeys explains
/// says so: [`windows::numkeys_hint`]).
pub fn parse(args: &[&[u8]]) -> Result<Call<Multi>> {
    parse_as_given(args).map_err(|e| {
        windows::numkeys_hint(args, e, crate::limits::MAX_KEYS, |a| {
            parse_as_given(a).is_ok()
        })
    })
}

fn parse_as_given(args: &[&[u8]]) -> Result<Call<Multi>> {
    let (numkeys, opts, mode) = windows::parse_call(args, NAME, <Multi as Syntax>::OPTIONS)?;
    // A refund, a forced request or UPTO of any cost can be settled: no capacity
    // check.
    let checked = if mode == Mode::Take { opts.cost } else { 0 };
    let call = call(numkeys, &opts.limits, checked, opts.align, opts.at)?;
    Ok(Call {
        cost: opts.cost,
        ..call.settling(mode)
    })
}

/// RL.MULTI's rule on one key: its LIMITs (fixed windows, aligned to the epoch or not).
/// Each call brings its cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Multi {
    /// One per LIMIT, in argument order. Shared: RL.MULTI judges every key with the
    /// same rule, and a rule of any limiter is moved as the largest one.
    pairs: Rc<[fixed::Fixed]>,
}

impl Multi {
    /// 1 to [`MAX_WINDOWS`](crate::limits::MAX_WINDOWS) LIMITs, no window twice.
    pub fn new(limits: &[Limit], align: bool) -> Result<Multi> {
        windows::check_limits(limits)?;
        let pairs = limits
            .iter()
            .map(|l| fixed::Fixed::new(l.limit, l.window, align))
            .collect::<Result<SmallVec<[fixed::Fixed; 16]>>>()?;
        Ok(Multi {
            pairs: Rc::from(pairs.as_slice()),
        })
    }

    /// The LIMITs, in argument order.
    pub fn limits(&self) -> impl Iterator<Item = Limit> + '_ {
        self.pairs.iter().map(|p| Limit {
            window: p.window(),
            limit: p.limit(),
        })
    }

    fn names(&self, window_ms: u64) -> bool {
        self.pairs
            .iter()
            .any(|p| p.window().floor_millis() == window_ms)
    }

    /// Judge a key's decoded state: every window with RL.FIXED's rules.
    pub fn judge_stored(
        &self,
        stored: Option<Stored<State>>,
        req: &Request,
    ) -> Result<Judgement<Pending>> {
        let mut binding = Binding::default();
        // The named windows' counters after the request (used when allowed).
        let mut updated = Entries::with_capacity(self.pairs.len());
        for pair in self.pairs.iter() {
            let window_ms = pair.window().floor_millis();
            let counter = stored
                .as_ref()
                .and_then(|s| s.state.get(window_ms))
                .map(|e| Stored {
                    state: e.count,
                    expires_at: Some(e.ends_at),
                });
            let (verdict, on_allow, _) = fixed::judge(counter, req, pair)?;
            binding.offer(verdict, window_ms);
            // A forced request over the limit is written too; a refund that empties
            // a window drops it (as a window this call names, it is not kept).
            if let (false, Effect::Set { state, expires_at }) = (verdict.is_denied(), on_allow) {
                updated.push(Entry {
                    window_ms,
                    count: state,
                    ends_at: expires_at,
                });
            }
        }
        let (verdict, window_ms) = binding.finish().unwrap_or_else(|| self.untouched());
        Ok(Judgement::plain(
            verdict,
            window_ms,
            Pending { stored, updated },
        ))
    }

    /// The reply for a rule without windows (never built): full capacity.
    fn untouched(&self) -> (Verdict, u64) {
        let first = self.pairs.first();
        (
            Verdict::untouched(first.map_or(0, fixed::Fixed::limit)),
            first.map_or(0, |p| p.window().floor_millis()),
        )
    }
}

/// What a judgement of one RL.MULTI key keeps for its write: the state it read and its
/// named windows' counters after an allowed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    stored: Option<Stored<State>>,
    updated: Entries,
}

impl<'a> Syntax<'a> for Multi {
    const KIND: &'static Kind = &KIND;
    const ARGS: usize = 0;
    const OPTIONS: &'static [Opt] = &[Opt::Limit, Opt::Align];
    type Args = ();

    fn parse_args(_: &[&'a [u8]]) -> Result<()> {
        Ok(())
    }

    fn build((): (), opts: &Options<'a>) -> Result<Multi> {
        Multi::new(&opts.limits, opts.align)
    }
}

impl Limiter for Multi {
    type State = State;
    type Pending = Pending;

    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()> {
        if mode != Mode::Take {
            return Ok(());
        }
        let limits: SmallVec<[Limit; 4]> = self.limits().collect();
        windows::check_cost(&limits, cost)
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
        // The windows are distinct: from distinct LIMITs and stored entries.
        windows::write_windows(stored, updated, names, (outcome, now, cost), State::of)
    }
}

impl windows::WindowEntry for Entry {
    fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// A counter counts until its window ends.
    fn ends_at(&self) -> Option<Micros> {
        Some(self.ends_at.as_micros())
    }
}

impl Written for State {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

/// The counter of one window in a key's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub window_ms: u64,
    pub count: i64,
    /// The absolute end of the window.
    pub ends_at: UnixMillis,
}

/// The entries of one key, on the heap (moves stay cheap: a state of any limiter is
/// moved as the largest one).
pub type Entries = Vec<Entry>;

/// A key's state: its entries, sorted by window, one per window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    entries: Entries,
}

impl State {
    /// Build a state from entries in any order; `None` when a window repeats.
    pub fn new(entries: impl IntoIterator<Item = Entry>) -> Option<State> {
        State::of(entries.into_iter().collect())
    }

    /// [`State::new`] of a list already made.
    pub fn of(mut entries: Entries) -> Option<State> {
        entries.sort_unstable_by_key(|e| e.window_ms);
        if entries.windows(2).any(|w| w[0].window_ms == w[1].window_ms) {
            return None;
        }
        Some(State { entries })
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn get(&self, window_ms: u64) -> Option<&Entry> {
        self.entries
            .binary_search_by_key(&window_ms, |e| e.window_ms)
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// Read a stored value: `window_ms:count:end_ms` entries separated by commas (at
    /// least one), each number 1 to 19 decimal digits; window_ms from 1 to 10 years,
    /// count a non-negative i64, end_ms at most [`MAX_END_MS`]; no window twice.
    pub fn parse(raw: &[u8]) -> Option<State> {
        if raw.is_empty() {
            return None;
        }
        let items = 1 + raw.iter().filter(|&&b| b == b',').count();
        let mut entries = Entries::with_capacity(items);
        for item in raw.split(|&b| b == b',') {
            let mut parts = item.split(|&b| b == b':');
            let (Some(w), Some(c), Some(e), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return None;
            };
            let window_ms = parse_decimal(w)?;
            if window_ms == 0 || window_ms > MAX_DURATION.floor_millis() {
                return None;
            }
            let count = fixed::parse_count(c)?;
            let end = parse_decimal(e)?;
            if end > MAX_END_MS {
                return None;
            }
            entries.push(Entry {
                window_ms,
                count,
                ends_at: UnixMillis(end),
            });
        }
        State::of(entries)
    }

    /// The stored value (the format [`State::parse`] reads).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 28);
        Encode::encode(self, &mut out);
        out
    }
}

/// `window_ms:count:end_ms` entries separated by commas, in window order.
impl Encode for State {
    fn encode(&self, out: &mut Vec<u8>) {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_decimal(out, e.window_ms);
            out.push(b':');
            e.count.encode(out);
            out.push(b':');
            push_decimal(out, e.ends_at.0);
        }
    }
}

/// Read a stored value (see [`State::parse`]); the glue names the key in the error
/// ([`Error::for_key`]).
pub fn parse_state(raw: &[u8]) -> Result<State> {
    State::parse(raw).ok_or_else(|| STATE.invalid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiters::windows::key_positions;
    use crate::limiters::windows::testing::{decide, KeyFull};
    use crate::limits::MAX_WINDOWS_PER_KEY;
    use crate::parse::args::MAX_SAFE_COUNT;

    const MAX: i64 = MAX_SAFE_COUNT;

    const T0: u64 = 1_700_000_000_000; // ms, on a second boundary (20 s past a minute)

    fn parse(args: &[&str]) -> Result<Call<Multi>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        super::parse(&raw)
    }

    fn lim(window_ms: u64, limit: i64) -> Limit {
        Limit {
            window: Micros::from_millis(window_ms),
            limit,
        }
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse(&[
                "2",
                "ip:1",
                "user:1",
                "LIMIT",
                "1",
                "10",
                "limit",
                "1m",
                "120",
                "COST",
                "2",
                "LIMIT",
                "1h",
                "240",
                "align",
                "AT",
                "1000000000005"
            ]),
            call(
                2,
                &[lim(1_000, 10), lim(60_000, 120), lim(3_600_000, 240)],
                2,
                true,
                Some(Micros::from_millis(1_000_000_000_005))
            )
        );
        assert_eq!(
            parse(&["1", "k", "LIMIT", "1500ms", "3"]),
            call(1, &[lim(1_500, 3)], 1, false, None)
        );
        // A key may be spelled like a keyword: keys are positional.
        assert_eq!(
            parse(&["2", "LIMIT", "COST", "LIMIT", "1", "1"]).map(|r| r.numkeys),
            Ok(2)
        );
        let many_keys: Vec<String> = std::iter::once("64".to_string())
            .chain((0..64).map(|i| format!("k{i}")))
            .chain(["LIMIT", "1s", "1"].map(String::from))
            .collect();
        let many_keys: Vec<&str> = many_keys.iter().map(String::as_str).collect();
        assert_eq!(parse(&many_keys).map(|r| r.numkeys), Ok(64));
        let mut many_windows = vec!["1".to_string(), "k".to_string()];
        for w in 1..=16 {
            many_windows.extend(["LIMIT".to_string(), format!("{w}s"), "5".to_string()]);
        }
        let many_windows: Vec<&str> = many_windows.iter().map(String::as_str).collect();
        assert_eq!(
            parse(&many_windows).map(|r| r.rules[0].1.limits().count()),
            Ok(16)
        );
    }

    #[test]
    fn argument_errors() {
        use Error::*;
        let numkeys = |v: &str| InvalidNumKeys {
            value: v.as_bytes().to_vec(),
        };
        let mut k65 = vec!["65".to_string()];
        k65.extend((0..65).map(|i| format!("k{i}")));
        k65.extend(["LIMIT", "1s", "1"].map(String::from));
        let k65: Vec<&str> = k65.iter().map(String::as_str).collect();
        let mut w17 = vec!["1".to_string(), "k".to_string()];
        for w in 1..=17 {
            w17.extend(["LIMIT".to_string(), format!("{w}s"), "5".to_string()]);
        }
        let w17: Vec<&str> = w17.iter().map(String::as_str).collect();
        let cases: Vec<(&[&str], Error)> = vec![
            (
                &["1", "k", "LIMIT", "1s"],
                WrongArity {
                    command: "RL.MULTI",
                },
            ),
            (&["0", "k", "LIMIT", "1s", "1"], numkeys("0")),
            (&["-1", "k", "LIMIT", "1s", "1"], numkeys("-1")),
            (&["x", "k", "LIMIT", "1s", "1"], numkeys("x")),
            (&["1.0", "k", "LIMIT", "1s", "1"], numkeys("1.0")),
            (
                &["99999999999999999999", "k", "LIMIT", "1s", "1"],
                numkeys("99999999999999999999"),
            ),
            (&k65, numkeys("65")),
            (
                &["6", "a", "b", "c", "d", "e"],
                NumKeysOverArgs {
                    value: b"6".to_vec(),
                    available: 5,
                },
            ),
            (
                &["2", "a", "a", "LIMIT", "1s", "1"],
                DuplicateKey { key: b"a".to_vec() },
            ),
            (&["4", "a", "b", "c", "d"], MissingLimit),
            (
                &["1", "a", "COST", "1", "AT", "1000000000005"],
                MissingLimit,
            ),
            (
                &["1", "a", "LIMIT", "1s", "1", "LIMIT", "2s"],
                IncompleteLimit,
            ),
            (&["2", "a", "b", "LIMIT", "1s"], IncompleteLimit),
            (
                &["1", "a", "LIMIT", "1m", "5", "LIMIT", "60s", "6"],
                DuplicateWindow {
                    value: b"60s".to_vec(),
                    ms: 60_000,
                },
            ),
            (
                &["1", "a", "LIMIT", "1000ms", "5", "LIMIT", "1", "6"],
                DuplicateWindow {
                    value: b"1".to_vec(),
                    ms: 1_000,
                },
            ),
            (&w17, TooManyWindows),
            (
                &[
                    "1", "a", "LIMIT", "1s", "10", "LIMIT", "1m", "3", "COST", "4",
                ],
                CostOverCapacity {
                    cost: 4,
                    capacity: 3,
                    what: "limit",
                },
            ),
            (
                &["1", "a", "LIMIT", "0s", "10"],
                InvalidDuration {
                    what: "window",
                    value: b"0s".to_vec(),
                    reason: crate::error::DurationProblem::NotPositive,
                },
            ),
            (
                &["1", "a", "LIMIT", "1s", "0"],
                InvalidInteger {
                    what: "limit",
                    value: b"0".to_vec(),
                    min: 1,
                },
            ),
            // The limit of a LIMIT is never read as the next keyword.
            (
                &["1", "a", "LIMIT", "1s", "COST", "5"],
                InvalidInteger {
                    what: "limit",
                    value: b"COST".to_vec(),
                    min: 1,
                },
            ),
            (
                &["1", "a", "LIMIT", "1s", "5", "LIMITS"],
                UnknownOption {
                    value: b"LIMITS".to_vec(),
                    accepted: Opt::set(&[
                        Opt::Cost,
                        Opt::At,
                        Opt::Limit,
                        Opt::Align,
                        Opt::Refund,
                        Opt::Force,
                        Opt::UpTo,
                    ]),
                },
            ),
            (
                &["1", "a", "LIMIT", "1s", "5", "COST", "1", "cost", "1"],
                RepeatedOption { name: "COST" },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args), Err(want), "{args:?}");
        }
    }

    #[test]
    fn key_positions_follow_numkeys() {
        let pos = |args: &[&str]| {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            key_positions(&raw)
        };
        assert_eq!(pos(&["2", "a", "b", "LIMIT", "1s", "1"]), Some(1..=2));
        assert_eq!(pos(&["1", "a"]), Some(1..=1));
        for bad in [
            &["0", "a"][..],
            &["-1", "a"],
            &["x", "a"],
            &["2", "a"],
            &["65", "a"],
            &[],
        ] {
            assert_eq!(pos(bad), None, "{bad:?}");
        }
    }

    fn entry(window_ms: u64, count: i64, end_after_t0: u64) -> Entry {
        Entry {
            window_ms,
            count,
            ends_at: UnixMillis(T0 + end_after_t0),
        }
    }

    #[test]
    fn state_format() {
        let s = State::parse(b"60000:7:1700000060000,1000:3:1700000001000").unwrap();
        assert_eq!(
            s.entries(),
            [entry(1_000, 3, 1_000), entry(60_000, 7, 60_000)]
        );
        assert_eq!(
            s.encode(),
            b"1000:3:1700000001000,60000:7:1700000060000".to_vec()
        );
        assert_eq!(State::parse(&s.encode()), Some(s));
        assert!(State::parse(b"1:0:0").is_some());
        assert!(State::parse(b"315360000000:9007199254740991:4417804800000").is_some());
        // An end later than the latest AT plus the longest window was not written by a
        // limiter: the year ~287 000, or one millisecond past the bound.
        assert!(State::parse(b"60000:1:9007199254740991").is_none());
        assert!(State::parse(b"60000:1:4417804800001").is_none());
        // A count above 2^53 - 1 was never written by a limiter (nor read by a twin).
        assert!(State::parse(b"1000:9007199254740992:0").is_none());
        assert!(State::parse(b"0001:007:0").is_some());
        for bad in [
            &b""[..],
            b"5",
            b"abc",
            b",",
            b"1000:1:5,",
            b",1000:1:5",
            b"1000:1",
            b"1000:1:5:6",
            b"1000::5",
            b"0:1:5",
            b"-1000:1:5",
            b"1000:-1:5",
            b"1000:1:-5",
            b"1000:+1:5",
            b"315360000001:1:5",
            b"1000:9223372036854775808:5",
            b"1000:1:9007199254740992",
            b"1000:1:99999999999999999999",
            b"1000:1:5,1000:2:6",
            b"1000:1:5 ",
            b"1000:1:5\n",
            b"1000:1:5;2000:1:5",
            b"1e3:1:5",
        ] {
            assert_eq!(
                State::parse(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    fn stored(entries: &[Entry], expires: Option<u64>) -> Option<Stored<State>> {
        Some(Stored {
            state: State::new(entries.to_vec()).unwrap(),
            expires_at: expires.map(|e| UnixMillis(T0 + e)),
        })
    }

    fn req(numkeys: usize, limits: &[(u64, i64)], cost: i64, align: bool) -> Call<Multi> {
        let limits: Vec<Limit> = limits.iter().map(|&(w, l)| lim(w, l)).collect();
        call(numkeys, &limits, cost, align, None).unwrap()
    }

    fn at(ms: u64) -> Micros {
        Micros::from_millis(T0 + ms)
    }

    fn set(entries: &[Entry]) -> Effect<State> {
        let expires_at = entries.iter().map(|e| e.ends_at).max().unwrap();
        Effect::Set {
            state: State::new(entries.to_vec()).unwrap(),
            expires_at,
        }
    }

    const ARTICLE: &[(u64, i64)] = &[(1_000, 10), (60_000, 120), (3_600_000, 240)];

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            stored: Vec<Option<Stored<State>>>,
            now: Micros,
            req: Call<Multi>,
            fields: [i64; 5],
            binding: (usize, u64),
            effects: Vec<Effect<State>>,
        }
        let cases = vec![
            Case {
                name: "first request opens every window of every key",
                stored: vec![None, None],
                now: at(0),
                req: req(2, ARTICLE, 1, false),
                fields: [0, 10, 9, -1, 1_000],
                binding: (0, 1_000),
                effects: vec![
                    set(&[
                        entry(1_000, 1, 1_000),
                        entry(60_000, 1, 60_000),
                        entry(3_600_000, 1, 3_600_000),
                    ]);
                    2
                ],
            },
            Case {
                name: "allowed: the pair with the least remaining binds",
                stored: vec![
                    stored(
                        &[entry(1_000, 2, 500), entry(60_000, 100, 30_000)],
                        Some(30_000),
                    ),
                    stored(&[entry(60_000, 115, 40_000)], Some(40_000)),
                ],
                now: at(100),
                req: req(2, ARTICLE, 1, false),
                fields: [0, 120, 4, -1, 39_900],
                binding: (1, 60_000),
                effects: vec![
                    set(&[
                        entry(1_000, 3, 500),
                        entry(60_000, 101, 30_000),
                        entry(3_600_000, 1, 3_600_100),
                    ]),
                    set(&[
                        entry(1_000, 1, 1_100),
                        entry(60_000, 116, 40_000),
                        entry(3_600_000, 1, 3_600_100),
                    ]),
                ],
            },
            Case {
                name: "allowed: ties go to the first key, then the first LIMIT",
                stored: vec![None, None],
                now: at(0),
                req: req(2, &[(60_000, 5), (1_000, 5)], 2, false),
                fields: [0, 5, 3, -1, 60_000],
                binding: (0, 60_000),
                effects: vec![set(&[entry(1_000, 2, 1_000), entry(60_000, 2, 60_000)]); 2],
            },
            Case {
                name: "denied: one full pair denies the whole request and nothing changes",
                stored: vec![
                    stored(&[entry(1_000, 3, 800)], Some(800)),
                    stored(&[entry(1_000, 10, 600)], Some(600)),
                ],
                now: at(100),
                req: req(2, ARTICLE, 1, false),
                fields: [1, 10, 0, 500, 500],
                binding: (1, 1_000),
                effects: vec![Effect::None, Effect::None],
            },
            Case {
                name: "denied: the denying pair that frees up last binds",
                stored: vec![
                    stored(
                        &[entry(1_000, 10, 600), entry(60_000, 120, 20_000)],
                        Some(20_000),
                    ),
                    stored(&[entry(3_600_000, 240, 50_000)], Some(50_000)),
                ],
                now: at(100),
                req: req(2, ARTICLE, 1, false),
                fields: [1, 240, 0, 49_900, 49_900],
                binding: (1, 3_600_000),
                effects: vec![Effect::None, Effect::None],
            },
            Case {
                name: "denied: ties in retry_after go to the first key",
                stored: vec![
                    stored(&[entry(1_000, 10, 600)], Some(600)),
                    stored(&[entry(1_000, 10, 600)], Some(600)),
                ],
                now: at(100),
                req: req(2, ARTICLE, 1, false),
                fields: [1, 10, 0, 500, 500],
                binding: (0, 1_000),
                effects: vec![Effect::None, Effect::None],
            },
            Case {
                name: "a cost that fits one pair but not another is denied by that one",
                stored: vec![stored(&[entry(60_000, 117, 30_000)], Some(30_000))],
                now: at(0),
                req: req(1, ARTICLE, 4, false),
                fields: [1, 120, 3, 30_000, 30_000],
                binding: (0, 60_000),
                effects: vec![Effect::None],
            },
            Case {
                name: "windows not named are kept; ended ones are dropped",
                stored: vec![stored(
                    &[
                        entry(500, 4, 50),
                        entry(2_000, 1, 1_500),
                        entry(5_000, 9, 4_000),
                    ],
                    Some(4_000),
                )],
                now: at(100),
                req: req(1, &[(1_000, 10)], 1, false),
                fields: [0, 10, 9, -1, 1_000],
                binding: (0, 1_000),
                effects: vec![set(&[
                    entry(1_000, 1, 1_100),
                    entry(2_000, 1, 1_500),
                    entry(5_000, 9, 4_000),
                ])],
            },
            Case {
                name: "an ended named window starts again",
                stored: vec![stored(&[entry(1_000, 10, 1_000)], Some(1_000))],
                now: at(1_000),
                req: req(1, &[(1_000, 10)], 1, false),
                fields: [0, 10, 9, -1, 1_000],
                binding: (0, 1_000),
                effects: vec![set(&[entry(1_000, 1, 2_000)])],
            },
            Case {
                name: "aligned windows end on multiples of the window",
                stored: vec![None],
                now: at(15_250),
                req: req(1, &[(1_000, 10), (60_000, 100)], 1, true),
                fields: [0, 10, 9, -1, 750],
                binding: (0, 1_000),
                effects: vec![set(&[entry(1_000, 1, 16_000), entry(60_000, 1, 40_000)])],
            },
            Case {
                name: "peek: nothing written, reply as for a real request",
                stored: vec![None, stored(&[entry(1_000, 4, 500)], Some(500))],
                now: at(0),
                req: req(2, ARTICLE, 0, false),
                fields: [0, 10, 6, -1, 500],
                binding: (1, 1_000),
                effects: vec![Effect::None, Effect::None],
            },
            Case {
                name: "peek on empty keys: full capacity, nothing to reset",
                stored: vec![None],
                now: at(0),
                req: req(1, ARTICLE, 0, false),
                fields: [0, 10, 10, -1, 0],
                binding: (0, 1_000),
                effects: vec![Effect::None],
            },
            Case {
                name: "peek on a full window is allowed",
                stored: vec![stored(&[entry(1_000, 10, 500)], Some(500))],
                now: at(0),
                req: req(1, ARTICLE, 0, false),
                fields: [0, 10, 0, -1, 500],
                binding: (0, 1_000),
                effects: vec![Effect::None],
            },
            Case {
                name: "a count above a (lowered) limit denies even a peek",
                stored: vec![stored(&[entry(1_000, 12, 500)], Some(500))],
                now: at(0),
                req: req(1, ARTICLE, 0, false),
                fields: [1, 10, 0, 500, 500],
                binding: (0, 1_000),
                effects: vec![Effect::None],
            },
            Case {
                name: "denied: a key without TTL gets it back at its latest live end",
                stored: vec![stored(
                    &[
                        entry(1_000, 10, 600),
                        entry(60_000, 3, 20_000),
                        entry(500, 1, 50),
                    ],
                    None,
                )],
                now: at(100),
                req: req(1, &[(1_000, 10)], 1, false),
                fields: [1, 10, 0, 500, 500],
                binding: (0, 1_000),
                effects: vec![Effect::ExpireAt(UnixMillis(T0 + 20_000))],
            },
            Case {
                name: "a peek never repairs a TTL, even when denied",
                stored: vec![stored(&[entry(1_000, 12, 600)], None)],
                now: at(100),
                req: req(1, &[(1_000, 10)], 0, false),
                fields: [1, 10, 0, 500, 500],
                binding: (0, 1_000),
                effects: vec![Effect::None],
            },
            Case {
                name: "huge limits do not overflow",
                stored: vec![stored(&[entry(1_000, MAX - 1, 10)], Some(10))],
                now: at(0),
                req: req(1, &[(1_000, MAX)], MAX, false),
                fields: [1, MAX, 1, 10, 10],
                binding: (0, 1_000),
                effects: vec![Effect::None],
            },
        ];
        for c in cases {
            let out = decide(&c.stored, c.now, &c.req).unwrap();
            assert_eq!(out.verdict.fields(), c.fields, "{}", c.name);
            assert_eq!(
                (out.binding.key, out.binding.window_ms),
                c.binding,
                "{}",
                c.name
            );
            assert_eq!(out.effects.to_vec(), c.effects, "{}", c.name);
        }
    }

    #[test]
    fn a_mismatched_key_count_decides_without_panicking() {
        // The glue always reads every key; keys a caller does not pass are missing, and
        // nothing panics.
        let out = decide::<_, State>(&[None], at(0), &req(2, ARTICLE, 1, false)).unwrap();
        let full = decide::<_, State>(&[None, None], at(0), &req(2, ARTICLE, 1, false)).unwrap();
        assert_eq!(out, full);
        assert_eq!(out.effects.len(), 2);
    }

    #[test]
    fn a_key_keeps_at_most_max_windows_per_key() {
        // 30 live windows left by other calls, two more named: 32 is the most.
        let others: Vec<Entry> = (1..=30).map(|i| entry(100_000 + i, 1, 50_000)).collect();
        let two = req(1, &[(1_000, 5), (2_000, 5)], 1, false);
        let out = decide(&[stored(&others, Some(50_000))], at(0), &two).unwrap();
        let Effect::Set { state, .. } = &out.effects[0] else {
            panic!("allowed requests write")
        };
        assert_eq!(state.entries().len(), MAX_WINDOWS_PER_KEY);
        // One more window would make 33: refused, nothing written, the key named.
        let three = req(2, &[(1_000, 5), (2_000, 5), (3_000, 5)], 1, false);
        assert_eq!(
            decide(&[None, stored(&others, Some(50_000))], at(0), &three),
            Err(KeyFull { key: 1 })
        );
        // Ended windows do not count; a peek or a denial writes nothing and is answered.
        assert!(decide(&[stored(&others, Some(50_000))], at(50_000), &three).is_ok());
        let peek = req(1, &[(1_000, 5), (2_000, 5), (3_000, 5)], 0, false);
        assert!(decide(&[stored(&others, Some(50_000))], at(0), &peek).is_ok());
    }

    /// Apply effects to simulated keys, as the glue does.
    fn apply(keys: &mut [Option<Stored<State>>], idx: &[usize], effects: &[Effect<State>]) {
        for (&k, e) in idx.iter().zip(effects) {
            match e {
                Effect::None => {}
                Effect::Delete => keys[k] = None,
                Effect::Set { state, expires_at } => {
                    keys[k] = Some(Stored {
                        state: state.clone(),
                        expires_at: Some(*expires_at),
                    })
                }
                Effect::ExpireAt(t) => {
                    if let Some(s) = keys[k].as_mut() {
                        s.expires_at = Some(*t)
                    }
                }
            }
        }
    }

    use proptest::prelude::*;

    const WINDOWS: [u64; 4] = [250, 1_000, 1_500, 60_000];

    proptest! {
        #[test]
        fn state_round_trips(
            entries in proptest::collection::btree_map(
                1u64..=315_360_000_000,
                (0i64..=MAX, 0u64..=MAX_END_MS),
                1..20,
            )
        ) {
            let entries: Vec<Entry> = entries
                .into_iter()
                .map(|(w, (c, e))| Entry { window_ms: w, count: c, ends_at: UnixMillis(e) })
                .collect();
            let state = State::new(entries).unwrap();
            prop_assert_eq!(State::parse(&state.encode()), Some(state));
        }

        /// Never more than a window's limit allowed in any instance of any (key, window)
        /// pair; all or nothing (a denial changes no key, an allowed request writes every
        /// key with every named window); waiting retry_after makes a denied request fit;
        /// written state holds no ended window and expires at its latest end.
        #[test]
        fn invariants(
            limits in proptest::collection::vec(1i64..12, 4),
            steps in proptest::collection::vec(
                (0u64..2_000_000, 1u8..8, 1u8..16, 0i64..12, any::<bool>(), any::<bool>()),
                1..150,
            ),
        ) {
            let mut keys: Vec<Option<Stored<State>>> = vec![None, None, None];
            let mut now = Micros::from_millis(T0) .saturating_add(Micros(77));
            // (key, window_ms, end) -> cost allowed in that window instance
            let mut used: std::collections::HashMap<(usize, u64, UnixMillis), i64> =
                Default::default();
            for (dt, key_mask, window_mask, cost, align, reverse) in steps {
                now = now.saturating_add(Micros(dt));
                let mut idx: Vec<usize> = (0..3).filter(|k| key_mask & (1 << k) != 0).collect();
                if reverse {
                    idx.reverse();
                }
                let mut ws: Vec<usize> = (0..4).filter(|w| window_mask & (1 << w) != 0).collect();
                if reverse {
                    ws.rotate_left(1);
                }
                let smallest = ws.iter().map(|&w| limits[w]).min().unwrap();
                let r_limits: Vec<Limit> = ws.iter().map(|&w| lim(WINDOWS[w], limits[w])).collect();
                let r = call(idx.len(), &r_limits, cost.min(smallest), align, None).unwrap();
                let view: Vec<Option<Stored<State>>> = idx.iter().map(|&k| keys[k].clone()).collect();
                let out = decide(&view, now, &r).unwrap();
                let [limited, limit, remaining, retry, _reset] = out.verdict.fields();
                prop_assert!(out.binding.key < idx.len());
                let bound = r.rules[0].1.limits().find(|l| l.window.floor_millis() == out.binding.window_ms);
                prop_assert_eq!(bound.map(|l| l.limit), Some(limit));
                prop_assert!((0..=limit).contains(&remaining));
                prop_assert_eq!(limited == 1, retry > 0);
                prop_assert_eq!(out.effects.len(), idx.len());
                if limited == 1 {
                    prop_assert!(out.effects.iter().all(|e| *e == Effect::None));
                    let later = now.saturating_add(Micros::from_millis(retry as u64));
                    let again = decide(&view, later, &r).unwrap();
                    prop_assert!(again.verdict.is_allowed());
                    continue;
                }
                if r.cost == 0 {
                    prop_assert!(out.effects.iter().all(|e| *e == Effect::None));
                    continue;
                }
                for (i, e) in out.effects.iter().enumerate() {
                    let Effect::Set { state, expires_at: ends_at } = e else {
                        return Err(TestCaseError::fail("an allowed request skipped a key"));
                    };
                    prop_assert_eq!(Some(*ends_at), state.entries().iter().map(|e| e.ends_at).max());
                    for entry in state.entries() {
                        prop_assert!(entry.ends_at.as_micros() > now, "an ended window was kept");
                    }
                    for l in r.rules[0].1.limits() {
                        let w = l.window.floor_millis();
                        let entry = state.get(w);
                        prop_assert!(entry.is_some(), "a named window is missing");
                        if let Some(entry) = entry {
                            let total = used.entry((idx[i], w, entry.ends_at)).or_insert(0);
                            *total += r.cost;
                            prop_assert_eq!(*total, entry.count);
                            prop_assert!(*total <= l.limit);
                        }
                    }
                }
                apply(&mut keys, &idx, &out.effects);
            }
        }
    }
}

//! The one interface every limiter implements. It knows time, cost and state, and
//! names no limiter: a limiter is a checked rule (RL.FIXED's limit and window, RL.GCRA's
//! rate, ...) that judges what one key holds at a time for a cost ([`Limiter::judge`]):
//! a [`Verdict`] with the five reply fields, and what it keeps to write the key once the
//! whole call is settled ([`Limiter::write`]). The loop of a call (judge every key,
//! decide all or nothing, write) is [`crate::call::Call::settle`], once for every call.
//!
//! Nothing here reads a clock or talks to a server: the glue opens each key as its
//! rule's [`Storage`] says, hands its content over as a [`KeyRead`], and carries out
//! the [`Effect`]s.

use crate::call::state::{Effect, Encode, StateKind, Stored};
use crate::call::verdict::Verdict;
use crate::parse::args::Options;
use crate::parse::error::{Error, Result};
use crate::parse::keyword::Opt;
use crate::units::{Micros, UnixMillis};

/// The type of key a limiter keeps its state in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A plain string with an absolute expiry (counters, TATs, packed windows).
    String,
    /// A sorted set (members scored by time), read through [`SortedSet`].
    SortedSet,
}

/// Which members of a sorted set a walk visits, and in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// Those with a score above this, lowest score first.
    After(Micros),
    /// Those with a score at or below this, highest score first.
    Through(Micros),
    /// All of them, lowest score first.
    All,
    /// All of them, highest score first.
    Down,
}

/// A sorted-set key as a limiter reads it: its size, and walks over its members in
/// score order (each member's bytes and score, while the visitor asks for more).
pub trait SortedSet {
    /// How many members the set holds.
    fn len(&self) -> usize;
    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Visit the members `walk` names, in its order, while `f` answers `Ok(true)`; an
    /// error from `f` ends the walk and is returned.
    fn walk(&self, walk: Walk, f: &mut dyn FnMut(&[u8], f64) -> Result<bool>) -> Result<()>;
    /// The score of `member`, if the set holds it.
    fn score(&self, member: &[u8]) -> Result<Option<f64>>;
    /// How many members have a score at or below `through` (`ZCOUNT key -inf
    /// through`), without reading them: O(log n).
    fn count_through(&self, through: Micros) -> Result<usize>;
}

/// What a key holds, as a limiter reads it.
#[derive(Clone, Copy)]
pub enum KeyRead<'a> {
    /// The key does not exist.
    Missing,
    /// A string key: its value and its absolute expiry (`None`: no TTL).
    String {
        value: &'a [u8],
        expires_at: Option<UnixMillis>,
    },
    /// A sorted-set key.
    SortedSet(&'a dyn SortedSet),
}

impl<'a> KeyRead<'a> {
    /// The decoded state of a string limiter (`None`: no key); the invalid-state error
    /// `parse` gives for a value that is not its state.
    pub fn string_state<S>(
        self,
        parse: impl FnOnce(&[u8]) -> Result<S>,
    ) -> Result<Option<Stored<S>>> {
        match self {
            KeyRead::Missing => Ok(None),
            KeyRead::String { value, expires_at } => Ok(Some(Stored {
                state: parse(value)?,
                expires_at,
            })),
            KeyRead::SortedSet(_) => Err(Error::WrongType),
        }
    }

    /// The sorted set of a limiter that keeps one (`None`: no key).
    pub fn sorted_set(self) -> Result<Option<&'a dyn SortedSet>> {
        match self {
            KeyRead::Missing => Ok(None),
            KeyRead::SortedSet(set) => Ok(Some(set)),
            KeyRead::String { .. } => Err(Error::WrongType),
        }
    }
}

/// A limiter's verdict on one key, and what it keeps to write that key once the call
/// is settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement<P> {
    pub verdict: Verdict,
    /// The window (ms) whose numbers the verdict carries: the limiter's window, or for
    /// a limiter of several windows its binding window on this key.
    pub window_ms: u64,
    /// A sixth reply field of the limiter's own, when its command gives one (a
    /// booking's delay).
    pub extra: Option<i64>,
    pub pending: P,
}

/// A write that would leave the key with more windows than a key may keep: the call
/// is refused and nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// What a key gets when the call is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Every rule allowed: the request is recorded.
    Allowed,
    /// Some rule denied: nothing is consumed; a single command repairs a lost TTL.
    Denied,
}

/// How a request settles: taken as it fits (the usual), or, after the fact, given back
/// (`REFUND`) or recorded whether it fits or not (`FORCE`). Each limiter implements each
/// mode in its own file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Allowed iff it fits; then recorded.
    #[default]
    Take,
    /// Give back `cost` that allowed requests took; always allowed.
    Refund,
    /// Record `cost` whether it fits or not.
    Force,
}

impl Mode {
    /// How a call's request settles, from its `REFUND` and `FORCE`: at most one of
    /// them, and neither with `DELAY` (a settled request is not booked); a call of
    /// `COST 0` peeks whatever its flag.
    pub fn of(opts: &Options<'_>) -> Result<Mode> {
        let mode = match (opts.refund, opts.force) {
            (true, true) => return Err(Error::RefundAndForce),
            (true, false) => Mode::Refund,
            (false, true) => Mode::Force,
            (false, false) => Mode::Take,
        };
        match (mode, opts.delay) {
            (Mode::Refund, Some(_)) => Err(Error::SettleWithDelay { flag: "REFUND" }),
            (Mode::Force, Some(_)) => Err(Error::SettleWithDelay { flag: "FORCE" }),
            // `COST 0` with either flag is the peek `COST 0` is without it.
            _ if opts.cost == 0 => Ok(Mode::Take),
            _ => Ok(mode),
        }
    }
}

/// What every rule of a call judges: the call's time, its cost and how it settles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub now: Micros,
    pub cost: i64,
    pub mode: Mode,
    /// A name the glue made for the call, when a rule asks for one
    /// ([`Limiter::wants_token`]): random hex digits, one for the whole call.
    pub token: Option<Token>,
}

/// How many characters a [`Token`] has: 20 hex digits, 80 random bits.
pub const TOKEN_LEN: usize = 20;

/// A name made for a call by the glue (random hex digits from the server), for a rule
/// that records a name when the call gives none; the same for every rule of the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token(pub [u8; TOKEN_LEN]);

/// A reply field of a rule's own after the fixed fields, where its command gives one
/// whatever the binding rule: a name it recorded, or nil.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// A null reply: nothing recorded (a denial, a peek).
    Nil,
    /// A bulk string.
    Bulk(smallvec::SmallVec<[u8; 24]>),
}

impl Request {
    /// A request taken as it fits, the usual.
    pub fn take(now: Micros, cost: i64) -> Request {
        Request {
            now,
            cost,
            mode: Mode::Take,
            token: None,
        }
    }
}

/// One rate-limiting algorithm, as a checked rule on one key; also a rule of any kind
/// (RL.ALL's), which passes each call to the rule of its kind.
pub trait Limiter {
    /// What an [`Effect::Set`] stores.
    type State: Written;
    /// What a judgement keeps for [`Limiter::write`].
    type Pending;

    /// Its name as an RL.ALL rule (`FIXED`).
    fn kind(&self) -> &'static str;
    /// How errors name its state (with its command, `RL.FIXED`).
    fn state_kind(&self) -> StateKind;
    /// The type of key it keeps.
    fn storage(&self) -> Storage;

    /// A cost the rule can never settle in `mode`: an error, not a denial (a cost
    /// above the capacity can never be taken; a refund or a forced request of any
    /// cost can be settled, unless the rule's costs are fixed, as a lease's 0 or 1).
    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()>;

    /// Judge the key's content for the request (its time, its cost, checked by
    /// `check_cost`, and how it settles). Errors: the key's content is not this
    /// limiter's state, or holds another type.
    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Self::Pending>>;

    /// The write of a judgement once the call is settled.
    fn write(
        &self,
        pending: Self::Pending,
        settled: Settled,
        req: &Request,
    ) -> std::result::Result<Effect<Self::State>, Full>;

    /// Whether the rule needs a [`Token`] in the request (a name to record when the call
    /// gives none).
    fn wants_token(&self) -> bool {
        false
    }

    /// A reply field of its own, after the call's fixed fields, from its judgement
    /// once the call is settled (`None`: it adds none); `pending` is `None` when the
    /// rule was not judged (a gate ended the call first).
    fn reply_field(&self, _pending: Option<&Self::Pending>, _settled: Settled) -> Option<Field> {
        None
    }

    /// Whether the rule is judged before the others and, when it denies, ends the call
    /// there: the other keys are neither read nor written (RL.ALL's BAN rule while a
    /// ban runs). Such a rule binds an allowed call only when it is the call's only
    /// rule.
    fn gates(&self) -> bool {
        false
    }

    /// What the rule does in a call of several rules (RL.ALL) that another rule denied,
    /// where nothing else is written: by default nothing; a penalty box records a
    /// strike (its write) and binds the call when that strike starts a ban.
    fn penalty(&self, _pending: Self::Pending, _req: &Request) -> Option<Penalty<Self::State>> {
        None
    }
}

/// A rule's part in a call another rule denied ([`Limiter::penalty`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Penalty<S> {
    pub effect: Effect<S>,
    /// The verdict the call then replies with, this rule binding (a ban starts).
    pub binds: Option<Verdict>,
}

impl<S> Penalty<S> {
    pub fn map<T>(self, f: impl FnOnce(S) -> T) -> Penalty<T> {
        Penalty {
            effect: self.effect.map(f),
            binds: self.binds,
        }
    }
}

/// How a limiter's rule is written in a call: the positional arguments after its key
/// (or, in RL.ALL, after its key's position) and the options of its own. `COST` and
/// `AT` belong to the call; they are never a rule's.
pub trait Syntax<'a>: Sized {
    /// Its name as an RL.ALL rule (`FIXED`).
    const KIND: &'static str;
    /// How errors name its state and its command.
    const STATE: StateKind;
    /// How many positional arguments follow the key.
    const ARGS: usize;
    /// Its own options (`ALIGN`, `BUCKETS`, `META`, `LIMIT`...).
    const OPTIONS: &'static [Opt];
    /// Options its command takes that RL.ALL does not (`DELAY`).
    const COMMAND_OPTIONS: &'static [Opt] = &[];
    /// Options of the whole call it takes in RL.ALL, after the rules (`ID`).
    const CALL_OPTIONS: &'static [Opt] = &[];
    /// The positional arguments, read in order.
    type Args;
    fn parse_args(args: &[&'a [u8]]) -> Result<Self::Args>;
    /// The checked rule from its arguments and options. `opts.cost` is the call's
    /// cost, for checks that come before the rule's other checks (RL.GCRA's `DELAY`).
    fn build(args: Self::Args, opts: &Options<'a>) -> Result<Self>;
    /// In RL.ALL, take the call's options of [`Syntax::CALL_OPTIONS`] (read after every
    /// rule).
    fn call_options(&mut self, _opts: &Options<'a>) -> Result<()> {
        Ok(())
    }
}

/// What a write stores: a string's value, or a change to a sorted set.
pub enum Value<'a> {
    String(&'a dyn Encode),
    SortedSet(SetWrite<'a>),
}

/// A change to a sorted set, in this order: a member added (or its score updated),
/// members removed by name (`ZREM`, never the one added), and the members scored at or
/// below a time removed, lowest score first (then in the set's order), at most
/// [`MAX_LOG_TRIM`](crate::limits::MAX_LOG_TRIM) of them: `ZREM key member...` of the
/// first of `ZRANGEBYSCORE key -inf through LIMIT 0 MAX_LOG_TRIM`; and every member
/// scored at or below a time removed (`ZREMRANGEBYSCORE key -inf remove_expired`, a
/// lease key's expired leases, never more than a lease key holds).
#[derive(Clone, Copy)]
pub struct SetWrite<'a> {
    /// Members removed by name.
    pub remove: &'a [Vec<u8>],
    /// The member's bytes and its score.
    pub add: Option<(&'a dyn Encode, Micros)>,
    pub remove_through: Option<Micros>,
    pub remove_expired: Option<Micros>,
}

/// The stored form of a limiter's state.
pub trait Written {
    fn value(&self) -> Value<'_>;
}

impl Written for i64 {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

impl Written for Micros {
    fn value(&self) -> Value<'_> {
        Value::String(self)
    }
}

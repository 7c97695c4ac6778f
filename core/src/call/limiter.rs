//! The one interface every limiter implements. It knows time, cost and state, and
//! names no limiter: a limiter is a checked rule (RL.FIXED's limit and window, RL.GCRA's
//! rate, ...) of a [`Kind`], that judges what one key holds at a time for a cost
//! ([`Limiter::judge`]): a [`Judgement`] with the five reply fields, and what it keeps to
//! write the key once the whole call is decided ([`Limiter::write`]). The loop of a call
//! (judge every key, decide all or nothing, write) is [`crate::call::Call::run`], once
//! for every call.
//!
//! Nothing here reads a clock or talks to a server: the glue opens each key as its
//! rule's [`Kind`] says, hands its content over as a [`KeyRead`], and carries out the
//! [`Effect`]s (see [`crate::call::keys`]).

use crate::call::keys::{KeyRead, Written};
use crate::call::state::{Effect, StateName};
use crate::call::verdict::Verdict;
use crate::error::{Error, Result};
use crate::parse::args::Options;
use crate::parse::keyword::Opt;
use crate::units::Micros;

/// The type of key a limiter keeps its state in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A plain string with an absolute expiry (counters, TATs, packed windows).
    String,
    /// A sorted set (members scored by time), read through
    /// [`SortedSet`](crate::call::keys::SortedSet).
    SortedSet,
}

/// What kind of limiter a rule is: how calls and errors name it, the type of key it
/// keeps, and where it stands in a call of several kinds (RL.ALL). Each limiter's file
/// declares its own.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// Its keyword as an RL.ALL rule (`FIXED`).
    pub keyword: &'static str,
    /// Its rule's syntax line in RL.ALL (`FIXED i limit window [ALIGN]`).
    pub syntax: &'static str,
    /// How errors name its state (and its command).
    pub state: StateName,
    /// The type of key it keeps.
    pub storage: Storage,
    /// Judged before the other rules of a call; when it denies, the call ends there,
    /// the other keys neither read nor written (a penalty box while a ban runs). It
    /// binds an allowed call only when the call has no rule of another kind.
    pub gate: bool,
    /// In RL.ALL it adds a reply field after the seven (a lease's id), nil when the
    /// call ends before it is judged.
    pub field: bool,
}

/// How a request settles: taken as it fits (the usual); after the fact, given back
/// (`REFUND`) or recorded whether it fits or not (`FORCE`); or taken as much of it as
/// fits (`UPTO`). Each limiter implements the first three in its own file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Allowed iff it fits; then recorded.
    #[default]
    Take,
    /// Give back `cost` that allowed requests took; always allowed.
    Refund,
    /// Record `cost` whether it fits or not.
    Force,
    /// Take as much of `cost` as fits now (`UPTO`): the call is judged and written as
    /// a call of that cost, by [`crate::call::Call::run`]; no limiter judges this mode.
    UpTo,
}

impl Mode {
    /// How a call's request settles, from its `REFUND`, `FORCE` and `UPTO`: at most one
    /// of them, and none with `DELAY` (a settled request is not booked, a booking takes
    /// its whole cost); `UPTO` with a cost of at least 1; a call of `COST 0` peeks
    /// whatever its flag.
    pub fn of(opts: &Options<'_>) -> Result<Mode> {
        let mode = match (opts.refund, opts.force, opts.upto) {
            (true, true, _) => return Err(Error::RefundAndForce),
            (true, false, true) => return Err(Error::UptoWith { flag: "REFUND" }),
            (false, true, true) => return Err(Error::UptoWith { flag: "FORCE" }),
            (true, false, false) => Mode::Refund,
            (false, true, false) => Mode::Force,
            (false, false, true) => Mode::UpTo,
            (false, false, false) => Mode::Take,
        };
        match (mode, opts.delay) {
            (Mode::Refund, Some(_)) => Err(Error::SettleWithDelay { flag: "REFUND" }),
            (Mode::Force, Some(_)) => Err(Error::SettleWithDelay { flag: "FORCE" }),
            (Mode::UpTo, Some(_)) => Err(Error::UptoWith { flag: "DELAY" }),
            (Mode::UpTo, None) if opts.cost == 0 => Err(Error::UptoCostZero),
            // `COST 0` with either flag is the peek `COST 0` is without it.
            _ if opts.cost == 0 => Ok(Mode::Take),
            _ => Ok(mode),
        }
    }
}

/// Names made for a call, for a rule that records a name the call does not give (a
/// lease without `ID`): the same name for every rule of the call, made on first use.
pub trait Names {
    fn token(&self) -> Result<Token>;
}

/// A call that can make no name (its rules never ask for one).
pub struct Unnamed;

impl Names for Unnamed {
    fn token(&self) -> Result<Token> {
        Err(Error::Internal("no names for this call"))
    }
}

/// What every rule of a call judges: the call's time, its cost, how it settles, and
/// where a name for it comes from.
#[derive(Clone, Copy)]
pub struct Request<'r> {
    pub now: Micros,
    pub cost: i64,
    pub mode: Mode,
    pub names: &'r dyn Names,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("now", &self.now)
            .field("cost", &self.cost)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Request<'static> {
    /// A request taken as it fits, the usual, by a call that makes no names.
    pub fn take(now: Micros, cost: i64) -> Request<'static> {
        Request {
            now,
            cost,
            mode: Mode::Take,
            names: &Unnamed,
        }
    }
}

/// How many characters a [`Token`] has: 20 hex digits, 80 random bits.
pub const TOKEN_LEN: usize = 20;

/// A name made for a call by the glue (random hex digits from the server), for a rule
/// that records a name when the call gives none; the same for every rule of the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token(pub [u8; TOKEN_LEN]);

/// A reply field of a rule's own after the fixed fields: a number (a booking's delay),
/// a name it recorded, or nil.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// An integer reply.
    Int(i64),
    /// A bulk string.
    Bulk(smallvec::SmallVec<[u8; 24]>),
    /// A null reply: nothing recorded (a denial, a peek).
    Nil,
}

/// A limiter's verdict on one key, and what it keeps to write that key once the call
/// is decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement<P> {
    pub verdict: Verdict,
    /// The window (ms) whose numbers the verdict carries: the limiter's window, or for
    /// a limiter of several windows its binding window on this key.
    pub window_ms: u64,
    /// A reply field of the rule's own, when its command gives one (RL.GCRA's booked
    /// delay with `DELAY`, a lease's id): as the rule judged it, and nil when another
    /// rule denies the call it allowed (it then records nothing).
    pub field: Option<Field>,
    /// The verdict the rule replies when another rule denies the call and its write
    /// then binds the call (a strike that starts a ban).
    pub when_denied: Option<Verdict>,
    pub pending: P,
}

impl<P> Judgement<P> {
    /// A judgement of the verdict's window with nothing of its own beside it.
    pub fn plain(verdict: Verdict, window_ms: u64, pending: P) -> Judgement<P> {
        Judgement {
            verdict,
            window_ms,
            field: None,
            when_denied: None,
            pending,
        }
    }

    /// The same judgement keeping `f(pending)`.
    pub fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Judgement<Q> {
        Judgement {
            verdict: self.verdict,
            window_ms: self.window_ms,
            field: self.field,
            when_denied: self.when_denied,
            pending: f(self.pending),
        }
    }
}

/// A write that would leave the key with more windows than a key may keep: the call
/// is refused and nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// How the call a rule's key belongs to was decided, as its write sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every rule allowed: the request is recorded.
    Allowed,
    /// Some rule denied: nothing is consumed. `repair`: the key's own command (not a
    /// call of several kinds, which writes nothing but a penalty), which gives a key
    /// that lost its TTL its expiry back.
    Denied { repair: bool },
}

impl Outcome {
    pub fn is_allowed(self) -> bool {
        self == Outcome::Allowed
    }
}

/// One rate-limiting algorithm, as a checked rule on one key; also a rule of any kind
/// (RL.ALL's), which passes each call to the rule of its kind.
pub trait Limiter {
    /// What an [`Effect::Set`] stores.
    type State: Written;
    /// What a judgement keeps for [`Limiter::write`].
    type Pending;

    /// Its kind: names, storage, place in a call.
    fn kind(&self) -> &'static Kind;

    /// A cost the rule can never settle in `mode`: an error, not a denial (a cost
    /// above the capacity can never be taken; a refund or a forced request of any
    /// cost can be settled, unless the rule's costs are fixed, as a lease's 0 or 1).
    fn check_cost(&self, cost: i64, mode: Mode) -> Result<()>;

    /// Judge the key's content for the request (its time, its cost, checked by
    /// `check_cost`, and how it settles). Errors: the key's content is not this
    /// limiter's state, or holds another type.
    fn judge(&self, key: KeyRead<'_>, req: &Request) -> Result<Judgement<Self::Pending>>;

    /// The write of a judgement once the call is decided (`Effect::None`: none).
    fn write(
        &self,
        pending: Self::Pending,
        outcome: Outcome,
        req: &Request,
    ) -> std::result::Result<Effect<Self::State>, Full>;
}

/// How a limiter's rule is written in a call: the positional arguments after its key
/// (or, in RL.ALL, after its key's position) and the options of its own. `COST` and
/// `AT` belong to the call; they are never a rule's.
pub trait Syntax<'a>: Sized {
    /// Its kind (its RL.ALL keyword, its state).
    const KIND: &'static Kind;
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

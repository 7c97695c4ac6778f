//! The option keywords of the limiter commands (`COST`, `AT`, `ALIGN`, ...), as a set
//! of bits: what a call accepts, and what an error lists.

/// The keywords that may follow a command's positional arguments (or a rule's, in
/// RL.ALL): each case-insensitive, each at most once (`LIMIT` excepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// `COST n`, default 1; 0 is a peek.
    Cost,
    /// `AT unix_ms`: the time to judge the request at instead of the server clock.
    At,
    /// `ALIGN`: fixed windows aligned to the Unix epoch.
    Align,
    /// `DELAY max_delay`: book a request that fits within this delay (GCRA).
    Delay,
    /// `BUCKETS n`: buckets per sliding window.
    Buckets,
    /// `META value`: what a log entry records besides its time (RL.LOG).
    Meta,
    /// `LIMIT window limit`, repeatable (RL.MULTI, RL.SLIDING).
    Limit,
    /// `ID id`: the name of a lease (RL.LEASE, RL.ALL's LEASE rules).
    Id,
    /// `REFUND`: give back what allowed requests took.
    Refund,
    /// `FORCE`: record the request whether it fits or not.
    Force,
    /// `UPTO`: take as much of `COST n` as fits now.
    UpTo,
}

impl Opt {
    const ALL: [Opt; 11] = [
        Opt::Cost,
        Opt::At,
        Opt::Align,
        Opt::Delay,
        Opt::Buckets,
        Opt::Meta,
        Opt::Limit,
        Opt::Id,
        Opt::Refund,
        Opt::Force,
        Opt::UpTo,
    ];

    pub fn keyword(self) -> &'static str {
        match self {
            Opt::Cost => "COST",
            Opt::At => "AT",
            Opt::Align => "ALIGN",
            Opt::Delay => "DELAY",
            Opt::Buckets => "BUCKETS",
            Opt::Meta => "META",
            Opt::Limit => "LIMIT",
            Opt::Id => "ID",
            Opt::Refund => "REFUND",
            Opt::Force => "FORCE",
            Opt::UpTo => "UPTO",
        }
    }

    /// Its bit in a set of options.
    pub const fn bit(self) -> u16 {
        1 << self as u8
    }

    /// A set of options as bits.
    pub const fn set(opts: &[Opt]) -> u16 {
        let mut set = 0;
        let mut i = 0;
        while i < opts.len() {
            set |= opts[i].bit();
            i += 1;
        }
        set
    }

    /// The options of a set, in their canonical order: `COST, AT, ALIGN`.
    pub fn list(set: u16) -> String {
        Opt::ALL
            .into_iter()
            .filter(|o| set & o.bit() != 0)
            .map(Opt::keyword)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The option `word` names, if any (case-insensitive).
    pub fn named(word: &[u8]) -> Option<Opt> {
        Opt::ALL
            .into_iter()
            .find(|o| word.eq_ignore_ascii_case(o.keyword().as_bytes()))
    }
}

/// The options of `COST n` and `AT unix_ms`, which every limiter command takes.
pub const COST_AT: [Opt; 2] = [Opt::Cost, Opt::At];

/// The flags that say how a request settles (`REFUND`, `FORCE`: after the fact;
/// `UPTO`: as much as fits), which the commands of the limiters that implement them
/// take.
pub const SETTLE: [Opt; 3] = [Opt::Refund, Opt::Force, Opt::UpTo];

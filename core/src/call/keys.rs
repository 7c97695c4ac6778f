//! Keys as the one loop of a call sees them ([`Keys`]): what each rule's key holds
//! ([`KeyRead`], a sorted set read through [`SortedSet`]), and the writes the loop
//! carries out on them ([`Written`]: a string's value, or a list of [`SetOp`]s, the
//! primitive changes of a sorted set, each with its bound). The module's keys and the
//! keys held in memory for tests ([`crate::call::memory`]) implement [`Keys`], so both
//! run the same loop, [`crate::call::Call::run`].

use crate::call::state::{Effect, Encode, Stored};
use crate::error::{Error, Result};
use crate::units::{Micros, UnixMillis};
use smallvec::SmallVec;

/// The keys of a call, one per rule, by the rule's place in the call.
pub trait Keys {
    /// What the key of rule `rule` holds, read as its rule keeps it.
    fn read(&self, rule: usize) -> Result<KeyRead<'_>>;
    /// The key's name, for errors.
    fn name(&self, rule: usize) -> &[u8];
    /// Refuse a call whose writes store a value when the server is out of memory
    /// (`maxmemory`): asked once, about the key of the first rule that stores one.
    fn check_memory(&self, rule: usize) -> Result<()>;
    /// Carry out an effect on the key of rule `rule`.
    fn apply<S: Written>(&mut self, rule: usize, effect: &Effect<S>) -> Result<()>;
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

/// What a write stores: a string's value, or changes to a sorted set, in order.
pub enum Value<'a> {
    String(&'a dyn Encode),
    SortedSet(SetOps<'a>),
}

/// The changes of one sorted-set write, in the order they are made.
pub type SetOps<'a> = SmallVec<[SetOp<'a>; 3]>;

/// One primitive change to a sorted set, replicated as the plain command it stands for
/// and announced with that command's keyspace event. A removal of several members
/// carries its own bound, so that no write is longer than its limiter allows.
#[derive(Clone, Copy)]
pub enum SetOp<'a> {
    /// `ZADD key score member`: the member added, or its score updated.
    Add { member: &'a dyn Encode, score: u64 },
    /// `ZREM key member`.
    Remove(&'a [u8]),
    /// The members scored at or below `through`, lowest first (then in the set's
    /// order), at most `at_most` of them: removed, replicated as one `ZREM key
    /// member...` naming them.
    RemoveOldest { through: u64, at_most: usize },
    /// Every member scored at or below `through`, of a set of at most `at_most`
    /// members (a larger one is refused before it is written):
    /// `ZREMRANGEBYSCORE key -inf through`.
    RemoveThrough { through: u64, at_most: usize },
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

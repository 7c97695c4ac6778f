//! Limiter state kept in a sorted set (RL.LOG's entries, RL.LEASE's leases), beside `string.rs` for
//! strings: opening it (`WRONGTYPE` for another type), reading it through the module's
//! sorted-set API (walks in score order, each step O(log n); a long score range is
//! counted with `ZCOUNT`, the one command that runs inside the module, read-only), and
//! writing the primitive changes a limiter's write lists (`SetOp`: a member added, a
//! member removed by name, the oldest members scored at or below a time removed, at most
//! so many, every member scored at or below a time removed), then the absolute expiry,
//! each replicated as the plain command it stands for (`ZADD`, `ZREM`,
//! `ZREMRANGEBYSCORE`, `PEXPIREAT` with absolute times) and announced with that
//! command's keyspace event. Each change carries its own bound: the glue knows no
//! limiter.

use crate::api::api;
use crate::argv::KeyName;
use crate::keys::open::OpenKey;
use crate::propagate;
use ratelimit_core::call::keys::{SetOp, SortedSet, Walk};
use ratelimit_core::call::state::push_decimal;
use ratelimit_core::{Error, Micros, UnixMillis};
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::os::raw::c_int;

const OK: c_int = raw::REDISMODULE_OK as c_int;

/// How many members [`SortedSet::count_through`] walks before it asks `ZCOUNT`.
const WALKED_BEFORE_ZCOUNT: usize = 16;

thread_local! {
    /// The member of a write, reused from call to call (commands run on the server's
    /// main thread, one at a time).
    static MEMBER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A sorted-set key opened for reading and writing, closed on drop.
pub struct SortedSetKey<'a> {
    ctx: &'a Context,
    name: KeyName<'a>,
    key: OpenKey,
    /// Whether the key exists (a sorted set; `open` refused other types).
    exists: bool,
}

impl<'a> SortedSetKey<'a> {
    /// Open `name`; a key of another type is `WRONGTYPE`.
    pub fn open(ctx: &'a Context, name: KeyName<'a>) -> Result<Self, Error> {
        let key = OpenKey::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)?
            .ok_or_else(|| Error::Internal("open key"))?;
        let key_type = api!(RedisModule_KeyType)?;
        // SAFETY: the key is open.
        let exists = match unsafe { key_type(key.ptr()) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => false,
            raw::REDISMODULE_KEYTYPE_ZSET => true,
            _ => return Err(Error::WrongType),
        };
        Ok(SortedSetKey {
            ctx,
            name,
            key,
            exists,
        })
    }

    /// Whether the key exists.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Walk the members with a score in `[min, max]` (`min` excluded when `min_ex`), from
    /// the first (or from the last, `backwards`), while `f` asks for more. The range is
    /// stopped before returning, so the key can be written after.
    fn range(
        &self,
        (min, min_ex): (f64, bool),
        max: f64,
        backwards: bool,
        f: &mut dyn FnMut(*mut raw::RedisModuleString, f64) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        if !self.exists {
            return Ok(());
        }
        let init = if backwards {
            api!(RedisModule_ZsetLastInScoreRange)?
        } else {
            api!(RedisModule_ZsetFirstInScoreRange)?
        };
        let step = if backwards {
            api!(RedisModule_ZsetRangePrev)?
        } else {
            api!(RedisModule_ZsetRangeNext)?
        };
        let (end_reached, current, stop, free) = (
            api!(RedisModule_ZsetRangeEndReached)?,
            api!(RedisModule_ZsetRangeCurrentElement)?,
            api!(RedisModule_ZsetRangeStop)?,
            api!(RedisModule_FreeString)?,
        );
        let k = self.key.ptr();
        // SAFETY: the key is an open sorted set; the range is stopped below on every
        // path.
        if unsafe { init(k, min, max, c_int::from(min_ex), 0) } != OK {
            return Err(Error::Internal("sorted set range"));
        }
        let mut result = Ok(());
        // SAFETY: the range was started above and is live until `stop`.
        while unsafe { end_reached(k) } == 0 {
            let mut score = 0.0;
            // SAFETY: the range is live and not at its end.
            let ele = unsafe { current(k, &mut score) };
            if ele.is_null() {
                break;
            }
            let more = f(ele, score);
            // SAFETY: the element was created for us by CurrentElement (no automatic
            // memory in this context) and is not used after this.
            unsafe { free(self.ctx.ctx, ele) };
            match more {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            // SAFETY: the range is live.
            if unsafe { step(k) } == 0 {
                break;
            }
        }
        // SAFETY: stops the range started above.
        unsafe { stop(k) };
        result
    }

    /// Write the changes of one write to the set, in order, then give it its new
    /// absolute expiry (a set the changes emptied is gone: it is announced deleted and
    /// gets no expiry).
    pub fn write(&self, ops: &[SetOp], expires_at: UnixMillis) -> Result<(), Error> {
        for op in ops {
            match *op {
                SetOp::Add { member, score } => MEMBER.with(|buf| {
                    let mut bytes = buf
                        .try_borrow_mut()
                        .map_err(|_| Error::Internal("buffer"))?;
                    bytes.clear();
                    member.encode(&mut bytes);
                    self.add(&bytes, score)
                })?,
                SetOp::Remove(member) => self.remove_member(member)?,
                SetOp::RemoveOldest { through, at_most } => self.remove_oldest(through, at_most)?,
                SetOp::RemoveThrough { through, at_most } => {
                    self.remove_expired(through, at_most)?
                }
            }
        }
        if self.is_gone()? {
            return Ok(());
        }
        self.expire_at(expires_at)
    }

    /// `ZREMRANGEBYSCORE key -inf through` (every member of a set of at most `at_most`:
    /// a lease key's expired leases; more is an internal error, nothing removed),
    /// replicated and announced (a key it empties is deleted, and announced so).
    fn remove_expired(&self, through: u64, at_most: usize) -> Result<(), Error> {
        let replicate = |_: &mut [_]| {
            propagate::members_removed_through(self.ctx, self.name, Micros(through), true)
        };
        if self.remove_lowest(through, at_most, Past::Refused, replicate)? {
            self.announce_if_deleted()?;
        }
        Ok(())
    }

    /// `PEXPIREAT key at`, replicated and announced.
    fn expire_at(&self, expires_at: UnixMillis) -> Result<(), Error> {
        let set_abs_expire = api!(RedisModule_SetAbsExpire)?;
        // SAFETY: the key is open for writing and holds a set.
        if unsafe { set_abs_expire(self.key.ptr(), propagate::millis(expires_at)) } != OK {
            return Err(Error::Internal("set expire"));
        }
        propagate::expiry_set(self.ctx, self.name, expires_at);
        Ok(())
    }

    /// `ZREM key member` (a refund's write, a released lease), replicated and announced
    /// (a key it empties is deleted, and announced so).
    fn remove_member(&self, member: &[u8]) -> Result<(), Error> {
        let (create, rem, free) = (
            api!(RedisModule_CreateString)?,
            api!(RedisModule_ZsetRem)?,
            api!(RedisModule_FreeString)?,
        );
        // SAFETY: ctx is live; the bytes are copied into a new string.
        let ele = unsafe { create(self.ctx.ctx, member.as_ptr().cast(), member.len()) };
        if ele.is_null() {
            return Err(Error::Internal("member"));
        }
        let mut deleted: c_int = 0;
        // SAFETY: the key is open for writing; the string is freed right after.
        let rc = unsafe { rem(self.key.ptr(), ele, &mut deleted) };
        // SAFETY: created above, not used after this.
        unsafe { free(self.ctx.ctx, ele) };
        if rc != OK {
            return Err(Error::Internal("sorted set remove"));
        }
        if deleted != 0 {
            propagate::member_removed(self.ctx, self.name, member);
            self.announce_if_deleted()?;
        }
        Ok(())
    }

    /// Whether the key is gone (its last member removed).
    fn is_gone(&self) -> Result<bool, Error> {
        let key_type = api!(RedisModule_KeyType)?;
        // SAFETY: the key is open.
        Ok(unsafe { key_type(self.key.ptr()) } as isize == raw::REDISMODULE_KEYTYPE_EMPTY)
    }

    /// The `del` event of a key that its removals through the key API emptied (the
    /// server deletes it, as `ZREM` does, without saying so).
    fn announce_if_deleted(&self) -> Result<(), Error> {
        if self.is_gone()? {
            propagate::key_emptied(self.ctx, self.name);
        }
        Ok(())
    }

    /// Delete the key (a refund that gave everything back), replicated as `DEL`.
    pub fn delete(&self) -> Result<(), Error> {
        if self.exists {
            self.key.delete()?;
            propagate::key_deleted(self.ctx, self.name);
        }
        Ok(())
    }

    /// `ZADD key score member`, replicated and announced.
    fn add(&self, member: &[u8], score: u64) -> Result<(), Error> {
        let create = api!(RedisModule_CreateString)?;
        let (add, free) = (api!(RedisModule_ZsetAdd)?, api!(RedisModule_FreeString)?);
        // SAFETY: ctx is live; the bytes are copied into a new string.
        let ele = unsafe { create(self.ctx.ctx, member.as_ptr().cast(), member.len()) };
        if ele.is_null() {
            return Err(Error::Internal("member"));
        }
        let mut flags: c_int = 0;
        // SAFETY: the key is open for writing and empty or a sorted set; the server
        // copies the member; the string is freed right after.
        let rc = unsafe { add(self.key.ptr(), score as f64, ele, &mut flags) };
        // SAFETY: created above, not used after this.
        unsafe { free(self.ctx.ctx, ele) };
        if rc != OK {
            return Err(Error::Internal("sorted set add"));
        }
        propagate::member_added(self.ctx, self.name, Micros(score), member);
        Ok(())
    }

    /// Remove the members with a score at or below `through`, lowest first, at most
    /// `at_most` of them, through the key API, replicated as one `ZREM key member...` and
    /// announced with its `zrem` event. The members left over are outside a log's window
    /// (no call counts them); later writes remove them, up to as many each, or the key's
    /// expiry does.
    fn remove_oldest(&self, through: u64, at_most: usize) -> Result<(), Error> {
        self.remove_lowest(through, at_most, Past::Left, |leaving| {
            propagate::members_removed(self.ctx, self.name, leaving)
        })
        .map(|_| ())
    }

    /// Remove the members with a score at or below `through`, lowest first, through the
    /// key API, at most `at_most` of them (`past` says what more is); `removed` is given
    /// the removed members (live until it returns) when the removals succeed and there
    /// are any; whether any was removed.
    fn remove_lowest(
        &self,
        through: u64,
        at_most: usize,
        past: Past,
        removed: impl FnOnce(&mut [*mut raw::RedisModuleString]),
    ) -> Result<bool, Error> {
        let (create, rem, free) = (
            api!(RedisModule_CreateString)?,
            api!(RedisModule_ZsetRem)?,
            api!(RedisModule_FreeString)?,
        );
        let mut leaving: SmallVec<[*mut raw::RedisModuleString; 8]> = SmallVec::new();
        let walked = self.range(
            (raw::REDISMODULE_NEGATIVE_INFINITE, false),
            through as f64,
            false,
            &mut |ele, _| {
                if leaving.len() >= at_most {
                    return match past {
                        Past::Left => Ok(false),
                        Past::Refused => Err(Error::Internal("more members than the set may hold")),
                    };
                }
                let member = bytes(ele);
                // SAFETY: ctx is live; the bytes are copied into a new string, freed below.
                let copy = unsafe { create(self.ctx.ctx, member.as_ptr().cast(), member.len()) };
                if copy.is_null() {
                    return Err(Error::Internal("member"));
                }
                leaving.push(copy);
                // Members left past the bound need not be visited; refused ones must.
                Ok(past == Past::Refused || leaving.len() < at_most)
            },
        );
        let mut result = walked;
        if result.is_ok() {
            for &member in &leaving {
                let mut deleted: c_int = 0;
                // SAFETY: the key is open for writing (a removal that empties it leaves
                // an empty key, which the last removal here is).
                if unsafe { rem(self.key.ptr(), member, &mut deleted) } != OK {
                    result = Err(Error::Internal("sorted set remove"));
                    break;
                }
            }
        }
        let any = !leaving.is_empty();
        if result.is_ok() && any {
            removed(&mut leaving);
        }
        for &member in &leaving {
            // SAFETY: created above, not used after this.
            unsafe { free(self.ctx.ctx, member) };
        }
        result.map(|()| any)
    }
}

/// What a removal of the lowest members does with those past its bound.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Past {
    /// They stay (a log's oldest entries, removed a few at a time).
    Left,
    /// They cannot be there: an internal error, nothing removed (a lease key's
    /// expired leases, bounded by its limit).
    Refused,
}

/// The bytes of a live module string.
fn bytes<'s>(s: *mut raw::RedisModuleString) -> &'s [u8] {
    let mut len = 0;
    let ptr = raw::string_ptr_len(s, &mut len);
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: the server gives `len` readable bytes at `ptr`, alive as long as the
    // string, which the caller keeps alive while it reads them.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

impl SortedSet for SortedSetKey<'_> {
    fn len(&self) -> usize {
        if !self.exists {
            return 0;
        }
        match api!(RedisModule_ValueLength) {
            // SAFETY: the key is an open sorted set.
            Ok(len) => unsafe { len(self.key.ptr()) },
            Err(_) => usize::MAX,
        }
    }

    fn walk(
        &self,
        walk: Walk,
        f: &mut dyn FnMut(&[u8], f64) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let (min, max, backwards) = match walk {
            Walk::After(after) => (
                (after.0 as f64, true),
                raw::REDISMODULE_POSITIVE_INFINITE,
                false,
            ),
            Walk::Through(through) => (
                (raw::REDISMODULE_NEGATIVE_INFINITE, false),
                through.0 as f64,
                true,
            ),
            Walk::All | Walk::Down => (
                (raw::REDISMODULE_NEGATIVE_INFINITE, false),
                raw::REDISMODULE_POSITIVE_INFINITE,
                walk == Walk::Down,
            ),
        };
        self.range(min, max, backwards, &mut |ele, score| f(bytes(ele), score))
    }

    /// A few members are counted as they are walked; past those, `ZCOUNT key -inf
    /// through` counts them in O(log n) (the key API has no count of a score range); a
    /// server that answers no `ZCOUNT` (renamed away) has them walked.
    fn count_through(&self, through: Micros) -> Result<usize, Error> {
        let (below, max) = (
            (raw::REDISMODULE_NEGATIVE_INFINITE, false),
            through.0 as f64,
        );
        let mut counted = 0;
        self.range(below, max, false, &mut |_, _| {
            counted += 1;
            Ok(counted <= WALKED_BEFORE_ZCOUNT)
        })?;
        if counted <= WALKED_BEFORE_ZCOUNT {
            return Ok(counted);
        }
        let mut max_arg = Vec::new();
        push_decimal(&mut max_arg, through.0);
        let opts = CallOptionsBuilder::new().errors_as_replies().build();
        let args: [&[u8]; 3] = [self.name.bytes(), b"-inf", &max_arg];
        let reply: CallResult = self.ctx.call_ext("ZCOUNT", &opts, &args[..]);
        if let Ok(CallReply::I64(n)) = reply {
            if let Ok(n) = usize::try_from(n.to_i64()) {
                return Ok(n);
            }
        }
        let mut counted = 0;
        self.range(below, max, false, &mut |_, _| {
            counted += 1;
            Ok(true)
        })?;
        Ok(counted)
    }

    fn score(&self, member: &[u8]) -> Result<Option<f64>, Error> {
        if !self.exists {
            return Ok(None);
        }
        let (create, score_of, free) = (
            api!(RedisModule_CreateString)?,
            api!(RedisModule_ZsetScore)?,
            api!(RedisModule_FreeString)?,
        );
        // SAFETY: ctx is live; the bytes are copied into a new string.
        let ele = unsafe { create(self.ctx.ctx, member.as_ptr().cast(), member.len()) };
        if ele.is_null() {
            return Err(Error::Internal("member"));
        }
        let mut score = 0.0;
        // SAFETY: the key is an open sorted set; the string is freed right after.
        let rc = unsafe { score_of(self.key.ptr(), ele, &mut score) };
        // SAFETY: created above, not used after this.
        unsafe { free(self.ctx.ctx, ele) };
        Ok((rc == OK).then_some(score))
    }
}

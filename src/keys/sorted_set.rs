//! Limiter state kept in a sorted set (RL.LOG's entries), beside `string.rs` for
//! strings: opening it (`WRONGTYPE` for another type), reading it through the module's
//! sorted-set API (walks in score order, each step O(log n)), and writing a change:
//! a member added, the members scored at or below a time removed, the absolute expiry set,
//! each replicated as the plain command it stands for (`ZADD`, `ZREMRANGEBYSCORE`,
//! `PEXPIREAT` with absolute times) and announced with that command's keyspace event.

use crate::api::api;
use crate::argv::KeyName;
use crate::effects;
use crate::keys::open::OpenKey;
use ratelimit_core::call::limiter::{SetWrite, SortedSet, Walk};
use ratelimit_core::{Error, Micros, UnixMillis};
use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::os::raw::c_int;

const OK: c_int = raw::REDISMODULE_OK as c_int;

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
            .ok_or(Error::Internal("open key"))?;
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

    /// Write a change to the set (a member added, the members scored at or below a
    /// time removed), with the key's new absolute expiry.
    pub fn write(&self, w: &SetWrite, expires_at: UnixMillis) -> Result<(), Error> {
        if let Some((member, score)) = w.add {
            MEMBER.with(|buf| {
                let mut bytes = buf
                    .try_borrow_mut()
                    .map_err(|_| Error::Internal("buffer"))?;
                bytes.clear();
                member.encode(&mut bytes);
                self.add(&bytes, score)
            })?;
        }
        if let Some(through) = w.remove_through {
            self.remove_expired(through)?;
        }
        self.expire_at(expires_at)
    }

    /// `ZREMRANGEBYSCORE key -inf through`, replicated and announced (a key it empties
    /// is deleted, and announced so).
    pub fn remove_expired(&self, through: Micros) -> Result<(), Error> {
        match self.remove_through(through)? {
            Removed::None => {}
            Removed::OneByOne => {
                effects::members_removed_through(self.ctx, self.name, through, true);
                self.announce_if_deleted()?;
            }
            Removed::ByCommand => {
                effects::members_removed_through(self.ctx, self.name, through, false)
            }
        }
        Ok(())
    }

    /// `PEXPIREAT key at`, replicated and announced.
    pub fn expire_at(&self, expires_at: UnixMillis) -> Result<(), Error> {
        let set_abs_expire = api!(RedisModule_SetAbsExpire)?;
        // SAFETY: the key is open for writing and holds a set.
        if unsafe { set_abs_expire(self.key.ptr(), effects::millis(expires_at)) } != OK {
            return Err(Error::Internal("set expire"));
        }
        effects::expiry_set(self.ctx, self.name, expires_at);
        Ok(())
    }

    /// `ZREM key member`, replicated and announced (a key it empties is deleted, and
    /// announced so).
    pub fn remove_member(&self, member: &[u8]) -> Result<(), Error> {
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
            effects::member_removed(self.ctx, self.name, member);
            self.announce_if_deleted()?;
        }
        Ok(())
    }

    /// Whether the key is gone (its last member removed).
    pub fn is_gone(&self) -> Result<bool, Error> {
        let key_type = api!(RedisModule_KeyType)?;
        // SAFETY: the key is open.
        Ok(unsafe { key_type(self.key.ptr()) } as isize == raw::REDISMODULE_KEYTYPE_EMPTY)
    }

    /// The `del` event of a key that its removals through the key API emptied (the
    /// server deletes it, as `ZREM` does, without saying so).
    fn announce_if_deleted(&self) -> Result<(), Error> {
        if self.is_gone()? {
            effects::key_deleted(self.ctx, self.name);
        }
        Ok(())
    }

    /// `ZADD key score member`, replicated and announced.
    fn add(&self, member: &[u8], score: Micros) -> Result<(), Error> {
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
        let rc = unsafe { add(self.key.ptr(), score.0 as f64, ele, &mut flags) };
        // SAFETY: created above, not used after this.
        unsafe { free(self.ctx.ctx, ele) };
        if rc != OK {
            return Err(Error::Internal("sorted set add"));
        }
        effects::member_added(self.ctx, self.name, score, member);
        Ok(())
    }

    /// Remove the members with a score at or below `through`: up to
    /// [`REMOVE_ONE_BY_ONE`] of them through the key API, more with the server's own
    /// `ZREMRANGEBYSCORE` in one step (a log whose entries of a burst leave together).
    fn remove_through(&self, through: Micros) -> Result<Removed, Error> {
        let (create, rem, free) = (
            api!(RedisModule_CreateString)?,
            api!(RedisModule_ZsetRem)?,
            api!(RedisModule_FreeString)?,
        );
        // The leaving members' bytes, one after the other, and where each ends.
        let mut bytes_of: Vec<u8> = Vec::new();
        let mut ends: SmallVec<[usize; 8]> = SmallVec::new();
        self.range(
            (raw::REDISMODULE_NEGATIVE_INFINITE, false),
            through.0 as f64,
            false,
            &mut |ele, _| {
                bytes_of.extend_from_slice(bytes(ele));
                ends.push(bytes_of.len());
                Ok(ends.len() <= REMOVE_ONE_BY_ONE)
            },
        )?;
        if ends.len() > REMOVE_ONE_BY_ONE {
            return self.remove_by_command(through);
        }
        let mut start = 0;
        for &end in &ends {
            let member = bytes_of.get(start..end).unwrap_or(&[]);
            start = end;
            // SAFETY: ctx is live; the bytes are copied into a new string.
            let ele = unsafe { create(self.ctx.ctx, member.as_ptr().cast(), member.len()) };
            if ele.is_null() {
                return Err(Error::Internal("member"));
            }
            let mut deleted: c_int = 0;
            // SAFETY: the key is open for writing (a removal that empties it leaves an
            // empty key, which the last removal here is); the string is freed right
            // after.
            let rc = unsafe { rem(self.key.ptr(), ele, &mut deleted) };
            // SAFETY: created above, not used after this.
            unsafe { free(self.ctx.ctx, ele) };
            if rc != OK {
                return Err(Error::Internal("sorted set remove"));
            }
        }
        Ok(if ends.is_empty() {
            Removed::None
        } else {
            Removed::OneByOne
        })
    }

    /// `ZREMRANGEBYSCORE key -inf through`, run by the server (which sends its keyspace
    /// event); not replicated by itself: the caller replicates it as it does the others.
    fn remove_by_command(&self, through: Micros) -> Result<Removed, Error> {
        let opts = CallOptionsBuilder::new().errors_as_replies().build();
        let mut digits = Vec::new();
        ratelimit_core::call::state::push_decimal(&mut digits, through.0);
        let args: [&[u8]; 3] = [self.name.bytes(), b"-inf", &digits];
        match self
            .ctx
            .call_ext::<_, CallResult>("ZREMRANGEBYSCORE", &opts, &args[..])
        {
            Ok(CallReply::I64(_)) => Ok(Removed::ByCommand),
            _ => Err(Error::Internal("ZREMRANGEBYSCORE")),
        }
    }
}

/// How many members a write removes through the key API before it leaves the rest to
/// one `ZREMRANGEBYSCORE` (each removal through the API costs about as much as the
/// command itself).
const REMOVE_ONE_BY_ONE: usize = 32;

/// What a write removed.
enum Removed {
    None,
    /// Through the key API: the module sends the keyspace event.
    OneByOne,
    /// By the server's command, which sent its keyspace event.
    ByCommand,
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
        };
        self.range(min, max, backwards, &mut |ele, score| f(bytes(ele), score))
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

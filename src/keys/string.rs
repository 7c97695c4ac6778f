//! Limiter state kept in plain Redis strings with an absolute expiry (RL.FIXED's
//! counter, RL.GCRA's TAT, RL.MULTI's and RL.SLIDING's packed windows): reading them,
//! writing them,
//! and replicating each write as a plain command with an absolute time
//! (`SET key value PXAT t`, `PEXPIREAT key t`), so replicas and the AOF never read a
//! clock of their own.
//!
//! Why the raw module API and not `RedisKeyWritable`: the safe wrapper has no call for
//! a key's absolute expiry (only relative TTLs, which would be recomputed from a second
//! clock reading), and its `write()` replaces the value and drops the TTL. Here the
//! value is read and written in place through DMA (`RedisModule_StringDMA`), which
//! keeps the expiry, and the expiry is read and set as an absolute time
//! (`RedisModule_GetAbsExpire` / `SetAbsExpire`). Every unsafe call states why it holds.

use crate::api::api;
use crate::argv::KeyName;
use crate::keys::open::OpenKey;
use crate::propagate;
use ratelimit_core::call::keys::KeyRead;
use ratelimit_core::call::state::Encode;
use ratelimit_core::{Error, UnixMillis};
use redis_module::{raw, Context};
use std::cell::{Cell, RefCell};
use std::os::raw::c_int;

/// A string key opened for reading and writing, closed on drop.
pub struct StringKey<'a> {
    ctx: &'a Context,
    name: KeyName<'a>,
    key: OpenKey,
    /// The length of the value (`None`: no key) and its absolute expiry (`None`: no
    /// TTL), when opened and kept up to date by the writes, so that each write does
    /// only what changes.
    len: Cell<Option<usize>>,
    expiry: Cell<Option<UnixMillis>>,
}

const OK: c_int = raw::REDISMODULE_OK as c_int;

thread_local! {
    /// The encoded value of a write, reused from call to call (commands run on the
    /// server's main thread, one at a time).
    static ENCODED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<'a> StringKey<'a> {
    /// Open `name`; a key of another type is `WRONGTYPE`.
    pub fn open(ctx: &'a Context, name: KeyName<'a>) -> Result<Self, Error> {
        let key = OpenKey::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)?
            .ok_or_else(|| Error::Internal("open key"))?;
        let key_type_of = api!(RedisModule_KeyType)?;
        // SAFETY: the key is open.
        let key_type = unsafe { key_type_of(key.ptr()) } as isize;
        let this = StringKey {
            ctx,
            name,
            key,
            len: Cell::new(None),
            expiry: Cell::new(None),
        };
        match key_type {
            raw::REDISMODULE_KEYTYPE_EMPTY => {}
            raw::REDISMODULE_KEYTYPE_STRING => {
                this.len.set(Some(this.value()?.len()));
                let get_abs_expire = api!(RedisModule_GetAbsExpire)?;
                // SAFETY: the key is open.
                let exp = unsafe { get_abs_expire(this.key.ptr()) };
                this.expiry.set(u64::try_from(exp).ok().map(UnixMillis));
            }
            _ => return Err(Error::WrongType),
        }
        Ok(this)
    }

    /// What the key holds, for a limiter to read: its value in place and its expiry.
    /// Read before any write of this key.
    pub fn read(&self) -> Result<KeyRead<'_>, Error> {
        if self.len.get().is_none() {
            return Ok(KeyRead::Missing);
        }
        Ok(KeyRead::String {
            value: self.value()?,
            expires_at: self.expiry.get(),
        })
    }

    /// The value in place, valid until the key is written or closed.
    fn value(&self) -> Result<&[u8], Error> {
        let mut len: usize = 0;
        let dma = api!(RedisModule_StringDMA)?;
        // SAFETY: the key is an open string key; READ mode leaves its value as it is.
        let data = unsafe { dma(self.key.ptr(), &mut len, raw::REDISMODULE_READ as c_int) };
        if data.is_null() {
            return Err(Error::Internal("string read"));
        }
        // SAFETY: DMA gives `len` readable bytes, valid while the key is open and not
        // written; callers read it before writing (see `state`).
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
    }

    /// Store the encoded `state` with the absolute expiry `expires_at` (see `set`).
    pub fn store(&self, state: &dyn Encode, expires_at: UnixMillis) -> Result<(), Error> {
        ENCODED.with(|buf| {
            let mut buf = buf
                .try_borrow_mut()
                .map_err(|_| Error::Internal("buffer"))?;
            buf.clear();
            state.encode(&mut buf);
            self.set(&buf, expires_at)
        })
    }

    /// Store `value` with the absolute expiry `expires_at`; replicated as
    /// `SET key value PXAT expires_at`.
    ///
    /// The value is written in place (an existing key is not deleted and re-added) and
    /// the expiry is set only when it changes: within a window, a write costs one copy.
    fn set(&self, value: &[u8], expires_at: UnixMillis) -> Result<(), Error> {
        self.write_value(value)?;
        if self.expiry.get() != Some(expires_at) {
            self.set_abs_expire(expires_at)?;
        }
        propagate::value_set(self.ctx, self.name, value, expires_at);
        Ok(())
    }

    /// Make the key's value `value`: resized (or created) to its length, then copied
    /// into place.
    fn write_value(&self, value: &[u8]) -> Result<(), Error> {
        if value.is_empty() && self.len.get().is_none() {
            return self.create_empty();
        }
        if self.len.get() != Some(value.len()) {
            let truncate = api!(RedisModule_StringTruncate)?;
            // SAFETY: the key is open for writing and is a string key or empty (open
            // refused other types); an empty key is created with this length.
            let rc = unsafe { truncate(self.key.ptr(), value.len()) };
            if rc != OK {
                return Err(Error::Internal("string resize"));
            }
            // A new key has no expiry.
            if self.len.get().is_none() {
                self.expiry.set(None);
            }
            self.len.set(Some(value.len()));
        }
        let dma = api!(RedisModule_StringDMA)?;
        let mut len: usize = 0;
        // SAFETY: the key is an open string key; WRITE gives its own copy of the value.
        let data = unsafe { dma(self.key.ptr(), &mut len, raw::REDISMODULE_WRITE as c_int) };
        if data.is_null() || len != value.len() {
            return Err(Error::Internal("string write"));
        }
        if len == 0 {
            return Ok(());
        }
        // SAFETY: DMA gives `len` writable bytes, valid until the key is next changed;
        // `value` has the same length and is not part of the key's value.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), data.cast::<u8>(), len) };
        Ok(())
    }

    /// Create the key with an empty value (StringTruncate creates no key for length 0).
    fn create_empty(&self) -> Result<(), Error> {
        let v = self.ctx.create_string("");
        let string_set = api!(RedisModule_StringSet)?;
        // SAFETY: key and string are live; StringSet takes its own reference.
        let rc = unsafe { string_set(self.key.ptr(), v.inner) };
        if rc != OK {
            return Err(Error::Internal("string set"));
        }
        self.len.set(Some(0));
        self.expiry.set(None);
        Ok(())
    }

    /// Delete the key (a refund that left its state full again), replicated as `DEL`.
    pub fn delete(&self) -> Result<(), Error> {
        if self.len.get().is_none() {
            return Ok(());
        }
        self.key.delete()?;
        self.len.set(None);
        self.expiry.set(None);
        propagate::key_deleted(self.ctx, self.name);
        Ok(())
    }

    /// Give the existing key the absolute expiry `expires_at`; replicated as
    /// `PEXPIREAT key expires_at`.
    pub fn expire_at(&self, expires_at: UnixMillis) -> Result<(), Error> {
        if self.expiry.get() != Some(expires_at) {
            self.set_abs_expire(expires_at)?;
        }
        propagate::expiry_set(self.ctx, self.name, expires_at);
        Ok(())
    }

    fn set_abs_expire(&self, at: UnixMillis) -> Result<(), Error> {
        let ms = propagate::millis(at);
        let set_abs_expire = api!(RedisModule_SetAbsExpire)?;
        // SAFETY: the key is open for writing and holds a value.
        let rc = unsafe { set_abs_expire(self.key.ptr(), ms) };
        if rc != OK {
            return Err(Error::Internal("set expire"));
        }
        self.expiry.set(Some(at));
        Ok(())
    }
}

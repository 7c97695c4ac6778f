//! A key opened through the raw module API, closed when dropped.

use crate::api::api;
use crate::argv::KeyName;
use ratelimit_core::Error;
use redis_module::{raw, Context};
use std::os::raw::c_int;

pub struct OpenKey(*mut raw::RedisModuleKey);

impl OpenKey {
    /// Open `name` with `mode` (`REDISMODULE_READ`, `_WRITE`, `_OPEN_KEY_NOTOUCH`...);
    /// `None` when the server gives no handle (a missing key opened for reading only).
    pub fn open(ctx: &Context, name: KeyName, mode: u32) -> Result<Option<OpenKey>, Error> {
        let open = api!(RedisModule_OpenKey)?;
        // SAFETY: ctx is the live command context and name a live module string.
        let key = unsafe { open(ctx.ctx, name.ptr(), mode as c_int) }.cast::<raw::RedisModuleKey>();
        Ok((!key.is_null()).then_some(OpenKey(key)))
    }

    /// Delete the key (opened for writing).
    pub fn delete(&self) -> Result<(), Error> {
        let delete = api!(RedisModule_DeleteKey)?;
        // SAFETY: the key is open, for writing as the callers open it.
        if unsafe { delete(self.0) } != raw::REDISMODULE_OK as c_int {
            return Err(Error::Internal("delete key"));
        }
        Ok(())
    }

    /// The handle, valid until `self` is dropped.
    pub fn ptr(&self) -> *mut raw::RedisModuleKey {
        self.0
    }
}

impl Drop for OpenKey {
    fn drop(&mut self) {
        if let Ok(close) = api!(RedisModule_CloseKey) {
            // SAFETY: opened by OpenKey in `open`, closed exactly once here.
            unsafe { close(self.0) };
        }
    }
}

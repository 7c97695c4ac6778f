//! Module strings made once, when the module loads, and kept for the life of the
//! server (the module is never unloaded): the words the hot paths pass to the server
//! on every call (`PXAT` in a replicated `SET`, the ACL probes), so that no call creates
//! and frees them again.

use crate::api::api;
use redis_module::raw;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// One static string: its text, and the server's string once made.
pub struct StaticString {
    text: &'static CStr,
    made: AtomicPtr<raw::RedisModuleString>,
}

impl StaticString {
    const fn new(text: &'static CStr) -> StaticString {
        StaticString {
            text,
            made: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The server's string, or `None` before the module has loaded (never, in a
    /// command).
    pub fn get(&self) -> Option<*mut raw::RedisModuleString> {
        let p = self.made.load(Ordering::Relaxed);
        (!p.is_null()).then_some(p)
    }
}

pub static PXAT: StaticString = StaticString::new(c"PXAT");
pub static SET: StaticString = StaticString::new(c"SET");
pub static PEXPIRE: StaticString = StaticString::new(c"PEXPIRE");
pub static ANY_VALUE: StaticString = StaticString::new(c"1");

static ALL: [&StaticString; 4] = [&PXAT, &SET, &PEXPIRE, &ANY_VALUE];

/// Make every static string (during OnLoad).
pub fn make_all() -> Result<(), String> {
    let create = api!(RedisModule_CreateString).map_err(|e| e.to_string())?;
    for s in &ALL {
        // SAFETY: a null context makes a string owned by the module, which keeps it for
        // the life of the server; the text is a static C string.
        let p = unsafe {
            create(
                std::ptr::null_mut(),
                s.text.as_ptr(),
                s.text.to_bytes().len(),
            )
        };
        if p.is_null() {
            return Err(format!("could not create the string {:?}", s.text));
        }
        s.made.store(p, Ordering::Relaxed);
    }
    Ok(())
}

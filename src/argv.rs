//! A command's arguments as the server hands them over, borrowed for the call: the
//! bytes of each argument and the server's own string objects for the keys. Nothing
//! is copied, retained or freed (the server owns `argv` until the command returns).

use ratelimit_core::Error;
use redis_module::{raw, RedisString};
use smallvec::SmallVec;
use std::marker::PhantomData;
use std::os::raw::c_int;

/// The arguments of one call, the command name at index 0.
pub struct Args<'a> {
    strings: &'a [*mut raw::RedisModuleString],
    /// Inline for the usual argument counts (an RL.MULTI call of 2 keys and 3 windows
    /// has 13).
    bytes: SmallVec<[&'a [u8]; 16]>,
}

impl<'a> Args<'a> {
    /// # Safety
    ///
    /// `argv` must point to `argc` live module strings that stay alive and unchanged
    /// for `'a` (true of a command's `argv` during the call).
    pub unsafe fn new(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> Args<'a> {
        let len = usize::try_from(argc).unwrap_or(0);
        let strings: &'a [*mut raw::RedisModuleString] = if argv.is_null() || len == 0 {
            &[]
        } else {
            // SAFETY: the caller guarantees `argc` live strings at `argv` for 'a.
            unsafe { std::slice::from_raw_parts(argv, len) }
        };
        let bytes = strings.iter().map(|&s| string_bytes(s)).collect();
        Args { strings, bytes }
    }

    /// The number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Every argument after the command name.
    pub fn after_name(&self) -> &[&'a [u8]] {
        self.bytes.get(1..).unwrap_or(&[])
    }

    /// The argument at `i` as a key name (index 0 is the command name).
    pub fn key(&self, i: usize) -> Option<KeyName<'a>> {
        self.strings.get(i).map(|&s| KeyName {
            ptr: s,
            bytes: self.bytes.get(i).copied().unwrap_or(&[]),
            _life: PhantomData,
        })
    }

    /// The keys at `first..first + n`, or an internal error when they are not there
    /// (the parser counted them).
    pub fn keys(&self, first: usize, n: usize) -> Result<KeyNames<'a>, Error> {
        (first..first + n)
            .map(|i| self.key(i).ok_or_else(|| Error::Internal("key argument")))
            .collect()
    }
}

/// The keys of one call, inline for the usual few.
pub type KeyNames<'a> = SmallVec<[KeyName<'a>; 4]>;

/// A key named by the caller: the server's string object and its bytes.
#[derive(Clone, Copy)]
pub struct KeyName<'a> {
    ptr: *mut raw::RedisModuleString,
    bytes: &'a [u8],
    _life: PhantomData<&'a ()>,
}

impl<'a> KeyName<'a> {
    /// The server's string object, for key and replication APIs.
    pub fn ptr(&self) -> *mut raw::RedisModuleString {
        self.ptr
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a> From<&'a RedisString> for KeyName<'a> {
    fn from(s: &'a RedisString) -> KeyName<'a> {
        KeyName {
            ptr: s.inner,
            bytes: s.as_slice(),
            _life: PhantomData,
        }
    }
}

/// The bytes of a live module string; empty for a null one.
fn string_bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    let mut len = 0;
    let ptr = raw::string_ptr_len(s, &mut len);
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: the server gives `len` readable bytes at `ptr`, alive as long as the
    // string, which outlives 'a (see `Args::new`).
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

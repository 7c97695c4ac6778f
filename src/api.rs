//! Access to the server's module API function pointers.

/// The module API function `$name` (e.g. `RedisModule_OpenKey`), or
/// `Error::Internal` when this server does not provide it.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: the server fills these pointers in once, while the module loads and
        // before any command can run; they are only read afterwards.
        let f = unsafe { redis_module::raw::$name };
        f.ok_or_else(|| ratelimit_core::Error::Internal(stringify!($name)))
    }};
}
pub(crate) use api;

//! Ctrl-C (SIGINT) and SIGTERM during a sweep: the handler only records the signal;
//! the sweep threads see it before their next call and stop, so every key counted
//! as given a TTL really got one, and the summary can be printed. The handler is
//! installed with `SA_RESETHAND`: a second Ctrl-C gets the default action and ends
//! the tool at once (for a server that does not answer).

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(signal: libc::c_int) {
    // Async-signal-safe: one atomic store.
    RECEIVED.store(signal, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM from now on. A signal that was ignored when the tool
/// started (`nohup`, a background job of a non-interactive shell) stays ignored.
pub fn install() -> Result<(), String> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data, for which all-zero is a valid value.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: reads and writes on the server connections go on after it.
        action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
        // SAFETY: `sa_mask` is a valid, owned `sigset_t`.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: all-zero is a valid `sigaction`; sigaction() overwrites it.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to valid `sigaction` values; `record` only does
        // an atomic store, which is async-signal-safe.
        if unsafe { libc::sigaction(signal, &action, &mut old) } != 0 {
            return Err(format!(
                "cannot install a signal handler: {}",
                std::io::Error::last_os_error()
            ));
        }
        if old.sa_sigaction == libc::SIG_IGN {
            // SAFETY: `old` is the action sigaction() just returned.
            unsafe { libc::sigaction(signal, &old, std::ptr::null_mut()) };
        }
    }
    Ok(())
}

/// The signal received since [`install`], if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The conventional exit status of a process stopped by `signal`: 128 + its number
/// (130 for SIGINT, 143 for SIGTERM).
pub fn exit_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// `SIGINT`, `SIGTERM`, or the number.
pub fn name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_names() {
        assert_eq!(exit_status(libc::SIGINT), 130);
        assert_eq!(exit_status(libc::SIGTERM), 143);
        assert_eq!(name(libc::SIGINT), "SIGINT");
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
    }

    #[test]
    fn a_signal_is_recorded_not_fatal() {
        install().expect("install");
        assert_eq!(received(), None);
        // SAFETY: raise() sends the signal to this thread; the handler only stores it.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert_eq!(received(), Some(libc::SIGTERM));
    }
}

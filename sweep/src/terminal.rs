//! The width of the terminal behind stderr, for the progress bar.

/// Columns of the terminal on stderr, or `None` when stderr is not a terminal (or the
/// size is unknown).
pub fn stderr_columns() -> Option<usize> {
    // SAFETY: `winsize` is plain data, for which all-zero is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ only writes into `ws`, and fails harmlessly on a descriptor
    // that is not a terminal.
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

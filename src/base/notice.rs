//! Notices: the library's and the commands' lines on standard error (warnings, "this is
//! estimated", "this file is ignored").
//!
//! Each line is written whole with one `write(2)` (issue 46 item 6): standard error is
//! unbuffered, and `writeln!` on it wrote each piece of the format separately (the no-PMU
//! notice took five calls), so that under `mpirun`, where every rank shares one standard error,
//! lines of different ranks interleaved mid-line. A line is formatted first, then written.
//!
//! A command that writes a machine-readable report on a stream the notices share can
//! [`capture`] them instead and put them in the report (`perfex --json` does, issue 46 item 7):
//! captured lines are kept in memory until [`take`], and [`release`] writes what is left.
//! Never called from a signal handler: it allocates and locks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static CAPTURING: AtomicBool = AtomicBool::new(false);
static CAPTURED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Write `text` (whole lines, each ending in `\n`) to standard error with one `write(2)` (a
/// short write is continued), or keep it while [`capture`] is on. A standard error that cannot
/// be written loses the text: never a panic.
pub fn write(text: &str) {
    if CAPTURING.load(Ordering::Acquire) {
        let mut kept = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
        // The capture may have ended while this thread waited for the lock.
        if CAPTURING.load(Ordering::Acquire) {
            kept.extend(text.lines().map(str::to_string));
            return;
        }
    }
    write_stderr(text);
}

/// Write `text` to standard error with one `write(2)` when the kernel takes it whole (always
/// for a line on a pipe or a terminal), never a panic.
pub fn write_stderr(text: &str) {
    // `write(2)` itself, not `std::io::stderr()`: no lock (whose synchronisation, inside the
    // uninstrumented standard library, ThreadSanitizer reports as a race), and the whole buffer
    // in one call; a short write or `EINTR` goes on with the rest.
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes from a live buffer of `rest.len()` bytes.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if n == 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// From now on keep the notices instead of writing them.
pub fn capture() {
    CAPTURING.store(true, Ordering::Release);
}

/// The notices kept so far (each a line without its newline), removed; capturing goes on.
pub fn take() -> Vec<String> {
    std::mem::take(&mut *CAPTURED.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Stop capturing and write the notices kept and not taken to standard error (a command that
/// ends without its report has no other place for them).
pub fn release() {
    let mut kept = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
    CAPTURING.store(false, Ordering::Release);
    let mut text = String::new();
    for line in kept.drain(..) {
        text.push_str(&line);
        text.push('\n');
    }
    drop(kept);
    if !text.is_empty() {
        write_stderr(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_lines_are_taken_then_released() {
        capture();
        write("first\nsecond\n");
        // Other tests of this process may say something meanwhile: look for these lines only.
        let kept = take();
        let at = kept.iter().position(|l| l == "first").expect("kept");
        assert_eq!(kept[at + 1], "second");
        write("third\n");
        release();
        assert!(!take().iter().any(|l| l == "third"));
    }
}

//! The descriptor the report is written to (issue 44 item 1): the library's copy of standard
//! error, taken when counting starts because programs close their standard error in exit
//! handlers that run before the report (GNU coreutils' `close_stdout`). A program may also
//! close the copy (`close_range(3, ~0U, 0)`, a loop closing 3..1023) and then open a pipe or a
//! file that gets its number: before, the report was written into that file (or blocked on
//! that pipe). Now the copy is used only while it is still the file it was (its identity:
//! device, inode, type, special device, access mode; and close-on-exec), else standard error
//! itself while that is still the original file; else the report has nowhere to go that is
//! the library's, and is not written (`PERFCOMPAT_PRELOAD_OUTPUT` names a file the report
//! opens when it is written, which a program cannot take away). Async-signal-safe: `fstat`
//! and `fcntl` only.

/// What a descriptor refers to, as far as the library can tell without a second reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    rdev: u64,
    /// The file type bits of `st_mode`.
    kind: u32,
    /// The access mode of the open file description (which, unlike `O_APPEND` or
    /// `O_NONBLOCK`, no `F_SETFL` changes: make sets `O_APPEND` on its standard error).
    flags: i32,
}

impl Identity {
    /// The identity of the open descriptor `fd`, `None` when it is not open.
    fn of(fd: i32) -> Option<Identity> {
        // SAFETY: plain data, filled by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid stat buffer; any descriptor number may be asked about.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return None;
        }
        // SAFETY: F_GETFL reads the descriptor's status flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return None;
        }
        Some(Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            rdev: st.st_rdev,
            kind: st.st_mode & libc::S_IFMT,
            flags: flags & libc::O_ACCMODE,
        })
    }
}

/// Standard error as it was when counting started, and the library's copy of it.
#[derive(Debug)]
pub struct Output {
    /// The copy (close-on-exec), -1 when none could be taken.
    copy: i32,
    /// What standard error was; `None`: it was closed.
    id: Option<Identity>,
}

impl Output {
    /// Take a copy of standard error (a descriptor of 3 or more, close-on-exec).
    pub fn keep_stderr() -> Output {
        let id = Identity::of(2);
        // SAFETY: fcntl on the standard error descriptor; a failure leaves -1.
        let copy = if id.is_some() {
            unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) }
        } else {
            -1
        };
        Output { copy, id }
    }

    /// Where the report goes now: the copy while it is still the library's, else standard
    /// error while it is still the file it was, else `None` (nowhere that is the library's).
    /// Async-signal-safe.
    pub fn fd(&self) -> Option<i32> {
        let id = self.id?;
        if self.copy >= 0 && Identity::of(self.copy) == Some(id) && cloexec(self.copy) {
            return Some(self.copy);
        }
        (Identity::of(2) == Some(id)).then_some(2)
    }

    /// The copy's number (-1: none), for the tests.
    pub fn copy(&self) -> i32 {
        self.copy
    }
}

/// Whether `fd` is close-on-exec, as the library's copy is.
fn cloexec(fd: i32) -> bool {
    // SAFETY: F_GETFD reads the descriptor's flags.
    let f = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    f >= 0 && f & libc::FD_CLOEXEC != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_taken_over_by_another_file_is_not_used() {
        let out = Output::keep_stderr();
        if out.copy() < 0 {
            return; // no standard error in this test run
        }
        assert_eq!(out.fd(), Some(out.copy()));
        // The program closes the copy and opens a file that gets its number.
        let path = std::env::temp_dir().join(format!("perfcompat-output-{}", std::process::id()));
        // SAFETY: the copy is this test's.
        unsafe { libc::close(out.copy()) };
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            )
        };
        assert!(fd >= 0);
        let got = out.fd();
        // Standard error itself, still the same file, or nothing: never the program's file.
        assert!(got == Some(2) || got.is_none(), "{got:?}");
        assert_ne!(got, Some(fd));
        // SAFETY: the test's own descriptor.
        unsafe { libc::close(fd) };
        let _ = std::fs::remove_file(path);
    }
}

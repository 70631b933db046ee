//! The command [`Pctx::create`](super::Pctx::create) starts: forked to wait on a pipe, seized,
//! let go to `execvp` it (searched in `PATH` as the shell does), and reaped.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use super::{errno, hear, Status};
use crate::base::error::{Error, Result};

/// Async-signal-safe write of a whole buffer (for a child between fork and exec).
pub(super) fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: writes from a live buffer.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Whether `execvp` could find `name`: a path (with a `/`) that exists, or a file of that name
/// in a `PATH` directory (glibc's default path when `PATH` is unset).
fn findable(name: &std::ffi::OsStr) -> bool {
    if name.is_empty() {
        return false;
    }
    if name.as_bytes().contains(&b'/') {
        return std::path::Path::new(name).exists();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path).any(|d| d.join(name).is_file())
}

/// Whether `execvp` could run `name`: `Ok`, or the errno it would fail with (`ENOENT` when no
/// file of that name is found, `EACCES` when the file found is not an executable regular
/// file). As `execvp`, a `PATH` search goes on past a file it cannot execute and reports
/// `EACCES` only when it finds none it can.
pub(super) fn executable(name: &std::ffi::OsStr) -> std::result::Result<(), i32> {
    let runnable = |p: &std::path::Path| -> std::result::Result<(), i32> {
        let meta = std::fs::metadata(p).map_err(|e| e.raw_os_error().unwrap_or(libc::ENOENT))?;
        let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| libc::ENOENT)?;
        // SAFETY: a valid NUL-terminated path.
        if !meta.is_file() || unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
            return Err(libc::EACCES);
        }
        Ok(())
    };
    if name.is_empty() {
        return Err(libc::ENOENT);
    }
    if name.as_bytes().contains(&b'/') {
        return runnable(std::path::Path::new(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let mut found = Err(libc::ENOENT);
    for d in std::env::split_paths(&path) {
        match runnable(&d.join(name)) {
            Ok(()) => return Ok(()),
            Err(libc::EACCES) => found = Err(libc::EACCES),
            Err(_) => {}
        }
    }
    found
}

/// Whether process `pid` is a zombie (state `Z` in `/proc/<pid>/stat`).
pub(super) fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// A forked child waiting for the go-ahead before it runs a command: the counters (or the
/// tracer) attach to it first.
pub(crate) struct Child {
    pub(crate) pid: i32,
    name: String,
    go: i32,
    status: i32,
    pub(super) reaped: bool,
}

impl Child {
    /// Fork; the child restores `mask`, waits for [`Child::release`] and runs `command`
    /// (with `hear`, under the filter of [`hear`]).
    pub(crate) fn spawn(command: &[OsString], mask: &libc::sigset_t, hear: bool) -> Result<Child> {
        // A command that is nowhere is refused before the fork, as `pctx_create` documents;
        // every other exec failure (permissions, format) is reported by the child.
        if let Some(name) = command.first().filter(|n| !findable(n)) {
            return Err(Error::CannotRun {
                command: name.to_string_lossy().into_owned(),
                errno: libc::ENOENT,
            });
        }
        Self::spawn_found(command, mask, hear)
    }

    /// [`Child::spawn`] for a caller that made sure `execvp` can find the command (with
    /// [`executable`]): the command's path is not looked up again (issue 48: a `statx` less).
    pub(super) fn spawn_found(
        command: &[OsString],
        mask: &libc::sigset_t,
        hear: bool,
    ) -> Result<Child> {
        let name = command
            .first()
            .ok_or_else(|| Error::InvalidArgument("no command to run".into()))?;
        let argv = command
            .iter()
            .map(|a| {
                CString::new(a.as_bytes()).map_err(|_| {
                    Error::InvalidArgument(format!("argument {a:?} contains a NUL byte"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (mut go, mut st) = ([0i32; 2], [0i32; 2]);
        // SAFETY: pipe2 writes two fds into each array.
        unsafe {
            if libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                return Err(Error::last_os("pipe2"));
            }
            if libc::pipe2(st.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                let e = Error::last_os("pipe2");
                libc::close(go[0]);
                libc::close(go[1]);
                return Err(e);
            }
        }
        // SAFETY: the child only makes async-signal-safe calls before exec or _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: (child) async-signal-safe calls on our own fds and buffers.
            unsafe {
                libc::close(go[1]);
                libc::close(st[0]);
                libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(go[0], (&mut b as *mut u8).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break n;
                    }
                };
                if n != 1 {
                    libc::_exit(127); // the parent gave up before the command could start
                }
                if hear {
                    hear::install_filter();
                }
                libc::execvp(ptrs[0], ptrs.as_ptr());
                let e = *libc::__errno_location();
                write_all(st[1], &e.to_ne_bytes());
                libc::_exit(if e == libc::ENOENT { 127 } else { 126 });
            }
        }
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(go[0]);
            libc::close(st[1]);
        }
        if pid < 0 {
            let e = Error::last_os("fork");
            // SAFETY: our remaining fds.
            unsafe {
                libc::close(go[1]);
                libc::close(st[0]);
            }
            return Err(e);
        }
        Ok(Child {
            pid,
            name: name.to_string_lossy().into_owned(),
            go: go[1],
            status: st[0],
            reaped: false,
        })
    }

    /// Let the child run the command; [`Error::CannotRun`] if `execvp` failed. Waits until the
    /// child has executed the command or failed to.
    pub(crate) fn release(&mut self) -> Result<()> {
        self.let_go();
        self.exec_error()
    }

    /// Let the child run the command, without waiting for its exec: a tracer learns of it
    /// from the exec stop, and of its failure from the child's end ([`Child::exec_error`]).
    pub(super) fn let_go(&mut self) {
        if self.go < 0 {
            return;
        }
        write_all(self.go, b"g");
        // SAFETY: our pipe end.
        unsafe { libc::close(self.go) };
        self.go = -1;
    }

    /// [`Error::CannotRun`] if the child, let go, could not execute the command (it says why
    /// on the status pipe before it ends). Blocks until it has executed the command or ended.
    pub(super) fn exec_error(&mut self) -> Result<()> {
        if self.status < 0 {
            return Ok(());
        }
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reads into the rest of a local buffer.
            let n = unsafe { libc::read(self.status, buf[got..].as_mut_ptr().cast(), 4 - got) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        // SAFETY: our pipe end, read to its end.
        unsafe { libc::close(self.status) };
        self.status = -1;
        if got == 4 {
            return Err(Error::CannotRun {
                command: self.name.clone(),
                errno: i32::from_ne_bytes(buf),
            });
        }
        Ok(())
    }

    /// Reap the child if it ended (`WNOHANG`); its resource usage goes into `ru`.
    pub(crate) fn try_reap(&mut self, ru: &mut libc::rusage) -> Result<Option<Status>> {
        let mut st = 0;
        // SAFETY: wait4 on our child with valid out-pointers.
        let r = unsafe { libc::wait4(self.pid, &mut st, libc::WNOHANG, ru) };
        if r < 0 {
            if errno() == libc::EINTR {
                return Ok(None);
            }
            return Err(Error::last_os("waiting for the command"));
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        Ok(Some(Status::from_wait(st)))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: closing our fds; killing and reaping our own child if it is still there.
        unsafe {
            if self.go >= 0 {
                libc::close(self.go); // the waiting child reads EOF and exits
            }
            if self.status >= 0 {
                libc::close(self.status);
            }
            if !self.reaped {
                if self.go < 0 {
                    libc::kill(self.pid, libc::SIGKILL);
                }
                let mut st = 0;
                while libc::waitpid(self.pid, &mut st, libc::__WALL) < 0 && errno() == libc::EINTR {
                }
            }
        }
    }
}

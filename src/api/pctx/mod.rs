//! Process control: run a command, or capture a running process, under `ptrace(2)` and be
//! told about every thread and process it creates, execs and ends, so counters can be bound to
//! each thread before it runs and read as it exits. This is what `perfex -mp` uses for
//! per-thread reports, and what Solaris's libpctx (`pctx_create`, `pctx_capture`,
//! `pctx_run`, `pctx_release`, behind `cpc_bind_pctx`) did with `/proc`.
//!
//! # How
//! - [`Pctx::create`] forks a child that waits on a pipe; the parent seizes it
//!   (`PTRACE_SEIZE` with the clone, fork, vfork, exec and exit options), and [`Pctx::run`]
//!   lets it `execvp` the command, holds it at the exec (which is not reported: it is how the
//!   command starts) and calls [`Observer::init_lwp`] before the command's first instruction.
//!   [`Pctx::capture`] seizes every thread of a running process instead.
//! - The order of the callbacks is libpctx's (pctx_set_events(3CPC)): a program that just runs
//!   gives `init_lwp`, `fini_lwp`, `exit`; a new thread gives `lwp_create` (with the creating
//!   thread's id) before its own `init_lwp`; a thread that ends before its process (it called
//!   `exit(2)`, `pthread_exit`, or returned from its start routine, while another thread
//!   lives) gives `lwp_exit` then `fini_lwp`; the threads that end with the process (its
//!   `exit_group(2)`, a fatal signal, the last thread's exit) give only `fini_lwp`; an `execve` gives
//!   `fini_lwp` for every observed thread of the process, then [`Observer::exec`], then
//!   `init_lwp` for the process's one thread (its id is the process id).
//! - A new process is followed as [`Observer::fork`] says ([`Follow`]): in this `Pctx`
//!   (`perfex -mp`), not at all (it runs untraced), or, as libpctx does when a fork callback is
//!   registered, as a `Pctx` of its own handed to [`Observer::adopt`] in a forked copy of the
//!   controlling process (see [`Follow::Copy`]).
//! - A new thread or process starts stopped (`PTRACE_EVENT_STOP`): `init_lwp` runs before it
//!   executes one instruction. A thread about to exit stops at `PTRACE_EVENT_EXIT`:
//!   [`Observer::fini_lwp`] runs while its counters still hold everything it did.
//! - Signals the tracees receive are passed on unchanged; group stops (`SIGSTOP`, `SIGTSTP`)
//!   are honoured with `PTRACE_LISTEN`, so job control works.
//! - [`Pctx::run`] returns when the first process (the command, or the captured process)
//!   has exited, or after the requested number of ticks. Processes it created that are still
//!   running are released: their threads get `fini_lwp` and are detached.
//!
//! # Limits (Linux)
//! - The caller must be allowed to trace the process (`kernel.yama.ptrace_scope`, same user or
//!   `CAP_SYS_PTRACE`); a process that is already being traced (by a debugger) cannot be.
//! - A process whose non-leader thread calls `execve` continues under the leader's id; the
//!   threads the exec ends get `fini_lwp` when the kernel reports them gone.
//! - One `Pctx` is driven by one thread. It waits only for its own tracees (never for any
//!   child), and wakes on SIGCHLD, or every 10 ms where another thread of the process may
//!   have taken the SIGCHLD; ticks are timed by the clock, not by these wake-ups.
//! - Only successful `execve`s are seen (the exec event comes after the new program is
//!   loaded, before it runs): `fini_lwp` reads counters that already include the kernel's
//!   work for the exec, and a failed `execve` gives no callback at all.

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};

mod hear;
pub use hear::{tell_controller, DISABLE, ENABLE};

// ptrace(2) events and options (the kernel's ABI, the same on every architecture).
const EVENT_FORK: i32 = 1;
const EVENT_VFORK: i32 = 2;
const EVENT_CLONE: i32 = 3;
const EVENT_EXEC: i32 = 4;
const EVENT_EXIT: i32 = 6;
const EVENT_SECCOMP: i32 = 7;
const EVENT_STOP: i32 = 128;
// fork vfork clone exec exit seccomp
const OPTIONS: libc::c_ulong = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
}

impl Status {
    /// The exit status a shell would report: the status, or 128 + the signal number.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Exited(c) => c,
            Status::Signaled(s) => 128 + s,
        }
    }

    fn from_wait(st: i32) -> Status {
        if libc::WIFSIGNALED(st) {
            Status::Signaled(libc::WTERMSIG(st))
        } else {
            Status::Exited(libc::WEXITSTATUS(st))
        }
    }
}

/// How a process created by an observed process is followed (the answer of
/// [`Observer::fork`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Observed in this [`Pctx`], its threads reported to the same observer (`perfex -mp`).
    Here,
    /// Not followed: it is let go before it runs and runs untraced (libpctx without a fork
    /// callback).
    No,
    /// Followed as a [`Pctx`] of its own in a copy of the controlling process: the controller
    /// forks (after flushing C stdio buffers), the copy takes control of the new process,
    /// still stopped before its first instruction, and calls [`Observer::adopt`] with it; when
    /// `adopt` returns the copy releases whatever it still controls and exits (`_exit(0)`).
    /// This is libpctx's behaviour when a fork callback is registered: the callback runs in
    /// its own copy of the caller, so whatever it changes does not disturb the parent's run.
    /// The original controller goes on with the parent and reaps the copy when it ends.
    /// In a multithreaded controller only the calling thread exists in the copy.
    Copy,
}

/// What a [`Pctx`] tells its user. Every method has a default that does nothing (and
/// [`Observer::fork`] follows children here). An error returned by `init_lwp`, `fini_lwp`,
/// `lwp_create`, `lwp_exit`, `exec` or `tick` ends [`Pctx::run`] with that error, with no
/// further callback (the processes are released by [`Pctx::release`] or the drop, not killed;
/// after a refusal, [`Error::CallbackRefused`], the release makes no `fini_lwp` either, as
/// libpctx's callbacks returning -1 ask).
pub trait Observer {
    /// Thread `tid` of process `pid` is now observed; it has not run yet (a new thread, the
    /// created command, a program just executed).
    fn init_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Thread `tid` of process `pid` is about to exit or to execute a new program, or is
    /// being released.
    fn fini_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Thread `tid` of process `pid` created thread `new` (called before `new`'s `init_lwp`).
    fn lwp_create(&mut self, pid: i32, tid: i32, new: i32) -> Result<()> {
        let _ = (pid, tid, new);
        Ok(())
    }
    /// Thread `tid` of process `pid` is exiting before its process does (before its
    /// `fini_lwp`); not called for the threads that end with the process.
    fn lwp_exit(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Thread `tid` of process `pid` created process `child`: say how to follow it.
    fn fork(&mut self, pid: i32, tid: i32, child: i32) -> Follow {
        let _ = (pid, tid, child);
        Follow::Here
    }
    /// In the copy of the controlling process made for [`Follow::Copy`]: `child`, created by
    /// thread `tid` of process `pid`, is under control, stopped before its first instruction
    /// (nothing has been called for it yet: its `init_lwp` comes from its own [`Pctx::run`]);
    /// dropping it lets it go. Or the error that kept the copy from taking it over (it then
    /// runs untraced).
    fn adopt(&mut self, child: Result<Pctx>, pid: i32, tid: i32) {
        let _ = (child, pid, tid);
    }
    /// Process `pid` executed a new program (after the `fini_lwp` of its threads, before the
    /// `init_lwp` of its one thread `pid`). An error ends the run, the process held stopped
    /// before the new program's first instruction.
    fn exec(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Process `pid` ended (after the `fini_lwp` of its last thread).
    fn exit(&mut self, pid: i32, status: Status) {
        let _ = (pid, status);
    }
    /// The tick of [`Pctx::run`], once per observed thread.
    fn tick(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Asked whenever [`Pctx::run`] wakes up (at least every 10 ms): `true` ends the run
    /// with `Ok(None)`, the processes still under control (libpctx's `pctx_terminate`).
    fn stop_requested(&mut self) -> bool {
        false
    }
}

fn ptrace(req: libc::c_uint, tid: i32, data: libc::c_ulong) -> libc::c_long {
    // SAFETY: requests that take no pointer (data is an integer: options or a signal).
    unsafe { libc::ptrace(req, tid, 0usize, data) }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The process (thread group) a thread belongs to, from `/proc/<tid>/status`.
fn tgid_of(tid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The system call thread `tid`, in its exit stop (`PTRACE_EVENT_EXIT`), was making: the
/// number of `exit` for a thread ending itself, of `exit_group` for the thread ending its
/// process, anything else for a thread killed with its process. `None` where it cannot be
/// read (another architecture, the thread gone).
#[cfg(target_arch = "x86_64")]
fn exit_syscall(tid: i32) -> Option<libc::c_long> {
    // struct user_regs_struct's orig_rax, the 16th word of the user area.
    const ORIG_RAX: usize = 15 * 8;
    // SAFETY: PEEKUSER reads one word of the tracee's user area at a valid offset.
    unsafe {
        *libc::__errno_location() = 0;
        let v = libc::ptrace(libc::PTRACE_PEEKUSER, tid, ORIG_RAX, 0usize);
        (v != -1 || errno() == 0).then_some(v)
    }
}

/// See the x86-64 version: on arm64 the syscall number is the `NT_ARM_SYSTEM_CALL` regset.
#[cfg(target_arch = "aarch64")]
fn exit_syscall(tid: i32) -> Option<libc::c_long> {
    const NT_ARM_SYSTEM_CALL: usize = 0x404;
    let mut nr: i32 = -1;
    let mut iov = libc::iovec {
        iov_base: (&mut nr as *mut i32).cast(),
        iov_len: std::mem::size_of::<i32>(),
    };
    // SAFETY: GETREGSET writes at most iov_len bytes into `nr`.
    let r = unsafe { libc::ptrace(libc::PTRACE_GETREGSET, tid, NT_ARM_SYSTEM_CALL, &mut iov) };
    (r == 0).then_some(libc::c_long::from(nr))
}

/// See the x86-64 version.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn exit_syscall(_tid: i32) -> Option<libc::c_long> {
    None
}

/// Async-signal-safe write of a whole buffer (for a child between fork and exec).
fn write_all(fd: i32, mut buf: &[u8]) {
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
fn executable(name: &std::ffi::OsStr) -> std::result::Result<(), i32> {
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
fn is_zombie(pid: i32) -> bool {
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
    reaped: bool,
}

impl Child {
    /// Fork; the child restores `mask`, waits for [`Child::release`] and runs `command`
    /// (with `hear`, under the filter of [`hear`]).
    pub(crate) fn spawn(command: &[OsString], mask: &libc::sigset_t, hear: bool) -> Result<Child> {
        let name = command
            .first()
            .ok_or_else(|| Error::InvalidArgument("no command to run".into()))?;
        // A command that is nowhere is refused before the fork, as `pctx_create` documents;
        // every other exec failure (permissions, format) is reported by the child.
        if !findable(name) {
            return Err(Error::CannotRun {
                command: name.to_string_lossy().into_owned(),
                errno: libc::ENOENT,
            });
        }
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

    /// Let the child run the command; [`Error::CannotRun`] if `execvp` failed.
    pub(crate) fn release(&mut self) -> Result<()> {
        if self.go < 0 {
            return Ok(());
        }
        write_all(self.go, b"g");
        // SAFETY: our pipe end.
        unsafe { libc::close(self.go) };
        self.go = -1;
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
            libc::close(self.status);
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

/// The longest wait for SIGCHLD before children are checked again anyway.
const POLL: Duration = Duration::from_millis(10);

/// The calling thread's signal state while a command runs: SIGCHLD (and optionally SIGUSR1
/// and SIGUSR2) blocked and taken with `sigwaitinfo`; SIGINT and SIGQUIT optionally ignored.
/// Restored on drop.
pub(crate) struct Signals {
    pub(crate) old_mask: libc::sigset_t,
    wait: libc::sigset_t,
    old_int: libc::sighandler_t,
    old_quit: libc::sighandler_t,
    ignoring: bool,
}

impl Signals {
    /// Block SIGCHLD, and SIGUSR1/SIGUSR2 when `usr`.
    pub(crate) fn block(usr: bool) -> Result<Signals> {
        // SAFETY: sigset manipulation on local values.
        unsafe {
            let mut wait: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut wait);
            libc::sigaddset(&mut wait, libc::SIGCHLD);
            if usr {
                libc::sigaddset(&mut wait, libc::SIGUSR1);
                libc::sigaddset(&mut wait, libc::SIGUSR2);
            }
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &wait, &mut old_mask);
            if rc != 0 {
                return Err(Error::Os {
                    op: "blocking signals",
                    errno: rc,
                });
            }
            Ok(Signals {
                old_mask,
                wait,
                old_int: libc::SIG_DFL,
                old_quit: libc::SIG_DFL,
                ignoring: false,
            })
        }
    }

    /// Ignore SIGINT and SIGQUIT (after the fork: the child keeps its own dispositions), as a
    /// shell's `time` does: the terminal sends them to the command too.
    pub(crate) fn ignore_interrupts(&mut self) {
        // SAFETY: setting dispositions to SIG_IGN.
        unsafe {
            self.old_int = libc::signal(libc::SIGINT, libc::SIG_IGN);
            self.old_quit = libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        }
        self.ignoring = true;
    }

    /// The next of the blocked signals, or `None` when `timeout` (at most [`POLL`]) passed
    /// first. In a multithreaded process SIGCHLD may go to (and be dropped by) a thread that
    /// does not block it, so callers check their children again after every `None`.
    pub(crate) fn next(&self, timeout: Option<Duration>) -> Result<Option<i32>> {
        let d = timeout.map_or(POLL, |t| t.min(POLL));
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: waits on a valid set with a valid timeout.
        let s = unsafe { libc::sigtimedwait(&self.wait, std::ptr::null_mut(), &ts) };
        if s >= 0 {
            return Ok(Some(s));
        }
        match errno() {
            // A handler ran (pctx_terminate may have been called from it): let the caller
            // look at its state again.
            libc::EINTR | libc::EAGAIN => Ok(None),
            _ => Err(Error::last_os("sigtimedwait")),
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        // SAFETY: restores what `block` and `ignore_interrupts` changed.
        unsafe {
            if self.ignoring {
                libc::signal(libc::SIGINT, self.old_int);
                libc::signal(libc::SIGQUIT, self.old_quit);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old_mask, std::ptr::null_mut());
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Task {
    pid: i32,
    observed: bool,
    /// In a ptrace-stop we took and have not ended (the command at its exec before the run,
    /// an adopted process, a thread whose callback failed): resumed or detached directly.
    held: bool,
    /// Past its exit stop.
    exiting: bool,
}

impl Task {
    fn new(pid: i32) -> Task {
        Task {
            pid,
            observed: false,
            held: false,
            exiting: false,
        }
    }
}

/// Wait for a stop or the end of traced thread `tid`.
fn wait_blocking(tid: i32, ru: &mut libc::rusage) -> Result<i32> {
    loop {
        let mut st = 0;
        // SAFETY: wait4 with valid out-pointers.
        let r = unsafe { libc::wait4(tid, &mut st, libc::__WALL, ru) };
        if r > 0 {
            return Ok(st);
        }
        if errno() != libc::EINTR {
            return Err(Error::last_os("waiting for a traced process"));
        }
    }
}

/// A process under control: created by [`Pctx::create`] or captured by [`Pctx::capture`]
/// (or handed to [`Observer::adopt`]). Dropping it releases every traced thread (and kills a
/// created command that never ran).
pub struct Pctx {
    pid: i32,
    child: Option<Child>,
    signals: Signals,
    tasks: BTreeMap<i32, Task>,
    status: Option<Status>,
    rusage: libc::rusage,
    /// A callback refused ([`Error::CallbackRefused`]): the run ended there, and no callback
    /// is made after it, the release's `fini_lwp` included.
    refused: bool,
    started: bool,
    /// The copies of this controller that follow children ([`Follow::Copy`]), to reap.
    copies: Vec<i32>,
}

impl Pctx {
    fn new(pid: i32, child: Option<Child>, signals: Signals) -> Pctx {
        Pctx {
            pid,
            child,
            signals,
            tasks: BTreeMap::new(),
            status: None,
            refused: false,
            // SAFETY: plain data.
            rusage: unsafe { std::mem::zeroed() },
            started: false,
            copies: Vec::new(),
        }
    }

    /// Start `command` (searched in `PATH`) under control, stopped before it runs: nothing of
    /// it executes until [`Pctx::run`].
    pub fn create(command: &[OsString]) -> Result<Pctx> {
        Self::start(command, false)
    }

    /// [`Pctx::create`] for a libcpc controller (libpctx's `pctx_create`, cputrack): the
    /// command's `cpc_disable` and `cpc_enable` on a thread with no set of its own stop and
    /// resume the counters this process binds to that thread ([`crate::base::held`]; how they are
    /// heard: [`tell_controller`]).
    pub fn create_for_cpc(command: &[OsString]) -> Result<Pctx> {
        Self::start(command, true)
    }

    fn start(command: &[OsString], hear: bool) -> Result<Pctx> {
        // What `execvp` would refuse is refused here, before anything is started (libpctx.h:
        // NULL and errno from pctx_create, not a handle whose run fails).
        if let Some(name) = command.first() {
            if let Err(errno) = executable(name) {
                return Err(Error::CannotRun {
                    command: name.to_string_lossy().into_owned(),
                    errno,
                });
            }
        }
        let signals = Signals::block(false)?;
        let child = Child::spawn(command, &signals.old_mask, hear)?;
        let pid = child.pid;
        let mut p = Pctx::new(pid, Some(child), signals);
        if ptrace(libc::PTRACE_SEIZE, pid, OPTIONS) < 0 {
            return Err(Self::trace_error(pid, errno()));
        }
        p.tasks.insert(pid, Task::new(pid));
        Ok(p)
    }

    /// Take control of the running process `pid` (every thread it has now, and every thread
    /// and process it creates from now on).
    pub fn capture(pid: i32) -> Result<Pctx> {
        if pid <= 0 {
            return Err(Error::NoSuchProcess(pid));
        }
        let signals = Signals::block(false)?;
        let mut p = Pctx::new(pid, None, signals);
        // Threads may appear while we seize: list again until no new one shows up.
        loop {
            let dir = std::fs::read_dir(format!("/proc/{pid}/task"))
                .map_err(|_| Error::NoSuchProcess(pid))?;
            let mut new = 0;
            for e in dir.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                if p.tasks.contains_key(&tid) {
                    continue;
                }
                if ptrace(libc::PTRACE_SEIZE, tid, OPTIONS) < 0 {
                    match errno() {
                        libc::ESRCH => continue, // it just exited
                        // The kernel refuses to trace a zombie with EPERM: say what it is.
                        libc::EPERM if is_zombie(pid) => return Err(Error::Zombie(pid)),
                        e => return Err(Self::trace_error(pid, e)),
                    }
                }
                p.tasks.insert(tid, Task::new(pid));
                new += 1;
            }
            if new == 0 {
                break;
            }
        }
        if p.tasks.is_empty() {
            return Err(Error::NoSuchProcess(pid));
        }
        Ok(p)
    }

    /// (In the copy of [`Follow::Copy`].) Take control of `pid`, a new single-threaded process
    /// the original controller let go with a SIGSTOP pending (or already taken); it is held
    /// stopped until [`Pctx::run`].
    fn adopt(pid: i32) -> Result<Pctx> {
        let signals = Signals::block(false)?;
        let mut p = Pctx::new(pid, None, signals);
        if ptrace(libc::PTRACE_SEIZE, pid, OPTIONS) < 0 {
            // (kernel.yama.ptrace_scope 1: the child is not our descendant.) Let it run
            // untraced rather than leave it stopped.
            let e = Self::trace_error(pid, errno());
            // SAFETY: ending the stop of a process our parent controller let go.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            return Err(e);
        }
        let mut ru = p.rusage;
        loop {
            let st = wait_blocking(pid, &mut ru)?;
            if !libc::WIFSTOPPED(st) {
                return Err(Error::NoSuchProcess(pid)); // killed meanwhile
            }
            let sig = libc::WSTOPSIG(st);
            match st >> 16 {
                // It had stopped already: now trapped for us; SIGCONT ends the group stop
                // (its notification is a later trap, passed over by the run).
                EVENT_STOP => {
                    if sig == libc::SIGSTOP {
                        // SAFETY: signalling the process we trace.
                        unsafe { libc::kill(pid, libc::SIGCONT) };
                    }
                    break;
                }
                // It was about to take the SIGSTOP: suppressed, it never stops.
                0 if sig == libc::SIGSTOP => break,
                0 => Self::cont(pid, sig), // another signal first: deliver it
                _ => Self::cont(pid, 0),
            }
        }
        p.tasks.insert(
            pid,
            Task {
                held: true,
                ..Task::new(pid)
            },
        );
        Ok(p)
    }

    fn trace_error(pid: i32, e: i32) -> Error {
        match e {
            libc::ESRCH => Error::NoSuchProcess(pid),
            libc::EPERM | libc::EACCES => Error::PermissionDenied {
                what: format!("tracing process {pid}"),
                fix: "it must belong to you and not be traced already; \
                      kernel.yama.ptrace_scope may forbid tracing processes that are not your \
                      descendants (CAP_SYS_PTRACE, or lower /proc/sys/kernel/yama/ptrace_scope)"
                    .into(),
            },
            errno => Error::Os {
                op: "ptrace(PTRACE_SEIZE)",
                errno,
            },
        }
    }

    /// The process under control.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// User and system CPU time of the created command and the children it waited for, in
    /// seconds (zero for a captured process, which is not our child).
    pub fn cpu_times(&self) -> (f64, f64) {
        let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        (s(self.rusage.ru_utime), s(self.rusage.ru_stime))
    }

    /// Ignore SIGINT and SIGQUIT in the calling process while the command runs (the terminal
    /// sends them to the command too), until this `Pctx` is dropped.
    pub fn ignore_interrupts(&mut self) {
        self.signals.ignore_interrupts();
    }

    /// Let the process run, telling `obs` what happens, until the first process ends (then
    /// `Ok(Some(status))`), or, with a `tick` interval, after `samples` ticks when `samples`
    /// is not zero, or when [`Observer::stop_requested`] says so (then `Ok(None)`; the process
    /// goes on under control). Ticks come every `tick` by the clock (the first one `tick`
    /// after the start; late ones are made up at once), each calling [`Observer::tick`] for
    /// every observed thread.
    pub fn run(
        &mut self,
        obs: &mut dyn Observer,
        tick: Option<Duration>,
        samples: u32,
    ) -> Result<Option<Status>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        if !self.started {
            self.started = true;
            if let Some(c) = &mut self.child {
                c.release()?;
                self.await_exec()?;
                if let Some(s) = self.status {
                    return Ok(Some(s));
                }
            }
            let tids: Vec<(i32, i32)> = self.tasks.iter().map(|(&k, t)| (k, t.pid)).collect();
            for (tid, pid) in tids {
                obs.init_lwp(pid, tid)?;
                if let Some(t) = self.tasks.get_mut(&tid) {
                    t.observed = true;
                }
            }
            for (&tid, t) in self.tasks.iter_mut().filter(|(_, t)| t.held) {
                t.held = false;
                Self::cont(tid, 0);
            }
        }
        let mut next_tick = tick.map(|d| Instant::now() + d);
        let mut ticks = 0u32;
        loop {
            while let Some((tid, st, ru)) = self.wait_any()? {
                if let Err(e) = self.handle(obs, tid, st, ru) {
                    self.hold(tid);
                    return Err(e);
                }
                if let Some(s) = self.status {
                    return Ok(Some(s));
                }
            }
            self.reap_copies(false);
            if obs.stop_requested() {
                return Ok(None);
            }
            if let (Some(at), Some(d)) = (next_tick, tick) {
                let now = Instant::now();
                if now >= at {
                    // Drift-free: a tick made late (this VM's vCPU descheduled, a slow
                    // callback) is followed at once by the ones missed meanwhile, so that
                    // the number of ticks measures the time run.
                    next_tick = Some(at + d);
                    let observed: Vec<(i32, i32)> = self
                        .tasks
                        .iter()
                        .filter(|(_, t)| t.observed)
                        .map(|(&tid, t)| (t.pid, tid))
                        .collect();
                    for (pid, tid) in observed {
                        obs.tick(pid, tid)?;
                    }
                    ticks += 1;
                    if samples != 0 && ticks >= samples {
                        return Ok(None);
                    }
                    continue;
                }
            }
            let timeout = next_tick.map(|t| t.saturating_duration_since(Instant::now()));
            self.signals.next(timeout)?;
        }
    }

    /// The created command, let go, stops at its exec (which is not reported: it is how the
    /// command starts); it is held there. If it died first, its status is recorded.
    fn await_exec(&mut self) -> Result<()> {
        let pid = self.pid;
        let mut ru = self.rusage;
        loop {
            let st = wait_blocking(pid, &mut ru)?;
            if !libc::WIFSTOPPED(st) {
                self.tasks.remove(&pid);
                self.rusage = ru;
                self.status = Some(Status::from_wait(st));
                if let Some(c) = &mut self.child {
                    c.reaped = true;
                }
                return Ok(());
            }
            match st >> 16 {
                EVENT_EXEC => {
                    self.hold(pid);
                    return Ok(());
                }
                0 => Self::cont(pid, libc::WSTOPSIG(st)), // a signal before the exec
                _ => Self::cont(pid, 0),
            }
        }
    }

    fn hold(&mut self, tid: i32) {
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.held = true;
        }
    }

    /// Reap the copies of this controller that have ended (all of them, waiting, when
    /// `wait`).
    fn reap_copies(&mut self, wait: bool) {
        self.copies.retain(|&c| loop {
            let mut st = 0;
            let flags = if wait { 0 } else { libc::WNOHANG };
            // SAFETY: waitpid on our own child with a valid out-pointer.
            let r = unsafe { libc::waitpid(c, &mut st, flags) };
            if r < 0 && errno() == libc::EINTR {
                continue;
            }
            break r == 0;
        });
    }

    /// One pending wait status of a traced task, if any. Each known task is asked in turn
    /// (never `wait(-1)`, which would take other children of the calling process); a task
    /// that has vanished unseen (ECHILD) is reported as exited.
    fn wait_any(&mut self) -> Result<Option<(i32, i32, libc::rusage)>> {
        let tids: Vec<i32> = self.tasks.keys().copied().collect();
        for tid in tids {
            loop {
                let mut st = 0;
                // SAFETY: plain data.
                let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                // SAFETY: wait4 with valid out-pointers.
                let r = unsafe { libc::wait4(tid, &mut st, libc::WNOHANG | libc::__WALL, &mut ru) };
                if r > 0 {
                    return Ok(Some((tid, st, ru)));
                }
                if r == 0 {
                    break;
                }
                match errno() {
                    libc::EINTR => continue,
                    libc::ECHILD => return Ok(Some((tid, 0, ru))),
                    _ => return Err(Error::last_os("waiting for traced threads")),
                }
            }
        }
        Ok(None)
    }

    fn task(&mut self, tid: i32) -> Task {
        *self
            .tasks
            .entry(tid)
            .or_insert_with(|| Task::new(tgid_of(tid).unwrap_or(tid)))
    }

    fn cont(tid: i32, sig: i32) {
        // ESRCH: it was killed meanwhile; its exit is reported by wait.
        let _ = ptrace(libc::PTRACE_CONT, tid, sig as libc::c_ulong);
    }

    fn set_observed(&mut self, tid: i32, observed: bool) {
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.observed = observed;
        }
    }

    /// One wait status of thread `tid`. A callback's error is returned with the thread still
    /// in its stop (the caller holds it).
    fn handle(
        &mut self,
        obs: &mut dyn Observer,
        tid: i32,
        st: i32,
        ru: libc::rusage,
    ) -> Result<()> {
        if !libc::WIFSTOPPED(st) {
            // Gone: exited, or killed (SIGKILL, or another thread's exit or exec, may skip
            // the exit stop).
            crate::base::held::forget_thread(tid);
            if let Some(t) = self.tasks.remove(&tid) {
                // Ended without an exit stop: killed with its process (SIGKILL) or by another
                // thread's exec; never a thread exiting on its own, so no lwp_exit.
                if t.observed {
                    obs.fini_lwp(t.pid, tid)?;
                }
                if tid == t.pid {
                    let status = Status::from_wait(st);
                    obs.exit(t.pid, status);
                    if tid == self.pid {
                        self.rusage = ru;
                        self.status = Some(status);
                        if let Some(c) = &mut self.child {
                            c.reaped = true;
                        }
                    }
                }
            }
            return Ok(());
        }
        let sig = libc::WSTOPSIG(st);
        let t = self.task(tid);
        match st >> 16 {
            EVENT_FORK | EVENT_VFORK | EVENT_CLONE => {
                let mut msg: libc::c_ulong = 0;
                // SAFETY: GETEVENTMSG writes one unsigned long.
                unsafe {
                    libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0usize, &mut msg);
                }
                let new = msg as i32;
                let thread = st >> 16 == EVENT_CLONE && tgid_of(new).is_none_or(|g| g == t.pid);
                if thread {
                    self.tasks.entry(new).or_insert(Task::new(t.pid));
                    obs.lwp_create(t.pid, tid, new)?;
                } else {
                    match obs.fork(t.pid, tid, new) {
                        Follow::Here => {
                            self.tasks.entry(new).or_insert(Task::new(new));
                        }
                        Follow::No => Self::let_go(new),
                        Follow::Copy => self.hand_over(obs, t.pid, tid, new)?,
                    }
                }
                Self::cont(tid, 0);
            }
            EVENT_EXEC => {
                // The exec has replaced every thread of the process by this one, which now
                // has the process's id: the old threads end, the new program begins.
                let old: Vec<i32> = self
                    .tasks
                    .iter()
                    .filter(|(_, x)| x.pid == t.pid && x.observed)
                    .map(|(&k, _)| k)
                    .collect();
                crate::base::held::forget_thread(tid);
                for x in old {
                    crate::base::held::forget_thread(x);
                    self.set_observed(x, false);
                    obs.fini_lwp(t.pid, x)?;
                }
                obs.exec(t.pid, tid)?;
                obs.init_lwp(t.pid, tid)?;
                self.set_observed(tid, true);
                Self::cont(tid, 0);
            }
            EVENT_SECCOMP => {
                // The thread's cpc_disable or cpc_enable (see `hear`), before its call runs.
                let mut msg: libc::c_ulong = 0;
                // SAFETY: GETEVENTMSG writes one unsigned long.
                unsafe {
                    libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0usize, &mut msg);
                }
                match msg {
                    hear::DATA_DISABLE => {
                        crate::base::held::hold_thread(tid, false);
                    }
                    hear::DATA_ENABLE => {
                        crate::base::held::hold_thread(tid, true);
                    }
                    _ => {}
                }
                Self::cont(tid, 0);
            }
            EVENT_EXIT => {
                crate::base::held::forget_thread(tid);
                if let Some(x) = self.tasks.get_mut(&tid) {
                    x.exiting = true;
                }
                if t.observed {
                    self.set_observed(tid, false);
                    // lwp_exit is for a thread that ends before its process does
                    // (pctx_set_events(3CPC)): one that called exit(2) itself (not
                    // exit_group(2), not killed with its process) while another thread of
                    // the process lives (observed yet or not: one just created).
                    let others = self
                        .tasks
                        .iter()
                        .any(|(&k, x)| k != tid && x.pid == t.pid && !x.exiting);
                    if others && exit_syscall(tid).is_none_or(|n| n == libc::SYS_exit) {
                        obs.lwp_exit(t.pid, tid)?;
                    }
                    obs.fini_lwp(t.pid, tid)?;
                }
                Self::cont(tid, 0);
            }
            EVENT_STOP => {
                if t.observed
                    && matches!(
                        sig,
                        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                    )
                {
                    // A group stop: stay stopped until SIGCONT, without blocking us.
                    let _ = ptrace(libc::PTRACE_LISTEN, tid, 0);
                } else {
                    if !t.observed {
                        obs.init_lwp(t.pid, tid)?;
                        self.set_observed(tid, true);
                    }
                    Self::cont(tid, 0);
                }
            }
            _ => Self::cont(tid, sig), // a signal for the tracee: deliver it
        }
        Ok(())
    }

    /// [`Follow::No`]: the new process `new` stops before its first instruction (it was
    /// traced automatically); detach it there.
    fn let_go(new: i32) {
        // SAFETY: plain data.
        let mut ru = unsafe { std::mem::zeroed() };
        if let Ok(st) = wait_blocking(new, &mut ru) {
            if libc::WIFSTOPPED(st) {
                let sig = if st >> 16 == 0 { libc::WSTOPSIG(st) } else { 0 };
                let _ = ptrace(libc::PTRACE_DETACH, new, sig as libc::c_ulong);
            }
        }
    }

    /// [`Follow::Copy`]: fork this controller; the copy takes `new` (created by thread `tid`
    /// of process `pid`) over and gives it to [`Observer::adopt`]. A task has one tracer, so
    /// `new` is detached here with a SIGSTOP pending, which keeps it from running until the
    /// copy has seized it (the copy suppresses that stop, or ends it with SIGCONT).
    fn hand_over(&mut self, obs: &mut dyn Observer, pid: i32, tid: i32, new: i32) -> Result<()> {
        // SAFETY: plain data.
        let mut ru = unsafe { std::mem::zeroed() };
        let st = wait_blocking(new, &mut ru)?;
        if !libc::WIFSTOPPED(st) {
            return Ok(()); // killed before it ran
        }
        let mut go = [0i32; 2];
        // SAFETY: pipe2 writes two fds; fflush(NULL) flushes every C stdio stream, so that
        // the copy does not write out what the caller had buffered.
        let copy = unsafe {
            if libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                let e = Error::last_os("pipe2");
                let _ = ptrace(libc::PTRACE_DETACH, new, 0);
                return Err(e);
            }
            libc::fflush(std::ptr::null_mut());
            libc::fork()
        };
        if copy == 0 {
            // The copy: wait until `new` is detached, take it, hand it over, exit.
            // SAFETY: our own fds and buffer; _exit ends the copy without running the
            // caller's exit handlers or our destructors (the copy's view of the parent's
            // tracees is stale).
            unsafe {
                libc::close(go[1]);
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(go[0], (&mut b as *mut u8).cast(), 1);
                    if n >= 0 || errno() != libc::EINTR {
                        break n;
                    }
                };
                libc::close(go[0]);
                if n == 1 {
                    obs.adopt(Pctx::adopt(new), pid, tid);
                }
                libc::fflush(std::ptr::null_mut());
                libc::_exit(0);
            }
        }
        // SAFETY: our fds; signalling and detaching our tracee.
        unsafe {
            libc::close(go[0]);
            if copy < 0 {
                let e = Error::last_os("fork");
                libc::close(go[1]);
                let _ = ptrace(libc::PTRACE_DETACH, new, 0);
                return Err(e);
            }
            libc::kill(new, libc::SIGSTOP);
            let _ = ptrace(libc::PTRACE_DETACH, new, 0);
            write_all(go[1], b"g");
            libc::close(go[1]);
        }
        self.copies.push(copy);
        Ok(())
    }

    /// [`Pctx::run`] as libpctx's `pctx_run` asks for it: a tick every `msec` milliseconds
    /// (none when 0; then `samples` is ignored), at most `samples` of them when not 0.
    /// `Ok(false)` when an observer's callback refused ([`Error::CallbackRefused`]: the run
    /// ended there, no later callback made), `Ok(true)` when the run ended otherwise.
    pub fn run_ms(&mut self, obs: &mut dyn Observer, msec: u32, samples: u32) -> Result<bool> {
        let (interval, samples) = match msec {
            0 => (None, 0),
            ms => (Some(Duration::from_millis(u64::from(ms))), samples),
        };
        match self.run(obs, interval, samples) {
            Ok(_) => Ok(true),
            Err(Error::CallbackRefused { .. }) => {
                self.refused = true;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Stop observing: every observed thread gets [`Observer::fini_lwp`], and every traced
    /// thread is detached and goes on running. The command, if it never ran, is killed. Then
    /// waits for the copies of this controller that follow children ([`Follow::Copy`]).
    pub fn release(mut self, obs: &mut dyn Observer) -> Result<()> {
        let mut first = Ok(());
        let tasks = std::mem::take(&mut self.tasks);
        for (&tid, t) in &tasks {
            if t.observed && !self.refused {
                if let Err(e) = obs.fini_lwp(t.pid, tid) {
                    first = first.and(Err(e));
                }
            }
        }
        Self::detach_all(&tasks);
        self.reap_copies(true);
        first
    }

    /// Detach every task: a held one directly; another is interrupted, waited for until it
    /// stops, then detached (passing on a pending signal).
    fn detach_all(tasks: &BTreeMap<i32, Task>) {
        for (&tid, t) in tasks {
            if t.held {
                let _ = ptrace(libc::PTRACE_DETACH, tid, 0);
                continue;
            }
            if ptrace(libc::PTRACE_INTERRUPT, tid, 0) < 0 {
                continue;
            }
            loop {
                let mut st = 0;
                // SAFETY: waitpid with a valid out-pointer.
                let r = unsafe { libc::waitpid(tid, &mut st, libc::__WALL) };
                if r < 0 && errno() == libc::EINTR {
                    continue;
                }
                if r <= 0 || !libc::WIFSTOPPED(st) {
                    break;
                }
                let sig = if st >> 16 == 0 { libc::WSTOPSIG(st) } else { 0 };
                if st >> 16 == EVENT_STOP || st >> 16 == 0 {
                    let _ = ptrace(libc::PTRACE_DETACH, tid, sig as libc::c_ulong);
                    break;
                }
                Self::cont(tid, 0); // another event stop first: let it reach the interrupt
            }
        }
    }
}

impl Drop for Pctx {
    fn drop(&mut self) {
        let tasks = std::mem::take(&mut self.tasks);
        if let Some(c) = self.child.as_mut().filter(|c| !c.reaped && !self.started) {
            // A created command that never ran: kill it; being traced, it may stop on its way
            // out (the exit event), so keep it going until it is gone.
            // SAFETY: signalling and reaping our own child.
            unsafe { libc::kill(c.pid, libc::SIGKILL) };
            loop {
                let mut st = 0;
                // SAFETY: waitpid with a valid out-pointer.
                let r = unsafe { libc::waitpid(c.pid, &mut st, libc::__WALL) };
                if r < 0 && errno() == libc::EINTR {
                    continue;
                }
                if r > 0 && libc::WIFSTOPPED(st) {
                    Self::cont(c.pid, 0);
                    continue;
                }
                break;
            }
            c.reaped = true;
        } else {
            Self::detach_all(&tasks);
        }
        self.reap_copies(true);
    }
}

/// The size of Solaris's `pr_psargs` (`PRARGSZ`): the argument string holds at most one byte
/// less, then its NUL.
pub const PRARGSZ: usize = 80;

/// libpctx's LWP ids: small numbers per process, as Solaris's (1 for the initial thread, then
/// 2, 3, ... in the order the threads are created, or, for a captured process, found), mapped
/// to the Linux thread ids the counters bind to. An exec starts again at 1 (the process's one
/// thread), as Solaris's exec does.
#[derive(Debug, Default)]
pub struct LwpIds {
    by_tid: BTreeMap<i32, u32>,
    next: u32,
    one_used: bool,
}

impl LwpIds {
    /// The id of thread `tid` of process `pid`, given now if it has none.
    pub fn id(&mut self, pid: i32, tid: i32) -> u32 {
        if let Some(&id) = self.by_tid.get(&tid) {
            return id;
        }
        let id = if tid == pid && !self.one_used {
            self.one_used = true;
            1
        } else {
            let n = self.next.max(2);
            self.next = n + 1;
            n
        };
        self.by_tid.insert(tid, id);
        id
    }

    /// The thread of id `id`.
    pub fn tid(&self, id: u32) -> Option<i32> {
        self.by_tid
            .iter()
            .find_map(|(&tid, &i)| (i == id).then_some(tid))
    }

    /// Thread `tid` is gone (or let go): its id names nothing any more.
    pub fn forget(&mut self, tid: i32) {
        self.by_tid.remove(&tid);
    }

    /// The process executed a program: its one thread will be 1 again.
    pub fn exec(&mut self) {
        *self = LwpIds::default();
    }
}

/// Process `pid`'s arguments as Solaris's `pr_psargs` holds them, what libpctx's exec
/// callback and cputrack's `exec` line show: `/proc/<pid>/cmdline`'s arguments joined by
/// spaces, cut to `PRARGSZ - 1` bytes (empty when it cannot be read).
pub fn psargs(pid: i32) -> Vec<u8> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: Vec<u8> = raw
        .strip_suffix(&[0])
        .unwrap_or(&raw)
        .iter()
        .map(|&b| if b == 0 { b' ' } else { b })
        .collect();
    s.truncate(PRARGSZ - 1);
    s
}

/// Whether `tid` is a thread of process `pid` (what a libcpc bind to another process's thread
/// needs): [`Error::NotAThreadOf`] when it is not, or is not a thread id at all.
pub fn check_thread(pid: i32, tid: i32) -> Result<()> {
    if tid > 0 && std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
        Ok(())
    } else {
        Err(Error::NotAThreadOf { tid, pid })
    }
}

#[cfg(test)]
mod tests {
    use super::LwpIds;

    #[test]
    fn lwp_ids_are_small_numbers_in_creation_order_and_start_over_at_exec() {
        let mut ids = LwpIds::default();
        assert_eq!(ids.id(100, 100), 1, "the process's first thread");
        assert_eq!(ids.id(100, 107), 2);
        assert_eq!(ids.id(100, 103), 3, "creation order, not thread id order");
        assert_eq!(ids.id(100, 107), 2, "an id is kept");
        assert_eq!(ids.tid(3), Some(103));
        ids.forget(103);
        assert_eq!(ids.tid(3), None);
        ids.exec();
        assert_eq!(ids.id(100, 100), 1, "one thread again after an exec");
        assert_eq!(ids.tid(2), None);
    }
}

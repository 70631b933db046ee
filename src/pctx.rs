//! Process control: run a command, or capture a running process, under `ptrace(2)` and be
//! told about every thread and process it creates, execs and ends, so counters can be bound to
//! each thread before it runs and read as it exits. This is what `perfex -mp` uses for
//! per-thread reports, and what Solaris's libpctx (`pctx_create`, `pctx_capture`,
//! `pctx_run`, `pctx_release`, behind `cpc_bind_pctx`) did with `/proc`.
//!
//! # How
//! - [`Pctx::create`] forks a child that waits on a pipe; the parent seizes it
//!   (`PTRACE_SEIZE` with the clone, fork, vfork, exec and exit options), and [`Pctx::run`]
//!   calls [`Observer::init_lwp`] for it before letting it `execvp` the command.
//!   [`Pctx::capture`] seizes every thread of a running process instead.
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
//!   have taken the SIGCHLD.

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use crate::error::{Error, Result};

// ptrace(2) events and options (the kernel's ABI, the same on every architecture).
const EVENT_FORK: i32 = 1;
const EVENT_VFORK: i32 = 2;
const EVENT_CLONE: i32 = 3;
const EVENT_EXEC: i32 = 4;
const EVENT_EXIT: i32 = 6;
const EVENT_STOP: i32 = 128;
const OPTIONS: libc::c_ulong = 0x02 | 0x04 | 0x08 | 0x10 | 0x40; // fork vfork clone exec exit

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

/// What a [`Pctx`] tells its user. Every method has a default that does nothing. An error
/// returned by `init_lwp`, `fini_lwp` or `tick` ends [`Pctx::run`] with that error (the
/// processes are released, not killed).
pub trait Observer {
    /// Thread `tid` of process `pid` is now observed; a new thread has not run yet.
    fn init_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Thread `tid` of process `pid` is about to exit, or is being released.
    fn fini_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
    }
    /// Thread `tid` of process `pid` created thread `new`.
    fn lwp_create(&mut self, pid: i32, tid: i32, new: i32) {
        let _ = (pid, tid, new);
    }
    /// Thread `tid` of process `pid` is exiting (before `fini_lwp`).
    fn lwp_exit(&mut self, pid: i32, tid: i32) {
        let _ = (pid, tid);
    }
    /// Thread `tid` of process `pid` created process `child`.
    fn fork(&mut self, pid: i32, tid: i32, child: i32) {
        let _ = (pid, tid, child);
    }
    /// Thread `tid` of process `pid` executed a new program.
    fn exec(&mut self, pid: i32, tid: i32) {
        let _ = (pid, tid);
    }
    /// Process `pid` ended.
    fn exit(&mut self, pid: i32, status: Status) {
        let _ = (pid, status);
    }
    /// The tick of [`Pctx::run`], once per observed thread.
    fn tick(&mut self, pid: i32, tid: i32) -> Result<()> {
        let _ = (pid, tid);
        Ok(())
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
    /// Fork; the child restores `mask`, waits for [`Child::release`] and runs `command`.
    pub(crate) fn spawn(command: &[OsString], mask: &libc::sigset_t) -> Result<Child> {
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
        let timeout = Some(timeout.map_or(POLL, |t| t.min(POLL)));
        loop {
            let s = match timeout {
                // SAFETY: waits on a valid set.
                None => unsafe { libc::sigwaitinfo(&self.wait, std::ptr::null_mut()) },
                Some(d) => {
                    let ts = libc::timespec {
                        tv_sec: d.as_secs() as libc::time_t,
                        tv_nsec: d.subsec_nanos() as libc::c_long,
                    };
                    // SAFETY: waits on a valid set with a valid timeout.
                    unsafe { libc::sigtimedwait(&self.wait, std::ptr::null_mut(), &ts) }
                }
            };
            if s >= 0 {
                return Ok(Some(s));
            }
            match errno() {
                libc::EINTR => continue,
                libc::EAGAIN => return Ok(None),
                _ => return Err(Error::last_os("sigwaitinfo")),
            }
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
}

/// A process under control: created by [`Pctx::create`] or captured by [`Pctx::capture`].
/// Dropping it releases every traced thread (and kills a created command that never ran).
pub struct Pctx {
    pid: i32,
    child: Option<Child>,
    signals: Signals,
    tasks: BTreeMap<i32, Task>,
    status: Option<Status>,
    rusage: libc::rusage,
    started: bool,
}

impl Pctx {
    /// Start `command` (searched in `PATH`) under control, stopped before it runs: nothing of
    /// it executes until [`Pctx::run`].
    pub fn create(command: &[OsString]) -> Result<Pctx> {
        let signals = Signals::block(false)?;
        let child = Child::spawn(command, &signals.old_mask)?;
        let pid = child.pid;
        // SAFETY: plain data.
        let rusage = unsafe { std::mem::zeroed() };
        let mut p = Pctx {
            pid,
            child: Some(child),
            signals,
            tasks: BTreeMap::new(),
            status: None,
            rusage,
            started: false,
        };
        if ptrace(libc::PTRACE_SEIZE, pid, OPTIONS) < 0 {
            return Err(Self::trace_error(pid, errno()));
        }
        p.tasks.insert(
            pid,
            Task {
                pid,
                observed: false,
            },
        );
        Ok(p)
    }

    /// Take control of the running process `pid` (every thread it has now, and every thread
    /// and process it creates from now on).
    pub fn capture(pid: i32) -> Result<Pctx> {
        if pid <= 0 {
            return Err(Error::NoSuchProcess(pid));
        }
        let signals = Signals::block(false)?;
        // SAFETY: plain data.
        let rusage = unsafe { std::mem::zeroed() };
        let mut p = Pctx {
            pid,
            child: None,
            signals,
            tasks: BTreeMap::new(),
            status: None,
            rusage,
            started: false,
        };
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
                        e => return Err(Self::trace_error(pid, e)),
                    }
                }
                p.tasks.insert(
                    tid,
                    Task {
                        pid,
                        observed: false,
                    },
                );
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
    /// `Ok(Some(status))`) or, with a `tick` interval, after `samples` ticks when `samples`
    /// is not zero (then `Ok(None)`; the process goes on under control). Each tick calls
    /// [`Observer::tick`] for every observed thread.
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
            for (&tid, t) in self.tasks.iter_mut() {
                obs.init_lwp(t.pid, tid)?;
                t.observed = true;
            }
            self.started = true;
            if let Some(c) = &mut self.child {
                c.release()?;
            }
        }
        let mut next_tick = tick.map(|d| (std::time::Instant::now() + d, d));
        let mut ticks = 0u32;
        loop {
            while let Some((tid, st, ru)) = self.wait_any()? {
                self.handle(obs, tid, st, ru)?;
                if let Some(s) = self.status {
                    return Ok(Some(s));
                }
            }
            let timeout =
                next_tick.map(|(t, _)| t.saturating_duration_since(std::time::Instant::now()));
            if self.signals.next(timeout)?.is_none() {
                if let Some((t, d)) = &mut next_tick {
                    *t += *d;
                }
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
            }
        }
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
        *self.tasks.entry(tid).or_insert_with(|| Task {
            pid: tgid_of(tid).unwrap_or(tid),
            observed: false,
        })
    }

    fn cont(tid: i32, sig: i32) {
        // ESRCH: it was killed meanwhile; its exit is reported by wait.
        let _ = ptrace(libc::PTRACE_CONT, tid, sig as libc::c_ulong);
    }

    fn handle(
        &mut self,
        obs: &mut dyn Observer,
        tid: i32,
        st: i32,
        ru: libc::rusage,
    ) -> Result<()> {
        if !libc::WIFSTOPPED(st) {
            // Gone: exited, or killed (SIGKILL may skip the exit stop).
            if let Some(t) = self.tasks.remove(&tid) {
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
                let pid = if thread { t.pid } else { new };
                self.tasks.entry(new).or_insert(Task {
                    pid,
                    observed: false,
                });
                if thread {
                    obs.lwp_create(t.pid, tid, new);
                } else {
                    obs.fork(t.pid, tid, new);
                }
                Self::cont(tid, 0);
            }
            EVENT_EXEC => {
                obs.exec(t.pid, tid);
                Self::cont(tid, 0);
            }
            EVENT_EXIT => {
                if t.observed {
                    obs.lwp_exit(t.pid, tid);
                    obs.fini_lwp(t.pid, tid)?;
                    if let Some(t) = self.tasks.get_mut(&tid) {
                        t.observed = false;
                    }
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
                        if let Some(t) = self.tasks.get_mut(&tid) {
                            t.observed = true;
                        }
                    }
                    Self::cont(tid, 0);
                }
            }
            _ => Self::cont(tid, sig), // a signal for the tracee: deliver it
        }
        Ok(())
    }

    /// Stop observing: every observed thread gets [`Observer::fini_lwp`], and every traced
    /// thread is detached and goes on running. The command, if it never ran, is killed.
    pub fn release(mut self, obs: &mut dyn Observer) -> Result<()> {
        let mut first = Ok(());
        let tasks = std::mem::take(&mut self.tasks);
        for (&tid, t) in &tasks {
            if t.observed {
                if let Err(e) = obs.fini_lwp(t.pid, tid) {
                    first = first.and(Err(e));
                }
            }
        }
        Self::detach_all(&tasks);
        first
    }

    /// Detach every task: interrupt it, wait for it to stop, detach (passing on a pending
    /// signal).
    fn detach_all(tasks: &BTreeMap<i32, Task>) {
        for &tid in tasks.keys() {
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
    }
}

//! Taking a process under control and giving it back: [`Pctx::create`] (a command started
//! stopped before it runs), [`Pctx::capture`] (every thread of a running process), the copy
//! that adopts a forked child, and [`Pctx::release`] (every traced thread detached, the
//! observed ones after their `fini_lwp`).

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::child::{executable, is_zombie};
use super::{
    errno, ptrace, wait_blocking, Child, Observer, Pctx, Signals, Task, EVENT_SECCOMP, EVENT_STOP,
    OPTIONS,
};
use crate::base::error::{Error, Result};

impl Pctx {
    /// Start `command` (searched in `PATH`) under control, stopped before it runs: nothing of
    /// it executes until [`Pctx::run`].
    pub fn create(command: &[OsString]) -> Result<Pctx> {
        Self::start(command, false)
    }

    /// [`Pctx::create`] for a libcpc controller (libpctx's `pctx_create`, cputrack): the
    /// command's `cpc_disable` and `cpc_enable` on a thread with no set of its own stop and
    /// resume the counters this process binds to that thread ([`crate::base::held`]; how they are
    /// heard: [`tell_controller`](super::tell_controller)).
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
        let child = Child::spawn_traced(command, &signals.old_mask, hear)?;
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

    /// (In the copy of [`Follow::Copy`](super::Follow::Copy).) Take control of `pid`, a new single-threaded process
    /// the original controller let go with a SIGSTOP pending (or already taken); it is held
    /// stopped until [`Pctx::run`].
    pub(super) fn adopt(pid: i32) -> Result<Pctx> {
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

    /// Stop observing: every observed thread gets [`Observer::fini_lwp`], and every traced
    /// thread is detached and goes on running. The command, if it never ran, is killed. Then
    /// waits for the copies of this controller that follow children ([`Follow::Copy`](super::Follow::Copy)).
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
    pub(super) fn detach_all(tasks: &BTreeMap<i32, Task>) {
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
                // Another event stop first: let it reach the interrupt (a call the program's
                // own seccomp filter traces failing as with no tracer).
                if st >> 16 == EVENT_SECCOMP {
                    let _ = super::hear::stopped(tid); // released: its counting is over
                }
                Self::cont(tid, 0);
            }
        }
    }
}

//! Process control: run a command, or capture a running process, under `ptrace(2)` and be
//! told about every thread and process it creates, execs and ends, so counters can be bound to
//! each thread before it runs and read as it exits. This is what `perfex -mp` uses for
//! per-thread reports, and what Solaris's libpctx (`pctx_create`, `pctx_capture`,
//! `pctx_run`, `pctx_release`, behind `cpc_bind_pctx`) did with `/proc`.
//!
//! # How
//! - [`Pctx::create`] creates a child that waits on a pipe, sharing the controller's memory
//!   (no copy of it: issue 48) with every signal blocked until its exec; the parent seizes it
//!   (`PTRACE_SEIZE` with the clone, fork, vfork, exec and exit options), and [`Pctx::run`]
//!   lets it `execvp` the command, holds it at the exec (which is not reported: it is how the
//!   command starts), gives it the caller's signal mask (`PTRACE_SETSIGMASK`) and calls
//!   [`Observer::init_lwp`] before the command's first instruction.
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
//! - A call that a seccomp filter of the program's own answers with `SECCOMP_RET_TRACE` fails
//!   with `ENOSYS` without running, as with no tracer; only libcpc's private `prctl` is taken
//!   (see `hear.rs`, issue 44 item 5).
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
//!
//! # Files
//! Here the callbacks ([`Observer`]) and the controller's state ([`Pctx`]); `take.rs` taking a
//! process and releasing it, `run.rs` the run loop, `events.rs` what each ptrace stop means in
//! callbacks, `child.rs` the created command, `signals.rs` the signals the controller waits
//! on, `hear.rs` a traced thread's `cpc_disable` heard, `lwp.rs` thread ids and `/proc` facts.

use std::collections::BTreeMap;

use crate::base::error::{Error, Result};

mod child;
mod events;
mod hear;
mod lwp;
mod run;
mod signals;
mod take;

pub(crate) use child::Child;
pub use hear::{tell_controller, DISABLE, ENABLE};
pub use lwp::{check_thread, psargs, LwpIds, PRARGSZ};
pub(crate) use signals::Signals;

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

    /// Say that no other thread of the calling process can take SIGCHLD while this `Pctx`
    /// runs (the process has no thread but the caller, or every other one blocks SIGCHLD).
    /// The controller always waits for SIGCHLD; where another thread could take it (and,
    /// SIGCHLD being ignored by default, drop it), it also checks its children every 10 ms
    /// without one. Told this, it checks only every second: each of those wakeups is two
    /// context switches and a few system calls, about 50 k instructions of `cputrack`'s fixed
    /// cost over a 40 ms command in the arm64 guest (issue 48). The second bounds the delay
    /// should a SIGCHLD be lost anyway.
    pub fn sole_sigchld_taker(&mut self) {
        self.signals.sole_taker();
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

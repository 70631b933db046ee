//! One ptrace stop and what it means in libpctx's callbacks: a new thread or process
//! (`lwp_create`, `init_lwp`, [`super::Follow`]), an exec, a thread's exit (`lwp_exit`,
//! `fini_lwp`), a signal passed on or a group stop honoured.

use super::child::write_all;
use super::{
    errno, exit_syscall, hear, ptrace, tgid_of, wait_blocking, Follow, Observer, Pctx, Status,
    Task, EVENT_CLONE, EVENT_EXEC, EVENT_EXIT, EVENT_FORK, EVENT_SECCOMP, EVENT_STOP, EVENT_VFORK,
};
use crate::base::error::{Error, Result};

impl Pctx {
    /// One wait status of thread `tid`. A callback's error is returned with the thread still
    /// in its stop (the caller holds it).
    pub(super) fn handle(
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
                // Before the call runs: the thread's cpc_disable or cpc_enable, or a call the
                // program's own filter traces, failed as with no tracer (see `hear`).
                if let Some((counting, ours)) = hear::stopped(tid) {
                    crate::base::held::hold_thread(tid, counting);
                    // Counted here: the thread's call returns 0 (libcpc v1's
                    // cpc_count_usr_events has a context then: issue 45 item 4), unless a
                    // filter of the program's own made the stop (the call fails as alone).
                    if ours && crate::base::held::counts(tid) {
                        hear::answer(tid);
                    }
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

    fn task(&mut self, tid: i32) -> Task {
        *self
            .tasks
            .entry(tid)
            .or_insert_with(|| Task::new(tgid_of(tid).unwrap_or(tid)))
    }

    pub(super) fn cont(tid: i32, sig: i32) {
        // ESRCH: it was killed meanwhile; its exit is reported by wait.
        let _ = ptrace(libc::PTRACE_CONT, tid, sig as libc::c_ulong);
    }

    fn set_observed(&mut self, tid: i32, observed: bool) {
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.observed = observed;
        }
    }
}

//! Running the controlled process: [`Pctx::run`] and [`Pctx::run_ms`] let it go, wait for its
//! threads' stops and hand each to the event handling (`events.rs`) until the first process
//! has exited or the ticks asked for have passed.

use std::time::{Duration, Instant};

use super::{errno, wait_blocking, Observer, Pctx, Status, EVENT_EXEC};
use crate::base::error::{Error, Result};

impl Pctx {
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
                // Let it go and wait for its exec stop alone (issue 48): waiting on the status
                // pipe first, this process was woken by the exec's close of the pipe, before
                // the stop, two context switches more. The pipe is read only if the command
                // ended before its exec, to say why.
                c.let_go();
                self.await_exec()?;
                if let Some(s) = self.status {
                    if let Some(c) = &mut self.child {
                        c.exec_error()?;
                    }
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
                    if self.child.as_ref().is_some_and(|c| c.mask_at_exec()) {
                        self.set_command_mask(pid)?;
                    }
                    return Ok(());
                }
                0 => Self::cont(pid, libc::WSTOPSIG(st)), // a signal before the exec
                _ => Self::cont(pid, 0),
            }
        }
    }

    /// The created command, held at its exec stop, started with every signal blocked
    /// ([`Child::spawn_traced`](super::Child)): give it the caller's mask, as a forked child
    /// restoring it would have.
    fn set_command_mask(&self, pid: i32) -> Result<()> {
        // The kernel's signal set: the first 8 bytes of glibc's.
        const KERNEL_SIGSET: usize = 8;
        // SAFETY: the kernel reads KERNEL_SIGSET bytes of the mask.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETSIGMASK,
                pid,
                KERNEL_SIGSET,
                &self.signals.old_mask as *const libc::sigset_t,
            )
        };
        if r < 0 {
            let e = Error::last_os("ptrace(PTRACE_SETSIGMASK)");
            // It must not run with every signal blocked: it ends before its first instruction.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(e);
        }
        Ok(())
    }

    fn hold(&mut self, tid: i32) {
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.held = true;
        }
    }

    /// Reap the copies of this controller that have ended (all of them, waiting, when
    /// `wait`).
    pub(super) fn reap_copies(&mut self, wait: bool) {
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
}

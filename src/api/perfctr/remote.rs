//! perfctr's remote virtual counters (`rvperfctr_*`, issue 47 item 1): another thread's
//! counters, programmed and read by the caller.
//!
//! perfctr's driver let a process open the virtual counters of a task it had attached with
//! `ptrace` and stopped, and control and read them through the same calls as its own. Here a
//! [`Remote`] binds its counters to the thread with the engine ([`Target::Thread`]): on the
//! perf backend `perf_event_open` on that thread, so the caller needs what the kernel asks for
//! that (`ptrace` read access: the same user, or `CAP_PERFMON`/root; `perf_event_paranoid` as
//! for any count), and not a `ptrace` stop; on an emulated PMU only the calling process's own
//! threads can be counted (the emulated counters live in this process), and another process
//! is refused at the open with `ENOTSUP` and the reason. The counters are the thread's alone,
//! not inherited by the threads or processes it creates (as perfctr's were not).
//!
//! The state is the handle's, not the target's: two handles on one thread are two sets of
//! counters (perfctr had one state per task). i-mode counters are not provided remotely
//! (`ENOTSUP`: their overflow signal would have to be raised in the target, stopped by the
//! engine there and resumed from here); so `rvperfctr_iresume` always finds no overflow to
//! resume from (`EPERM`, as perfctr's driver answered without i-mode counters).
//!
//! The remote virtual TSC is the thread's CPU time (`/proc/<tid>/task/<tid>/schedstat`'s first field, in
//! nanoseconds) at the nominal clock (`cpu_khz`), on every backend (an emulated PMU's TSC is
//! its thread's own cycles, which another thread cannot read), while the counters run.

use std::sync::Mutex;

use super::{checked_set, info, Control, Sums};
use crate::backend::{Backend, BackendKind};
use crate::base::error::{Error, Result};
use crate::base::set::Target;
use crate::engine::{self, Binding};

/// A handle on thread `tid`'s counters (`struct rvperfctr`).
pub struct Remote {
    tid: i32,
    backend: &'static dyn Backend,
    khz: u32,
    state: Mutex<State>,
}

/// What a [`Remote`] keeps between calls.
#[derive(Default)]
struct State {
    binding: Option<Binding>,
    control: Control,
    /// Sums carried from earlier controls (with `preserve`) and from a stop.
    base: Sums,
    /// The TSC: running since `tsc_start` (the thread's CPU time, in TSC ticks).
    tsc_running: bool,
    tsc_start: u64,
}

impl Remote {
    /// `rvperfctr_open(tid)`: `ESRCH` when there is no such thread; on an emulated PMU,
    /// `ENOTSUP` when it is not a thread of the calling process.
    pub fn open(tid: i32) -> Result<Remote> {
        let backend = crate::backend::global()?;
        // A thread id names its own `/proc/<tid>` (a thread of any process).
        if !crate::base::sys::is_thread_of(tid, tid) {
            return Err(Error::NoSuchProcess(tid));
        }
        if matches!(backend.shape_unmeasured().kind, BackendKind::Sim(_))
            && !crate::base::sys::is_thread_of(std::process::id() as i32, tid)
        {
            return Err(Error::Unsupported(format!(
                "thread {tid} is another process's: the emulated PMU counts only the calling \
                 process's threads (counting another process needs the perf backend)"
            )));
        }
        Ok(Remote {
            tid,
            backend,
            khz: info()?.cpu_khz,
            state: Mutex::new(State::default()),
        })
    }

    /// The thread's id (`rvperfctr_pid`).
    pub fn tid(&self) -> i32 {
        self.tid
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The thread's CPU time now, in TSC ticks (`None` once it is gone).
    fn cpu_time(&self) -> Option<u64> {
        let ns = crate::base::sys::thread_cpu_ns(self.tid, self.tid)?;
        Some(super::ns_to_tsc(u128::from(ns), self.khz))
    }

    /// `rvperfctr_control`: check `c` and (re)program the thread's counters; on an error the
    /// earlier ones are left as they were.
    pub fn control(&self, c: &Control) -> Result<()> {
        if c.cpu.nrictrs > 0 {
            return Err(Error::Unsupported(format!(
                "nrictrs {}: i-mode counters of another thread (only a-mode counters and the \
                 TSC remotely)",
                c.cpu.nrictrs
            )));
        }
        let set = checked_set(self.backend, c)?;
        let mut s = self.state();
        // The new counters are bound before the earlier ones go, which stop meanwhile (so that
        // no event is in both): a failure leaves the earlier counters as they were.
        let stopped = s.binding.as_ref().is_some_and(|o| o.stop().is_ok());
        let new = if set.is_empty() {
            None
        } else {
            match engine::bind_with(self.backend, &set, Target::Thread(self.tid)) {
                Ok(b) => Some(b),
                Err(e) => {
                    if let (true, Some(o)) = (stopped, &s.binding) {
                        let _ = o.resume();
                    }
                    return Err(e);
                }
            }
        };
        let sums = s.sums(self).unwrap_or(s.base);
        let old = std::mem::replace(&mut s.binding, new);
        drop(old);
        s.base = if c.preserve != 0 {
            sums
        } else {
            Sums::default()
        };
        s.control = *c;
        s.tsc_running = c.cpu.tsc_on != 0;
        s.tsc_start = self.cpu_time().unwrap_or(0);
        Ok(())
    }

    /// `rvperfctr_read_ctrs`: the TSC's and every counter's sum.
    pub fn read(&self) -> Result<Sums> {
        self.state().sums(self)
    }

    /// `rvperfctr_read_state`: the sums and the control, of one moment, as
    /// [`super::read_state`] gives them (`preserve` 0; zeros after a stop).
    pub fn read_state(&self) -> Result<(Sums, Control)> {
        let s = self.state();
        let c = Control {
            preserve: 0,
            ..s.control
        };
        Ok((s.sums(self)?, c))
    }

    /// `rvperfctr_stop`: stop the counters and the TSC, keeping their sums.
    pub fn stop(&self) -> Result<()> {
        let mut s = self.state();
        s.base = s.sums(self).unwrap_or(s.base);
        s.binding = None;
        s.control = Control::default();
        s.tsc_running = false;
        Ok(())
    }

    /// `rvperfctr_iresume`: there are no remote i-mode counters, so never an overflow to resume
    /// from: `EPERM`.
    pub fn iresume(&self) -> Result<()> {
        Err(super::no_overflow())
    }

    /// `rvperfctr_unlink`: end the thread's counting and forget its sums and control.
    pub fn unlink(&self) -> Result<()> {
        let mut s = self.state();
        *s = State::default();
        Ok(())
    }
}

impl State {
    /// The sums now: what was carried, plus the running binding's totals and TSC (an error
    /// when the binding cannot be read).
    fn sums(&self, r: &Remote) -> Result<Sums> {
        let mut out = self.base;
        if let Some(b) = &self.binding {
            super::add_totals(b, &mut out.pmc)?;
        }
        if self.tsc_running {
            if let Some(now) = r.cpu_time() {
                out.tsc = out.tsc.wrapping_add(now.saturating_sub(self.tsc_start));
            }
        }
        Ok(out)
    }
}

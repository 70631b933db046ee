//! perfctr's global-mode counters (`gperfctr_*`, issue 47 item 2): everything that runs on
//! chosen CPUs, counted from the moment of a start.
//!
//! As perfctr 2.6 had them: [`Global::control`] gives one CPU its control data (a-mode
//! counters and the TSC only: i-mode counters `EPERM`; a CPU that is not online `EINVAL`;
//! while the counters run `EBUSY`) and starts that CPU's sums from 0; [`Global::start`] starts
//! every CPU that has control data and returns how many do (an `interval_usec` under 10000,
//! other than 0, is `EINVAL`; the engine's counters are 64 bits wide, so no sampling timer is
//! needed and the interval is only checked); [`Global::read`] gives one CPU's sums and control;
//! [`Global::stop`] stops everything: the sums stay readable, and a new start needs new
//! control data.
//!
//! Each CPU is an engine binding to [`Target::Cpu`]. On the perf backend that is
//! `perf_event_open` for a CPU, which Linux allows only at `perf_event_paranoid` 0 or below,
//! or with `CAP_PERFMON` (or root): otherwise [`Global::start`] fails with `EACCES` and a
//! message naming the setting, and nothing is left running. On an emulated PMU a CPU's
//! counters count what the threads of this process advance while they run on it.
//!
//! The global TSC counts the time since the start (monotonic clock) at the nominal clock
//! (`cpu_khz`), as a CPU's TSC ticked whatever ran on it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{checked_set, info, Control, CpuControl, Sums};
use crate::backend::Backend;
use crate::base::error::{Error, Result};
use crate::base::set::{CounterSet, Target};
use crate::engine::{self, Binding};

/// `struct gperfctr`: the process's global-mode counters.
pub struct Global {
    backend: &'static dyn Backend,
    khz: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The counter sets of the CPUs the next start counts, checked when their control data
    /// was given (a start does not check them again).
    armed: BTreeMap<u32, CounterSet>,
    /// The control data each CPU last had (what a read reports).
    shown: BTreeMap<u32, CpuControl>,
    /// While running: each CPU's binding (none with the TSC alone) and the start time.
    running: Vec<(u32, Option<Binding>)>,
    start_ns: u64,
    /// The sums at the stop.
    last: BTreeMap<u32, Sums>,
}

/// The monotonic clock, in nanoseconds.
fn now() -> u64 {
    crate::base::sys::now_ns().max(0) as u64
}

/// The smallest sampling interval perfctr took (other than 0).
const MIN_INTERVAL_USEC: u32 = 10_000;

impl Global {
    /// `gperfctr_open`.
    pub fn open() -> Result<Global> {
        Ok(Global {
            backend: crate::backend::global()?,
            khz: info()?.cpu_khz,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn online(cpu: u32) -> Result<()> {
        if crate::base::sys::online_cpus().contains(&cpu) {
            Ok(())
        } else {
            Err(Error::NoSuchCpu(cpu))
        }
    }

    /// `gperfctr_control`: CPU `cpu` counts `c` from the next start; its sums start from 0.
    /// Returns the number of CPUs with control data.
    pub fn control(&self, cpu: u32, c: &CpuControl) -> Result<u32> {
        Self::online(cpu)?;
        if c.nrictrs != 0 {
            return Err(Error::Os {
                op: "programming i-mode counters in global mode (perfctr's global mode takes a-mode counters and the TSC only)",
                errno: libc::EPERM,
            });
        }
        let set = checked_set(
            self.backend,
            &Control {
                cpu: *c,
                ..Control::default()
            },
        )?;
        let mut s = self.state();
        if !s.running.is_empty() {
            return Err(Error::Os {
                op: "changing the control data while the global-mode counters run (gperfctr_stop first)",
                errno: libc::EBUSY,
            });
        }
        if c.tsc_on != 0 || c.nrctrs() > 0 {
            s.armed.insert(cpu, set);
        } else {
            s.armed.remove(&cpu);
        }
        s.shown.insert(cpu, *c);
        s.last.remove(&cpu);
        Ok(s.armed.len() as u32)
    }

    /// `gperfctr_start`: count on every CPU with control data; their number (0: nothing to
    /// start). All or nothing: a CPU the kernel refuses stops the others again.
    pub fn start(&self, interval_usec: u32) -> Result<u32> {
        if interval_usec != 0 && interval_usec < MIN_INTERVAL_USEC {
            return Err(Error::InvalidArgument(format!(
                "interval_usec {interval_usec}: 0, or at least {MIN_INTERVAL_USEC}"
            )));
        }
        let mut s = self.state();
        if !s.running.is_empty() {
            return Ok(s.running.len() as u32);
        }
        let mut running = Vec::new();
        for (&cpu, set) in &s.armed {
            let b = if set.is_empty() {
                None
            } else {
                // On an error `running` is dropped: the CPUs bound so far stop.
                Some(engine::bind_with(self.backend, set, Target::Cpu(cpu))?)
            };
            running.push((cpu, b));
        }
        s.running = running;
        s.start_ns = now();
        for cpu in s.armed.keys().copied().collect::<Vec<_>>() {
            s.last.remove(&cpu);
        }
        Ok(s.running.len() as u32)
    }

    /// `gperfctr_read`: CPU `cpu`'s sums and control (zeros for a CPU without control data).
    pub fn read(&self, cpu: u32) -> Result<(Sums, CpuControl)> {
        let s = self.state();
        // A CPU given control data was online then: only another is looked up in `/sys`.
        if !s.shown.contains_key(&cpu) {
            Self::online(cpu)?;
        }
        let control = s.shown.get(&cpu).copied().unwrap_or_default();
        let sums = match s.running.iter().find(|(c, _)| *c == cpu) {
            Some((_, b)) => self.sums(&s, b.as_ref(), &control)?,
            None => s.last.get(&cpu).copied().unwrap_or_default(),
        };
        Ok((sums, control))
    }

    fn sums(&self, s: &State, b: Option<&Binding>, c: &CpuControl) -> Result<Sums> {
        let mut out = Sums::default();
        if let Some(b) = b {
            super::add_totals(b, &mut out.pmc)?;
        }
        if c.tsc_on != 0 {
            let ns = now().saturating_sub(s.start_ns);
            out.tsc = super::ns_to_tsc(u128::from(ns), self.khz);
        }
        Ok(out)
    }

    /// `gperfctr_stop`: stop every CPU; the sums stay readable, the control data must be
    /// given again before the next start.
    pub fn stop(&self) -> Result<()> {
        let mut s = self.state();
        let running = std::mem::take(&mut s.running);
        for (cpu, b) in &running {
            let c = s.shown.get(cpu).copied().unwrap_or_default();
            let sums = self.sums(&s, b.as_ref(), &c).unwrap_or_default();
            s.last.insert(*cpu, sums);
        }
        s.armed.clear();
        Ok(())
    }
}

/// The online CPUs as the words of perfctr's `struct perfctr_cpu_mask` (bit `i % 32` of word
/// `i / 32` for CPU `i`).
pub fn cpu_mask_words() -> Vec<u32> {
    let cpus = crate::base::sys::online_cpus();
    let n = cpus.iter().max().map_or(1, |&m| m as usize / 32 + 1);
    let mut words = vec![0u32; n];
    for c in cpus {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    words
}

/// `perfctr_cpus_info_print`'s text: each list's CPU numbers, as `cpus\t\t\t[0 1]`.
pub fn cpus_text(cpus: &[u32], forbidden: &[u32]) -> String {
    let list = |w: &[u32]| -> String {
        let v: Vec<String> = (0..w.len() * 32)
            .filter(|&i| w[i / 32] >> (i % 32) & 1 != 0)
            .map(|i| i.to_string())
            .collect();
        format!("[{}]", v.join(" "))
    };
    format!(
        "cpus\t\t\t{}\ncpus_forbidden\t\t{}\n",
        list(cpus),
        list(forbidden)
    )
}

//! The engine of `cpustat`: counting every online CPU, set after set.
//!
//! `cpustat -c spec [-c spec]...` binds the first set to every online CPU
//! ([`crate::Target::Cpu`], libcpc's `cpc_bind_cpu`), samples all of them every interval and
//! reports each CPU's counts since the previous sample. With several sets it counts one at a
//! time, moving to the next after each period (rebinding starts the new set from zero, as
//! Solaris' rebinding presets to 0). [`CpuStat::totals`] sums everything counted, for the line
//! cpustat prints when it is interrupted. Argument parsing and output are the command's
//! (`tools/cpustat.rs`).

use crate::backend::Backend;
use crate::base::error::{Error, Result};
use crate::{bind_with, Binding, CounterSet, Target};

pub use crate::base::sys::online_cpus;

/// One CPU's counts over an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    /// The CPU.
    pub cpu: u32,
    /// The set that counted (index into the sets given).
    pub set: usize,
    /// The count of each request of that set over the interval.
    pub deltas: Vec<u64>,
}

/// Counting every online CPU with one of several sets at a time.
pub struct CpuStat {
    backend: &'static dyn Backend,
    sets: Vec<CounterSet>,
    current: usize,
    cpus: Vec<u32>,
    bound: Vec<Binding>,
    last: Vec<Vec<u64>>,
    totals: Vec<Vec<u64>>,
}

impl CpuStat {
    /// Bind the first of `sets` to every online CPU. A refusal names the reason (for an
    /// unprivileged user: the `perf_event_paranoid` level and the fix).
    pub fn start(backend: &'static dyn Backend, sets: Vec<CounterSet>) -> Result<CpuStat> {
        if sets.is_empty() {
            return Err(Error::InvalidArgument("no event specification".into()));
        }
        let totals = sets.iter().map(|s| vec![0; s.len()]).collect();
        let mut c = CpuStat {
            backend,
            sets,
            current: 0,
            cpus: online_cpus(),
            bound: Vec::new(),
            last: Vec::new(),
            totals,
        };
        c.bind(0)?;
        Ok(c)
    }

    fn bind(&mut self, set: usize) -> Result<()> {
        self.bound.clear();
        self.last.clear();
        for &cpu in &self.cpus {
            let b = bind_with(self.backend, &self.sets[set], Target::Cpu(cpu))?;
            self.last.push(vec![0; b.len()]);
            self.bound.push(b);
        }
        self.current = set;
        Ok(())
    }

    /// The CPUs counted.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// The set counting now.
    pub fn current(&self) -> usize {
        self.current
    }

    /// Each CPU's counts since the previous sample (or the bind).
    pub fn sample(&mut self) -> Result<Vec<CpuSample>> {
        let mut out = Vec::with_capacity(self.cpus.len());
        for (k, b) in self.bound.iter().enumerate() {
            let mut v = vec![0u64; b.len()];
            b.sample(&mut v)?;
            let deltas: Vec<u64> = v
                .iter()
                .zip(&self.last[k])
                .map(|(a, b)| a.wrapping_sub(*b))
                .collect();
            for (t, d) in self.totals[self.current].iter_mut().zip(&deltas) {
                *t = t.wrapping_add(*d);
            }
            self.last[k] = v;
            out.push(CpuSample {
                cpu: self.cpus[k],
                set: self.current,
                deltas,
            });
        }
        Ok(out)
    }

    /// Move to the next set (after the last, the first), counting from zero.
    pub fn next_set(&mut self) -> Result<()> {
        if self.sets.len() > 1 {
            self.bind((self.current + 1) % self.sets.len())?;
        }
        Ok(())
    }

    /// What each set counted over every CPU and every sample so far.
    pub fn totals(&self) -> &[Vec<u64>] {
        &self.totals
    }

    /// Unbind every CPU.
    pub fn stop(&mut self) {
        self.bound.clear();
    }
}

//! The emulated counters of one bound set at work ([`SimGroup`]): which threads' advances it
//! sees, the register model (a load that interrupts after a distance, silent interrupts folded
//! into the 64-bit sum), and the group interface the engine reads and arms it through.

use std::any::Any;
use std::sync::atomic::Ordering;

use super::{SimCounter, SimGroup};
use crate::backend::{Group, Times};
use crate::base::set::Target;
use crate::base::virt;

impl SimGroup {
    pub(super) fn sees(&self, tid: i32, pid: i32, cpu: i32) -> bool {
        match self.target {
            Target::CurrentThread => tid == self.owner,
            Target::CurrentThreadInherit => tid == self.owner || !self.preexisting.contains(&tid),
            Target::Process(p) => p == pid,
            Target::Thread(t) => tid == t,
            Target::Cpu(c) => cpu >= 0 && c == cpu as u32,
        }
    }

    fn write<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        self.seq.write(|| f(self))
    }

    /// The register load that makes counter `c` interrupt after `distance` events (or after a
    /// whole period when the distance is longer).
    fn load_for(c: &SimCounter, distance: u64) -> u64 {
        c.irq_at - distance.min(c.irq_at)
    }

    /// Count `n` occurrences of `event` in lock step on every counter that counts it, stopping
    /// at the first overflow notification. Returns (events not yet counted, notification
    /// fired, whether any counter counts this event).
    pub(super) fn count(&self, event: usize, n: u64) -> (u64, bool, bool) {
        self.write(|g| {
            let mine: Vec<&SimCounter> = g
                .counters
                .iter()
                .filter(|c| c.event == event && c.counts)
                .collect();
            if mine.is_empty() {
                return (0, false, false);
            }
            if !g.running.load(Ordering::Relaxed) {
                return (0, false, true);
            }
            // Whole stretches at a time up to the next notification: stepping from interrupt
            // to interrupt took 2^33 iterations, with every signal blocked, for an `n` near
            // 2^64 (found by fuzz/state_machine: a hang).
            let step = mine
                .iter()
                .filter(|c| c.armed.load(Ordering::Relaxed))
                .map(|c| c.remaining.load(Ordering::Relaxed))
                .min()
                .unwrap_or(n)
                .min(n);
            let mut fired = false;
            for c in &mine {
                fired |= g.count_on(c, step);
            }
            if fired {
                return (n - step, true, true);
            }
            (0, false, true)
        })
    }

    /// Count `k` events on `c`, no more than up to its notification: the register advances,
    /// each interrupt folds it into the 64-bit sum and reloads it (for the rest of the distance
    /// when armed); runs of silent interrupts over whole periods are folded at once. Returns
    /// whether the notification fired (then `k` was exactly the distance left).
    fn count_on(&self, c: &SimCounter, mut k: u64) -> bool {
        let irq_at = c.irq_at;
        let armed = || c.armed.load(Ordering::Relaxed);
        while k > 0 {
            let reg = c.reg.load(Ordering::Relaxed);
            let to_irq = irq_at - reg;
            if k < to_irq {
                c.reg.store(reg + k, Ordering::Relaxed);
                if armed() {
                    c.remaining.fetch_sub(k, Ordering::Relaxed);
                }
                return false;
            }
            k -= to_irq;
            if armed() {
                c.remaining.fetch_sub(to_irq, Ordering::Relaxed);
            }
            // The hardware interrupt: fold the register into the 64-bit sum, reload. The
            // interrupt itself says the register reached `irq_at`; on a wrapping model the
            // register now reads 0, and a masked difference would lose the whole period, so
            // fold the position the interrupt stands for.
            let mut acc = virt::Accumulator {
                sum: c.sum.load(Ordering::Relaxed),
                start: c.start.load(Ordering::Relaxed),
            };
            let remaining = c.remaining.load(Ordering::Relaxed);
            let reload = if armed() && remaining > 0 {
                Self::load_for(c, remaining)
            } else {
                0
            };
            acc.fold(irq_at, 64, reload);
            if armed() && remaining == 0 {
                c.armed.store(false, Ordering::Relaxed);
                c.sum.store(acc.sum, Ordering::Relaxed);
                c.start.store(acc.start, Ordering::Relaxed);
                c.reg.store(reload, Ordering::Relaxed);
                return true;
            }
            if reload == 0 {
                // Whole periods from 0 to the interrupt, silent ones only: an armed register
                // stays loaded at 0 while at least a period of its distance is left after.
                let mut periods = k / irq_at;
                if armed() {
                    periods = periods.min((remaining / irq_at).saturating_sub(1));
                    c.remaining.fetch_sub(periods * irq_at, Ordering::Relaxed);
                }
                acc.sum = acc.sum.wrapping_add(periods.wrapping_mul(irq_at));
                k -= periods * irq_at;
            }
            c.sum.store(acc.sum, Ordering::Relaxed);
            c.start.store(acc.start, Ordering::Relaxed);
            c.reg.store(reload, Ordering::Relaxed);
        }
        false
    }
}

impl Group for SimGroup {
    fn read(&self, out: &mut [u64]) -> std::result::Result<Times, i32> {
        loop {
            let s = self.seq.begin();
            for (o, c) in out.iter_mut().zip(self.counters.iter()) {
                let acc = virt::Accumulator {
                    sum: c.sum.load(Ordering::Relaxed),
                    start: c.start.load(Ordering::Relaxed),
                };
                *o = acc.peek(c.reg.load(Ordering::Relaxed) & virt::mask(c.width), c.width);
            }
            if self.seq.valid(s) {
                return Ok(Times::default());
            }
        }
    }

    fn stop(&self) {
        self.write(|g| g.running.store(false, Ordering::Relaxed));
    }

    fn start(&self) {
        self.write(|g| g.running.store(true, Ordering::Relaxed));
    }

    fn arm(&self, index: usize, distance: Option<u64>) {
        self.write(|g| {
            let Some(c) = g.counters.get(index) else {
                return;
            };
            // End the current period, then load the register for the new one.
            let mut acc = virt::Accumulator {
                sum: c.sum.load(Ordering::Relaxed),
                start: c.start.load(Ordering::Relaxed),
            };
            let reload = match distance {
                Some(d) => Self::load_for(c, d),
                None => c.reg.load(Ordering::Relaxed),
            };
            acc.fold(c.reg.load(Ordering::Relaxed), c.width, reload);
            c.sum.store(acc.sum, Ordering::Relaxed);
            c.start.store(acc.start, Ordering::Relaxed);
            c.reg.store(reload, Ordering::Relaxed);
            c.remaining.store(distance.unwrap_or(0), Ordering::Relaxed);
            c.armed.store(distance.is_some(), Ordering::Relaxed);
        });
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl SimGroup {
    /// The hardware counter each request was placed on, in request order.
    pub fn placement(&self) -> Vec<u32> {
        self.counters.iter().map(|c| c.counter).collect()
    }

    /// The raw register value of request `index` (for tests of the register model).
    pub fn register(&self, index: usize) -> Option<u64> {
        self.counters
            .get(index)
            .map(|c| c.reg.load(Ordering::Relaxed) & virt::mask(c.width))
    }
}

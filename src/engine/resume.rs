//! Stopping and resuming a bound set (`cpc_disable`/`cpc_enable`, libperfex's stop): the
//! counts held at the stop, counting resumed from where it stopped, the overflow periods
//! re-armed.

use std::sync::atomic::Ordering;

use super::{BoundSet, FROZEN, READY};
use crate::backend::Times;
use crate::base::error::{Error, Result};
use crate::base::set::MAX_REQUESTS;
use crate::base::virt;

impl BoundSet {
    /// Stop counting (libcpc's `cpc_disable`). Fails if the set is already frozen.
    pub fn stop(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.check_descriptors()?;
        self.write(|b| {
            if b.is_frozen() {
                return Err(Error::WrongState("the counters are already stopped"));
            }
            b.freeze(0)
        })
    }

    /// Resume counting after [`BoundSet::stop`] (libcpc's `cpc_enable`): the values go on from
    /// where they were frozen. Fails if the set is running.
    pub fn resume(&self) -> Result<()> {
        self.resume_with(0)
    }

    /// Resume a frozen set the way perfctr resumes after an overflow interrupt: each request
    /// that overflowed (an *i-mode* counter: a notifying request, whose preset is its restart
    /// value, perfctr's `ireset`) starts again from its preset, and every other request (the
    /// *a-mode* counters, and i-mode counters that have not reached their overflow) goes on
    /// from its frozen value, as [`BoundSet::resume`] does for all. The totals of
    /// [`BoundSet::sample_totals`] keep every event of both kinds. Fails if the set is running.
    ///
    /// Async-signal-safe: meant for the overflow hook, the way libcpc's handlers call
    /// [`BoundSet::restart`].
    pub fn iresume(&self) -> Result<()> {
        self.resume_with(self.notify & self.overflowed.load(Ordering::Acquire))
    }

    /// Resume from the freeze; the requests of `reload` restart from their presets.
    fn resume_with(&self, reload: u64) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.check_descriptors()?;
        self.write(|b| {
            if !b.is_frozen() {
                return Err(Error::WrongState("the counters are already running"));
            }
            let from = |i: usize| {
                if reload & (1 << i) != 0 {
                    b.preset[i].load(Ordering::Relaxed)
                } else {
                    b.frozen_vals[i].load(Ordering::Relaxed)
                }
            };
            let mut raw = [0u64; MAX_REQUESTS];
            let (_, running) = b.resume_raw(&mut raw, |i| virt::distance_to_wrap(from(i)))?;
            b.end_period(&raw);
            for i in 0..b.n {
                b.set_base_origin(i, from(i), raw[i]);
                if b.notify & (1 << i) != 0 && !running {
                    b.group.arm(i, virt::distance_to_wrap(from(i)));
                }
            }
            if reload != 0 {
                b.overflowed.store(0, Ordering::Relaxed);
            }
            b.set_state(0, FROZEN | READY);
            b.new_generation(true);
            if !running {
                b.group.start();
            }
            Ok(())
        })
    }

    /// Where counting resumes after a freeze or a stop: the raw counts into `raw`, and whether
    /// the group is still counting and may go on as it is (no re-arm, no start). `distance`
    /// gives each notifying request's next overflow distance. Must run inside `write`.
    ///
    /// A set frozen while its group counts on ([`KernelStop::Running`]) is read now: when its
    /// one notifying request has counted nothing since the overflow and keeps its period, the
    /// kernel's period is already whole and the group goes on (one `read`, the overflow's only
    /// system call besides the signal's own). Otherwise it is stopped and read (the restart
    /// then re-arms and starts it). What counted between the overflow and that read is
    /// dropped, as it is between an overflow and a stop ([`dropped_at_freezes`]).
    pub(super) fn resume_raw(
        &self,
        raw: &mut [u64; MAX_REQUESTS],
        distance: impl Fn(usize) -> Option<u64>,
    ) -> Result<(Times, bool)> {
        if !(self.is_frozen() && self.take_runs_on()) {
            return self.stopped_raw(raw).map(|t| (t, false));
        }
        let lone = self.notify.count_ones() == 1;
        let i = self.notify.trailing_zeros() as usize;
        if lone {
            match self.counted_nothing_since(i, distance(i), &mut raw[..]) {
                Ok(Some(times)) => {
                    self.drop_since_freeze(raw);
                    return Ok((times, true));
                }
                Ok(None) => {}
                Err(e) => {
                    self.group.stop();
                    return Err(e);
                }
            }
        }
        self.group.stop();
        let times = self.read_raw(raw)?;
        self.drop_since_freeze(raw);
        Ok((times, false))
    }
}

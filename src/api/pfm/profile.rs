//! Profiling (`PFM_PROFILING`): the user address range and its histogram buckets, the
//! overflow hook that adds the interrupted program counter (async-signal-safe: no allocation,
//! no lock, no output), and `read(2)` of the histogram.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Device, Errno, OpenMode, Prof, PFM_PROFILING};
use crate::base::sigsafe::Blocked;

impl Device {
    /// `PCNTSETURANGE` (and `PCNTSETUADDR` with the current stride, 4 at first): profile the
    /// user addresses `[start, end)`, one bucket per `stride` instructions (of 4 bytes), 0
    /// for one bucket. `EINVAL` without `PFM_PROFILING`, for an empty range or a stride that
    /// is not a power of two; `ENOMEM` when the buckets cannot be allocated.
    pub fn set_urange(&self, start: usize, end: usize, stride: Option<u64>) -> Result<(), Errno> {
        let mut st = self.state();
        if st.items & PFM_PROFILING == 0 || start >= end {
            return Err(libc::EINVAL);
        }
        let stride = stride.unwrap_or(st.urange.map_or(4, |r| r.2));
        if stride != 0 && !stride.is_power_of_two() {
            return Err(libc::EINVAL);
        }
        let shift = if stride == 0 { 64 } else { stride.ilog2() + 2 };
        let len = (end - start) as u64;
        let nb = if shift >= 64 {
            1
        } else {
            len.div_ceil(1 << shift)
        };
        let total = nb.checked_mul(self.nslots as u64).ok_or(libc::ENOMEM)?;
        if total > (1 << 28) {
            return Err(libc::ENOMEM);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(total as usize)
            .map_err(|_| libc::ENOMEM)?;
        v.extend((0..total).map(|_| AtomicU32::new(0)));
        let buckets = v.into_boxed_slice();
        st.urange = Some((start, end, stride));
        st.read_pos = 0;
        self.prof_mut(|p| {
            // SAFETY: inside `prof_mut`.
            *unsafe { cell(&p.buckets) } = buckets;
            p.start.store(start, Ordering::Relaxed);
            p.end.store(end, Ordering::Relaxed);
            p.shift.store(shift, Ordering::Relaxed);
            p.nb.store(nb as usize, Ordering::Relaxed);
        });
        if st.enabled && !st.live.is_empty() && self.prof_binding_missing() {
            let counters = st.live[0].counters.clone();
            self.bind_profile(&st, &counters)?;
        }
        Ok(())
    }

    fn prof_binding_missing(&self) -> bool {
        // SAFETY: read only, with `st` held (writers hold it too).
        unsafe { &*self.prof.binding.get() }.is_none()
    }

    /// `PCNTSETKADDR`/`PCNTSETKRANGE`: `EINVAL` without `PFM_PROFILING`, else `ENOTSUP`
    /// (Linux does not show a program the kernel's program counters).
    pub fn set_krange(&self) -> Result<(), Errno> {
        if self.state().items & PFM_PROFILING == 0 {
            Err(libc::EINVAL)
        } else {
            Err(libc::ENOTSUP)
        }
    }

    /// `PCNTGETRSIZE`: bytes of profile data (0 without profiling or a range).
    pub fn rsize(&self) -> u64 {
        let st = self.state();
        if st.items & PFM_PROFILING == 0 || st.urange.is_none() {
            return 0;
        }
        (self.prof.nb.load(Ordering::Relaxed) * self.nslots * 4) as u64
    }

    /// `read(2)`: up to `max` bytes of the profile (32-bit native-endian bucket counts, slot
    /// after slot) from the read position, which advances; a read at the end returns nothing
    /// and rewinds, so the next read starts over.
    pub fn read(&self, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.read_into(max, |b| {
            out.extend_from_slice(b);
            Ok(())
        });
        out
    }

    /// [`Device::read`] delivering the bytes to `sink` (the copy into the caller's buffer):
    /// the read position moves only when `sink` succeeds, so a read that fails (`EFAULT`)
    /// changes nothing. Returns the number of bytes delivered (0 at the end, which rewinds
    /// without calling `sink`).
    pub fn read_into(
        &self,
        max: usize,
        sink: impl FnOnce(&[u8]) -> Result<(), Errno>,
    ) -> Result<usize, Errno> {
        let mut st = self.state();
        let total = if st.items & PFM_PROFILING == 0 || st.urange.is_none() {
            0
        } else {
            self.prof.nb.load(Ordering::Relaxed) * self.nslots * 4
        };
        let from = st.read_pos.min(total);
        let to = (from.saturating_add(max)).min(total);
        if from == to {
            st.read_pos = 0;
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity(to - from);
        // SAFETY: the buckets are replaced only by `prof_mut`, which needs `st` (held here)
        // to be called from `set_urange`.
        let buckets = unsafe { &*self.prof.buckets.get() };
        for i in from / 4..to.div_ceil(4) {
            let v = buckets.get(i).map_or(0, |b| b.load(Ordering::Relaxed));
            let b = v.to_ne_bytes();
            for (k, byte) in b.iter().enumerate() {
                let at = i * 4 + k;
                if at >= from && at < to {
                    bytes.push(*byte);
                }
            }
        }
        sink(&bytes)?;
        st.read_pos = to;
        Ok(bytes.len())
    }

    /// Change the profile's signal-side state with every overflow hook shut out (and every
    /// signal blocked on this thread), then serve an overflow the hook had to leave.
    pub(super) fn prof_mut(&self, f: impl FnOnce(&Prof)) {
        let _b = Blocked::all();
        self.prof.closed.store(true, Ordering::SeqCst);
        while self.prof.in_hook.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        f(&self.prof);
        self.prof.closed.store(false, Ordering::SeqCst);
        // An overflow that came while the hook was shut out froze the binding: serve it.
        // SAFETY: read only; writers are `prof_mut` callers, which hold `st`.
        if let Some(b) = unsafe { &*self.prof.binding.get() } {
            if b.is_frozen() {
                self.prof.in_hook.fetch_add(1, Ordering::SeqCst);
                self.serve(0);
                self.prof.in_hook.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// The overflow of the profile binding: record `pc`, set the overflowed counters a period
    /// from their next interrupt and the others where they are, count again.
    /// Async-signal-safe. Runs with `in_hook` held.
    pub(super) fn serve(&self, pc: usize) {
        // SAFETY: `prof_mut` waits for `in_hook` to fall to 0 before changing these.
        let (b, periods) = unsafe { (&*self.prof.binding.get(), &*self.prof.periods.get()) };
        let Some(b) = b else { return };
        let n = b.len().min(3);
        let mut v = [0u64; 3];
        if b.sample(&mut v[..n]).is_err() {
            return;
        }
        let over = b.overflowed();
        if over == 0 {
            return;
        }
        for i in 0..n {
            if over & (1 << i) != 0 {
                self.record(pc);
                let _ = b.set_preset(i, 0u64.wrapping_sub(periods[i]));
            } else {
                let _ = b.set_preset(i, v[i]);
            }
        }
        let _ = b.restart();
    }

    /// Add one sample at `pc` (async-signal-safe).
    fn record(&self, pc: usize) {
        let p = &self.prof;
        let (start, end) = (
            p.start.load(Ordering::Relaxed),
            p.end.load(Ordering::Relaxed),
        );
        if pc < start || pc >= end {
            return;
        }
        let nb = p.nb.load(Ordering::Relaxed);
        let idx = ((pc - start) as u64)
            .checked_shr(p.shift.load(Ordering::Relaxed))
            .unwrap_or(0) as usize;
        let slot = if self.mode == OpenMode::Each {
            // SAFETY: sched_getcpu reads the CPU number (vDSO or getcpu).
            let cpu = unsafe { libc::sched_getcpu() };
            self.cpus.iter().position(|&c| c as i32 == cpu).unwrap_or(0)
        } else {
            0
        };
        // SAFETY: as in `serve`.
        let buckets = unsafe { &*p.buckets.get() };
        if idx < nb {
            if let Some(b) = buckets.get(slot * nb + idx) {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A mutable reference to a cell of the profile's state.
///
/// # Safety
/// Only inside [`Device::prof_mut`], which has shut every hook out and is called with the
/// device's state locked (so no other thread writes either).
#[allow(clippy::mut_from_ref)]
pub(super) unsafe fn cell<T>(c: &UnsafeCell<T>) -> &mut T {
    // SAFETY: the caller's promise.
    unsafe { &mut *c.get() }
}

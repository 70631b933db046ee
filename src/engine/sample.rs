//! Sampling a bound set: the counts read from the backend (or the frozen values) turned into
//! 64-bit virtual values, with the time enabled and running and the generation rule.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BoundSet, SampleInfo, DETACHED, FROZEN, NOT_LEAN};
use crate::backend::Times;
use crate::base::error::{Error, Result};
use crate::base::set::{Target, MAX_REQUESTS};
use crate::base::sys::now_ns;
use crate::base::virt;

/// Each `out[i]` (a raw count) made virtual in place: `base[i]` plus the events since
/// `origin[i]` ([`virt::virtual_value`]). Both branches of the sample use it.
#[inline(always)]
fn virtualize(out: &mut [u64], base: &[AtomicU64], origin: &[AtomicU64]) {
    let n = out.len();
    let (base, origin) = (&base[..n], &origin[..n]);
    // The closure inlined by force: with 16 codegen units, LLVM called it out of line from
    // libperfex's general calls once they grew (issue 48: +34 instructions per host interval).
    virt::each_index(
        n,
        #[inline(always)]
        |i| {
            let events = out[i].wrapping_sub(origin[i].load(Ordering::Relaxed));
            out[i] = virt::virtual_value(base[i].load(Ordering::Relaxed), events);
        },
    );
}

/// The error of a failed counter read (`errno`).
#[cold]
fn read_error(errno: i32) -> Error {
    if errno == libc::ESRCH {
        Error::NoSuchProcess(0)
    } else {
        Error::Os {
            op: "reading the counters",
            errno,
        }
    }
}

/// Where the lean read puts a value: the caller's buffer of plain values (through a `Cell`
/// view) or of atomics (a `cpc_buf_t`, written with relaxed stores).
trait Slot {
    /// Put `v` here.
    fn put(&self, v: u64);
}

impl Slot for Cell<u64> {
    #[inline(always)]
    fn put(&self, v: u64) {
        self.set(v);
    }
}

impl Slot for AtomicU64 {
    #[inline(always)]
    fn put(&self, v: u64) {
        self.store(v, Ordering::Relaxed);
    }
}

/// What [`BoundSet::sample_to_untimed`] tells besides the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampled {
    /// [`SampleInfo::bound_running_ns`].
    pub bound_running_ns: u64,
    /// The time of the freeze for a stopped set ([`SampleInfo::hrtime`]); `None` for a running
    /// one, whose time is the caller's clock read, made after this returns.
    pub frozen_at: Option<i64>,
}

/// What the lean sample tells besides the values ([`SampleInfo`]'s fields of the same names).
struct Lean {
    hrtime: i64,
    enabled: u64,
    running: u64,
    bound_running: u64,
}

impl BoundSet {
    /// Read the group's raw counts into `raw`. Inlined down to the perf backend's system call
    /// ([`DirectRead`] says why).
    #[inline(always)]
    pub(super) fn read_raw(&self, raw: &mut [u64]) -> Result<Times> {
        let r = if let Some(d) = &self.direct {
            d.read(&mut raw[..self.n], || self.on_owner())
        } else {
            self.group.read(&mut raw[..self.n])
        };
        r.map_err(|e| self.read_failed(e))
    }

    /// Whether the calling thread is the one that bound the set: only there may its counter
    /// pages be read from user space (`owner_mark` says why). The lean sample
    /// ([`BoundSet::sample_to`], [`BoundSet::sample_running`]) is given the calling thread's
    /// own binding alone and does not ask.
    #[inline(always)]
    pub(super) fn on_owner(&self) -> bool {
        self.owner_mark == super::thread::thread_mark()
    }

    /// The error of a failed counter read (`errno`): a closed descriptor when the backend's
    /// check finds the program closed it (the read's `EBADF`) or put something else at its
    /// number (`EIO`, a read of the wrong size; `EAGAIN`, an empty pipe that does not block;
    /// whatever another file says). Not for `ESRCH`: the target is gone, its counter is not.
    #[cold]
    #[inline(never)]
    pub(super) fn read_failed(&self, errno: i32) -> Error {
        if errno != libc::ESRCH {
            if let Err(e) = self.check_descriptors() {
                return e;
            }
        }
        read_error(errno)
    }

    /// Write each request's 64-bit virtual value into `out[..len()]`.
    ///
    /// Async-signal-safe. On a frozen set this returns the values at the freeze without
    /// reading the hardware.
    #[inline]
    pub fn sample(&self, out: &mut [u64]) -> Result<SampleInfo> {
        self.sample_into::<true>(out, None)
    }

    /// The time enabled and running since the last (re)start, from the backend's `times`.
    #[inline(always)]
    pub(super) fn since_restart(&self, times: &Times) -> (u64, u64) {
        (
            times
                .enabled
                .wrapping_sub(self.enabled0.load(Ordering::Relaxed)),
            times
                .running
                .wrapping_sub(self.running0.load(Ordering::Relaxed)),
        )
    }

    /// [`BoundSet::sample`]'s common case, lean (issue 48): a running set whose counters are
    /// read from user space (their mmap pages), without overflow notification, whose interval
    /// since the last restart is complete. Writes each request's virtual value into
    /// `out[..len()]` and returns the time of the sample and the running time since the bind
    /// ([`SampleInfo::hrtime`], [`SampleInfo::bound_running_ns`]); `None` when the set is not
    /// in that case (frozen, notifying, gone, lost, multiplexed, read with `read()`, written
    /// to during the read): then nothing is decided and the caller takes [`BoundSet::sample`],
    /// which says what is wrong or reads the general way. It leaves out what that case does
    /// not need: the unsignalled-overflow looks, the generation word and its incomplete mark,
    /// the overflow mask. For a binding of the calling thread only (its counter pages are read
    /// from user space, which only the thread it counts may do). Async-signal-safe.
    #[inline(always)]
    pub fn sample_running(&self, out: &mut [u64]) -> Option<(i64, u64)> {
        self.lean::<true>(out).map(|l| (l.hrtime, l.bound_running))
    }

    /// [`BoundSet::sample_running`] without the clock read, for libperfex: the time enabled
    /// and running since the last (re)start ([`SampleInfo::enabled_ns`],
    /// [`SampleInfo::running_ns`]), or `None` as there. Async-signal-safe.
    #[inline(always)]
    pub fn sample_running_untimed(&self, out: &mut [u64]) -> Option<(u64, u64)> {
        self.lean::<false>(out).map(|l| (l.enabled, l.running))
    }

    /// The lean sample of [`BoundSet::sample_running`] (the clock read when `TIMED`).
    #[inline(always)]
    fn lean<const TIMED: bool>(&self, out: &mut [u64]) -> Option<Lean> {
        // What cannot change after the bind first, in one word (`BoundSet::lean`): a group
        // read with `read()` pays only this test for the try.
        if !self.lean || out.len() < self.n {
            return None;
        }
        if self.gone() || self.lost() {
            return None;
        }
        let out = Cell::from_mut(&mut out[..self.n]).as_slice_of_cells();
        let s1 = self.seq.begin();
        // A stopped set takes the general path.
        if self.state.load(Ordering::Acquire) & FROZEN != 0 {
            return None;
        }
        let (enabled, running, times) = self.read_user_into(out)?;
        if !self.seq.valid(s1) {
            return None;
        }
        // The time of the sample after the sequence check: nothing that follows the clock
        // read can fail, so a caller's fallback keeps nothing alive across that call.
        Some(Lean {
            hrtime: if TIMED { now_ns() } else { 0 },
            enabled,
            running,
            bound_running: times
                .running
                .wrapping_sub(self.bound_running0.load(Ordering::Relaxed)),
        })
    }

    /// The lean read, inside a sequence section: each member's mmap page read
    /// ([`crate::backend::perf::UserPage::read`]) and its virtual value put straight into its
    /// slot of `out` (one per request); the time enabled and running since the last restart,
    /// and the group's times. `None` when a member is off its counter or was multiplexed, or
    /// the interval since the last restart is incomplete (the general sample marks it: the
    /// generation word). For a set of the lean kind only, with `out` of `n` slots: the callers
    /// test `BoundSet::lean` (or `NOT_LEAN` in the state word) and the size first.
    #[inline(always)]
    fn read_user_into<S: Slot>(&self, out: &[S]) -> Option<(u64, u64, Times)> {
        let times = self.read_user_members(out)?;
        let (enabled, running) = self.since_restart(&times);
        if running < enabled {
            return None;
        }
        Some((enabled, running, times))
    }

    /// [`BoundSet::read_user_into`] without the times since the last restart and their test:
    /// the group's times. Its test is not needed to know the interval complete: the leader's
    /// read answers only when its page's time running equals its time enabled (not
    /// multiplexed since it was opened: [`crate::backend::perf::UserPage::read`]; the others'
    /// are the same, [`crate::backend::perf::UserPage::read_count`]), and a
    /// group's enabled minus running time never shrinks (the kernel adds to both while it
    /// counts, to enabled alone while it waits for a counter, and brings the page up to date
    /// when it comes back on one), so it was 0 at the last restart too, and running since
    /// then equals enabled since then (issue 48: 6 instructions of every `cpc_set_sample`).
    #[inline(always)]
    fn read_user_members<S: Slot>(&self, out: &[S]) -> Option<Times> {
        debug_assert!(self.lean && !self.lean_pages.0.is_null() && out.len() == self.n);
        let n = self.n;
        let (pages, shift) = (self.lean_pages.0, self.shift.as_ptr());
        // SAFETY: for a lean binding `lean_pages` is its `n` pages (fixed at the bind, valid
        // while `direct` is, which is never replaced), `shift` holds `n` values, and the
        // callers give `n` slots: `i < n` below. Indexed without a length test (issue 48: the
        // slices' lengths and their minimum were ~10 instructions of every sample).
        let member = |i: usize| unsafe { (*pages.add(i), out.get_unchecked(i), &*shift.add(i)) };
        // The virtual value: the base plus the events since the origin ([`virt::shifted`]).
        let put = |o: &S, shift: &AtomicU64, count: u64| {
            o.put(virt::shifted(count, shift.load(Ordering::Relaxed)));
        };
        // The first member apart: its times are the group's (as `DirectRead::read`'s), and
        // a one-request set has no loop.
        let (first, o, d) = member(0);
        let (count, times) = first.read()?;
        put(o, d, count);
        // The others' counts alone: the leader's times are theirs (`UserPage::read_count`).
        for i in 1..n {
            let (page, o, d) = member(i);
            put(o, d, page.read_count()?);
        }
        Some(times)
    }

    /// libcpc's common sample (issue 48), written straight into `out` (one value per request,
    /// the caller's buffer): the running time since the bind ([`SampleInfo::bound_running_ns`])
    /// and, for a stopped set, the time of the freeze; for a running set the caller reads the
    /// clock then ([`SampleInfo::hrtime`] is the time of the sample: nothing that follows can
    /// fail). Two cases answer:
    ///
    /// - a frozen set (`cpc_disable`, an overflow): the values, time and running time of the
    ///   freeze, as [`BoundSet::sample`] gives them;
    /// - a running set of the lean kind ([`BoundSet::sample_running`]'s): each member read
    ///   from its mmap page and made virtual into its slot of `out`.
    ///
    /// `None` for anything else (gone, a lost descriptor, a buffer of another size, a member
    /// off its counter or multiplexed, a write during the read or in progress): nothing is
    /// decided, and the caller takes [`BoundSet::sample`], which says what is wrong, waits
    /// out a write or reads the general way. `out` may then hold some values of this try,
    /// which that sample writes over.
    ///
    /// No buffer of counts between the pages and `out`, no [`SampleInfo`], no `Result`, no
    /// call (nor a wait: a caller without a frame of its own saves no registers for one): on
    /// the arm64 guest each of those was instructions of every `cpc_set_sample`. Frozen, not
    /// lean and unbound are one test of the state word. For a binding of the calling thread
    /// only, as [`BoundSet::sample_running`]. Async-signal-safe.
    #[inline(always)]
    pub fn sample_to_untimed(&self, out: &[AtomicU64]) -> Option<Sampled> {
        if self.inherited_from_parent() {
            return None;
        }
        self.sample_binders_to_untimed(out)
    }

    /// [`BoundSet::sample_to_untimed`] without its test of `fork`, for a binding the caller
    /// found where a child of `fork` cannot find its parent's: libcpc's binder's own, kept in
    /// its set, which every child of `fork` forgets (`api::cpc::set`; issue 48: the test was
    /// 6 instructions of every `cpc_set_sample`). Given the parent's binding in a child, it
    /// would read counters that are not the child's. Async-signal-safe.
    #[inline(always)]
    pub fn sample_binders_to_untimed(&self, out: &[AtomicU64]) -> Option<Sampled> {
        if out.len() != self.n || self.lost() {
            return None;
        }
        // A write in progress: the general sample waits it out.
        let s1 = self.seq.snapshot()?;
        // Inside the section (the snapshot's load acquires, `valid` checks it).
        let st = self.state.load(Ordering::Relaxed);
        if st & (FROZEN | NOT_LEAN | DETACHED) != 0 {
            return self.sample_frozen_to(out, st, s1);
        }
        let times = self.read_user_members(out)?;
        if !self.seq.valid(s1) {
            return None;
        }
        Some(Sampled {
            bound_running_ns: times
                .running
                .wrapping_sub(self.bound_running0.load(Ordering::Relaxed)),
            frozen_at: None,
        })
    }

    /// [`BoundSet::sample_to_untimed`] of a set whose state word `st` (read in the sequence
    /// section begun at `s1`) is not the lean kind's running one: the values of the freeze
    /// when it is frozen and bound, else `None`.
    #[inline(always)]
    fn sample_frozen_to(&self, out: &[AtomicU64], st: u64, s1: u64) -> Option<Sampled> {
        if st & (FROZEN | DETACHED) != FROZEN {
            return None;
        }
        let frozen = self.frozen_vals.as_ptr();
        for (i, o) in out.iter().enumerate() {
            // SAFETY: `frozen_vals` holds `n` values, and `out` is `n` slots (tested).
            o.store(
                unsafe { &*frozen.add(i) }.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
        let hrtime = self.frozen_at.load(Ordering::Relaxed) as i64;
        let running = self.frozen_running.load(Ordering::Relaxed);
        if !self.seq.valid(s1) {
            return None;
        }
        Some(Sampled {
            bound_running_ns: running.wrapping_sub(self.bound_running0.load(Ordering::Relaxed)),
            frozen_at: Some(hrtime),
        })
    }

    /// [`BoundSet::sample_to_untimed`] with the time of the sample: `(hrtime, bound_running_ns)`
    /// ([`SampleInfo::hrtime`], [`SampleInfo::bound_running_ns`]), the clock read last for a
    /// running set. Async-signal-safe.
    #[inline(always)]
    pub fn sample_to(&self, out: &[AtomicU64]) -> Option<(i64, u64)> {
        self.sample_to_untimed(out)
            .map(|s| (s.frozen_at.unwrap_or_else(now_ns), s.bound_running_ns))
    }

    /// [`BoundSet::sample`] without the time of the sample: [`SampleInfo::hrtime`] is 0 (on a
    /// frozen set, the time of the freeze), one clock read fewer, for callers that do not report
    /// it (libperfex). Async-signal-safe.
    #[inline]
    pub fn sample_untimed(&self, out: &mut [u64]) -> Result<SampleInfo> {
        self.sample_into::<false>(out, None)
    }

    /// [`BoundSet::sample`], and in `totals[..len()]` the events each request has counted
    /// since the bind, across every restart, resume and overflow: perfctr's per-counter `sum`,
    /// which an i-mode counter keeps while its value goes back to its restart value
    /// ([`BoundSet::iresume`]). Events between an overflow and the stop of the set that
    /// followed it are in neither (the set was frozen at the overflow).
    ///
    /// Async-signal-safe.
    pub fn sample_totals(&self, out: &mut [u64], totals: &mut [u64]) -> Result<SampleInfo> {
        if totals.len() < self.n {
            return Err(Error::BufferTooSmall {
                len: totals.len(),
                need: self.n,
            });
        }
        self.sample_into::<true>(out, Some(totals))
    }

    // Inlined into its callers (the C exports), so that the counter read's system call is made
    // in their frame: see `DirectRead`.
    #[inline(always)]
    fn sample_into<const TIMED: bool>(
        &self,
        out: &mut [u64],
        mut totals: Option<&mut [u64]>,
    ) -> Result<SampleInfo> {
        if out.len() < self.n {
            return Err(Error::BufferTooSmall {
                len: out.len(),
                need: self.n,
            });
        }
        if self.gone() {
            return Err(Error::NotBound);
        }
        if self.lost() {
            return Err(self.read_failed(libc::EBADF));
        }
        if self.notify != 0 && !self.is_frozen() {
            self.take_unsignalled();
        }
        // Whether an overflow that came during this sample's read was looked for.
        let mut looked_again = false;
        loop {
            let s1 = self.seq.begin();
            let frozen = self.state.load(Ordering::Acquire) & FROZEN != 0;
            let times;
            if frozen {
                for (i, o) in out.iter_mut().enumerate().take(self.n) {
                    *o = self.frozen_vals[i].load(Ordering::Relaxed);
                }
                // The times of the freeze, as the values.
                times = Times {
                    enabled: self.frozen_enabled.load(Ordering::Relaxed),
                    running: self.frozen_running.load(Ordering::Relaxed),
                };
                if let Some(t) = totals.as_deref_mut() {
                    for (i, t) in t.iter_mut().enumerate().take(self.n) {
                        *t = self.sums[i]
                            .load(Ordering::Relaxed)
                            .wrapping_add(self.frozen_events[i].load(Ordering::Relaxed));
                    }
                }
            } else if let (Some(d), None) = (&self.direct, &totals) {
                // The inline read straight into `out`, made virtual in place: the counts are
                // not copied through a buffer of their own.
                let n = self.n;
                let out = &mut out[..n];
                times = d
                    .read(out, || self.on_owner())
                    .map_err(|e| self.read_failed(e))?;
                virtualize(out, &self.base, &self.origin);
            } else {
                // Most sets are small: zeroing a 64-value buffer on every sample showed in
                // profiles.
                let mut small = [0u64; 8];
                let mut large;
                let raw: &mut [u64] = if self.n <= small.len() {
                    &mut small
                } else {
                    large = [0u64; MAX_REQUESTS];
                    &mut large
                };
                times = self.read_raw(raw)?;
                // The raw counts are kept for the totals below.
                let n = self.n;
                out[..n].copy_from_slice(&raw[..n]);
                virtualize(&mut out[..n], &self.base, &self.origin);
                if let Some(t) = totals.as_deref_mut() {
                    for (i, t) in t.iter_mut().enumerate().take(self.n) {
                        let origin = self.origin[i].load(Ordering::Relaxed);
                        *t = self.sums[i]
                            .load(Ordering::Relaxed)
                            .wrapping_add(raw[i].wrapping_sub(origin));
                    }
                }
            }
            let hrtime = if frozen {
                self.frozen_at.load(Ordering::Relaxed) as i64
            } else if TIMED {
                now_ns()
            } else {
                0
            };
            let (enabled, running) = self.since_restart(&times);
            // An overflow between the look above and the read: its record waits now, and the
            // count read may be past its wrap (issue 44 item 2). Memory reads of the rings'
            // heads, no system call, unless a record waits.
            if !frozen && self.notify != 0 && !looked_again {
                looked_again = true;
                if self.take_unsignalled() {
                    continue;
                }
            }
            let overflowed = self.overflowed.load(Ordering::Relaxed);
            let mut word = self.gen.load(Ordering::Acquire);
            if !self.seq.valid(s1) {
                continue;
            }
            let complete = frozen || running >= enabled;
            if !complete && word & 1 == 0 {
                word = self.mark_incomplete(word);
            }
            return Ok(SampleInfo {
                generation: (word >> 1) as u32,
                hrtime,
                frozen,
                complete: complete && word & 1 == 0,
                overflowed,
                running_ns: running,
                enabled_ns: enabled,
                bound_running_ns: times
                    .running
                    .wrapping_sub(self.bound_running0.load(Ordering::Relaxed)),
            });
        }
    }

    /// The raw counts and times to count on from: those recorded at the freeze when frozen
    /// (the group has been stopped since), else stop the group and read them.
    pub(super) fn stopped_raw(&self, raw: &mut [u64; MAX_REQUESTS]) -> Result<Times> {
        // A set counting other threads is read again, stopped as it is: when the overflow
        // handler stopped it, another CPU could be inside the kernel counting one event for
        // the group, and a software event's count still takes that increment after it is
        // disabled. Then the read kept at the freeze is one short, and the next overflow
        // would come one event early against it. On the binding's own thread nothing can be
        // in flight while its handler runs.
        if self.is_frozen() && self.target == Target::CurrentThread {
            for (r, f) in raw.iter_mut().zip(self.frozen_raw.iter()) {
                *r = f.load(Ordering::Relaxed);
            }
            return Ok(Times {
                enabled: self.frozen_enabled.load(Ordering::Relaxed),
                running: self.frozen_running.load(Ordering::Relaxed),
            });
        }
        if !self.is_frozen() {
            self.group.stop();
        }
        self.read_raw(raw)
    }
}

//! A bound set's state: what it is (id, requests, target, owner, group), its generation word
//! and its state bits (frozen, counting on through a freeze), and the sequence-counted write
//! every change goes through.

use std::sync::atomic::Ordering;

use super::bind::FORKS;
use super::{gen_word, next_generation, BoundSet, DETACHED, EPOCH, FROZEN, RUNS_ON};
use crate::backend::{BackendKind, Group};
use crate::base::error::{Error, Result};
use crate::base::set::Target;
use crate::base::virt;

/// A binding dropped in a child of `fork()` of the process that made it (its thread table
/// keeps it until a sweep) leaves the group's mappings: they are not this process's, and a
/// binding made in the child since may have its pages at their addresses (the guest's
/// `count.libperfex_fork`: the child's new pair read an unmapped page; issue 48).
impl Drop for BoundSet {
    fn drop(&mut self) {
        if self.inherited_from_parent() {
            self.group.forget_mappings();
        }
    }
}

impl BoundSet {
    /// Whether this binding was made by the process before a fork() that made this one: its
    /// counters belong to the parent. Async-signal-safe (one atomic load).
    #[inline]
    pub fn inherited_from_parent(&self) -> bool {
        self.fork_gen != FORKS.load(Ordering::Relaxed)
    }

    /// Not usable here: unbound, or the parent's (after fork).
    #[inline]
    pub(super) fn gone(&self) -> bool {
        self.detached.load(Ordering::Acquire) || self.inherited_from_parent()
    }

    /// Whether the binding is no longer usable here: unbound, or the parent's (after fork).
    /// Async-signal-safe.
    #[inline(always)]
    pub fn is_gone(&self) -> bool {
        self.gone()
    }

    /// Whether the lean sample can answer for this binding at all
    /// ([`BoundSet::sample_running`]: read from user space, no notifying request), fixed at
    /// the bind.
    #[inline(always)]
    pub fn is_lean(&self) -> bool {
        self.lean
    }

    /// Unique id of this binding within the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the set is empty (never true: empty sets cannot be bound).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Event names as given, in request order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// What the set is bound to.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The thread that made the binding.
    pub fn owner(&self) -> i32 {
        self.owner
    }

    /// The backend's group (for backends that need to reach their own state, and tests).
    pub fn group(&self) -> &dyn Group {
        self.group.as_ref()
    }

    /// Attach a value for the ABI layer (reported in [`OverflowEvent::user_data`](super::OverflowEvent::user_data)).
    pub fn set_user_data(&self, v: usize) {
        self.user_data.store(v, Ordering::Release);
    }

    /// The attached value.
    pub fn user_data(&self) -> usize {
        self.user_data.load(Ordering::Acquire)
    }

    /// The current generation number.
    #[inline]
    pub fn generation(&self) -> u32 {
        (self.gen.load(Ordering::Acquire) >> 1) as u32
    }

    /// Mark the interval of generation word `word` (read by a sample in its sequence section)
    /// incomplete, with a new generation: the kernel could not count the whole interval.
    /// Returns the word the sample reports. When the mark fails, a restart began a new interval
    /// since the sample's read (or another sample marked this one): the sample's interval is
    /// incomplete all the same, and the generation it reports is not its start's. Out of line:
    /// only multiplexed counters come here.
    #[cold]
    #[inline(never)]
    pub(super) fn mark_incomplete(&self, word: u64) -> u64 {
        crate::base::sigsafe::window_hook(crate::base::sigsafe::WindowPoint::BeforeIncompleteMark);
        let marked = gen_word(next_generation(), true);
        match self
            .gen
            .compare_exchange(word, marked, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => marked,
            Err(now) => now | 1,
        }
    }

    /// Start a new generation: a new interval, not seen incomplete (`keep_incomplete`: the same
    /// interval goes on, as it was seen).
    pub(super) fn new_generation(&self, keep_incomplete: bool) {
        let g = gen_word(next_generation(), false);
        if keep_incomplete {
            let _ = self
                .gen
                .fetch_update(Ordering::Release, Ordering::Relaxed, |w| Some(g | (w & 1)));
        } else {
            self.gen.store(g, Ordering::Release);
        }
    }

    /// Whether the set is frozen.
    pub fn is_frozen(&self) -> bool {
        self.state.load(Ordering::Acquire) & FROZEN != 0
    }

    /// Whether the set is frozen at an overflow while its group counts on.
    pub(super) fn runs_on(&self) -> bool {
        self.state.load(Ordering::Relaxed) & RUNS_ON != 0
    }

    /// Set `set` and clear `clear` in the state word, a write more. Must run inside `write`.
    pub(super) fn set_state(&self, set: u64, clear: u64) {
        let s = self.state.load(Ordering::Relaxed);
        self.state
            .store(((s | set) & !clear).wrapping_add(EPOCH), Ordering::Release);
    }

    /// Clear RUNS_ON, and say whether it was set. Must run inside `write`.
    pub(super) fn take_runs_on(&self) -> bool {
        let was = self.runs_on();
        if was {
            self.set_state(0, RUNS_ON);
        }
        was
    }

    /// Requests that overflowed since the last restart.
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Run `f` as the only writer (see [`SeqCount`]).
    pub(super) fn write<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        self.seq.write(|| {
            let r = f(self);
            // Every write changes the state word (see `restart_counting_on`). A load and a
            // store: every change of the word is made by the holder of the sequence claim (a
            // handler writing through this thread's open window runs to its end before the
            // interrupted writer goes on), and an atomic add is a call to an outline atomic on
            // arm64 without LSE (issue 48).
            let s = self.state.load(Ordering::Relaxed);
            self.state.store(s.wrapping_add(EPOCH), Ordering::Release);
            r
        })
    }

    /// The error for a set whose counter descriptor the program closed, if one did: already
    /// known, or found now by the backend's check ([`Group::lost_descriptor`]: one
    /// `PERF_EVENT_IOC_ID` per descriptor on the perf backend, no read, no wait). Made before
    /// every call that would use the descriptors other than the sample, which learns it from
    /// its read's failure. Async-signal-safe.
    ///
    /// [`Group::lost_descriptor`]: crate::backend::Group::lost_descriptor
    pub(super) fn check_descriptors(&self) -> Result<()> {
        let fd = match self.lost.load(Ordering::Relaxed) {
            -1 => match self.group.lost_descriptor() {
                None => return Ok(()),
                Some(fd) => {
                    self.lost.store(fd, Ordering::Relaxed);
                    fd
                }
            },
            fd => fd,
        };
        Err(Error::DescriptorClosed { fd })
    }

    /// Request `i` counts on from raw count `origin` with virtual value `base` there. Must run
    /// inside `write` (or before the binding is shared).
    #[inline]
    pub(super) fn set_base_origin(&self, i: usize, base: u64, origin: u64) {
        self.base[i].store(base, Ordering::Relaxed);
        self.set_origin(i, origin);
    }

    /// Request `i`'s virtual value is its base at raw count `origin` from now on. Must run
    /// inside `write` (or before the binding is shared).
    #[inline]
    pub(super) fn set_origin(&self, i: usize, origin: u64) {
        self.origin[i].store(origin, Ordering::Relaxed);
        let base = self.base[i].load(Ordering::Relaxed);
        self.shift[i].store(virt::shift(base, origin), Ordering::Relaxed);
    }

    /// Whether a counter descriptor of the set was found closed by the program.
    #[inline(always)]
    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed) >= 0
    }

    pub(super) fn detach(&self) {
        // After fork the descriptors still drive the parent's counters: only close ours.
        if !self.detached.swap(true, Ordering::AcqRel) && !self.inherited_from_parent() {
            // A descriptor the program closed is not stopped (nor any of the group's after it).
            let _ = self.check_descriptors();
            self.write(|b| {
                b.group.stop();
                // For `cpc_set_sample`'s common case, which tests the state word alone.
                b.set_state(DETACHED, 0);
            });
            if self.notify != 0 {
                crate::base::watch::unregister(self.id);
            }
        }
    }

    /// The backend that counts it.
    pub fn backend_kind(&self) -> BackendKind {
        self.kind
    }
}

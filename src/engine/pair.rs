//! A binding of one or two requests read from user space through pages found once, at the
//! bind: libperfex's common start and read (issue 48, the interval row). Kept apart from the
//! lean sample of `sample.rs` (libcpc's), which finds its pages at every sample.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Binding, BoundSet, FROZEN};
use crate::backend::perf::UserPage;
use crate::base::virt;

/// A binding of one or two requests whose counters are read from user space
/// ([`BoundSet::is_lean`]), with its members' pages found once ([`Binding::user_pair`]):
/// [`UserPair::read`] then goes from the set to the counter reads with no test of the set's
/// kind, its size or its pages (on the arm64 guest those were ~25 instructions of each
/// libperfex start and read). It holds the set, so its pages stay mapped while it lives.
#[derive(Clone)]
pub struct UserPair {
    set: Arc<BoundSet>,
    /// The first member's page and the last one's (the same for one request).
    pages: [UserPage; 2],
    /// The last member's number (0 or 1; a number rather than a `bool`, so that an
    /// `Option<UserPair>` is tested on its set's pointer, which is loaded anyway).
    last: usize,
}

impl std::fmt::Debug for UserPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserPair")
            .field("id", &self.set.id)
            .field("members", &(self.last + 1))
            .finish()
    }
}

impl Binding {
    /// The binding as a [`UserPair`]: `None` unless it has one or two requests and is read
    /// from user space ([`BoundSet::is_lean`]: pages, no scaled and no notifying request).
    pub fn user_pair(&self) -> Option<UserPair> {
        let set = self.set_arc();
        if !set.lean || !(1..=2).contains(&set.n) {
            return None;
        }
        let pages = set.direct.as_ref()?.user_pages()?;
        // `read` indexes `base` and `origin` by member without a bounds test: their lengths
        // are the number of requests, said here once.
        if pages.len() != set.n || set.base.len() != set.n || set.origin.len() != set.n {
            return None;
        }
        Some(UserPair {
            set: Arc::clone(set),
            pages: [pages[0], pages[set.n - 1]],
            last: set.n - 1,
        })
    }
}

impl UserPair {
    /// The first member's virtual value into `out[0]` and the last member's into `out[1]`
    /// (the same for one request), as [`BoundSet::sample`] gives them, read from the members'
    /// pages; with `TIMES`, the time enabled and running since the last (re)start
    /// ([`crate::SampleInfo::enabled_ns`], [`crate::SampleInfo::running_ns`]), else `(0, 0)`.
    /// `None`, with nothing decided and `out` perhaps written, when the set is gone (unbound,
    /// a child of fork()), lost a descriptor, is stopped, a member is off its counter or was
    /// ever multiplexed (its page's time enabled is not its time running), or the set was
    /// written to during the read: the caller then takes the general sample, which says
    /// what is wrong or reads with `read()`.
    ///
    /// A member whose page says it ran for all its time enabled was never multiplexed since
    /// the bind (the gap between the two only grows): an interval that ends at a read that
    /// answers was counted whole, whatever its start read. For a binding of the calling
    /// thread only (its counters are read from user space, which only the thread they count
    /// may do). Async-signal-safe: no allocation, no lock, no system call, no panic.
    #[inline(always)]
    pub fn read<const TIMES: bool>(&self, out: &mut [u64; 2]) -> Option<(u64, u64)> {
        let set = &*self.set;
        if set.gone() || set.lost() {
            return None;
        }
        let s1 = set.seq.begin();
        if set.state.load(Ordering::Acquire) & FROZEN != 0 {
            return None;
        }
        let (c0, times) = self.pages[0].read()?;
        // SAFETY (both): member 0 is, and member 1 is when there are two (`user_pair`).
        out[0] = unsafe { set.virtual_of(0, c0) };
        out[1] = if self.last != 0 {
            unsafe { set.virtual_of(1, self.pages[1].read()?.0) }
        } else {
            out[0]
        };
        if !set.seq.valid(s1) {
            return None;
        }
        Some(if TIMES {
            set.since_restart(&times)
        } else {
            (0, 0)
        })
    }
}

impl BoundSet {
    /// Member `i`'s raw count `count` made virtual ([`virt::virtual_value`]), with no bounds
    /// test.
    ///
    /// # Safety
    /// `i` is below the lengths of `base` and `origin` ([`Binding::user_pair`] checked them).
    #[inline(always)]
    unsafe fn virtual_of(&self, i: usize, count: u64) -> u64 {
        debug_assert!(i < self.base.len() && i < self.origin.len());
        // SAFETY: the caller's promise.
        let (base, origin) = unsafe { (self.base.get_unchecked(i), self.origin.get_unchecked(i)) };
        virt::virtual_value(
            base.load(Ordering::Relaxed),
            count.wrapping_sub(origin.load(Ordering::Relaxed)),
        )
    }
}

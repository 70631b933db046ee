//! A binding of one or two requests read from user space through pages found once, at the
//! bind: libperfex's common start and read (issue 48, the interval row). Kept apart from the
//! lean sample of `sample.rs` (libcpc's), which finds its pages at every sample.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Binding, BoundSet, FROZEN};
use crate::backend::perf::UserPage;
use crate::base::tpslot::TpTable;
use crate::base::virt;

/// Each thread's published pair holder, found by its thread pointer (one register read and
/// a load, where a thread-local is a call of the TLS descriptor's resolver: issue 48,
/// libperfex's interval). The engine clears it in the child of `fork()` (beside
/// `bind::FORKS`): no thread of the child finds an entry a thread of the parent published,
/// the forking thread's included (its pair's pages are not mapped in the child, and its
/// counters count the parent). What an entry points to, and the rules of its publication
/// (each thread frees its slot before it exits), are its user's: libperfex's.
pub static PAIR_SLOTS: TpTable<64> = TpTable::new();

/// A binding of one or two requests whose counters are read from user space
/// ([`BoundSet::is_lean`]), with its members' pages found once ([`Binding::user_pair`]):
/// [`UserPair::read_held`] then goes from the pair to the counter reads with no test of the
/// set's kind, its size or its pages (on the arm64 guest those were ~25 instructions of each
/// libperfex start and read). It holds the set, so its pages stay mapped while it lives.
///
/// It also holds what makes a member's page count virtual (its base less its origin) as it
/// was when the pair was made, with the set's sequence count then ([`UserPair::is_current`]):
/// its holder keeps its own origins in page counts ([`UserPair::page_counts`]), so that a
/// read and a start read the pages and add nothing (issue 48), and turns them into virtual
/// values where it needs them ([`UserPair::virtual_values`]). After a write (a restart of the
/// set: libperfex makes none) the pair is not current: it is made again.
#[derive(Clone)]
pub struct UserPair {
    set: Arc<BoundSet>,
    /// The first member's page and the last one's (the same for one request).
    pages: [UserPage; 2],
    /// Base less origin of the first member and of the last one, at `seq`.
    delta: [u64; 2],
    /// The set's sequence count when `delta` was read (even: no write was open).
    seq: u64,
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
        if pages.len() != set.n || set.shift.len() != set.n {
            return None;
        }
        let last = set.n - 1;
        let seq = set.seq.begin();
        // The set's shifts (base less origin, `virt::shift`), written with them.
        let delta = |i: usize| set.shift[i].load(Ordering::Relaxed);
        let delta = [delta(0), delta(last)];
        // Made usable (not unbound, not stopped): `read` then tests only that nothing was
        // written since.
        let stopped = set.state.load(Ordering::Acquire) & FROZEN != 0;
        if seq & 1 != 0 || stopped || set.gone() || !set.seq.valid(seq) {
            return None;
        }
        Some(UserPair {
            set: Arc::clone(set),
            pages: [pages[0], pages[last]],
            delta,
            seq,
            last,
        })
    }
}

impl UserPair {
    /// Whether the set was not written to since the pair was made (its base and origin are
    /// still the pair's).
    #[inline]
    pub fn is_current(&self) -> bool {
        self.set.seq.valid(self.seq)
    }

    /// Whether [`UserPair::read_held`] may read the pair: [`UserPair::is_current`], and the
    /// set is neither gone (unbound, the parent's after `fork()`) nor lost a descriptor, and
    /// is not stopped. Asked where the pair is published ([`PAIR_SLOTS`]).
    #[inline]
    pub fn is_usable(&self) -> bool {
        let set = &*self.set;
        self.is_current()
            && !set.gone()
            && !set.lost()
            && set.state.load(Ordering::Acquire) & FROZEN == 0
    }

    /// Virtual values (as [`BoundSet::sample`] gives them) of the first and last member's
    /// page counts `c` ([`UserPair::read_held`]).
    #[inline]
    pub fn virtual_values(&self, c: [u64; 2]) -> [u64; 2] {
        // `virt::virtual_value(base, count - origin)`, with the shifts read when the pair was
        // made.
        [
            virt::shifted(c[0], self.delta[0]),
            virt::shifted(c[1], self.delta[1]),
        ]
    }

    /// What [`UserPair::virtual_values`] adds to each page count (base less origin): a caller
    /// that keeps it converts with no test of whether it has a pair (0 without one).
    #[inline]
    pub fn delta(&self) -> [u64; 2] {
        self.delta
    }

    /// The page counts of the first and last member's virtual values `v`: the inverse of
    /// [`UserPair::virtual_values`].
    #[inline]
    pub fn page_counts(&self, v: [u64; 2]) -> [u64; 2] {
        [
            virt::unshifted(v[0], self.delta[0]),
            virt::unshifted(v[1], self.delta[1]),
        ]
    }

    /// The first member's page count (the count the kernel's page gives, not made virtual:
    /// [`UserPair::virtual_values`]) into `out[0]` and the last member's into `out[1]` (the
    /// same for one request), read from the members' pages, for a pair its holder published
    /// in [`PAIR_SLOTS`] and holds there for the read (issue 48: no test of fork, of a lost
    /// descriptor, nor of the set's sequence, no base or origin added: ~21 instructions of
    /// each libperfex start and read fewer). `None`, with `out` perhaps written, only where a
    /// member is off its counter or was ever multiplexed (its page's time enabled is not its
    /// time running): the caller then takes its general path.
    ///
    /// The caller's promise, kept by libperfex's publication: the pair was
    /// [`UserPair::is_usable`] when it was published and nothing wrote to its set since.
    /// - The child of `fork()` finds no published pair (the engine clears the table there).
    /// - A lost descriptor is found, and the set written to, only by calls on the set's
    ///   binding, which its holder makes on its own thread, with the pair unpublished (held).
    /// - The same holds for every write of the set: a lean set has no notifying request (no
    ///   overflow, no watcher writes it); its stops, restarts and unbind are its holder's calls.
    ///
    /// A member whose page says it ran for all its time enabled was never multiplexed since
    /// the bind (the gap between the two only grows): an interval that ends at a read that
    /// answers was counted whole, whatever its start read. For a binding of the calling
    /// thread only (its counters are read from user space, which only the thread they count
    /// may do). Async-signal-safe: no allocation, no lock, no system call, no panic.
    #[inline(always)]
    pub fn read_held(&self, out: &mut [u64; 2]) -> Option<()> {
        out[0] = self.pages[0].read()?.0;
        out[1] = if self.last != 0 {
            self.pages[1].read()?.0
        } else {
            out[0]
        };
        Some(())
    }
}

//! A small process-wide table of per-thread pointers keyed by the thread pointer
//! ([`sys::thread_pointer`]): one register read, a shift and a load find the calling thread's
//! entry, where a thread-local in a shared library is a call to the TLS descriptor's resolver
//! (stable Rust has no initial-exec model for a `cdylib`; issue 48, libperfex's interval).
//!
//! Each [`TpSlot`] is a word and a pointer. The word is 0 (free), a thread's pointer `tp`
//! (that thread published the pointer: [`TpSlot::mine`] gives it to that thread alone), or
//! `tp | BUSY` (that thread is inside a call that uses or changes what the pointer points to:
//! nobody may use it, and a call of the same thread that finds it so, which can only be a
//! signal handler that interrupted that call, knows it: [`TpSlot::busy_here`]). A thread
//! claims a free slot with a compare-and-swap ([`TpSlot::claim`]); only the thread whose
//! pointer is in the word changes it afterwards (and its signal handlers, which put back what
//! they found before they return), until it frees it.
//!
//! The rules that make it sound (the caller's, documented at its use):
//! - A thread pointer is unique among live threads but not over time: a thread created after
//!   another exited may get its thread block, and so its thread pointer, again (glibc keeps
//!   the stacks of exited threads for new ones). So a thread must free its slot before it
//!   exits (from a destructor of its thread-locals, which run on the exiting thread before its
//!   stack can be given to another): a new thread with the same pointer then finds the slot
//!   free, never the dead thread's entry.
//! - In the child of `fork()` only the forking thread lives, and the other threads' stacks
//!   (their thread pointers) are free for the child's new threads: the child clears the whole
//!   table ([`TpTable::clear_all`], from a `fork` handler), the forking thread's slot too.
//! - Two live threads whose pointers fall on the same slot: the first to claim it has it; the
//!   other finds no entry ([`TpSlot::mine`] is `None`) and takes its caller's general path.
//!
//! Async-signal-safe: atomic loads and stores, one compare-and-swap; no allocation, no lock.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::sys;

/// In a slot's word with its thread's pointer: the thread is inside a call that uses or
/// changes the entry ([`TpSlot::hold_if_mine`], [`TpSlot::enter`]). A thread pointer is aligned (to 16
/// bytes at least on arm64 and x86-64), so its low bit is free.
pub const BUSY: usize = 1;

/// One thread's entry: its word (0, `tp` or `tp | BUSY`) and its pointer.
#[derive(Debug)]
#[repr(C, align(16))]
pub struct TpSlot {
    word: AtomicUsize,
    ptr: AtomicPtr<()>,
}

impl TpSlot {
    const fn new() -> TpSlot {
        TpSlot {
            word: AtomicUsize::new(0),
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The pointer the thread of `tp` published here, if it did and is not inside a call that
    /// holds it ([`BUSY`]). For the thread of `tp` only (another thread's answer would be
    /// stale at once).
    #[inline(always)]
    pub fn mine(&self, tp: usize) -> Option<*mut ()> {
        // Relaxed: the word equals `tp` only where this thread stored it (or a thread with its
        // pointer that freed the slot before it exited, which ordered the free before this
        // thread's start).
        if self.word.load(Ordering::Relaxed) != tp {
            return None;
        }
        Some(self.ptr.load(Ordering::Relaxed))
    }

    /// Mark the slot, which [`TpSlot::mine`] just gave to the thread of `tp`, held by a call
    /// of that thread ([`BUSY`]) until [`TpSlot::leave`]: a signal handler that interrupts
    /// the call finds no entry.
    #[inline(always)]
    pub fn enter(&self, tp: usize) {
        self.word.store(tp | BUSY, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    }

    /// End of [`TpSlot::enter`]'s hold: the entry is the thread's again.
    #[inline(always)]
    pub fn leave(&self, tp: usize) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.word.store(tp, Ordering::Relaxed);
    }

    /// Whether a call of the thread of `tp` holds the slot ([`TpSlot::enter`],
    /// [`TpSlot::hold_if_mine`] or [`TpSlot::claim`]): asked by a call of that thread, a call it interrupted (as a signal
    /// handler) uses or changes the entry.
    #[inline]
    pub fn busy_here(&self, tp: usize) -> bool {
        self.word.load(Ordering::Relaxed) == tp | BUSY
    }

    /// Hold the slot for a longer call of the thread of `tp` (which may change or free what
    /// the entry points to), where the thread published an entry: `true` when it did (the
    /// slot is now [`BUSY`], for [`TpSlot::publish`]); `false`, with nothing done, otherwise.
    /// No atomic read-modify-write: a call of a thread that has no entry (its counters are not
    /// read from user space) pays a load.
    #[inline]
    pub fn hold_if_mine(&self, tp: usize) -> bool {
        if self.word.load(Ordering::Relaxed) != tp {
            return false;
        }
        self.enter(tp);
        true
    }

    /// Claim a free slot for the thread of `tp`, held ([`BUSY`], for [`TpSlot::publish`]):
    /// `false` if another thread has it.
    #[inline]
    pub fn claim(&self, tp: usize) -> bool {
        let ok = self
            .word
            .compare_exchange(0, tp | BUSY, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        ok
    }

    /// Publish `p` as the entry of the thread of `tp`, which holds the slot
    /// ([`TpSlot::hold_if_mine`], [`TpSlot::claim`]); `None` frees the slot instead. Nothing is done when the slot is not
    /// held by that thread (it was freed meanwhile and may be another thread's).
    #[inline]
    pub fn publish(&self, tp: usize, p: Option<*mut ()>) {
        if self.word.load(Ordering::Relaxed) != tp | BUSY {
            return;
        }
        match p {
            Some(p) => {
                self.ptr.store(p, Ordering::Relaxed);
                self.leave(tp);
            }
            None => self.free(),
        }
    }

    /// Free the slot if the thread of `tp` has it, held or not: that thread exits, or drops
    /// what its entry points to.
    #[inline]
    pub fn free_if_mine(&self, tp: usize) {
        if self.word.load(Ordering::Relaxed) & !BUSY == tp {
            self.free();
        }
    }

    #[inline]
    fn free(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Relaxed);
        // Release: a thread that claims the slot next sees the pointer cleared.
        self.word.store(0, Ordering::Release);
    }
}

/// `N` slots (a power of two), each thread's at [`TpTable::index`] of its thread pointer.
pub struct TpTable<const N: usize> {
    slots: [TpSlot; N],
}

impl<const N: usize> Default for TpTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> TpTable<N> {
    /// An empty table.
    pub const fn new() -> TpTable<N> {
        assert!(N.is_power_of_two());
        TpTable {
            slots: [const { TpSlot::new() }; N],
        }
    }

    /// The slot of thread pointer `tp`: bits 12 and up plus bits 23 and up (glibc puts a
    /// thread's control block at the top of its stack, and its stacks lie one after another,
    /// each its size and a guard page apart: 8 MiB + 4 KiB by default, so that threads differ
    /// from bit 12 and from bit 23 up at once, which an exclusive or of the two would cancel),
    /// so that neighbouring threads fall on different slots. Two instructions on arm64 (`add`
    /// with a shift, `ubfx`).
    #[inline(always)]
    pub fn index(tp: usize) -> usize {
        (tp.wrapping_add(tp >> 11) >> 12) & (N - 1)
    }

    /// The slot of thread pointer `tp` ([`TpTable::index`]).
    #[inline(always)]
    pub fn slot(&self, tp: usize) -> &TpSlot {
        // `& (N - 1)` in `index`: in bounds, no check made.
        &self.slots[Self::index(tp)]
    }

    /// The calling thread's slot, and its thread pointer.
    #[inline(always)]
    pub fn here(&self) -> (&TpSlot, usize) {
        let tp = sys::thread_pointer();
        (self.slot(tp), tp)
    }

    /// Free every slot: in the child of `fork()`, whose threads are not the parent's (see the
    /// module). Async-signal-safe.
    #[inline]
    pub fn clear_all(&self) {
        for s in &self.slots {
            s.free();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A slot answers the thread whose pointer it holds, and only while that thread does not
    // hold it for a call: a signal handler that interrupts the call finds no entry, and knows
    // that a call of its thread holds it.
    #[test]
    fn a_slot_answers_its_thread_alone_and_not_while_a_call_holds_it() {
        let t: TpTable<8> = TpTable::new();
        let a = 0x7f00_0000_1000usize;
        let b = a + (1 << 40); // the same slot
        let p = 0x1234usize as *mut ();
        let s = t.slot(a);
        assert_eq!(s.mine(a), None, "free");
        assert!(!s.hold_if_mine(a), "nothing published");
        assert!(!s.busy_here(a));
        assert!(s.claim(a));
        assert!(s.busy_here(a));
        assert_eq!(s.mine(a), None, "held by a call");
        s.publish(a, Some(p));
        assert_eq!(s.mine(a), Some(p));
        assert!(!s.busy_here(a));
        // Another thread on the same slot neither sees nor takes it.
        assert_eq!(TpTable::<8>::index(b), TpTable::<8>::index(a));
        assert_eq!(s.mine(b), None);
        assert!(!s.hold_if_mine(b));
        assert!(!s.claim(b));
        assert!(!s.busy_here(b));
        assert_eq!(s.mine(a), Some(p));
        // A call of the thread holds it: no entry, busy for that thread only.
        s.enter(a);
        assert_eq!(s.mine(a), None);
        assert!(s.busy_here(a));
        s.leave(a);
        assert_eq!(s.mine(a), Some(p));
        // Publishing nothing frees it.
        assert!(s.hold_if_mine(a));
        s.publish(a, None);
        assert_eq!(s.mine(a), None);
        assert!(!s.busy_here(a));
    }

    // Issue 48: a thread created after another exited may get its thread pointer. The exiting
    // thread frees its slot, so the new one finds none; and after fork() the child clears the
    // table: no thread of the child takes a parent's thread's entry.
    #[test]
    fn a_freed_or_cleared_slot_gives_nothing_to_a_thread_with_the_same_pointer() {
        let t: TpTable<8> = TpTable::new();
        let a = 0x7f00_0000_1000usize;
        let s = t.slot(a);
        assert!(s.claim(a));
        s.publish(a, Some(8 as *mut ()));
        // The thread exits: its destructor frees the slot.
        s.free_if_mine(a);
        assert_eq!(
            s.mine(a),
            None,
            "a new thread with the dead thread's pointer"
        );
        // Freed by someone else's pointer: nothing happens.
        assert!(s.claim(a));
        s.publish(a, Some(8 as *mut ()));
        s.free_if_mine(a + 0x10);
        assert_eq!(s.mine(a), Some(8 as *mut ()));
        t.clear_all();
        assert_eq!(s.mine(a), None, "cleared in the child of fork()");
        // A publish after the slot was freed under the holder does not take it back.
        assert!(s.claim(a));
        s.free_if_mine(a);
        s.publish(a, Some(8 as *mut ()));
        assert_eq!(s.mine(a), None);
    }

    // Threads with glibc's default stacks (8 MiB and a guard page apart, or 8 MiB) and with
    // small ones (64 or 128 KiB and a guard page) fall on different slots.
    #[test]
    fn neighbouring_threads_fall_on_different_slots() {
        for step in [0x80_1000usize, 0x80_0000, 0x1_1000, 0x2_1000, 0x20_1000] {
            let base = 0xffff_a000_0000usize + 0x7f0;
            let idx: Vec<usize> = (0..16)
                .map(|i| TpTable::<64>::index(base - i * step))
                .collect();
            let mut d = idx.clone();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), idx.len(), "step {step:#x}: {idx:?}");
        }
    }
}

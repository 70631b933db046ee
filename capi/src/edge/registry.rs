//! The registry of live libcpc and libpctx handles.
//!
//! Every `cpc_t`, `cpc_set_t`, `cpc_buf_t`, `pctx_t` and `struct vperfctr` this library hands out
//! is a slot of this table, and the value C holds is not an address but the slot's index, a
//! generation and the handle's kind in one word ([`insert`] makes it). A value from C is
//! checked in constant time before anything is dereferenced: its kind bits, its index taken
//! modulo the table, and the one word the slot holds while that handle is live, which must
//! equal the value whole ([`get`]). So a stale, foreign, NULL, garbage or mistyped handle (a
//! buffer passed as a set, a handle already destroyed, a pointer to anything else) is an
//! `EINVAL`, never a crash; a slot used again gets a new generation, so an old handle is told
//! from the new one (the registry of addresses this replaced could not tell a freed address
//! the allocator handed out again, and its hashed probe was a fifth of `cpc_set_sample`'s
//! instructions, issue 48).
//!
//! Lookups are two loads and allocate nothing, so the async-signal-safe entry points
//! (`cpc_set_sample`, `cpc_buf_get`...) check their handles from a signal handler. Insertions
//! claim a free slot with a compare-and-swap, removals free it with one (only one remover wins,
//! so only one frees the value).

use std::sync::atomic::{AtomicUsize, Ordering};

/// What a registered pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `cpc_t`.
    Cpc = 1,
    /// A `cpc_set_t`.
    Set = 2,
    /// A `cpc_buf_t`.
    Buf = 3,
    /// A `pctx_t`.
    Pctx = 4,
    /// A `struct vperfctr` (perfctr, issue 47).
    Vperfctr = 5,
    /// A `struct rvperfctr` (perfctr's remote form).
    Rvperfctr = 6,
    /// A `struct gperfctr` (perfctr's global mode).
    Gperfctr = 7,
}

/// A handle's low bits: its kind (never 0 in a live handle).
const KIND_BITS: u32 = 3;
const KIND_MASK: usize = (1 << KIND_BITS) - 1;
const BITS: u32 = 14;
/// Slots in the table: the live handles it holds at most.
pub(crate) const CAPACITY: usize = 1 << BITS;
/// Where a handle's generation starts.
const GEN_SHIFT: u32 = KIND_BITS + BITS;
/// A slot being filled (kind bits 0: no handle matches it).
const RESERVED: usize = 1 << KIND_BITS;

/// One handle's place: `word` is the live handle's value, else (kind bits 0) the generation
/// its last handle had (plus [`RESERVED`] while an insertion fills it); `ptr` the value's
/// address.
#[repr(C, align(16))]
struct Slot {
    word: AtomicUsize,
    ptr: AtomicUsize,
}

static TABLE: [Slot; CAPACITY] = [const {
    Slot {
        word: AtomicUsize::new(0),
        ptr: AtomicUsize::new(0),
    }
}; CAPACITY];
/// Where the next insertion starts looking for a free slot.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The handle of slot `index` for kind `kind`, generation `gen`.
fn handle(gen: usize, index: usize, kind: Kind) -> usize {
    (gen << GEN_SHIFT) | (index << KIND_BITS) | kind as usize
}

/// The generation after `gen` (never 0, wrapping within the bits a handle has for it).
fn next_gen(gen: usize) -> usize {
    let g = gen.wrapping_add(1) & (usize::MAX >> GEN_SHIFT);
    g.max(1)
}

/// Record `p` (the address of a value of `kind`) as a new live handle: its value for C.
/// `None` when the table is full (the caller reports `ENOMEM`).
pub(crate) fn insert(p: usize, kind: Kind) -> Option<usize> {
    let start = NEXT.fetch_add(1, Ordering::Relaxed);
    for i in 0..CAPACITY {
        let index = (start + i) % CAPACITY;
        let slot = &TABLE[index];
        let w = slot.word.load(Ordering::Acquire);
        if w & (KIND_MASK | RESERVED) != 0 {
            continue;
        }
        if slot
            .word
            .compare_exchange(w, w | RESERVED, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        let h = handle(next_gen(w >> GEN_SHIFT), index, kind);
        slot.ptr.store(p, Ordering::Relaxed);
        slot.word.store(h, Ordering::Release);
        NEXT.store(index + 1, Ordering::Relaxed);
        return Some(h);
    }
    None
}

/// The address of the value of `h` if it is a live handle of `kind`. Async-signal-safe,
/// constant time: the kind bits, then the slot's word against `h` whole.
#[inline(always)]
pub(crate) fn get(h: usize, kind: Kind) -> Option<usize> {
    if h & KIND_MASK != kind as usize {
        return None;
    }
    let slot = &TABLE[(h >> KIND_BITS) % CAPACITY];
    if slot.word.load(Ordering::Acquire) != h {
        return None;
    }
    Some(slot.ptr.load(Ordering::Relaxed))
}

/// Whether `h` is a live handle of `kind`. Async-signal-safe.
#[inline]
pub(crate) fn contains(h: usize, kind: Kind) -> bool {
    get(h, kind).is_some()
}

/// Forget `h`: the address of its value, which is no longer a handle, or `None` if `h` was
/// not a live handle of `kind`. Only one caller wins a race to remove the same handle, so only
/// one frees its value.
pub(crate) fn remove(h: usize, kind: Kind) -> Option<usize> {
    let p = get(h, kind)?;
    let slot = &TABLE[(h >> KIND_BITS) % CAPACITY];
    // The slot keeps the generation (kind bits 0: free), for the next handle made in it.
    let free = (h >> GEN_SHIFT) << GEN_SHIFT;
    slot.word
        .compare_exchange(h, free, Ordering::AcqRel, Ordering::Relaxed)
        .ok()
        .map(|_| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    // The registry is process-wide: the test that fills it must not run beside the others.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn handles_are_found_only_alive_and_under_their_kind() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let a = Box::into_raw(Box::new(0u64)) as usize;
        let h = insert(a, Kind::Set).unwrap();
        assert_eq!(get(h, Kind::Set), Some(a));
        assert!(!contains(h, Kind::Buf), "a set is not a buffer");
        assert!(!contains(h + (1 << KIND_BITS), Kind::Set), "another slot");
        assert!(
            !contains(a, Kind::Set),
            "the value's address is not its handle"
        );
        assert!(!contains(0, Kind::Set), "NULL");
        assert!(!contains(usize::MAX, Kind::Set), "garbage");
        assert_eq!(remove(h, Kind::Set), Some(a));
        assert!(!contains(h, Kind::Set), "removed");
        assert_eq!(remove(h, Kind::Set), None, "removed twice");
        // SAFETY: from Box::into_raw above.
        unsafe { drop(Box::from_raw(a as *mut u64)) };
    }

    #[test]
    fn a_slot_used_again_has_a_new_generation() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Fill the table (other tests may hold a few slots), free one slot, and make a handle
        // of the same kind again: it lands in that slot, with another value.
        let mut held: Vec<usize> = std::iter::from_fn(|| insert(0x2000, Kind::Pctx)).collect();
        assert!(
            held.len() + 16 >= CAPACITY,
            "refused after only {}",
            held.len()
        );
        assert_eq!(insert(0x3000, Kind::Pctx), None, "the table is full");
        let old = held.pop().unwrap();
        assert_eq!(remove(old, Kind::Pctx), Some(0x2000));
        let again = insert(0x1000, Kind::Pctx).unwrap();
        let slot = |h: usize| (h >> KIND_BITS) % CAPACITY;
        assert_eq!(slot(again), slot(old));
        assert_ne!(again, old, "a new generation");
        assert!(
            !contains(old, Kind::Pctx),
            "the old handle of the same slot and kind"
        );
        assert_eq!(get(again, Kind::Pctx), Some(0x1000));
        held.push(again);
        for h in held {
            assert!(remove(h, Kind::Pctx).is_some());
        }
        assert!(insert(0x3000, Kind::Pctx)
            .and_then(|h| remove(h, Kind::Pctx))
            .is_some());
    }

    #[test]
    fn many_handles_from_many_threads() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..3 {
                        let ptrs: Vec<usize> = (0..2000)
                            .map(|i| 0x1000_0000 + (t * 1_000_000 + round * 100_000 + i) * 8)
                            .collect();
                        let hs: Vec<usize> = ptrs
                            .iter()
                            .map(|&p| insert(p, Kind::Buf).unwrap())
                            .collect();
                        for (&h, &p) in hs.iter().zip(&ptrs) {
                            assert_eq!(get(h, Kind::Buf), Some(p));
                        }
                        for (&h, &p) in hs.iter().zip(&ptrs) {
                            assert_eq!(remove(h, Kind::Buf), Some(p));
                        }
                        for &h in &hs {
                            assert!(!contains(h, Kind::Buf));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

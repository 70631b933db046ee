//! The registry of live libcpc and libpctx handles.
//!
//! Every `cpc_t`, `cpc_set_t`, `cpc_buf_t`, `pctx_t` and `struct vperfctr` this library hands out
//! is a slot of this table, and the value C holds is not an address but the slot's index, a
//! generation and the handle's kind in one word ([`insert`] makes it). A value from C is
//! checked in constant time before anything is dereferenced: its index bits pick a slot among
//! those of the kind asked for (each kind has its own slots, `CAPACITY` of them), and the one
//! word that slot holds while its handle is live must equal the value whole ([`get`]): two
//! loads, one compare, no test of the kind bits apart (a handle of another kind never equals a
//! word of this kind's slots; issue 48: the kind's test and the address's null test were 8 of
//! `cpc_set_sample`'s instructions). So a stale, foreign, NULL, garbage or mistyped handle (a
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

use std::ptr::NonNull;
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
const BITS: u32 = 11;
/// Slots of each kind: the live handles of one kind the table holds at most, plus one (index
/// 0 is never used, see [`RESERVED`]). 2048, so that the table keeps its size of when the
/// kinds shared 16384 slots (256 KiB): on the arm64 guest a table of 2 MiB (16384 of each kind)
/// made loading the library 26k instructions dearer, and one of 1 MiB 20k (issue 48).
pub(crate) const CAPACITY: usize = 1 << BITS;
/// Where a handle's generation starts.
const GEN_SHIFT: u32 = KIND_BITS + BITS;
/// Slots in the table: slot `index << KIND_BITS | kind` is index `index` of kind `kind`
/// (those of kind bits 0 are never used). 256 KiB of zeroed data, touched where used.
const SLOTS: usize = 1 << GEN_SHIFT;
/// A handle's index bits, in place (the bits of its slot's number above the kind's).
const INDEX_MASK: usize = (SLOTS - 1) & !KIND_MASK;
/// A slot being filled (kind bits 0). A slot's word while it holds no live handle has index
/// bits 0, and index 0 holds no handle: a value from C is compared only with the word of a
/// slot of its own index bits, so it never equals a free or reserved slot's word, whatever
/// its kind bits, but for 0 (NULL) and index 0's slot, never used, whose address is null
/// ([`get`]).
const RESERVED: usize = 1 << (usize::BITS - 1);

/// One handle's place: `word` is the live handle's value, else (kind and index bits 0) the
/// generation its last handle had (plus [`RESERVED`] while an insertion fills it); `ptr` the value's
/// address.
#[repr(C, align(16))]
struct Slot {
    word: AtomicUsize,
    ptr: AtomicUsize,
}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        word: AtomicUsize::new(0),
        ptr: AtomicUsize::new(0),
    }
}; SLOTS];
/// Where the next insertion starts looking for a free slot (an index, whatever the kind).
///
/// In the initialised data, not `.bss` (issue 48, first use): the linker put it after
/// [`TABLE`], alone on the last page of its 256 KiB, so that the first handle cost that page
/// two faults (the read of the atomic update mapped the zero page, its write a copy of it);
/// the data's pages are written by the time a program makes its first handle.
#[link_section = ".data.perfcompat_registry"]
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// For each kind, one past the highest index an insertion used ([`each`] looks no further).
/// In the initialised data, as [`NEXT`] is.
#[link_section = ".data.perfcompat_registry"]
static HIGH: [AtomicUsize; 1 << KIND_BITS] = [const { AtomicUsize::new(0) }; 1 << KIND_BITS];

/// The slot of index bits `h & INDEX_MASK` among `kind`'s: whatever `h`'s own kind bits are.
#[inline(always)]
fn slot(h: usize, kind: Kind) -> &'static Slot {
    // In bounds: `INDEX_MASK | KIND_MASK` is `SLOTS - 1` (the compiler sees it, no test).
    &TABLE[(h & INDEX_MASK) | kind as usize]
}

/// The handle of slot `index` for kind `kind`, generation `gen`.
fn handle(gen: usize, index: usize, kind: Kind) -> usize {
    (gen << GEN_SHIFT) | (index << KIND_BITS) | kind as usize
}

/// The generation after `gen` (never 0, wrapping within the bits a handle has for it).
fn next_gen(gen: usize) -> usize {
    // Below [`RESERVED`]'s bit.
    let g = gen.wrapping_add(1) & (usize::MAX >> (GEN_SHIFT + 1));
    g.max(1)
}

/// Record `p` (the address of a value of `kind`) as a new live handle: its value for C.
/// `None` when the table is full (the caller reports `ENOMEM`), or `p` is 0 (never an
/// address of a value: [`get`] relies on it).
pub(crate) fn insert(p: usize, kind: Kind) -> Option<usize> {
    if p == 0 {
        return None;
    }
    let start = NEXT.fetch_add(1, Ordering::Relaxed);
    for i in 0..CAPACITY {
        let index = (start + i) % CAPACITY;
        if index == 0 {
            continue;
        }
        let slot = slot(index << KIND_BITS, kind);
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
        HIGH[kind as usize].fetch_max(index + 1, Ordering::AcqRel);
        slot.ptr.store(p, Ordering::Relaxed);
        slot.word.store(h, Ordering::Release);
        NEXT.store(index + 1, Ordering::Relaxed);
        return Some(h);
    }
    None
}

/// The address of the value of `h` if it is a live handle of `kind`. Async-signal-safe,
/// constant time: the word of `kind`'s slot at `h`'s index against `h` whole (a slot of
/// `kind` holds only handles of `kind`, so the kind bits are compared with the rest).
#[inline(always)]
pub(crate) fn get(h: usize, kind: Kind) -> Option<NonNull<()>> {
    let slot = slot(h, kind);
    if slot.word.load(Ordering::Acquire) != h {
        return None;
    }
    // Never null while its handle is live (`insert` refuses 0, and stores the address before
    // the word the load above acquired); null for the one value that equals a slot never
    // used: 0 (NULL) against index 0's, which holds no handle (see [`RESERVED`]).
    NonNull::new(slot.ptr.load(Ordering::Relaxed) as *mut ())
}

/// Run `f` on the address of the value of every live handle of `kind`, up to the highest
/// index any insertion of it reached. Async-signal-safe; for a child of `fork` (one thread:
/// nothing is removed meanwhile).
pub(crate) fn each(kind: Kind, mut f: impl FnMut(usize)) {
    let high = HIGH[kind as usize].load(Ordering::Acquire);
    for index in 0..high.min(CAPACITY) {
        let slot = slot(index << KIND_BITS, kind);
        let w = slot.word.load(Ordering::Acquire);
        if w & KIND_MASK == kind as usize {
            f(slot.ptr.load(Ordering::Relaxed));
        }
    }
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
    let p = get(h, kind)?.as_ptr() as usize;
    let slot = slot(h, kind);
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
        assert_eq!(get(h, Kind::Set).map(|p| p.as_ptr() as usize), Some(a));
        assert!(!contains(h, Kind::Buf), "a set is not a buffer");
        assert!(!contains(h + (1 << KIND_BITS), Kind::Set), "another slot");
        assert!(
            !contains(a, Kind::Set),
            "the value's address is not its handle"
        );
        assert!(!contains(0, Kind::Set), "NULL");
        assert!(!contains(usize::MAX, Kind::Set), "garbage");
        // Issue 48: the kind is not tested apart, but chooses the slot the value is compared
        // with: the set's handle with a buffer's kind bits is neither.
        let b = insert(a, Kind::Buf).unwrap();
        let as_other = |h: usize, k: Kind| (h & !KIND_MASK) | k as usize;
        assert!(
            !contains(as_other(h, Kind::Buf), Kind::Set),
            "mistyped, asked as a set"
        );
        assert!(
            !contains(as_other(h, Kind::Buf), Kind::Buf),
            "mistyped, asked as a buffer"
        );
        assert!(
            !contains(as_other(b, Kind::Set), Kind::Set),
            "a buffer's, as a set"
        );
        assert_eq!(remove(b, Kind::Buf), Some(a));
        assert_eq!(remove(h, Kind::Set), Some(a));
        assert!(!contains(h, Kind::Set), "removed");
        assert_eq!(remove(h, Kind::Set), None, "removed twice");
        // Nor the words of free slots, kind bits 0 or not: never used, and used then freed.
        for v in [
            0,
            1 << KIND_BITS,
            h & !KIND_MASK,
            (h >> GEN_SHIFT) << GEN_SHIFT,
            RESERVED,
        ] {
            for k in [Kind::Cpc, Kind::Set, Kind::Buf, Kind::Pctx] {
                assert!(!contains(v, k), "{v:#x} as {k:?}");
                assert!(!contains(v | k as usize, k), "{v:#x} | {k:?}");
            }
        }
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
        assert_eq!(
            get(again, Kind::Pctx).map(|p| p.as_ptr() as usize),
            Some(0x1000)
        );
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
                        // A quarter of a kind's slots each, less what other tests hold.
                        let ptrs: Vec<usize> = (0..CAPACITY / 4 - 16)
                            .map(|i| 0x1000_0000 + (t * 1_000_000 + round * 100_000 + i) * 8)
                            .collect();
                        let hs: Vec<usize> = ptrs
                            .iter()
                            .map(|&p| insert(p, Kind::Buf).unwrap())
                            .collect();
                        for (&h, &p) in hs.iter().zip(&ptrs) {
                            assert_eq!(get(h, Kind::Buf).map(|a| a.as_ptr() as usize), Some(p));
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

//! The registry of live libcpc and libpctx handles.
//!
//! Every `cpc_t`, `cpc_set_t`, `cpc_buf_t` and `pctx_t` this library hands out is recorded here
//! with its kind, and removed before it is freed. A pointer from C is dereferenced only after
//! [`contains`] found it under the expected kind, so a stale, foreign, NULL or mistyped pointer
//! (a buffer passed as a set, a handle already destroyed) is an `EINVAL`, not a crash. A freed
//! address that the allocator hands out again for a new handle of the same kind cannot be told
//! from it: that is the limit of checking raw pointers.
//!
//! The table is a fixed-size open-addressing hash set of atomics: lookups are lock-free and
//! allocate nothing, so the async-signal-safe entry points (`cpc_set_sample`, `cpc_buf_get`...)
//! can check their handles from a signal handler. Insertions claim a free slot with a
//! compare-and-swap; removals leave a tombstone that later insertions reuse.

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

const BITS: u32 = 15;
/// Slots in the table.
const CAPACITY: usize = 1 << BITS;
/// Live handles the registry accepts (the rest of the table keeps probe sequences short).
pub(crate) const MAX_LIVE: usize = CAPACITY / 2;

const EMPTY: usize = 0;
const TOMBSTONE: usize = usize::MAX;

static TABLE: [AtomicUsize; CAPACITY] = [const { AtomicUsize::new(EMPTY) }; CAPACITY];
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// A pointer and its kind in one word: handles are at least 8-byte aligned, so the kind fits
/// in the low 3 bits, and the entry is never `EMPTY` or `TOMBSTONE`.
fn entry(p: usize, kind: Kind) -> Option<usize> {
    (p != 0 && p.is_multiple_of(8)).then_some(p | kind as usize)
}

/// Where the probe for entry `e` starts: a pseudo-random place for the handle's page of memory
/// (4 KB), plus its place in that page, in words. Handles made one after another (a `cpc_t`,
/// its set, its buffer) sit in one page of memory, so their slots share a cache line or two of
/// the table and one page of it: `cpc_set_sample` checks three handles after a system call
/// that left little of the table cached, and a hash that scattered them over the 256 KB table
/// cost it 1-3 % (`bash benches/ab`). Handles of different pages still start at unrelated
/// places (the page is hashed), so handles of the same offset in many pages (large boxes that
/// the allocator maps page-aligned) do not pile up.
#[inline]
fn home(e: usize) -> usize {
    const PAGE_BITS: u32 = 12;
    let page = (e >> PAGE_BITS).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - BITS);
    let word = (e & ((1 << PAGE_BITS) - 1)) >> 3;
    (page + word) % CAPACITY
}

/// Record `p` as a live handle of `kind`. `false` when the registry is full (the caller reports
/// `ENOMEM`) or `p` cannot be a handle.
pub(crate) fn insert(p: usize, kind: Kind) -> bool {
    let Some(e) = entry(p, kind) else {
        return false;
    };
    if LIVE.fetch_add(1, Ordering::AcqRel) >= MAX_LIVE {
        LIVE.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    let h = home(e);
    loop {
        for i in 0..CAPACITY {
            let slot = &TABLE[(h + i) % CAPACITY];
            // Claim the slot as empty first: a compare-and-swap writes, so a slot on a page
            // of the table nothing touched yet costs one page fault, where a load first maps
            // the shared zero page and the store then faults again to copy it (a process's
            // first handles land on such pages: cpc_open's first use).
            let cur = match slot.compare_exchange(EMPTY, e, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(cur) => cur,
            };
            if cur == TOMBSTONE
                && slot
                    .compare_exchange(TOMBSTONE, e, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return true;
            }
        }
        // Fewer than CAPACITY / 2 slots are live, so a free one exists: only racing inserts
        // can have taken every one we saw. Look again.
    }
}

/// Whether `p` is a live handle of `kind`. Async-signal-safe.
///
/// The first slot is read here (where most handles are found: the table is at most half
/// full), the probe goes on out of line: `cpc_set_sample` checks three handles, and the probe
/// loop inlined three times was a fifth of its instructions.
#[inline]
pub(crate) fn contains(p: usize, kind: Kind) -> bool {
    let Some(e) = entry(p, kind) else {
        return false;
    };
    let h = home(e);
    match TABLE[h].load(Ordering::Acquire) {
        EMPTY => false,
        x if x == e => true,
        _ => probe_on(e, h),
    }
}

/// [`contains`] past the first slot `h` of entry `e`.
#[inline(never)]
fn probe_on(e: usize, h: usize) -> bool {
    for i in 1..CAPACITY {
        match TABLE[(h + i) % CAPACITY].load(Ordering::Acquire) {
            EMPTY => return false,
            x if x == e => return true,
            _ => {}
        }
    }
    false
}

/// Forget `p`; `false` if it was not a live handle of `kind`. Only one caller wins a race to
/// remove the same handle, so only one frees it.
pub(crate) fn remove(p: usize, kind: Kind) -> bool {
    let Some(e) = entry(p, kind) else {
        return false;
    };
    let h = home(e);
    for i in 0..CAPACITY {
        let slot = &TABLE[(h + i) % CAPACITY];
        match slot.load(Ordering::Acquire) {
            EMPTY => return false,
            x if x == e => {
                if slot
                    .compare_exchange(e, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    LIVE.fetch_sub(1, Ordering::AcqRel);
                    return true;
                }
                return false;
            }
            _ => {}
        }
    }
    false
}

/// How many slots a lookup of `p` under `kind` reads before it finds it (`None`: not live).
#[cfg(test)]
fn probes(p: usize, kind: Kind) -> Option<usize> {
    let e = entry(p, kind)?;
    let h = home(e);
    (0..CAPACITY).find_map(
        |i| match TABLE[(h + i) % CAPACITY].load(Ordering::Acquire) {
            EMPTY => Some(None),
            x if x == e => Some(Some(i + 1)),
            _ => None,
        },
    )?
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
        let b = Box::into_raw(Box::new(0u64)) as usize;
        assert!(insert(a, Kind::Set));
        assert!(contains(a, Kind::Set));
        assert!(!contains(a, Kind::Buf), "a set is not a buffer");
        assert!(!contains(b, Kind::Set), "never registered");
        assert!(!contains(0, Kind::Set), "NULL");
        assert!(!contains(a + 1, Kind::Set), "misaligned");
        assert!(remove(a, Kind::Set));
        assert!(!contains(a, Kind::Set), "removed");
        assert!(!remove(a, Kind::Set), "removed twice");
        // SAFETY: both came from Box::into_raw above.
        unsafe {
            drop(Box::from_raw(a as *mut u64));
            drop(Box::from_raw(b as *mut u64));
        }
    }

    #[test]
    fn many_handles_from_many_threads_and_tombstones_reused() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..3 {
                        let ptrs: Vec<usize> = (0..2000)
                            .map(|i| 0x1000_0000 + (t * 1_000_000 + round * 100_000 + i) * 8)
                            .collect();
                        for &p in &ptrs {
                            assert!(insert(p, Kind::Buf));
                        }
                        for &p in &ptrs {
                            assert!(contains(p, Kind::Buf));
                        }
                        for &p in &ptrs {
                            assert!(remove(p, Kind::Buf));
                        }
                        for &p in &ptrs {
                            assert!(!contains(p, Kind::Buf));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_full_registry_refuses_more() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Fill up to the limit (other tests may hold a few entries), then one more fails.
        let base = 0x7000_0000_0000usize;
        let mut n = 0;
        while insert(base + n * 8, Kind::Pctx) {
            n += 1;
            assert!(n <= MAX_LIVE, "the registry accepted more than MAX_LIVE");
        }
        assert!(n + 16 >= MAX_LIVE, "refused after only {n}");
        for i in 0..n {
            assert!(remove(base + i * 8, Kind::Pctx));
        }
        assert!(insert(base, Kind::Pctx), "room again after removals");
        assert!(remove(base, Kind::Pctx));
    }

    #[test]
    fn handles_made_together_sit_together_in_the_table() {
        // A cpc_t, its set and its buffer as malloc placed them in one run (0x400, 0x4a0,
        // 0x7a0 into one page): their slots are as far apart as their addresses, in words,
        // so the three lookups of a sample read one page of the table, not three.
        let page = 0x5555_1234_5000usize;
        let (cpc, set, buf) = (page + 0x400, page + 0x4a0, page + 0x7a0);
        let slot = |p| home(entry(p, Kind::Cpc).unwrap());
        let dist = |a: usize, b: usize| (slot(b) + CAPACITY - slot(a)) % CAPACITY;
        assert_eq!(dist(cpc, set), (set - cpc) / 8);
        assert_eq!(dist(cpc, buf), (buf - cpc) / 8);
        // The kind does not move the slot: a set and a buffer at one address probe alike.
        assert_eq!(
            home(entry(set, Kind::Set).unwrap()),
            home(entry(set, Kind::Buf).unwrap())
        );
    }

    #[test]
    fn handles_at_one_offset_of_many_pages_do_not_pile_up() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Large boxes come page-aligned from the allocator's own mappings: the same offset in
        // each page. Their pages are hashed, so they spread over the table like random keys
        // (4096 of 32768 slots: a probe of a few slots), where taking the address alone would
        // give them 64 starting slots and lookups 64 slots long.
        let base = 0x6000_0000_0000usize;
        let ptrs: Vec<usize> = (0..4096).map(|i| base + i * 4096 + 16).collect();
        for &p in &ptrs {
            assert!(insert(p, Kind::Pctx));
        }
        let longest = ptrs.iter().map(|&p| probes(p, Kind::Pctx).unwrap()).max();
        for &p in &ptrs {
            assert!(remove(p, Kind::Pctx));
        }
        let longest = longest.unwrap();
        assert!(longest <= 24, "a lookup read {longest} slots");
    }

    #[test]
    fn a_handle_past_its_first_slot_is_found() {
        let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Two handles whose probes start at the same slot: the second lands past it, and is
        // found there (`probe_on`), also once the first has left a tombstone.
        let a = 0x5100_0000_0000usize;
        let ha = home(entry(a, Kind::Buf).unwrap());
        let b = (1..1 << 20)
            .map(|i| a + i * 4096)
            .find(|&b| home(entry(b, Kind::Buf).unwrap()) == ha)
            .expect("another page hashed to the same place");
        assert!(insert(a, Kind::Buf));
        assert!(insert(b, Kind::Buf));
        assert_eq!(probes(a, Kind::Buf), Some(1));
        assert!(
            probes(b, Kind::Buf).unwrap() > 1,
            "b is past its first slot"
        );
        assert!(contains(b, Kind::Buf));
        assert!(remove(a, Kind::Buf));
        assert!(contains(b, Kind::Buf), "found past a tombstone");
        assert!(!contains(a, Kind::Buf));
        assert!(remove(b, Kind::Buf));
        assert!(!contains(b, Kind::Buf));
    }
}

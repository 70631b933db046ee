//! Binding sets and reading them: the counter-virtualisation engine.
//!
//! [`bind`] checks a [`CounterSet`](crate::CounterSet) against the backend, places its requests on counters
//! (explaining conflicts), programs a backend [`Group`] and returns a [`Binding`]. From then on:
//!
//! - each request's *virtual value* is `base + (raw - origin)` modulo 2^64, where `raw` is the
//!   backend's 64-bit count and `base`/`origin` are taken at the last (re)start: `base` is the
//!   request's preset, so a preset of `UINT64_MAX - k` wraps after exactly `k + 1` events;
//! - a request that notifies on overflow is armed with its distance to the wrap; when it wraps,
//!   the whole set freezes, the overflowed requests are recorded, the generation changes and
//!   the process's overflow hook runs ([`set_overflow_hook`]);
//! - [`BoundSet::restart`] sets every request back to its current preset
//!   ([`BoundSet::set_preset`]) and counts again;
//! - the *generation* changes whenever counting is started, restarted or stopped, and when the
//!   backend reports it could not count the whole interval (multiplexing), so that a program
//!   comparing the generation at start and at read notices that its counts are not whole.
//!
//! # Signal safety
//! [`BoundSet::sample`], [`BoundSet::restart`], [`BoundSet::set_preset`], the overflow path,
//! [`with_current`] and [`with_thread_binding`] are async-signal-safe: they allocate nothing,
//! take no lock, print nothing.
//! The state they share is guarded by a sequence counter: writers make their change with all
//! signals blocked (so a handler never interrupts a change on its own thread) after claiming the
//! counter with a compare-and-swap (so two threads never write at once); readers retry when the
//! counter moved. A reader can only wait for a writer on *another* thread, which always finishes.
//!
//! # Threads
//! A binding belongs to the thread that made it. The engine keeps, per thread, a fixed-size
//! table of that thread's bindings (the overflow signal handler searches it; [`with_current`]
//! finds its most recent thread binding, [`with_thread_binding`] one by id: libcpc's "the
//! calling LWP's bound set" is the binding `cpc_bind_curlwp` made, whatever came after it).
//! Each library keeps its per-thread state in that table as its [`Owner`]'s entry: libcpc
//! its bound set's key and binding, libperfex its counters ([`with_owned_state`]).
//!
//! # Files
//! Here the types ([`BoundSet`], [`SampleInfo`], [`OverflowEvent`]) and the generations;
//! [`BoundSet`]'s methods by idea: `state.rs` (what a binding is, its state word and its
//! sequence-counted write), `sample.rs` (sampling), `restart.rs` (presets and restart),
//! `resume.rs` (stop and resume), `overflow.rs` (the overflow hooks, a wrap handled, the
//! freeze), `watched.rs` (the overflows the signal cannot bring, the watcher's side);
//! `bind.rs` binding and the [`Binding`] handle; `thread.rs` each thread's table.

// Per-request state lives in parallel arrays (presets, bases, origins, raw counts); indexing
// them by request number reads better than zipping four iterators.
#![allow(clippy::needless_range_loop)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::backend::perf::{DirectRead, UserPage};
use crate::backend::{BackendKind, Group};
use crate::base::set::Target;
use crate::base::sigsafe::SeqCount;

mod bind;
mod overflow;
mod pair;
mod restart;
mod resume;
mod sample;
mod state;
mod thread;
mod watched;

pub use bind::{
    at_fork_child, bind, bind_tagged, bind_with, check_bind, check_request, plan, Binding,
};
pub use overflow::{add_overflow_hook, dropped_at_freezes, set_overflow_hook};
pub use pair::{UserPair, PAIR_SLOTS};
pub use sample::Sampled;
pub use thread::{
    owned, owned_any, owned_key, set_owned, with_current, with_made_state, with_owned,
    with_owned_state, with_thread_binding, OwnedState, Owner, MAX_THREAD_BINDINGS,
};

/// What an overflow hook is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverflowEvent {
    /// The binding's id ([`BoundSet::id`]).
    pub binding: u64,
    /// The value the ABI layer attached with [`BoundSet::set_user_data`].
    pub user_data: usize,
    /// Bit i set: request i wrapped past 2^64.
    pub overflowed: u64,
    /// The interrupted program counter, where known (0 otherwise).
    pub pc: usize,
    /// The thread that owns the binding.
    pub tid: i32,
}

/// A per-process overflow hook. It runs in signal-handler context on the perf backend, so it
/// must be async-signal-safe.
pub type OverflowHook = fn(&OverflowEvent);

static NEXT_GENERATION: AtomicU32 = AtomicU32::new(1);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A [`BoundSet`]'s generation word: generation `g`, and whether its interval was seen
/// incomplete.
#[inline]
fn gen_word(g: u32, incomplete: bool) -> u64 {
    (u64::from(g) << 1) | u64::from(incomplete)
}

/// A fresh generation number: positive, never 0, fits in a C `int`, unique within the process
/// until it wraps after 2^31 - 1 numbers. ABI layers that keep their own generations (libperfex)
/// draw from the same sequence.
///
/// The counter starts at 1 and its low 31 bits are the number, 0 skipped: 1, 2, ...,
/// 2^31 - 1, then 1 again. The remainder by 2^31 - 1 this replaces (a multiply and shifts)
/// was 7 instructions of each libperfex start in the arm64 guest (issue 48, the interval
/// row), which now draws from a block of its thread's ([`Generations`]).
#[inline]
pub fn next_generation() -> u32 {
    let g = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff;
    if g == 0 {
        return next_generation_past_zero();
    }
    g
}

/// Generation numbers drawn `BLOCK` at a time from the process's sequence, then handed out
/// one by one without an atomic operation: for a caller that draws one per call on its own
/// thread (libperfex's `start_counters`; the atomic add is a call to `__aarch64_ldadd4_relax`
/// on arm64 without LSE: about 10 instructions of each start in the arm64 guest, issue 48).
/// The numbers are those of [`next_generation`]: positive, never 0, unique within the
/// process until the sequence wraps (a block is no other caller's).
///
/// A block is kept as its next number and its end, cut where the sequence comes round to 0
/// (the numbers after it are not given: a subset of a block is no other caller's either), so
/// that a draw is a compare and an add: no mask, no test of 0 (issue 48: 4 instructions of
/// each libperfex start fewer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generations {
    /// The next number (in 1..=2^31 - 1 while below `end`).
    raw: u32,
    /// The block's end (excluded; at most 2^31): used up at `raw == end`.
    end: u32,
}

impl Generations {
    /// Numbers drawn at a time. 256: libperfex's common start leaves the draw of a block to
    /// its general start ([`Generations::draw_ready`]), which at one start in 64 was ~4
    /// instructions of every start and read on the arm64 guest (issue 48); a thread that
    /// starts once leaves up to 255 numbers unused (the sequence wraps after 2^31 - 1).
    pub const BLOCK: u32 = 256;

    /// None drawn yet (the first call draws a block).
    pub const fn new() -> Generations {
        Generations { raw: 0, end: 0 }
    }

    /// A fresh generation number.
    #[inline(always)]
    pub fn draw(&mut self) -> u32 {
        if self.raw == self.end {
            self.refill();
        }
        let g = self.raw;
        self.raw += 1;
        g
    }

    /// A fresh generation number from the block in hand, or `None` (nothing drawn, nothing
    /// changed) when the block is used up: then [`Generations::draw`] draws. For a common
    /// case that must make no call (libperfex's start: a call there made its frame save six
    /// registers, issue 48); the caller's general path draws.
    #[inline(always)]
    pub fn draw_ready(&mut self) -> Option<u32> {
        let g = self.raw;
        if g == self.end {
            return None;
        }
        self.raw = g + 1;
        Some(g)
    }

    /// Draw the next block: its numbers up to where the sequence comes round to 0 (at least
    /// one).
    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        let first = NEXT_GENERATION.fetch_add(Self::BLOCK, Ordering::Relaxed) & 0x7fff_ffff;
        self.raw = first.max(1);
        self.end = (first + Self::BLOCK).min(0x8000_0000);
    }
}

/// [`next_generation`] when the counter's low bits came round to 0: the next one.
#[cold]
#[inline(never)]
fn next_generation_past_zero() -> u32 {
    next_generation()
}

pub use crate::base::sys::{gettid, now_ns};

/// What a sample returns besides the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleInfo {
    /// The binding's generation number after this sample.
    pub generation: u32,
    /// Monotonic time of the sample (of the freeze, for a frozen set), in nanoseconds.
    pub hrtime: i64,
    /// Whether the set is frozen (after an overflow or [`BoundSet::stop`]).
    pub frozen: bool,
    /// Whether the backend counted the whole interval since the last (re)start.
    pub complete: bool,
    /// Requests that overflowed since the last restart (bit i = request i).
    pub overflowed: u64,
    /// Nanoseconds the counters were running since the last (re)start (up to the freeze, for
    /// a frozen set).
    pub running_ns: u64,
    /// Nanoseconds the counters were enabled since the last (re)start; more than
    /// `running_ns` when the kernel multiplexed them.
    pub enabled_ns: u64,
    /// Nanoseconds the counters were running since the bind (up to the freeze, for a frozen
    /// set): a restart does not start it again. What libcpc's virtual tick counts.
    pub bound_running_ns: u64,
}

/// [`BoundSet`]'s state word: frozen. The three bits `cpc_set_sample`'s common case tests
/// (frozen, unbound, not lean) are the word's lowest: one test of an immediate, as are frozen
/// and unbound apart (issue 48: a mask of scattered bits was one instruction more to make).
const FROZEN: u64 = 1;
/// Unbound ([`BoundSet::detach`]'s write sets it, beside the `detached` flag every other path
/// reads): for the same one test.
const DETACHED: u64 = 2;
/// Set at the bind, never cleared: the lean sample cannot answer for this binding (it is not
/// read from its counter pages, or a request notifies; see `BoundSet::lean`). In the state
/// word so that `cpc_set_sample`'s common case tests frozen, not lean and unbound with one
/// load (issue 48).
const NOT_LEAN: u64 = 4;
/// Frozen at an overflow record while the group counts on.
const RUNS_ON: u64 = 8;
/// Frozen at an overflow record where the kernel stopped the group, right at the wrap, with
/// the restart made ready (see `ready_restart_at`).
const READY: u64 = 16;
/// One write more (the rest of the word counts writes).
const EPOCH: u64 = 32;

/// The members' counter pages of a binding of the lean kind (`BoundSet::lean`), one per
/// request: the first of `n` [`UserPage`]s in its `DirectRead`, which is never replaced, or
/// null for any other binding. The lean read indexes them, and `base` and `origin`, without
/// a length test (issue 48: the slices' lengths and their minimum were a tenth of a sample).
#[derive(Debug, Clone, Copy)]
struct LeanPages(*const UserPage);

// SAFETY: the pages are shared read-only mappings, read with volatile loads from any thread
// (as `UserPage` itself, which is Send and Sync).
unsafe impl Send for LeanPages {}
// SAFETY: as above.
unsafe impl Sync for LeanPages {}

/// A bound set: the engine's state for one binding. Reached through a [`Binding`] (which owns
/// it) or, for the calling thread's current binding, through [`with_current`].
// `seq` first: the sample's acquiring load of it needs no address computed (issue 48).
#[repr(C)]
pub struct BoundSet {
    seq: SeqCount,
    id: u64,
    n: usize,
    names: Vec<String>,
    target: Target,
    owner: i32,
    // The binding thread's [`thread::thread_mark`]: the counter pages of a binding to the
    // calling thread (`Target::CurrentThread`, the only one that has them) are read from user
    // space on that thread alone. Another thread's user-space read (`rdpmc`, `mrs`) would read
    // the counter of the CPU it runs on, not the one the owner counts on; it reads with
    // `read()` (a sample from another thread, the watcher's look at a waiting record).
    owner_mark: usize,
    kind: BackendKind,
    group: Box<dyn Group>,
    // `group`'s read made here, inline, where its backend has one ([`Group::direct_read`],
    // asked once at the bind; `group` is never replaced, so it stays valid).
    direct: Option<DirectRead>,
    // Whether the lean sample can answer at all (`BoundSet::sample_running`): `direct` reads
    // from user space (`DirectRead::reads_user`) and no request notifies. Fixed at the bind,
    // so that the lean sample tests one word where it tested four (issue 48).
    lean: bool,
    // `direct`'s pages when `lean` (exactly `n` of them), else null.
    lean_pages: LeanPages,
    notify: u64,
    preset: Box<[AtomicU64]>,
    base: Box<[AtomicU64]>,
    origin: Box<[AtomicU64]>,
    // `base - origin` (wrapping), for each request: the lean read's virtual value is the
    // count plus it, one load where there were two and a subtraction (issue 48). Written
    // with them, only through `BoundSet::set_base_origin` and `BoundSet::set_origin`.
    shift: Box<[AtomicU64]>,
    frozen_vals: Box<[AtomicU64]>,
    // The backend's raw counts and times at the freeze: the group is stopped while frozen
    // (unless `runs_on`), so restart and resume start from them without stopping and reading
    // again (two system calls fewer on every overflow that the handler restarts).
    frozen_raw: Box<[AtomicU64]>,
    // FROZEN, RUNS_ON, READY, NOT_LEAN, DETACHED and a count of writes (EPOCH): one word, so that the restart of a
    // set that counts on, or of one made ready at its freeze, can take effect in one
    // compare-and-swap without blocking signals (`restart_counting_on`, `restart_ready`). RUNS_ON: frozen at an overflow record while the backend's
    // group counts on ([`KernelStop::Running`]): `frozen_raw` is the count at the overflow,
    // and where counting resumes is read at the restart (or at a stop, see
    // `stop_counting_on`).
    state: AtomicU64,
    // `sigsafe::thread_key` of the thread that bound the set: the only one that makes
    // unblocked writes to `seq` (`restart_counting_on`).
    owner_key: usize,
    frozen_enabled: AtomicU64,
    frozen_running: AtomicU64,
    // Events each request counted in the period that the freeze ended (from its origin to the
    // overflow instant), and in all periods before it: perfctr's `sum`, which the totals of
    // [`BoundSet::sample_totals`] report across restarts.
    frozen_events: Box<[AtomicU64]>,
    sums: Box<[AtomicU64]>,
    frozen_at: AtomicU64,
    overflowed: AtomicU64,
    enabled0: AtomicU64,
    running0: AtomicU64,
    // The backend's running time at the bind's first start: `SampleInfo::bound_running_ns`
    // counts from it. Written once, before the binding is shared.
    bound_running0: AtomicU64,
    // The generation number (bits 1..33) and whether the interval since the last restart was
    // seen incomplete (bit 0), in one word: a sample marks the interval it read with one
    // compare-and-swap from the value it read in its sequence section, so a restart that came
    // after that section (a new interval) makes the mark fail instead of landing on the new
    // interval. Set with `gen_word`.
    gen: AtomicU64,
    detached: AtomicBool,
    // A counter descriptor the program closed (issue 44 item 1): its number, or -1. Once set,
    // every call fails with `Error::DescriptorClosed` and none reads the group again.
    lost: AtomicI32,
    // The overflow signals of the notifying requests are off: the owner could not take them
    // (`BoundSet::unsignalled`).
    quiet: AtomicBool,
    user_data: AtomicUsize,
    // FORKS when the binding was made: a child of fork() has copies of the parent's counter
    // descriptors, which still count the parent; the child must neither read nor stop them.
    fork_gen: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    // The counter's low bits coming round to 0 give no generation 0 (nor a number a C `int`
    // cannot hold): the next one is drawn. Other tests may draw meanwhile; every number drawn
    // here is still in 1..=2^31 - 1.
    // Issue 48: a block of generations handed out one by one gives the sequence's numbers:
    // never 0 (also where the counter's low bits come round inside a block), and none that
    // another block (another thread's) gives.
    /// The tests that look at the process's sequence: the next one moves it back.
    static SEQUENCE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_block_of_generations_skips_zero_and_is_no_one_elses() {
        let _one = SEQUENCE.lock().unwrap_or_else(|e| e.into_inner());
        for (counter, want) in [
            (0xffff_fffe_u32, [0x7fff_fffe, 0x7fff_ffff]),
            (0x7fff_fffe, [0x7fff_fffe, 0x7fff_ffff]),
            (0x8000_0000, [1, 2]),
        ] {
            NEXT_GENERATION.store(counter, Ordering::Relaxed);
            let mut g = Generations::new();
            let got = [g.draw(), g.draw()];
            assert_eq!(got, want, "after {counter:#x}");
            // The block is cut where the sequence comes round: 0 is never given.
            while g.raw != g.end {
                assert!((1..=0x7fff_ffff).contains(&g.draw()));
            }
        }
        let (mut a, mut b) = (Generations::new(), Generations::new());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 * Generations::BLOCK {
            for n in [a.draw(), b.draw(), next_generation()] {
                assert!((1..=0x7fff_ffff).contains(&n), "{n:#x}");
                assert!(seen.insert(n), "{n:#x} given twice");
            }
        }
    }

    // Issue 48: libperfex's common start draws with `draw_ready`, which makes no call: it
    // answers from the block in hand and leaves everything else (a used-up block, the number
    // 0) to `draw`, changing nothing when it does not answer.
    #[test]
    fn draw_ready_answers_from_the_block_in_hand_and_changes_nothing_otherwise() {
        let _one = SEQUENCE.lock().unwrap_or_else(|e| e.into_inner());
        NEXT_GENERATION.store(1000, Ordering::Relaxed);
        let mut g = Generations::new();
        assert_eq!(g.draw_ready(), None, "no block yet");
        assert_eq!(g, Generations::new());
        let first = g.draw();
        for i in 1..Generations::BLOCK {
            assert_eq!(g.draw_ready(), Some(first + i), "number {i} of the block");
        }
        let used = g.clone();
        assert_eq!(g.draw_ready(), None, "the block is used up");
        assert_eq!(g, used);
        // A block drawn where the sequence's low bits are 0 starts at 1.
        NEXT_GENERATION.store(0x8000_0000, Ordering::Relaxed);
        let mut z = Generations::new();
        assert_eq!((z.draw(), z.draw_ready()), (1, Some(2)));
    }

    #[test]
    fn generations_skip_zero_when_the_counter_comes_round() {
        let _one = SEQUENCE.lock().unwrap_or_else(|e| e.into_inner());
        for start in [0x7fff_fffe_u32, 0xffff_fffe] {
            NEXT_GENERATION.store(start, Ordering::Relaxed);
            for _ in 0..4 {
                let g = next_generation();
                assert!((1..=0x7fff_ffff).contains(&g), "{g:#x} after {start:#x}");
            }
        }
    }
}

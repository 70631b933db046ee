//! IRIX `libperfex` semantics on the engine: two R10000 events per thread, counted between a
//! start and a read. The C and Fortran entry points (in `perfcompat-capi`) only check pointers
//! and call these functions.
//!
//! Contract: libperfex(3C) and the decisions in the project's perfex reference.
//! - Events are R10000 event numbers 0..31, resolved by the backend (natively on `sim:r10000`
//!   and `sim:r12000`; through the event map, `PERFCOMPAT_EVENTS` included, on perf). Each is
//!   pinned to its R10000 hardware counter (0..15 on counter 0, 16..31 on counter 1), so two
//!   events of one counter are a "conflicting counters" error on every backend, as on IRIX.
//!   One event asked for twice (`start_counters(0, 0)`) needs one counter: it is counted once
//!   and [`read`] reports its count in both places, with the usual generation rules.
//! - `T5_EVENT0`/`T5_EVENT1` (or `T5EVENT0`/`T5EVENT1`) override the events; a value that is not
//!   an integer in 0..31 is reported once on stderr and ignored.
//! - State is per thread, the thread's entry in the engine's thread table
//!   ([`Owner::Libperfex`], as libcpc's bound set is [`Owner::Libcpc`]'s). The counter group
//!   stays open between pairs: [`start`] takes one sample as the origin and [`read`] one sample
//!   for the counts, so each costs one counter read. "Stopping" after the read is logical: the
//!   next start takes a new origin.
//! - Generations: [`start`] returns a fresh one; [`read`] returns the same unless the kernel did
//!   not run the group for the whole interval (multiplexing), in which case it returns a fresh
//!   one, so the program's comparison fails as the man page intends.
//! - Under the `perfex` command, a thread that never called [`start`] reads its own counts
//!   since it started, for the events perfex counts: see [`adopt_handoff`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Once, OnceLock};

use crate::api::costs;
use crate::base::error::{Error, Result};
use crate::base::tpslot::TpSlot;
use crate::base::virt;
use crate::engine::{self, next_generation, Generations, OwnedState, Owner, UserPair, PAIR_SLOTS};
use crate::{backend, bind, Binding, CounterSet, Request, RequestFlags, Target};

/// How a thread's counters came to be running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Read since the last start: the next [`read`] needs a [`start`] first.
    Stopped,
    /// Started by [`start`] with these (override-resolved) events.
    Started(i32, i32),
    /// Started when the thread started, for the events the `perfex` command counts (see
    /// [`adopt_handoff`]); reads do not stop them.
    Perfex,
}

/// The distinct events a binding counts, in binding order: one or two (no allocation, so
/// that a start/read pair costs two counter reads and nothing more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bound {
    events: [u32; 2],
    n: usize,
}

impl Bound {
    /// The distinct events of a pair: one event asked for twice is counted once (it needs one
    /// counter, so it is no conflict).
    fn pair(n0: u32, n1: u32) -> Bound {
        Bound {
            events: [n0, n1],
            n: if n0 == n1 { 1 } else { 2 },
        }
    }

    /// Distinct events (one or two), as `perfex` hands them over.
    fn of(events: &[u32]) -> Bound {
        match *events {
            [e] => Bound::pair(e, e),
            [e0, e1, ..] => Bound::pair(e0, e1),
            [] => Bound::pair(0, 0),
        }
    }

    #[inline(always)]
    fn as_slice(&self) -> &[u32] {
        &self.events[..self.n]
    }
}

/// Two events as one word, for the common start's and read's one compare (issue 48):
/// `e0 | e1 << 32` when both are R10000 event numbers (0..31), `None` otherwise. A key is
/// below 2^37: the words [`NO_KEY`], [`STOPPED_WORD`], [`PERFEX_WORD`] and [`NOT_USER_READ`]
/// are none.
#[inline(always)]
fn pair_key(e0: i32, e1: i32) -> Option<u64> {
    if (e0 | e1) as u32 >= 32 {
        return None;
    }
    Some((e0 as u64) | ((e1 as u64) << 32))
}

/// Any two `int`s as one word, `e0 | e1 << 32` (each as its 32 bits): the common start's and
/// read's key, with no range test. Two pairs have the same word only if they are the same
/// pair, so a word equal to a [`pair_key`] (two R10000 event numbers) is that pair's: the one
/// compare against the bound pair's key tests the range too (issue 48).
#[inline(always)]
fn any_key(e0: i32, e1: i32) -> u64 {
    u64::from(e0 as u32) | (u64::from(e1 as u32) << 32)
}

/// [`ThreadCounters::start_key`] of a pair the common start cannot start.
const NO_KEY: u64 = u64::MAX;
/// [`ThreadCounters::mode`]: [`Mode::Stopped`].
const STOPPED_WORD: u64 = 1 << 62;
/// [`ThreadCounters::mode`]: [`Mode::Perfex`].
const PERFEX_WORD: u64 = 1 << 63;
/// In [`ThreadCounters::mode`], with a [`Mode::Started`] pair's key: the common read cannot
/// read it (kernel mode, or not read from user space).
const NOT_USER_READ: u64 = 1 << 61;

/// [`ThreadCounters::mode`]'s word of `m`, for a binding read from user space or not
/// (`user_read`). A started pair's events are R10000 event numbers (the general start checked
/// them).
fn mode_word(m: Mode, user_read: bool) -> u64 {
    match m {
        Mode::Stopped => STOPPED_WORD,
        Mode::Perfex => PERFEX_WORD,
        Mode::Started(e0, e1) => match pair_key(e0, e1) {
            Some(k) if user_read => k,
            Some(k) => k | NOT_USER_READ,
            // Never made by the start (out of range); the common read never matches it.
            None => STOPPED_WORD | NOT_USER_READ,
        },
    }
}

/// Whether the [`mode_word`] `w` is `Mode::Started(e0, e1)`.
#[inline(always)]
fn started_with(w: u64, e0: i32, e1: i32) -> bool {
    pair_key(e0, e1) == Some(w & !NOT_USER_READ)
}

/// The [`Mode`] of a [`mode_word`].
#[inline(always)]
fn mode_of(w: u64) -> Mode {
    if w & PERFEX_WORD != 0 {
        Mode::Perfex
    } else if w & STOPPED_WORD != 0 {
        Mode::Stopped
    } else {
        Mode::Started((w & 0xff) as i32, ((w >> 32) & 0xff) as i32)
    }
}

struct ThreadCounters {
    /// The events the binding counts.
    bound: Bound,
    /// Whether the binding counts kernel mode too (only a `perfex -k` hand-over does).
    kernel: bool,
    binding: Binding,
    /// The binding read from user space ([`UserPair`]), where it is, in user mode only: what
    /// the common start and read read.
    pair: Option<UserPair>,
    /// The key ([`pair_key`]) of `bound`'s events where `pair` is there: the common start
    /// starts those events with one compare; [`NO_KEY`] otherwise.
    start_key: u64,
    /// The counts at the start: member 0's, and the last member's (member 0's again for one
    /// event), so that the common read takes each argument's origin without an index. Where
    /// `pair` is there, its page counts ([`UserPair::page_counts`]: what the common start
    /// stores and the common read subtracts, with nothing added, issue 48); virtual values
    /// otherwise ([`ThreadCounters::origin`] gives them).
    origin: [u64; 2],
    /// `pair`'s [`UserPair::delta`], 0 without a pair: the origin's conversions with no test
    /// of the pair (issue 48: the tests were instructions of the host's general calls).
    delta: [u64; 2],
    enabled0: u64,
    running0: u64,
    generation: u32,
    /// Where this thread's fresh generations come from (no atomic operation per start).
    generations: Generations,
    /// The [`Mode`] as one word ([`ThreadCounters::mode`] reads it): [`Mode::Started`] is
    /// its events' key ([`pair_key`], with [`NOT_USER_READ`] where `pair` is not there), so
    /// that the common read tests it with one compare (the enum was three, issue 48).
    mode: u64,
}

impl ThreadCounters {
    /// Bind `bound` (distinct events) to the calling thread and take the origin sample.
    fn bind(bound: Bound, kernel: bool, mode: Mode) -> Result<ThreadCounters> {
        let flags = RequestFlags {
            system: kernel,
            ..RequestFlags::USER
        };
        let binding = bind(&pinned_set(bound.as_slice(), flags)?, Target::CurrentThread)?;
        let pair = binding.user_pair().filter(|_| !kernel);
        let start_key = match (&pair, bound.events) {
            (Some(_), [e0, e1]) => pair_key(e0 as i32, e1 as i32).unwrap_or(NO_KEY),
            (None, _) => NO_KEY,
        };
        let delta = delta_of(&pair);
        let mut t = ThreadCounters {
            bound,
            kernel,
            binding,
            pair,
            start_key,
            origin: [0; 2],
            delta,
            enabled0: 0,
            running0: 0,
            generation: 0,
            generations: Generations::new(),
            mode: STOPPED_WORD,
        };
        t.set_mode(mode);
        t.restart()?;
        Ok(t)
    }

    /// The [`UserPair`] made again where the set was written to since it was made (it then
    /// is no longer current: [`UserPair::is_current`]), the origin kept as the same virtual
    /// values (in the new pair's page counts, or virtual without one); out of line, from the
    /// general start only.
    #[inline(never)]
    fn renew_pair(&mut self) {
        if self.pair.as_ref().is_some_and(|p| !p.is_current()) {
            let origin = self.origin();
            self.pair = self.binding.user_pair();
            self.delta = delta_of(&self.pair);
            self.origin = self.page_counts(origin);
        }
    }

    /// What the calling thread publishes in its slot of [`PAIR_SLOTS`] for [`start_here`]
    /// and [`read_here`]: itself, where its pair is read from user space in user mode
    /// ([`ThreadCounters::start_key`]), usable ([`UserPair::is_usable`]), and the environment
    /// overrides no event (so that the events the common start and read are given are the
    /// events counted); `None` otherwise.
    #[inline(always)]
    fn publishable(&mut self) -> Option<*mut ()> {
        let usable = self.start_key != NO_KEY
            && self.pair.as_ref().is_some_and(UserPair::is_usable)
            && no_override();
        usable.then_some(self as *mut ThreadCounters as *mut ())
    }

    /// Whether the mode is [`Mode::Started`] with `e0` and `e1`: its key, with or without
    /// [`NOT_USER_READ`] (fewer instructions than [`ThreadCounters::mode`] and a compare on the
    /// host's read, which takes the general path).
    #[inline(always)]
    fn is_started(&self, e0: i32, e1: i32) -> bool {
        started_with(self.mode, e0, e1)
    }

    /// The mode, from its word.
    #[inline(always)]
    fn mode(&self) -> Mode {
        mode_of(self.mode)
    }

    /// The origin as virtual values ([`ThreadCounters::origin`]'s field).
    #[inline(always)]
    fn origin(&self) -> [u64; 2] {
        [
            virt::shifted(self.origin[0], self.delta[0]),
            virt::shifted(self.origin[1], self.delta[1]),
        ]
    }

    /// Virtual values `v` as the origin's field keeps them ([`ThreadCounters::origin`]'s
    /// inverse: the pair's page counts, or `v` without a pair).
    #[inline(always)]
    fn page_counts(&self, v: [u64; 2]) -> [u64; 2] {
        [
            virt::unshifted(v[0], self.delta[0]),
            virt::unshifted(v[1], self.delta[1]),
        ]
    }

    /// Set the mode's word.
    #[inline(always)]
    fn set_mode(&mut self, m: Mode) {
        self.mode = mode_word(m, self.pair.is_some());
    }

    /// Take a new origin and a fresh generation.
    #[inline(always)]
    fn restart(&mut self) -> Result<()> {
        let mut v = [0u64; 2];
        let (enabled, running) = self.sample(&mut v)?;
        if self.bound.n == 1 {
            // The last member's origin is the first's (`origin`).
            v[1] = v[0];
        }
        self.origin = self.page_counts(v);
        self.enabled0 = enabled;
        self.running0 = running;
        self.generation = self.generations.draw();
        Ok(())
    }

    /// The counts into `v` and the time enabled and running since the binding's last
    /// (re)start: the lean sample of a running set read from user space first (issue 48), the
    /// general one for anything else.
    #[inline(always)]
    fn sample(&self, v: &mut [u64; 2]) -> Result<(u64, u64)> {
        if let Some(t) = self.binding.sample_running_untimed(v) {
            return Ok(t);
        }
        let info = self.binding.sample_untimed(v)?;
        Ok((info.enabled_ns, info.running_ns))
    }

    /// Where event `e` is in the binding (0 or 1). No slice, no index: the common start and
    /// read run outside the unwind boundary and must not be able to panic.
    #[inline(always)]
    fn index(&self, e: i32) -> Option<usize> {
        let is = |b: u32| i64::from(b) == i64::from(e);
        if is(self.bound.events[0]) {
            Some(0)
        } else if self.bound.n > 1 && is(self.bound.events[1]) {
            Some(1)
        } else {
            None
        }
    }

    /// The counts of `e0` and `e1` (both bound) since the origin, with the generation rule.
    #[inline(always)]
    fn counts(&mut self, e0: i32, e1: i32) -> Result<Counts> {
        let (Some(i0), Some(i1)) = (self.index(e0), self.index(e1)) else {
            return Err(Error::InvalidArgument(format!(
                "events ({e0}, {e1}) are not both counted on this thread"
            )));
        };
        let mut v = [0u64; 2];
        let (enabled, running) = self.sample(&mut v)?;
        Ok(self.counts_of(i0, i1, &v, enabled, running))
    }

    /// The counts of the events at `i0` and `i1` in `v` (a sample, with its time enabled and
    /// running since the binding's last restart) since the origin, with the generation rule.
    #[inline(always)]
    fn counts_of(
        &mut self,
        i0: usize,
        i1: usize,
        v: &[u64; 2],
        enabled: u64,
        running: u64,
    ) -> Counts {
        // `enabled0` and `running0` are the times at the last general start (or the bind):
        // a common start ([`start_here`]) leaves them, and the rule still tells this
        // interval. The gap between time enabled and time running only grows, and a common
        // start answers only where every member's page showed none (`UserPair::read_held`):
        // there was none up to that start, so "more gap now than at the general start" is
        // "more gap now than at the common start".
        let enabled = enabled.wrapping_sub(self.enabled0);
        let running = running.wrapping_sub(self.running0);
        if running < enabled {
            // The kernel took the counters away for part of the interval.
            self.generation = self.generations.draw();
        }
        // `& 1`: an index is 0 or 1 (`index`), said so that no bounds check is made. Member
        // `i`'s origin is `origin[i]` (for one event, member 0 is the last member too).
        let origin = self.origin();
        let count = |i: usize| v[i & 1].wrapping_sub(origin[i & 1]) as i64;
        Counts {
            c0: count(i0),
            c1: count(i1),
            generation: self.generation,
        }
    }
}

/// [`UserPair::delta`] of `pair`, 0 without one ([`ThreadCounters::delta`]).
fn delta_of(pair: &Option<UserPair>) -> [u64; 2] {
    pair.as_ref().map_or([0; 2], UserPair::delta)
}

/// Counters dropped (a new pair bound in their place, the thread's exit) are no longer the
/// thread's published entry: its slot is freed (a general call that drops them claims it
/// again: [`with_held`]). At the thread's exit this is what keeps a thread created later with
/// the same thread pointer from finding them.
impl Drop for ThreadCounters {
    fn drop(&mut self) {
        let (slot, tp) = PAIR_SLOTS.here();
        slot.free_if_mine(tp);
    }
}

// SAFETY: the only state of `Owner::Libperfex`.
unsafe impl OwnedState for ThreadCounters {
    const OWNER: Owner = Owner::Libperfex;
}

/// `f` on this thread's counters: its entry in the engine's thread table, with `f` called in
/// the caller's frame (the counter read inside it is inlined into the C export: one return
/// less after the read's system call, see [`start`]).
#[inline(always)]
fn with_state<R>(f: impl FnOnce(&RefCell<Option<ThreadCounters>>) -> R) -> R {
    engine::with_owned_state(f)
}

/// `f` on this thread's counters, held: the thread's slot of [`PAIR_SLOTS`] is held (so that
/// neither [`start_here`] nor [`read_here`] in a signal handler that interrupts `f` uses
/// them) and, after `f`, the counters are published there again or the slot freed
/// ([`ThreadCounters::publishable`]). A call that finds this thread's counters in use by the
/// call it interrupted (a signal handler's: the common start or read holds the slot, any
/// other call the counters' `RefCell`) is refused ([`nested`]) rather than aborted or let to
/// change them under that call.
#[inline(always)]
fn with_held<R>(f: impl FnOnce(&mut Option<ThreadCounters>) -> Result<R>) -> Result<R> {
    // No thread of the process published (the host's software events, read with `read()`):
    // neither has this one, so it has no slot to hold and no common start or read can be in
    // progress on it (a thread publishes only after it set the mark). One load instead of
    // the slot's look-up and tests, and after `f` one test of whether the counters have a
    // pair at all (issue 48: the host's interval, `benches/ab`).
    let (slot, tp) = if ANY_PUBLISHED.load(Ordering::Relaxed) {
        let (slot, tp) = PAIR_SLOTS.here();
        if slot.busy_here(tp) {
            return Err(nested());
        }
        (Some(slot), tp)
    } else {
        (None, 0)
    };
    with_state(|st| {
        let Ok(mut st) = st.try_borrow_mut() else {
            return Err(nested());
        };
        if let Some(slot) = slot {
            slot.hold_if_mine(tp);
        }
        let r = f(&mut st);
        if slot.is_some() || st.as_ref().is_some_and(|t| t.pair.is_some()) {
            publish(slot, tp, &mut st);
        }
        r
    })
}

/// Whether a thread of this process ever published its counters in [`PAIR_SLOTS`] (set
/// before its first publication): until then the general calls skip the slot ([`with_held`]).
/// In the data a first use writes, as [`OVERRIDES`] is.
#[link_section = ".data.perfcompat_first_use"]
static ANY_PUBLISHED: AtomicBool = AtomicBool::new(false);

/// The end of [`with_held`]: `st` published in `slot` (the calling thread's, of pointer `tp`;
/// `None` where no thread had published when the call began)
/// where it is publishable ([`ThreadCounters::publishable`]), in the slot the call held or
/// one it can claim (a first publication, or dropped counters freed it); the slot the call
/// held freed otherwise. A thread whose counters are not read from user space (the host's
/// software events) pays a test and a load: no atomic read-modify-write. Inlined into the
/// general calls (a function of its own would lie outside the first use's text,
/// `capi/link/first-use-order.txt`: a page fault more).
#[inline(always)]
fn publish(slot: Option<&'static TpSlot>, tp: usize, st: &mut Option<ThreadCounters>) {
    let p = st.as_mut().and_then(ThreadCounters::publishable);
    let (slot, tp) = match (slot, p) {
        (Some(slot), _) => (slot, tp),
        (None, None) => return,
        // The first publication of the process: the mark first (see `ANY_PUBLISHED`).
        (None, Some(_)) => {
            ANY_PUBLISHED.store(true, Ordering::Relaxed);
            PAIR_SLOTS.here()
        }
    };
    if slot.busy_here(tp) || (p.is_some() && slot.claim(tp)) {
        slot.publish(tp, p);
    }
}

/// The refusal of a call made by a signal handler while the calling thread was inside
/// another libperfex call ([`with_held`]): `EAGAIN`, with a static text (no allocation).
#[cold]
#[inline(never)]
fn nested() -> Error {
    Error::Os {
        op:
            "libperfex called from a signal handler during another of this thread's libperfex calls",
        errno: libc::EAGAIN,
    }
}

/// The counts [`read`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Count of the first event.
    pub c0: i64,
    /// Count of the second event.
    pub c1: i64,
    /// Generation number (see the module documentation).
    pub generation: u32,
}

/// `T5_EVENT0`/`T5EVENT0` (index 0) or `T5_EVENT1`/`T5EVENT1` (index 1), if set and valid.
fn env_override(index: usize) -> Option<i32> {
    static WARNED: [Once; 2] = [Once::new(), Once::new()];
    crate::base::sys::env_name! { const T5_EVENT0 = "T5_EVENT0"; }
    crate::base::sys::env_name! { const T5EVENT0 = "T5EVENT0"; }
    crate::base::sys::env_name! { const T5_EVENT1 = "T5_EVENT1"; }
    crate::base::sys::env_name! { const T5EVENT1 = "T5EVENT1"; }
    let names = [[T5_EVENT0, T5EVENT0], [T5_EVENT1, T5EVENT1]][index];
    let (name, value) = names
        .iter()
        .find_map(|n| crate::base::sys::env_var(n).map(|v| (*n, v)))?;
    match value.trim().parse::<i32>() {
        Ok(n) if (0..32).contains(&n) => Some(n),
        _ => {
            WARNED[index].call_once(|| {
                crate::stderr_line!(
                    "libperfex: ignoring {name}={value:?}: not an event number in 0..31"
                )
            });
            None
        }
    }
}

/// The events actually counted for arguments `e0`, `e1`: the environment overrides them.
///
/// The environment is read once, at the first call: a start/read pair must cost one counter
/// read each, and looking up four variables twice per pair cost more than the reads (the
/// benchmarks showed it). A program that changes `T5_EVENT0`/`T5_EVENT1` after its first
/// `start_counters` is not seen, as with a variable read when the program started. Inlined
/// down to one load once read (a call of its own was 20 instructions of each start and read
/// in the arm64 guest, issue 48).
#[inline(always)]
pub fn events(e0: i32, e1: i32) -> (i32, i32) {
    let mut w = OVERRIDES.load(Ordering::Relaxed);
    if w & OVERRIDES_READ == 0 {
        w = read_overrides();
    }
    picked(w, e0, e1)
}

/// `e0` and `e1` after the overrides of the word `w` ([`OVERRIDES`], read).
#[inline(always)]
fn picked(w: u32, e0: i32, e1: i32) -> (i32, i32) {
    let pick = |byte: u32, e: i32| match byte as u8 {
        NO_OVERRIDE => e,
        n => i32::from(n),
    };
    (pick(w, e0), pick(w >> 8, e1))
}

/// The environment's overrides, read once per process ([`events`]): one byte each, the first
/// in the low byte (the event number, or [`NO_OVERRIDE`]), and [`OVERRIDES_READ`] once read.
/// One word, so that a start or a read loads it once and picks each event with a compare (a
/// `OnceLock` of two `Option<i32>`s copied 16 bytes through the stack: ~8 instructions of each
/// start and read in the arm64 guest, issue 48). Two threads reading it first both store the
/// same word.
///
/// In the data, not `.bss` (issue 48, first use): written by the first `start_counters`, it
/// lay on a page of `.bss` of its own, which cost two faults (the read mapped the zero page,
/// the write a copy); `capi/link/relocated-data.ld` puts its section on a page the loader
/// writes.
#[link_section = ".data.perfcompat_first_use"]
static OVERRIDES: AtomicU32 = AtomicU32::new(0);
/// [`OVERRIDES`]'s mark of a word read from the environment.
const OVERRIDES_READ: u32 = 1 << 16;
/// An [`OVERRIDES`] byte without an override (an event number is below 32).
const NO_OVERRIDE: u8 = 0xff;

/// [`OVERRIDES`], read at the first call.
#[cold]
#[inline(never)]
fn read_overrides() -> u32 {
    let byte = |o: Option<i32>| o.and_then(|n| u8::try_from(n).ok()).unwrap_or(NO_OVERRIDE);
    let w =
        OVERRIDES_READ | u32::from(byte(env_override(0))) | (u32::from(byte(env_override(1))) << 8);
    OVERRIDES.store(w, Ordering::Relaxed);
    w
}

/// An R10000 event number written as text (`"26"`, surrounding blanks allowed), or an error
/// naming it: what `perfex -e` and `PERFCOMPAT_PRELOAD_EVENTS` take.
pub fn parse_event(text: &str) -> Result<u32> {
    let n = text.trim().parse::<i32>().map_err(|_| {
        Error::InvalidArgument(format!(
            "{text:?} is not an R10000 event number (events are 0-31; `perfex -l` lists them)"
        ))
    })?;
    check_range(n)
}

/// `e` as an R10000 event number, or an error naming it when it is not in 0..31.
#[inline(always)]
pub fn check_range(e: i32) -> Result<u32> {
    match u32::try_from(e) {
        Ok(n) if n < 32 => Ok(n),
        _ => Err(out_of_range(e)),
    }
}

/// [`check_range`]'s error, built out of line.
#[cold]
#[inline(never)]
fn out_of_range(e: i32) -> Error {
    Error::InvalidArgument(format!(
        "event {e} is out of range (R10000 events are 0-31; `perfex -l` lists them)"
    ))
}

/// A set counting R10000 `events` with `flags`, each pinned to its R10000 hardware counter
/// (0..15 on counter 0, 16..31 on counter 1), so that two events of one counter are a
/// "conflicting counters" error on every backend.
pub fn pinned_set(events: &[u32], flags: RequestFlags) -> Result<CounterSet> {
    let mut set = CounterSet::new();
    for &e in events {
        set.add(Request::new(e.to_string()).on_counter(e / 16).flags(flags))?;
    }
    Ok(set)
}

/// Start counting events `e0` and `e1` (after the environment overrides) on the calling
/// thread from zero; returns the generation number. The same event twice is counted once, and
/// [`read`] reports its count for both.
///
/// Inlined, with its common case (the thread's open pair reused) inlined down to the counter
/// read, so that the read's system call is made in the C export's frame: every return after a
/// system call to a frame live before it costs about 8 ns here (see
/// `backend::perf::DirectRead`). Everything else is out of line.
#[inline(always)]
pub fn start(e0: i32, e1: i32) -> Result<u32> {
    let (e0, e1) = events(e0, e1);
    let bound = Bound::pair(check_range(e0)?, check_range(e1)?);
    with_held(|st| {
        // The group stays open between pairs. After fork() the pair open in the parent still
        // counts the parent: open a new one. Counters perfex handed over are reused when they
        // count exactly these events in user mode.
        match st {
            Some(t) if t.bound == bound && !t.kernel && !t.binding.inherited_from_parent() => {
                if t.pair.is_some() {
                    t.renew_pair();
                }
                t.restart()?;
                t.set_mode(Mode::Started(e0, e1));
                Ok(t.generation)
            }
            other => start_slow(other, bound, e0, e1),
        }
    })
}

/// Whether the environment overrides no event (read if it was not): the condition of a
/// thread's publication for [`start_here`] and [`read_here`], which are given the events the
/// program passed (a program that sets `T5_EVENT0`/`T5_EVENT1` takes the general path: the
/// overrides' selection was ~14 instructions of every start and read on the arm64 guest,
/// issue 48).
#[inline(always)]
fn no_override() -> bool {
    let mut w = OVERRIDES.load(Ordering::Relaxed);
    if w & OVERRIDES_READ == 0 {
        w = read_overrides();
    }
    w == NO_OVERRIDES
}

/// [`OVERRIDES`] read, without an override.
const NO_OVERRIDES: u32 = OVERRIDES_READ | (NO_OVERRIDE as u32) | ((NO_OVERRIDE as u32) << 8);

/// The calling thread's published counters ([`published`]): for [`start_published`] and
/// [`read_published`], at once, on this thread (it is neither `Send` nor `Sync`).
#[derive(Debug, Clone, Copy)]
pub struct Published {
    slot: &'static TpSlot,
    tp: usize,
    counters: *mut ThreadCounters,
}

/// The calling thread's counters where it published them (`ThreadCounters::publishable`),
/// for [`start_published`] or [`read_published`]; `None` where it did not. One register read
/// and two loads find them: no thread-local (a call of the TLS descriptor's resolver), no
/// `RefCell` (issue 48). Apart from the common start and read themselves so that an export
/// can try them out of line where inlining them costs the general path (x86-64: the export
/// saved six registers before this look-up).
#[inline(always)]
pub fn published() -> Option<Published> {
    // x86-64 first asks whether any thread published: where none did (a host without
    // user-space reads: the software events of `benches/ab`) the export's try is then a load
    // and a test, as the gate it replaced, rather than the thread pointer's slot (its
    // interval 1.04-1.05 against the gate). Not on arm64, where the guest's interval counts
    // every instruction of the common path and the host rows are not measured.
    if cfg!(target_arch = "x86_64") && !ANY_PUBLISHED.load(Ordering::Relaxed) {
        return None;
    }
    let (slot, tp) = PAIR_SLOTS.here();
    let p = slot.mine(tp)?;
    Some(Published {
        slot,
        tp,
        counters: p as *mut ThreadCounters,
    })
}

/// `f` on the counters of `h`, held (their slot of [`PAIR_SLOTS`] marked busy, so that a
/// signal handler that interrupts `f` neither uses nor changes them: `with_held`).
#[inline(always)]
fn with_published<R>(h: Published, f: impl FnOnce(&mut ThreadCounters) -> Option<R>) -> Option<R> {
    h.slot.enter(h.tp);
    // SAFETY: the thread published them, from its general call's hold (`with_held`), and
    // nothing moved or dropped them since: every call that could is a general call, which
    // holds the slot first (dropped counters free it: their `Drop`). They are the thread's
    // own (`Published` is made on this thread, not sent), used by no other thread, and by no
    // call of this thread while the slot is held (a general call refuses: `nested`).
    let r = f(unsafe { &mut *h.counters });
    h.slot.leave(h.tp);
    r
}

/// [`start`]'s common case alone (issue 48): this thread published its pair
/// (`with_published`), which counts these events in user mode and is read from user space
/// ([`UserPair::read_held`]): the two counts become the new origin, with a fresh generation.
/// `None` for anything else (the first start, other events, a read with `read()`, an
/// override, a child of `fork()`, which finds nothing published, a bad event): then [`start`]
/// decides, and tells what is wrong. One compare decides whether the pair is this thread's
/// (the events' word against the bound pair's key). Nothing in it can panic, allocate or make
/// a system call: the C export calls it outside its unwind boundary, and [`start`] out of line
/// only when it answers `None`.
#[inline(always)]
pub fn start_here(e0: i32, e1: i32) -> Option<u32> {
    start_published(published()?, e0, e1)
}

/// [`start_here`] on counters [`published`] found.
#[inline(always)]
pub fn start_published(h: Published, e0: i32, e1: i32) -> Option<u32> {
    let key = any_key(e0, e1);
    with_published(h, |t| {
        if t.start_key != key {
            return None;
        }
        // SAFETY: a thread publishes its counters only with their pair there
        // (`publishable`), and only its general calls, which unpublish them first, change it.
        let pair = unsafe { t.pair.as_ref().unwrap_unchecked() };
        let mut v = [0u64; 2];
        pair.read_held(&mut v)?;
        // No call here (a new block of generations is drawn by `start`, once in 256).
        t.generation = t.generations.draw_ready()?;
        // Page counts: the origin's form where there is a pair.
        t.origin = v;
        // `enabled0` and `running0` are left as they are (issue 48: ~6 instructions): see
        // `counts_of`.
        // `Mode::Started(e0, e1)`, read from user space (`start_key` says so).
        t.mode = key;
        Some(t.generation)
    })
}

/// [`read`]'s common case alone (issue 48): the events started on this thread, read from
/// user space; `None` for anything else, which [`read`] decides. One compare decides
/// whether they are the events started (the mode's word); they are then the bound
/// pair, in order: the first argument is member 0, the second the last member. The
/// generation stays: a read that answers found no member ever multiplexed
/// ([`UserPair::read_held`]), so the interval was counted whole. The same rules as
/// [`start_here`]'s.
#[inline(always)]
pub fn read_here(e0: i32, e1: i32) -> Option<Counts> {
    read_published(published()?, e0, e1)
}

/// [`read_here`] on counters [`published`] found.
#[inline(always)]
pub fn read_published(h: Published, e0: i32, e1: i32) -> Option<Counts> {
    let key = any_key(e0, e1);
    with_published(h, |t| {
        if t.mode != key {
            return None;
        }
        // SAFETY: as in `start_here`.
        let pair = unsafe { t.pair.as_ref().unwrap_unchecked() };
        let mut v = [0u64; 2];
        pair.read_held(&mut v)?;
        t.mode = STOPPED_WORD;
        Some(Counts {
            c0: v[0].wrapping_sub(t.origin[0]) as i64,
            c1: v[1].wrapping_sub(t.origin[1]) as i64,
            generation: t.generation,
        })
    })
}

/// [`start`] with a new pair: unbind the old one, bind and start the new one.
#[inline(never)]
fn start_slow(st: &mut Option<ThreadCounters>, bound: Bound, e0: i32, e1: i32) -> Result<u32> {
    *st = None; // unbind the old pair first
    let t = st.insert(ThreadCounters::bind(bound, false, Mode::Stopped)?);
    t.set_mode(Mode::Started(e0, e1));
    Ok(t.generation)
}

/// Read the counts since the matching [`start`] on this thread, and stop counting.
///
/// A thread that has not called [`start`] in a program the `perfex` command runs reads the
/// counters perfex handed over (see [`adopt_handoff`]): the counts since the thread started,
/// for events perfex counts; those keep running.
///
/// Inlined down to the counter read in its common case (the events started), as [`start`];
/// everything else is out of line.
#[inline(always)]
pub fn read(e0: i32, e1: i32) -> Result<Counts> {
    let (e0, e1) = events(e0, e1);
    with_held(|st| match st {
        Some(t) if t.is_started(e0, e1) && !t.binding.inherited_from_parent() => {
            let c = t.counts(e0, e1)?;
            t.set_mode(Mode::Stopped);
            Ok(c)
        }
        other => read_slow(other, e0, e1),
    })
}

/// [`read`] in every case but the common one: not started, other events, a child of fork(),
/// the counters perfex handed over.
#[inline(never)]
fn read_slow(st: &mut Option<ThreadCounters>, e0: i32, e1: i32) -> Result<Counts> {
    let not_started = Error::WrongState(
        "the counters were not started on this thread (call start_counters first)",
    );
    let t = match st.as_mut() {
        Some(t) if t.binding.inherited_from_parent() => {
            return Err(if t.mode() == Mode::Perfex {
                Error::WrongState(
                    "the counters perfex started on this thread count the parent process \
                     (this is a child of fork()); call start_counters first",
                )
            } else {
                not_started
            });
        }
        Some(t) => t,
        None => return Err(not_started),
    };
    match t.mode() {
        Mode::Stopped => Err(not_started),
        Mode::Started(s0, s1) if (s0, s1) != (e0, e1) => Err(Error::InvalidArgument(format!(
            "events ({e0}, {e1}) differ from the events started on this thread ({s0}, {s1})"
        ))),
        Mode::Started(..) => {
            let c = t.counts(e0, e1)?;
            t.set_mode(Mode::Stopped);
            Ok(c)
        }
        Mode::Perfex => {
            if let Some(e) = [e0, e1].into_iter().find(|&e| t.index(e).is_none()) {
                let list: Vec<String> = t.bound.as_slice().iter().map(u32::to_string).collect();
                return Err(Error::InvalidArgument(format!(
                    "event {e} is not one perfex counts (it counts event{} {}): call \
                     start_counters first",
                    if list.len() > 1 { "s" } else { "" },
                    list.join(" and ")
                )));
            }
            t.counts(e0, e1)
        }
    }
}

crate::base::sys::env_name! {
    /// The variable through which the `perfex` command hands its event list to the command it
    /// runs (see [`adopt_handoff`]); set by `perfex`, inherited by the command's descendants.
    pub const HANDOFF_VAR = "PERFCOMPAT_PERFEX_EVENTS";
}

/// What `perfex` handed over: the events it counts, and whether in kernel mode too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// Distinct R10000 events, in `perfex -e` order (at most two, of different counters).
    pub events: Vec<u32>,
    /// Counted in kernel mode too (`perfex -k`).
    pub kernel: bool,
}

impl Handoff {
    /// The value of [`HANDOFF_VAR`]: the event numbers, then `kernel` if so (`0,25,kernel`).
    pub fn to_value(&self) -> String {
        let mut items: Vec<String> = self.events.iter().map(u32::to_string).collect();
        if self.kernel {
            items.push("kernel".into());
        }
        items.join(",")
    }

    /// Parse a [`HANDOFF_VAR`] value; an error names what is wrong.
    pub fn parse(value: &str) -> Result<Handoff> {
        let mut h = Handoff {
            events: Vec::new(),
            kernel: false,
        };
        for item in value.split(',') {
            if item.trim() == "kernel" {
                h.kernel = true;
                continue;
            }
            let e = parse_event(item)?;
            if !h.events.contains(&e) {
                h.events.push(e);
            }
        }
        if h.events.is_empty() || h.events.len() > 2 {
            return Err(Error::InvalidArgument(format!(
                "{value:?}: one or two R10000 events expected"
            )));
        }
        Ok(h)
    }
}

/// The hand-over this process adopted, if any.
static HANDOFF: OnceLock<Handoff> = OnceLock::new();
/// Whether [`HANDOFF`] is set: one relaxed load for the thread-creation fast path.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);

/// Adopt the counters of the `perfex` command that runs this program: `value` is what perfex
/// put in [`HANDOFF_VAR`]. From now on the calling thread (the library's constructor runs on
/// the main thread) and every thread that reports its start through [`thread_started`] count
/// those events from their start, so that a thread that calls [`read`] without [`start`]
/// reads its own counts since it started, as IRIX programs run under `perfex` did.
///
/// # Decisions
/// - The counters are the thread's own (one group per thread, user mode unless perfex counts
///   kernel mode too), separate from perfex's: perfex's counts are not changed by them, nor do
///   they count twice. On a PMU they use counters beside perfex's.
/// - Reads do not stop them (the program did not start them): each read without a start gives
///   the counts since the thread started. The thread's first [`start`] takes over as before
///   (reusing the group when it counts the same events), and from then on its reads need
///   starts, exactly as without perfex.
/// - Only events perfex counts can be read so; any other event is an error naming the events
///   perfex counts.
/// - A child of `fork()` inherits the forking thread's state, whose counters still count the
///   parent: its reads without a start fail and say so (its new threads count their own).
///   A program that `exec`s adopts anew (the variable is inherited).
pub fn adopt_handoff(value: &str) -> Result<()> {
    let h = Handoff::parse(value)?;
    let h = HANDOFF.get_or_init(|| h);
    HANDED_OVER.store(true, Ordering::Release);
    pre_start(h)
}

/// Whether this process adopted a `perfex` hand-over (see [`adopt_handoff`]). One atomic load.
#[inline]
pub fn handed_over() -> bool {
    HANDED_OVER.load(Ordering::Relaxed)
}

/// A new thread starts (called before its start routine runs): under a `perfex` hand-over,
/// start its counters. A failure is reported once per process on stderr; the thread then
/// reads as not started.
pub fn thread_started() {
    static WARNED: Once = Once::new();
    let Some(h) = HANDOFF.get() else {
        return;
    };
    if let Err(e) = pre_start(h) {
        WARNED.call_once(|| {
            crate::stderr_line!(
                "libperfex: a new thread cannot count the events perfex counts ({e}); its \
                 read_counters needs a start_counters"
            )
        });
    }
}

/// Bind `h` to the calling thread, unless it already has counters.
fn pre_start(h: &Handoff) -> Result<()> {
    with_held(|st| {
        if st.is_none() {
            *st = Some(ThreadCounters::bind(
                Bound::of(&h.events),
                h.kernel,
                Mode::Perfex,
            )?);
        }
        Ok(())
    })
}

/// The calling thread's generation number: that of its last start or read, or a fresh one if
/// it never started counters (or if this is a signal handler that interrupted another
/// libperfex call of the thread, which holds its counters: `with_held`).
pub fn generation() -> u32 {
    with_held(|st| Ok(st.as_ref().map(|t| t.generation)))
        .map_or_else(|_| next_generation(), |g| g.unwrap_or_else(next_generation))
}

/// The pairs a report lists: both, or one when the same event comes twice with the same count
/// (what [`read`] returns for one event asked for twice). Both are checked.
fn report_pairs(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<Vec<(u32, i64)>> {
    let (n0, n1) = (check_range(e0)?, check_range(e1)?);
    Ok(if (n0, c0) == (n1, c1) {
        vec![(n0, c0)]
    } else {
        vec![(n0, c0), (n1, c1)]
    })
}

/// The count table `print_counters` writes (our layout, pinned by a golden test). The same
/// event twice with the same count is listed once.
pub fn format_counters(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<String> {
    let pairs = report_pairs(e0, c0, e1, c1)?;
    let kind = backend::global().ok().map(|b| b.shape_unmeasured().kind);
    let backend = kind.map_or_else(|| "none".to_string(), |k| k.to_string());
    let flavor = kind.map_or(costs::Flavor::Host, costs::Flavor::for_backend);
    let mut out = format!("Event counts (libperfex on the {backend} backend):\n");
    for (e, c) in pairs {
        out.push_str(&count_line(flavor, e, &c.to_string()));
        out.push('\n');
    }
    Ok(out)
}

/// One line of a count table: event number and name with a dotted leader, then `count`
/// right-aligned (shared by `print_counters` and the `perfex` command). The name is what was
/// counted: on an emulated R10000 or R12000 the event's own; where the number stands for
/// another event (a host's perf event, the event map's choice, `cycles` estimated from the
/// task clock) that event, followed by the R10000 event it stands for.
pub fn count_line(flavor: costs::Flavor, event: u32, count: &str) -> String {
    format!("{:.<60} {count:>20}", count_label(flavor, event))
}

/// The label of event `event`'s line in a count table ([`count_line`]), with its trailing
/// space, before the dotted leader.
pub fn count_label(flavor: costs::Flavor, event: u32) -> String {
    let name = flavor.event_name(event as usize);
    let counted = backend::global()
        .ok()
        .and_then(|b| b.counted_name(&event.to_string()));
    match counted {
        Some(c) => format!("{event:>2} {c} (R10000 {name}) "),
        None => format!("{event:>2} {name} "),
    }
}

/// The cost report `print_costs` writes: the two counts with their time estimates under the
/// cost table in force (see [`crate::api::costs`]), then the derived statistics they allow. The
/// same event twice with the same count is listed once (and counted once in the statistics).
pub fn format_costs(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<String> {
    let counts: Vec<(usize, i64)> = report_pairs(e0, c0, e1, c1)?
        .into_iter()
        .map(|(e, c)| (e as usize, c))
        .collect();
    Ok(costs::format_exact_costs(&costs::current(), &counts, None))
}

/// Load the cost table file at `path` over the default table, for every thread: what
/// `load_costs` does. All or nothing (see [`crate::api::costs::load`]).
pub fn load_costs(path: &std::path::Path) -> Result<()> {
    costs::load(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 48: the common start and read test a pair with one compare of its key against
    // `ThreadCounters::start_key` and the mode's word. A key is made only of two event
    // numbers, and no key is one of the words that mean "not this way".
    #[test]
    fn a_pair_key_is_made_of_event_numbers_only_and_is_no_other_word() {
        for (e0, e1) in [(0, 16), (31, 31), (17, 0), (0, 0)] {
            let k = pair_key(e0, e1).unwrap();
            assert_eq!((k & 0xffff_ffff, k >> 32), (e0 as u64, e1 as u64));
            for w in [NO_KEY, STOPPED_WORD, PERFEX_WORD] {
                assert_ne!(k, w);
            }
            assert_eq!(k & NOT_USER_READ, 0);
        }
        for (e0, e1) in [(32, 0), (0, 32), (-1, 0), (0, -1), (-1, -1), (i32::MIN, 5)] {
            assert_eq!(pair_key(e0, e1), None, "({e0}, {e1})");
        }
    }

    // Issue 48: a call made by a signal handler while the thread was inside another
    // libperfex call is refused with EAGAIN, whichever call it interrupted: the common start
    // or read (which holds the thread's slot) or a general call (which holds the counters'
    // `RefCell`; the base panicked there, an abort). Nothing is changed by the refusal.
    #[test]
    fn a_call_inside_another_of_the_threads_calls_is_refused_and_changes_nothing() {
        std::thread::spawn(|| {
            let eagain =
                |r: Result<u32>| matches!(r, Err(Error::Os { errno, .. }) if errno == libc::EAGAIN);
            // Inside the common start or read: the slot held (a thread published, so that
            // the general calls look at their slots).
            ANY_PUBLISHED.store(true, Ordering::Relaxed);
            let (slot, tp) = PAIR_SLOTS.here();
            assert!(slot.claim(tp));
            assert!(eagain(start(0, 16)), "start inside the common case");
            assert!(
                matches!(read(0, 16), Err(Error::Os { errno, .. }) if errno == libc::EAGAIN),
                "read inside the common case"
            );
            slot.publish(tp, None);
            // Inside a general call: the counters borrowed.
            with_state(|st| {
                let _held = st.borrow_mut();
                assert!(eagain(start(0, 16)), "start inside a general call");
                let g = generation();
                assert!(g > 0, "a fresh generation, no state read");
            });
            assert!(with_state(|st| st.borrow().is_none()), "nothing was made");
            assert!(!slot.busy_here(tp));
        })
        .join()
        .unwrap();
    }

    // The mode's word: what the general path reads back is the mode it set, and only a
    // started pair read from user space is its events' key (what the common read compares).
    #[test]
    fn the_mode_word_gives_back_the_mode_and_is_a_key_only_where_the_common_read_may_answer() {
        for user_read in [true, false] {
            for m in [
                Mode::Stopped,
                Mode::Perfex,
                Mode::Started(0, 16),
                Mode::Started(31, 31),
                Mode::Started(17, 0),
            ] {
                let w = mode_word(m, user_read);
                assert_eq!(mode_of(w), m, "{m:?} user_read {user_read}");
                let key = match m {
                    Mode::Started(e0, e1) => pair_key(e0, e1),
                    _ => None,
                };
                let keys: Vec<u64> = (0..32)
                    .flat_map(|a| (0..32).map(move |b| pair_key(a, b).unwrap()))
                    .filter(|&k| k == w)
                    .collect();
                let want = if user_read {
                    key.into_iter().collect()
                } else {
                    vec![]
                };
                assert_eq!(keys, want, "{m:?} user_read {user_read}");
                for (e0, e1) in [(0, 16), (31, 31), (17, 0), (16, 0), (0, 1 << 30), (-1, -1)] {
                    assert_eq!(
                        started_with(w, e0, e1),
                        m == Mode::Started(e0, e1),
                        "{m:?} user_read {user_read} ({e0}, {e1})"
                    );
                }
            }
        }
    }
}

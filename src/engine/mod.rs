//! Binding sets and reading them: the counter-virtualisation engine.
//!
//! [`bind`] checks a [`CounterSet`] against the backend, places its requests on counters
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

// Per-request state lives in parallel arrays (presets, bases, origins, raw counts); indexing
// them by request number reads better than zipping four iterators.
#![allow(clippy::needless_range_loop)]

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::backend::perf::DirectRead;
use crate::backend::{self, Backend, BackendKind, Group, KernelStop, Times};
use crate::base::error::{Error, Result};
use crate::base::sched::{self, Candidate};
use crate::base::set::{CounterSet, Request, Target, MAX_REQUESTS};
use crate::base::sigsafe::{Blocked, SeqCount};
use crate::base::virt;

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

static HOOK: AtomicUsize = AtomicUsize::new(0);

/// Install (or with `None` remove) the per-process overflow hook.
pub fn set_overflow_hook(hook: Option<OverflowHook>) {
    HOOK.store(hook.map_or(0, |h| h as usize), Ordering::Release);
}

/// Hooks added beside the one [`set_overflow_hook`] installs: one per ABI layer that needs its
/// own (the pfm device, `crate::api::pfm`), each recognising its bindings by their user data.
static EXTRA_HOOKS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// Add a hook that runs after the per-process one on every overflow notification (idempotent:
/// adding a hook twice keeps one). Hooks cannot be removed; each must ignore the bindings that
/// are not its own ([`OverflowEvent::user_data`]) and be async-signal-safe.
pub fn add_overflow_hook(hook: OverflowHook) -> Result<()> {
    let h = hook as usize;
    for slot in &EXTRA_HOOKS {
        match slot.compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(()),
            Err(old) if old == h => return Ok(()),
            Err(_) => {}
        }
    }
    Err(Error::InvalidArgument(
        "no room for another overflow hook".into(),
    ))
}

fn run_hook(ev: &OverflowEvent) {
    let h = HOOK.load(Ordering::Acquire);
    if h != 0 {
        // SAFETY: only ever stored from an `OverflowHook`.
        let f: OverflowHook = unsafe { std::mem::transmute::<usize, OverflowHook>(h) };
        f(ev);
    }
    for slot in &EXTRA_HOOKS {
        let h = slot.load(Ordering::Acquire);
        if h != 0 {
            // SAFETY: only ever stored from an `OverflowHook`.
            let f: OverflowHook = unsafe { std::mem::transmute::<usize, OverflowHook>(h) };
            f(ev);
        }
    }
}

thread_local! {
    /// Per request index: events that happened between an overflow and the stop that froze
    /// the set at the overflow's record, summed over the freezes handled on this thread. They
    /// are counted nowhere by design; this is for tests that account for every event.
    static DROPPED: [Cell<u64>; MAX_REQUESTS] = const { [const { Cell::new(0) }; MAX_REQUESTS] };
}

/// Events of request `index` dropped at the freezes handled on the calling thread so far:
/// those that came between an overflow (the kernel's record of it) and the handler's stop of
/// the group (see the README, "The freeze is taken at the overflow instant"). A test that
/// counts every event independently adds them to what the set reported. Async-signal-safe.
pub fn dropped_at_freezes(index: usize) -> u64 {
    DROPPED
        .try_with(|d| d.get(index).map_or(0, Cell::get))
        .unwrap_or(0)
}

static NEXT_GENERATION: AtomicU32 = AtomicU32::new(0);
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
pub fn next_generation() -> u32 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed) % 0x7fff_ffff + 1
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
}

/// [`BoundSet`]'s state word: frozen.
const FROZEN: u64 = 1;
/// Frozen at an overflow record while the group counts on.
const RUNS_ON: u64 = 2;
/// Frozen at an overflow record where the kernel stopped the group, right at the wrap, with
/// the restart made ready (see `ready_restart_at`).
const READY: u64 = 4;
/// One write more (the rest of the word counts writes).
const EPOCH: u64 = 8;

/// Each `out[i]` (a raw count) made virtual in place: `base[i]` plus the events since
/// `origin[i]` ([`virt::virtual_value`]). Both branches of the sample use it.
#[inline(always)]
fn virtualize(out: &mut [u64], base: &[AtomicU64], origin: &[AtomicU64]) {
    let n = out.len();
    let (base, origin) = (&base[..n], &origin[..n]);
    virt::each_index(n, |i| {
        let events = out[i].wrapping_sub(origin[i].load(Ordering::Relaxed));
        out[i] = virt::virtual_value(base[i].load(Ordering::Relaxed), events);
    });
}

fn zeroed(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// A bound set: the engine's state for one binding. Reached through a [`Binding`] (which owns
/// it) or, for the calling thread's current binding, through [`with_current`].
pub struct BoundSet {
    id: u64,
    n: usize,
    names: Vec<String>,
    target: Target,
    owner: i32,
    kind: BackendKind,
    group: Box<dyn Group>,
    // `group`'s read made here, inline, where its backend has one ([`Group::direct_read`],
    // asked once at the bind; `group` is never replaced, so it stays valid).
    direct: Option<DirectRead>,
    notify: u64,
    seq: SeqCount,
    preset: Box<[AtomicU64]>,
    base: Box<[AtomicU64]>,
    origin: Box<[AtomicU64]>,
    frozen_vals: Box<[AtomicU64]>,
    // The backend's raw counts and times at the freeze: the group is stopped while frozen
    // (unless `runs_on`), so restart and resume start from them without stopping and reading
    // again (two system calls fewer on every overflow that the handler restarts).
    frozen_raw: Box<[AtomicU64]>,
    // FROZEN, RUNS_ON, READY and a count of writes (EPOCH): one word, so that the restart of a
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
    // The generation number (bits 1..33) and whether the interval since the last restart was
    // seen incomplete (bit 0), in one word: a sample marks the interval it read with one
    // compare-and-swap from the value it read in its sequence section, so a restart that came
    // after that section (a new interval) makes the mark fail instead of landing on the new
    // interval. Set with `gen_word`.
    gen: AtomicU64,
    detached: AtomicBool,
    // The overflow signals of the notifying requests are off: the owner could not take them
    // (`BoundSet::unsignalled`).
    quiet: AtomicBool,
    user_data: AtomicUsize,
    // FORKS when the binding was made: a child of fork() has copies of the parent's counter
    // descriptors, which still count the parent; the child must neither read nor stop them.
    fork_gen: u32,
}

/// fork()s this process has gone through (incremented in the child by a pthread_atfork
/// handler, registered at the first bind).
static FORKS: AtomicU32 = AtomicU32::new(0);

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
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

impl BoundSet {
    /// Whether this binding was made by the process before a fork() that made this one: its
    /// counters belong to the parent. Async-signal-safe (one atomic load).
    #[inline]
    pub fn inherited_from_parent(&self) -> bool {
        self.fork_gen != FORKS.load(Ordering::Relaxed)
    }

    /// Not usable here: unbound, or the parent's (after fork).
    #[inline]
    fn gone(&self) -> bool {
        self.detached.load(Ordering::Acquire) || self.inherited_from_parent()
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

    /// Attach a value for the ABI layer (reported in [`OverflowEvent::user_data`]).
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
    fn mark_incomplete(&self, word: u64) -> u64 {
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
    fn new_generation(&self, keep_incomplete: bool) {
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
    fn runs_on(&self) -> bool {
        self.state.load(Ordering::Relaxed) & RUNS_ON != 0
    }

    /// Set `set` and clear `clear` in the state word, a write more. Must run inside `write`.
    fn set_state(&self, set: u64, clear: u64) {
        let s = self.state.load(Ordering::Relaxed);
        self.state
            .store(((s | set) & !clear).wrapping_add(EPOCH), Ordering::Release);
    }

    /// Clear RUNS_ON, and say whether it was set. Must run inside `write`.
    fn take_runs_on(&self) -> bool {
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
    fn write<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        self.seq.write(|| {
            let r = f(self);
            // Every write changes the state word (see `restart_counting_on`).
            self.state.fetch_add(EPOCH, Ordering::Release);
            r
        })
    }

    /// Read the group's raw counts into `raw`. Inlined down to the perf backend's system call
    /// ([`DirectRead`] says why).
    #[inline(always)]
    fn read_raw(&self, raw: &mut [u64]) -> Result<Times> {
        let r = if let Some(d) = &self.direct {
            d.read(&mut raw[..self.n])
        } else {
            self.group.read(&mut raw[..self.n])
        };
        r.map_err(read_error)
    }

    /// Write each request's 64-bit virtual value into `out[..len()]`.
    ///
    /// Async-signal-safe. On a frozen set this returns the values at the freeze without
    /// reading the hardware.
    #[inline]
    pub fn sample(&self, out: &mut [u64]) -> Result<SampleInfo> {
        self.sample_into::<true>(out, None)
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
        if self.notify != 0 && !self.is_frozen() {
            self.take_unsignalled();
        }
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
                times = d.read(out).map_err(read_error)?;
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
            let enabled = times
                .enabled
                .wrapping_sub(self.enabled0.load(Ordering::Relaxed));
            let running = times
                .running
                .wrapping_sub(self.running0.load(Ordering::Relaxed));
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
            });
        }
    }

    /// The raw counts and times to count on from: those recorded at the freeze when frozen
    /// (the group has been stopped since), else stop the group and read them.
    fn stopped_raw(&self, raw: &mut [u64; MAX_REQUESTS]) -> Result<Times> {
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

    /// Where counting resumes after a freeze or a stop: the raw counts into `raw`, and whether
    /// the group is still counting and may go on as it is (no re-arm, no start). `distance`
    /// gives each notifying request's next overflow distance. Must run inside `write`.
    ///
    /// A set frozen while its group counts on ([`KernelStop::Running`]) is read now: when its
    /// one notifying request has counted nothing since the overflow and keeps its period, the
    /// kernel's period is already whole and the group goes on (one `read`, the overflow's only
    /// system call besides the signal's own). Otherwise it is stopped and read (the restart
    /// then re-arms and starts it). What counted between the overflow and that read is
    /// dropped, as it is between an overflow and a stop ([`dropped_at_freezes`]).
    fn resume_raw(
        &self,
        raw: &mut [u64; MAX_REQUESTS],
        distance: impl Fn(usize) -> Option<u64>,
    ) -> Result<(Times, bool)> {
        if !(self.is_frozen() && self.take_runs_on()) {
            return self.stopped_raw(raw).map(|t| (t, false));
        }
        let lone = self.notify.count_ones() == 1;
        let i = self.notify.trailing_zeros() as usize;
        if lone {
            match self.counted_nothing_since(i, distance(i), &mut raw[..]) {
                Ok(Some(times)) => {
                    self.drop_since_freeze(raw);
                    return Ok((times, true));
                }
                Ok(None) => {}
                Err(e) => {
                    self.group.stop();
                    return Err(e);
                }
            }
        }
        self.group.stop();
        let times = self.read_raw(raw)?;
        self.drop_since_freeze(raw);
        Ok((times, false))
    }

    /// For notifying request `i` of a set frozen while its group counts on: the times of a read
    /// (into `raw`) that shows nothing counted since the overflow, when its kernel period is
    /// also whole at `distance` (then the group can go on as it is); `None` otherwise, without
    /// a read when the period is not whole.
    fn counted_nothing_since(
        &self,
        i: usize,
        distance: Option<u64>,
        raw: &mut [u64],
    ) -> Result<Option<Times>> {
        if !self.group.keeps_period(i, distance) {
            return Ok(None);
        }
        let times = self.read_raw(raw)?;
        Ok((raw[i] == self.frozen_raw[i].load(Ordering::Relaxed)).then_some(times))
    }

    /// The set was just frozen at raw counts `at` while its group counts on: mark it so, and
    /// make ready now what a restart that finds nothing counted since needs
    /// ([`BoundSet::restart_counting_on`], which then writes only the state word and fields
    /// that the restart made with signals blocked sets again should it fail): the
    /// period's events go into the totals (the frozen set reports the same totals, its period
    /// adding nothing more), and counting goes on from `at`. A restart or resume that finds
    /// otherwise sets the origin again. Must run inside `write`.
    fn count_on_from(&self, at: &[u64]) {
        self.fold_frozen_period(at);
        self.set_state(RUNS_ON, 0);
    }

    /// Move the events of the period a freeze just ended into the totals (the frozen set
    /// reports the same totals: its period then adds nothing more) and count on from raw
    /// counts `at`: what a restart from the freeze needs, made before it. Must run inside
    /// `write`.
    fn fold_frozen_period(&self, at: &[u64]) {
        for i in 0..self.n {
            let events = self.frozen_events[i].swap(0, Ordering::Relaxed);
            let sum = self.sums[i].load(Ordering::Relaxed);
            self.sums[i].store(sum.wrapping_add(events), Ordering::Relaxed);
            self.origin[i].store(at[i], Ordering::Relaxed);
        }
    }

    /// The set was just frozen at raw counts `at`, where the kernel stopped its group right
    /// at the wrap of its one notifying request with nothing counted since: make ready what
    /// the restart to the same preset needs ([`BoundSet::restart_ready`], which then only
    /// writes the state word and fields that the restart with signals blocked writes again
    /// should it fail, and starts the group). Must run inside `write`.
    fn ready_restart_at(&self, at: &[u64]) {
        self.fold_frozen_period(at);
        self.set_state(READY, 0);
    }

    /// Restart a set frozen at an overflow while its group counts on, without blocking
    /// signals (two system calls fewer on the overflow path), when that restart changes
    /// nothing but the state word: one request, its preset unchanged and its kernel period
    /// whole (nothing counted since the overflow: one `read` shows it), on the thread that
    /// bound the set. False when it could not (the caller then restarts with signals blocked);
    /// a handler that wrote to the set meanwhile, on this thread or another, makes it fail.
    /// Async-signal-safe.
    fn restart_counting_on(&self) -> bool {
        let Some((st, snapshot, preset)) = self.unblocked_restart_of(RUNS_ON) else {
            return false;
        };
        let mut raw = [0u64; 1];
        let Ok(Some(times)) =
            self.counted_nothing_since(0, virt::distance_to_wrap(preset), &mut raw)
        else {
            return false;
        };
        self.commit_unblocked_restart(st, snapshot, times)
    }

    /// For a restart without blocking signals of a lone notifying request frozen with `kind`
    /// (RUNS_ON or READY) set, on the thread that bound the set, to the preset it had: the
    /// state word, the sequence snapshot and the preset. `None` otherwise.
    #[inline]
    fn unblocked_restart_of(&self, kind: u64) -> Option<(u64, u64, u64)> {
        let st = self.state.load(Ordering::Acquire);
        if st & (FROZEN | RUNS_ON | READY) != FROZEN | kind
            || self.n != 1
            || self.notify != 1
            || self.owner_key == 0
            || self.owner_key != crate::base::sigsafe::thread_key()
        {
            return None;
        }
        let snapshot = self.seq.snapshot()?;
        let preset = self.preset[0].load(Ordering::Relaxed);
        (preset == self.base[0].load(Ordering::Relaxed)).then_some((st, snapshot, preset))
    }

    /// The restart's writes without blocking signals, from state word `st` at `snapshot`,
    /// counting on from `times`: true when its compare-and-swap of the state word took effect.
    fn commit_unblocked_restart(&self, st: u64, snapshot: u64, times: Times) -> bool {
        self.seq
            .write_unblocked(snapshot, || {
                // Plain stores that the restart with signals blocked makes again should the
                // compare-and-swap fail, as it does when any write came in between (every
                // write changes the state word).
                self.enabled0.store(times.enabled, Ordering::Relaxed);
                self.running0.store(times.running, Ordering::Relaxed);
                self.overflowed.store(0, Ordering::Relaxed);
                self.new_generation(false);
                self.state
                    .compare_exchange(
                        st,
                        (st & !(FROZEN | RUNS_ON | READY)).wrapping_add(EPOCH),
                        Ordering::Release,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            })
            .unwrap_or(false)
    }

    /// Whether request `i`'s raw count `at` is exactly where its virtual value wraps (an
    /// overflow with no skid). Must run inside `write`.
    fn at_the_wrap(&self, i: usize, at: u64) -> bool {
        let base = self.base[i].load(Ordering::Relaxed);
        let origin = self.origin[i].load(Ordering::Relaxed);
        virt::virtual_value(base, at.wrapping_sub(origin)) == 0
    }

    /// Count what a group that ran on after its freeze counted since (up to `raw`) as dropped
    /// at that freeze ([`dropped_at_freezes`]).
    fn drop_since_freeze(&self, raw: &[u64]) {
        let mut from = [0u64; MAX_REQUESTS];
        for (f, r) in from.iter_mut().zip(self.frozen_raw.iter()) {
            *f = r.load(Ordering::Relaxed);
        }
        self.add_dropped(&from, raw);
    }

    /// Add what each request counted from raw counts `from` to `to` to the events dropped at
    /// freezes on this thread ([`dropped_at_freezes`]).
    fn add_dropped(&self, from: &[u64], to: &[u64]) {
        let _ = DROPPED.try_with(|d| {
            for (i, c) in d.iter().enumerate().take(self.n) {
                c.set(c.get().wrapping_add(to[i].wrapping_sub(from[i])));
            }
        });
    }

    /// A set frozen while its group counts on is signalled again (the kernel's next overflow
    /// came before the restart): stop the group there, so that a set left frozen does not take
    /// a signal every period, and resume from the count at that stop. Must run inside `write`.
    fn stop_counting_on(&self) {
        if self.take_runs_on() {
            self.stop_where_frozen();
        }
    }

    /// Stop a frozen set's group that counts on, and count on from where it stopped: what it
    /// counted since the freeze is dropped at the freeze. Must run inside `write`.
    fn stop_where_frozen(&self) {
        self.group.stop();
        let mut raw = [0u64; MAX_REQUESTS];
        if self.read_raw(&mut raw).is_ok() {
            self.drop_since_freeze(&raw);
            for (f, r) in self.frozen_raw.iter().zip(raw.iter()) {
                f.store(*r, Ordering::Relaxed);
            }
        }
    }

    /// (Re)start counting from the current presets: the state at the start of a binding and
    /// after [`BoundSet::restart`]. Must run inside `write`.
    fn start_from_presets(&self) -> Result<()> {
        let mut raw = [0u64; MAX_REQUESTS];
        let (times, running) = self.resume_raw(&mut raw, |i| {
            virt::distance_to_wrap(self.preset[i].load(Ordering::Relaxed))
        })?;
        self.end_period(&raw);
        for i in 0..self.n {
            let p = self.preset[i].load(Ordering::Relaxed);
            self.base[i].store(p, Ordering::Relaxed);
            self.origin[i].store(raw[i], Ordering::Relaxed);
            if self.notify & (1 << i) != 0 && !running {
                self.group.arm(i, virt::distance_to_wrap(p));
            }
        }
        self.enabled0.store(times.enabled, Ordering::Relaxed);
        self.running0.store(times.running, Ordering::Relaxed);
        self.overflowed.store(0, Ordering::Relaxed);
        self.set_state(0, FROZEN | READY);
        self.new_generation(false);
        if !running {
            self.group.start();
        }
        Ok(())
    }

    /// Fold the events of the period that ends now into the totals: up to the freeze when
    /// frozen, else up to `raw` (read after the stop). Nothing before the first start.
    fn end_period(&self, raw: &[u64]) {
        if self.gen.load(Ordering::Relaxed) >> 1 == 0 {
            return;
        }
        let frozen = self.is_frozen();
        for i in 0..self.n {
            let events = if frozen {
                self.frozen_events[i].load(Ordering::Relaxed)
            } else {
                raw[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed))
            };
            let sum = self.sums[i].load(Ordering::Relaxed);
            self.sums[i].store(sum.wrapping_add(events), Ordering::Relaxed);
        }
    }

    /// Set every request back to its preset and count again; clears a freeze.
    ///
    /// Async-signal-safe: meant to be called from the overflow signal handler.
    pub fn restart(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        if self.restart_counting_on() || self.restart_ready() {
            return Ok(());
        }
        self.write(|b| b.start_from_presets())
    }

    /// Restart a set made ready at its freeze ([`BoundSet::ready_restart_at`]) without blocking
    /// signals (two system calls fewer on the overflow path), when that restart changes
    /// nothing but the state word and the group's start: its preset unchanged and its kernel
    /// period whole ([`Group::keeps_stopped_period`]), on the thread that bound the set. The
    /// group starts after the compare-and-swap: a sample in between reads the stopped group
    /// at the preset, and a handler that froze the set again before the start (its
    /// `cpc_disable`) has the group stopped again after it, where it then stands. False when
    /// it could not (the caller then restarts with signals blocked); a handler that wrote to
    /// the set meanwhile, on this thread or another, makes it fail. Async-signal-safe.
    fn restart_ready(&self) -> bool {
        let Some((st, snapshot, preset)) = self.unblocked_restart_of(READY) else {
            return false;
        };
        if !self
            .group
            .keeps_stopped_period(0, virt::distance_to_wrap(preset))
        {
            return false;
        }
        let times = Times {
            enabled: self.frozen_enabled.load(Ordering::Relaxed),
            running: self.frozen_running.load(Ordering::Relaxed),
        };
        if !self.commit_unblocked_restart(st, snapshot, times) {
            return false;
        }
        let next = (st & !(FROZEN | READY)).wrapping_add(EPOCH);
        self.group.start();
        if self.state.load(Ordering::Acquire) != next {
            // A handler wrote to the set between the compare-and-swap and the start. If it
            // froze it, the group it found stopped runs now: stop it where the freeze stands.
            self.write(|b| {
                if b.is_frozen() {
                    b.stop_where_frozen();
                }
            });
        }
        true
    }

    /// Whether the binding's overflow signals are off (see `unsignalled`).
    fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// Turn the binding's overflow signals on again (`crate::base::watch` found its owner no longer
    /// blocking them).
    fn speak_again(&self) {
        if self.quiet.swap(false, Ordering::AcqRel) {
            self.group.set_signalled(true);
        }
    }

    /// Handle the overflow whose record waits on `fd` for an owner that could not take its
    /// signal. With `quiet` (the owner blocks the signal), also turn the binding's overflow
    /// signals off until `crate::base::watch` finds the owner no longer blocking them:
    /// a thread that keeps the signal blocked would otherwise collect one queued signal per
    /// overflow, which the user's whole queue of real-time signals pays for. Overflows are
    /// then found from their records only (by the sample and by `crate::base::watch`).
    /// Async-signal-safe.
    fn unsignalled(&self, fd: i32, quiet: bool) {
        if quiet && !self.quiet.swap(true, Ordering::AcqRel) {
            self.group.set_signalled(false);
        }
        self.interrupt(fd, true, 0);
    }

    /// Change request `index`'s preset; it takes effect at the next [`BoundSet::restart`].
    ///
    /// Async-signal-safe.
    pub fn set_preset(&self, index: usize, preset: u64) -> Result<()> {
        if index >= self.n {
            return Err(Error::IndexOutOfRange {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                len: self.n,
            });
        }
        self.preset[index].store(preset, Ordering::Release);
        Ok(())
    }

    /// Freeze the values as they are now (`out`, if given, receives them).
    fn freeze(&self, overflowed: u64) -> Result<()> {
        self.group.stop();
        let mut raw = [0u64; MAX_REQUESTS];
        let times = self.read_raw(&mut raw)?;
        self.freeze_at(&raw, &raw, times, overflowed, None);
        Ok(())
    }

    /// Freeze: the values are those of raw counts `at` (at the overflow instant, or as read
    /// after the stop), counting resumes from raw counts `raw` read after the group was
    /// stopped (so what was counted between `at` and the stop counts nowhere), and `when` is
    /// the time of `at` if the backend knows it.
    fn freeze_at(&self, at: &[u64], raw: &[u64], times: Times, overflowed: u64, when: Option<u64>) {
        for i in 0..self.n {
            self.frozen_raw[i].store(raw[i], Ordering::Relaxed);
            self.frozen_events[i].store(
                at[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
            let base = self.base[i].load(Ordering::Relaxed);
            let origin = self.origin[i].load(Ordering::Relaxed);
            self.frozen_vals[i].store(
                virt::virtual_value(base, at[i].wrapping_sub(origin)),
                Ordering::Relaxed,
            );
        }
        let when = when.unwrap_or_else(|| now_ns() as u64);
        self.frozen_at.store(when, Ordering::Relaxed);
        self.overflowed.fetch_or(overflowed, Ordering::Relaxed);
        self.frozen_enabled.store(times.enabled, Ordering::Relaxed);
        self.frozen_running.store(times.running, Ordering::Relaxed);
        self.set_state(FROZEN, READY);
        self.new_generation(true);
    }

    /// Run the process's overflow hooks for this binding's overflowed requests, as if their
    /// overflow had just been signalled at program counter `pc`: what a thread that inherits a
    /// libcpc set is told after [`BoundSet::freeze_as_overflowed`]. Async-signal-safe.
    pub fn notify_overflowed(&self, pc: usize) {
        run_hook(&OverflowEvent {
            binding: self.id,
            user_data: self.user_data(),
            overflowed: self.overflowed(),
            pc,
            tid: self.owner,
        });
    }

    /// Freeze a freshly bound set as if every notifying request had just overflowed: those
    /// read `u64::MAX` and are reported overflowed, the others read their presets. What a
    /// thread inheriting a libcpc set with `CPC_OVF_NOTIFY_EMT` requests sees before its
    /// handler presets and restarts it ([`BoundSet::restart`] counts from the presets). Fails
    /// if the set is already frozen.
    pub fn freeze_as_overflowed(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.write(|b| {
            if b.is_frozen() {
                return Err(Error::WrongState("the counters are already stopped"));
            }
            b.freeze(b.notify)?;
            for i in 0..b.n {
                let v = if b.notify & (1 << i) != 0 {
                    u64::MAX
                } else {
                    b.preset[i].load(Ordering::Relaxed)
                };
                b.frozen_vals[i].store(v, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    /// Stop counting (libcpc's `cpc_disable`). Fails if the set is already frozen.
    pub fn stop(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.write(|b| {
            if b.is_frozen() {
                return Err(Error::WrongState("the counters are already stopped"));
            }
            b.freeze(0)
        })
    }

    /// Resume counting after [`BoundSet::stop`] (libcpc's `cpc_enable`): the values go on from
    /// where they were frozen. Fails if the set is running.
    pub fn resume(&self) -> Result<()> {
        self.resume_with(0)
    }

    /// Resume a frozen set the way perfctr resumes after an overflow interrupt: each request
    /// that overflowed (an *i-mode* counter: a notifying request, whose preset is its restart
    /// value, perfctr's `ireset`) starts again from its preset, and every other request (the
    /// *a-mode* counters, and i-mode counters that have not reached their overflow) goes on
    /// from its frozen value, as [`BoundSet::resume`] does for all. The totals of
    /// [`BoundSet::sample_totals`] keep every event of both kinds. Fails if the set is running.
    ///
    /// Async-signal-safe: meant for the overflow hook, the way libcpc's handlers call
    /// [`BoundSet::restart`].
    pub fn iresume(&self) -> Result<()> {
        self.resume_with(self.notify & self.overflowed.load(Ordering::Acquire))
    }

    /// Resume from the freeze; the requests of `reload` restart from their presets.
    fn resume_with(&self, reload: u64) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.write(|b| {
            if !b.is_frozen() {
                return Err(Error::WrongState("the counters are already running"));
            }
            let from = |i: usize| {
                if reload & (1 << i) != 0 {
                    b.preset[i].load(Ordering::Relaxed)
                } else {
                    b.frozen_vals[i].load(Ordering::Relaxed)
                }
            };
            let mut raw = [0u64; MAX_REQUESTS];
            let (_, running) = b.resume_raw(&mut raw, |i| virt::distance_to_wrap(from(i)))?;
            b.end_period(&raw);
            for i in 0..b.n {
                b.base[i].store(from(i), Ordering::Relaxed);
                b.origin[i].store(raw[i], Ordering::Relaxed);
                if b.notify & (1 << i) != 0 && !running {
                    b.group.arm(i, virt::distance_to_wrap(from(i)));
                }
            }
            if reload != 0 {
                b.overflowed.store(0, Ordering::Relaxed);
            }
            b.set_state(0, FROZEN | READY);
            b.new_generation(true);
            if !running {
                b.group.start();
            }
            Ok(())
        })
    }

    /// The notifying requests that wrapped at raw counts `raw` (bit mask), and for the others
    /// the events left to their wrap.
    fn wrapped(&self, raw: &[u64], mut rearm: Option<&mut [Option<u64>; MAX_REQUESTS]>) -> u64 {
        let mut mask = 0u64;
        for i in 0..self.n {
            let mut left = None;
            if self.notify & (1 << i) != 0 {
                let base = self.base[i].load(Ordering::Relaxed);
                let events = raw[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed));
                match virt::distance_to_wrap(base) {
                    Some(d) if events >= d => mask |= 1 << i,
                    Some(d) => left = Some(d - events),
                    None => {}
                }
            }
            if let Some(r) = rearm.as_deref_mut() {
                r[i] = left;
            }
        }
        mask
    }

    /// Overflow interrupt from the backend, for the signal that carried `fd` (-1 when the
    /// backend detected it itself; `hup`, the signal's code says the kernel stopped the event
    /// there): find the requests that wrapped, freeze, notify. Async-signal-safe.
    pub(crate) fn interrupt(&self, fd: i32, hup: bool, pc: usize) {
        if self.notify == 0 || self.gone() {
            return;
        }
        let fired = self.write(|b| {
            // First: the backend learns from the signal how the kernel left the group, even
            // when the set is frozen already.
            let kstop = if fd >= 0 {
                b.group.overflow_signalled(fd, hup)
            } else {
                KernelStop::No
            };
            if b.is_frozen() {
                // The group counts on after the freeze and overflowed again: stop it now.
                if fd >= 0 {
                    b.stop_counting_on();
                }
                return 0;
            }
            // A signal whose overflow record is gone reports an overflow already handled (two
            // overflows before the first signal was taken; the restart dropped the second's
            // record). Stopping and restarting the group for it would not be free: on a group
            // counting another running thread, the kernel's disable can fall between two
            // members' increments for one event and lose it in one of them.
            // A signal that finds no record, though, can also be a real overflow whose record
            // the kernel could not write (a full ring while signals were blocked): then a
            // request has wrapped, and the freeze falls back to the read after the stop.
            if kstop == KernelStop::No
                && fd >= 0
                && b.group.overflow_record_pending(fd) == Some(false)
            {
                let mut raw = [0u64; MAX_REQUESTS];
                match b.read_raw(&mut raw) {
                    Ok(_) if b.wrapped(&raw, None) != 0 => {}
                    _ => return 0,
                }
            }
            // The values freeze at the overflow instant when the backend recorded it (the
            // perf backend's overflow record), else at the read after the stop. Counting
            // resumes after a restart from that read, or from the record itself where the
            // kernel stopped the group right there ([`KernelStop::AtRecord`]: no stop, no read).
            let mut at = [0u64; MAX_REQUESTS];
            // A group that counts on is frozen at its record when the record shows the wrap;
            // otherwise it is handled as one the kernel did not stop.
            let mut kstop = kstop;
            if kstop == KernelStop::Running {
                if let Some((when, times)) = b.group.overflow_snapshot(fd, &mut at) {
                    let mask = b.wrapped(&at, None);
                    if mask != 0 {
                        b.freeze_at(&at, &at, times, mask, Some(when));
                        b.count_on_from(&at);
                        return mask;
                    }
                }
                kstop = KernelStop::No;
            }
            // Declared here, not above: the lone leader's path returns before, and zeroing
            // buffers it does not use cost it time on every overflow.
            let mut raw = [0u64; MAX_REQUESTS];
            let (times, when) = match kstop {
                KernelStop::AtRecord => match b.group.overflow_snapshot(fd, &mut at) {
                    Some((when, times)) => {
                        raw = at;
                        (times, Some(when))
                    }
                    None => match b.read_raw(&mut raw) {
                        Ok(times) => (times, None),
                        Err(_) => return 0,
                    },
                },
                _ => {
                    // Stop first, unless the kernel did.
                    if kstop == KernelStop::No {
                        b.group.stop();
                    }
                    let Ok(times) = b.read_raw(&mut raw) else {
                        b.group.start();
                        return 0;
                    };
                    let when = if fd >= 0 {
                        b.group.overflow_snapshot(fd, &mut at).map(|(w, _)| w)
                    } else {
                        None
                    };
                    (times, when)
                }
            };
            if let Some(when) = when {
                let mask = b.wrapped(&at, None);
                if mask != 0 {
                    // Nothing counted between the overflow and the stop: the backend may
                    // find its kernel's period already whole at the restart.
                    let mut whole = 0u64;
                    for i in (0..b.n).filter(|i| mask & (1 << i) != 0) {
                        if raw[i] == at[i] && b.at_the_wrap(i, at[i]) {
                            b.group.stopped_at_overflow(i);
                            whole |= 1 << i;
                        }
                    }
                    b.add_dropped(&at, &raw);
                    b.freeze_at(&at, &raw, times, mask, Some(when));
                    // A lone notifying request on its own thread, stopped by the kernel right
                    // at its wrap: its restart can be made ready now.
                    if b.n == 1 && whole == 1 && b.target == Target::CurrentThread {
                        b.ready_restart_at(&raw);
                    }
                    return mask;
                }
            }
            let mut rearm = [None::<u64>; MAX_REQUESTS];
            let mask = b.wrapped(&raw, Some(&mut rearm));
            if mask == 0 {
                // The backend could not be armed that far (perf periods stop at 2^63):
                // arm again for the rest of the distance.
                for (i, r) in rearm.iter().enumerate().take(b.n) {
                    if r.is_some() {
                        b.group.arm(i, *r);
                    }
                }
                b.group.start();
                return 0;
            }
            b.freeze_at(&raw, &raw, times, mask, None);
            mask
        });
        if fired != 0 {
            run_hook(&OverflowEvent {
                binding: self.id,
                user_data: self.user_data(),
                overflowed: fired,
                pc,
                tid: self.owner,
            });
        }
    }

    /// An overflow record waits while the set is not frozen: the overflow's signal has not
    /// been handled. Handle it here, as the signal's handler would have, when no signal will
    /// come for it: the binding's signals are off (`crate::base::watch` found the owner blocking
    /// them), or the program ignores the signal. So a sample after such an overflow returns the
    /// frozen values. A thread that blocks the signal for now (in a handler of its own, say)
    /// or a handler of the program's that may pass it on are left to the signal and to
    /// `crate::base::watch`, which acts once the record has waited. Async-signal-safe.
    #[cold]
    #[inline(never)]
    fn take_unsignalled(&self) {
        let Some(fd) = self.group.pending_overflow_fd() else {
            return;
        };
        // Inside the library's own blocked scopes (or its overflow handler) the overflow
        // handler runs when they end.
        if crate::base::sigsafe::blocked_by_library() || gettid() != self.owner {
            return;
        }
        let dropped = !self.is_quiet()
            && crate::base::signal::disposition() == crate::base::signal::Disposition::Dropped;
        if !self.is_quiet() && !dropped {
            return;
        }
        // A record can outlive the overflow it reports (handled, or discarded by a restart
        // that kept the group counting): only a request past its wrap now has one to handle.
        let mut raw = [0u64; MAX_REQUESTS];
        if self
            .read_raw(&mut raw)
            .map_or(true, |_| self.wrapped(&raw, None) == 0)
        {
            return;
        }
        if dropped {
            crate::base::watch::tell_taken_over();
        }
        self.unsignalled(fd, false);
    }

    fn detach(&self) {
        // After fork the descriptors still drive the parent's counters: only close ours.
        if !self.detached.swap(true, Ordering::AcqRel) && !self.inherited_from_parent() {
            self.write(|b| b.group.stop());
            if self.notify != 0 {
                crate::base::watch::unregister(self.id);
            }
        }
    }
}

/// A bound set, owned by the caller. Dropping it unbinds.
pub struct Binding {
    inner: Arc<BoundSet>,
}

impl std::ops::Deref for Binding {
    type Target = BoundSet;
    fn deref(&self) -> &BoundSet {
        &self.inner
    }
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("id", &self.id)
            .field("events", &self.names)
            .field("target", &self.target)
            .finish()
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.inner.detach();
        if gettid() == self.inner.owner {
            unregister(&self.inner);
        }
        // Otherwise the owner thread sweeps its detached entries at its next bind, unbind or
        // exit; until then the stopped counters stay open.
    }
}

/// Bindings per thread the engine can track.
pub const MAX_THREAD_BINDINGS: usize = 64;

/// A library that keeps one binding per thread, recorded in the engine's thread table under
/// its tag ([`set_owned`]). (libperfex's per-thread counters are still `crate::api::perfex`'s own
/// thread-local state: issue 15 would move them here too.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// libcpc: the set `cpc_bind_curlwp` bound on the thread, or the thread's inherited copy.
    Libcpc = 0,
}

/// One owner's binding on a thread: the library's key for it (libcpc: its set) and the
/// binding's id; key 0: none.
struct Owned {
    key: Cell<usize>,
    id: Cell<u64>,
}

impl Owned {
    const fn none() -> Owned {
        Owned {
            key: Cell::new(0),
            id: Cell::new(0),
        }
    }
}

struct ThreadTable {
    slots: UnsafeCell<[*const BoundSet; MAX_THREAD_BINDINGS]>,
    current: Cell<*const BoundSet>,
    /// Each owner's binding, by [`Owner`].
    owned: [Owned; 1],
}

impl Drop for ThreadTable {
    fn drop(&mut self) {
        let slots = self.slots.get_mut();
        for s in slots.iter_mut() {
            if !s.is_null() {
                // SAFETY: every non-null slot holds one strong count from Arc::into_raw.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
    }
}

thread_local! {
    static THREAD: ThreadTable = const {
        ThreadTable {
            slots: UnsafeCell::new([std::ptr::null(); MAX_THREAD_BINDINGS]),
            current: Cell::new(std::ptr::null()),
            owned: [Owned::none()],
        }
    };
}

/// Add a binding to this thread's table. Sweeps detached entries first.
fn register(b: &Arc<BoundSet>, make_current: bool) -> Result<()> {
    let _blocked = Blocked::all();
    THREAD.with(|t| {
        // SAFETY: only this thread touches its table, and only with signals blocked, so no
        // handler observes the change half-made.
        let slots = unsafe { &mut *t.slots.get() };
        for s in slots.iter_mut() {
            // SAFETY: non-null slots are live Arcs.
            if !s.is_null() && unsafe { (**s).detached.load(Ordering::Acquire) } {
                if t.current.get() == *s {
                    t.current.set(std::ptr::null());
                }
                // SAFETY: releases this slot's strong count.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
        let free = slots.iter_mut().find(|s| s.is_null()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a thread can hold at most {MAX_THREAD_BINDINGS} bindings"
            ))
        })?;
        *free = Arc::into_raw(b.clone());
        if make_current {
            t.current.set(*free);
        }
        Ok(())
    })
}

fn unregister(b: &Arc<BoundSet>) {
    let _blocked = Blocked::all();
    let _ = THREAD.try_with(|t| {
        // SAFETY: as in `register`.
        let slots = unsafe { &mut *t.slots.get() };
        let p = Arc::as_ptr(b);
        for s in slots.iter_mut() {
            if *s == p {
                if t.current.get() == p {
                    t.current.set(std::ptr::null());
                }
                // SAFETY: releases this slot's strong count.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
    });
}

/// Run `f` on the calling thread's current binding (its most recent binding to itself). `None`
/// when there is none. (libcpc finds its set by id instead: [`with_thread_binding`].)
/// Async-signal-safe.
pub fn with_current<R>(f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    THREAD
        .try_with(|t| {
            let p = t.current.get();
            if p.is_null() {
                return None;
            }
            // SAFETY: the table holds a strong count for as long as `current` points here, and
            // only this thread changes it (never while a handler of this thread runs).
            let b = unsafe { &*p };
            if b.gone() {
                None
            } else {
                Some(f(b))
            }
        })
        .ok()
        .flatten()
}

/// Run `f` on the calling thread's binding `id` ([`BoundSet::id`]), if the thread holds it and
/// it is still bound. Unlike [`with_current`], this finds a binding whatever the thread bound
/// after it: libcpc's "the calling LWP's bound set" is the set `cpc_bind_curlwp` bound, even
/// when libperfex's `start_counters` bound counters on the same thread since.
/// Async-signal-safe.
pub fn with_thread_binding<R>(id: u64, f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    THREAD.try_with(|t| find(t, id, f)).ok().flatten()
}

/// `f` on binding `id` of table `t`, if it holds it and it is still bound.
#[inline]
fn find<R>(t: &ThreadTable, id: u64, f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    // SAFETY: as in `with_current`: the table holds a strong count for each non-null slot, and
    // only this thread changes it, with signals blocked.
    let slots = unsafe { &*t.slots.get() };
    slots
        .iter()
        .filter(|s| !s.is_null())
        // SAFETY: non-null slots are live.
        .map(|&s| unsafe { &*s })
        .find(|b| b.id == id && !b.gone())
        .map(f)
}

/// Record binding `id` of the calling thread as `owner`'s binding on it, under the library's
/// `key` (libcpc: its set); key 0 (and id 0): none. A signal handler of this thread sees none or
/// a consistent pair.
pub fn set_owned(owner: Owner, key: usize, id: u64) {
    let _ = THREAD.try_with(|t| {
        let o = &t.owned[owner as usize];
        o.key.set(0);
        compiler_fence(Ordering::SeqCst);
        o.id.set(id);
        compiler_fence(Ordering::SeqCst);
        o.key.set(key);
    });
}

/// The key of `owner`'s binding on the calling thread (0: none). Async-signal-safe.
pub fn owned_key(owner: Owner) -> usize {
    THREAD
        .try_with(|t| t.owned[owner as usize].key.get())
        .unwrap_or(0)
}

/// Run `f` on `owner`'s binding on the calling thread (only if it is under `key`, when given),
/// if it has one and it is still bound. Async-signal-safe and allocation-free.
#[inline]
pub fn with_owned<R>(
    owner: Owner,
    key: Option<usize>,
    f: impl FnOnce(&BoundSet) -> R,
) -> Option<R> {
    THREAD
        .try_with(|t| {
            let o = &t.owned[owner as usize];
            let k = o.key.get();
            if k == 0 || key.is_some_and(|key| key != k) {
                return None;
            }
            find(t, o.id.get(), f)
        })
        .ok()
        .flatten()
}

/// The perf backend's overflow signal arrived carrying `fd`: find the calling thread's binding
/// that owns it and process the overflow. Async-signal-safe.
pub(crate) fn on_overflow_fd(fd: i32, hup: bool, pc: usize) {
    let _ = THREAD.try_with(|t| {
        // SAFETY: see `with_current`; the table is not being changed (signals are blocked while
        // it is).
        let slots = unsafe { &*t.slots.get() };
        for &s in slots.iter() {
            if s.is_null() {
                continue;
            }
            // SAFETY: non-null slots are live.
            let b = unsafe { &*s };
            if b.group.owns_fd(fd) {
                b.interrupt(fd, hup, pc);
                return;
            }
        }
    });
}

/// An overflow signal that says nothing of its counter arrived: the kernel's plain `SIGIO`,
/// sent instead of the overflow signal when the user's queue of real-time signals is full
/// (`RLIMIT_SIGPENDING`, shared by all of the user's processes). Every perf binding of the
/// calling thread with a notifying request that has wrapped is frozen, at a read after the
/// stop (there is no record to take). Async-signal-safe.
pub(crate) fn on_overflow_unknown(pc: usize) {
    let _ = THREAD.try_with(|t| {
        // SAFETY: as in `on_overflow_fd`.
        let slots = unsafe { &*t.slots.get() };
        for &s in slots.iter().filter(|s| !s.is_null()) {
            // SAFETY: non-null slots are live.
            let b = unsafe { &*s };
            if b.notify == 0 || b.kind.is_emulated() || b.gone() {
                continue;
            }
            if b.is_frozen() {
                // Possibly the next overflow of a group that counts on after its freeze.
                if b.runs_on() {
                    b.write(|b| b.stop_counting_on());
                }
                continue;
            }
            let mut raw = [0u64; MAX_REQUESTS];
            if b.read_raw(&mut raw).is_ok() && b.wrapped(&raw, None) != 0 {
                b.interrupt(-1, false, pc);
            }
        }
    });
}

/// Check a set against a backend and find where its requests go, without binding.
pub fn plan(backend: &dyn Backend, set: &CounterSet) -> Result<Vec<crate::base::sched::Slot>> {
    if set.is_empty() {
        return Err(Error::EmptySet);
    }
    let info = backend.shape();
    // Two requests pinned to one counter conflict whatever their events are, and whether or
    // not this host can count them (Solaris rejects duplicate picnums before configuring).
    let reqs = set.requests();
    for (j, b) in reqs.iter().enumerate() {
        if let Some((i, a)) = reqs[..j]
            .iter()
            .enumerate()
            .find(|(_, a)| a.counter.is_some() && a.counter == b.counter)
        {
            return Err(Error::Conflict(crate::base::error::Conflict {
                requests: vec![(i, a.event.clone()), (j, b.event.clone())],
                reason: crate::base::error::ConflictReason::SameCounter {
                    counters: vec![b.counter.unwrap_or(0)],
                },
            }));
        }
    }
    let mut cands: Vec<Candidate> = Vec::with_capacity(set.len());
    for r in set.requests() {
        if let Some(c) = r.counter {
            if c as usize >= info.counters {
                return Err(Error::InvalidPicnum {
                    picnum: c,
                    npic: info.counters as u32,
                });
            }
        }
        if r.flags.notify_overflow && !info.overflow_interrupt {
            return Err(Error::OverflowUnsupported {
                backend: info.kind.to_string(),
            });
        }
        cands.push(backend.candidate(r)?);
    }
    backend.check_set(set.requests())?;
    let names = resource_namer(backend);
    sched::schedule(&cands, info.counters, &*names)
}

/// Check one request on its own, before it joins a set: what libcpc's `cpc_set_add_request`
/// checks, in its order. The event must be countable on at least one counter
/// ([`Error::UnknownEvent`] or [`Error::EventUnavailable`]); every attribute name must be one
/// of the backend's ([`Error::InvalidAttribute`]); a pinned counter must exist
/// ([`Error::InvalidPicnum`]) and be able to count the event ([`Error::PicNotCapable`]).
/// Attribute *values*, flags and the set as a whole are checked at bind ([`plan`]).
pub fn check_request(backend: &dyn Backend, request: &Request) -> Result<()> {
    let info = backend.shape();
    let mut bare = request.clone();
    bare.attrs.clear();
    bare.counter = None;
    backend.candidate(&bare)?;
    if let Some(a) = request
        .attrs
        .iter()
        .find(|a| !info.attributes.contains(&a.name))
    {
        return Err(Error::InvalidAttribute {
            name: a.name.clone(),
            backend: info.kind.to_string(),
        });
    }
    if let Some(c) = request.counter {
        let npic = info.counters as u32;
        if c >= npic {
            return Err(Error::InvalidPicnum { picnum: c, npic });
        }
        bare.counter = Some(c);
        if backend.candidate(&bare).is_err() {
            return Err(Error::PicNotCapable {
                event: request.event.clone(),
                picnum: c,
            });
        }
    }
    Ok(())
}

fn resource_namer(backend: &dyn Backend) -> Box<dyn Fn(u16) -> String + '_> {
    Box::new(move |r| backend.resource_name(r))
}

/// Bind `set` to `target` on the process's backend ([`backend::global`]).
pub fn bind(set: &CounterSet, target: Target) -> Result<Binding> {
    bind_with(backend::global()?, set, target)
}

/// Bind `set` to `target` on a given backend.
pub fn bind_with(
    backend: &'static dyn Backend,
    set: &CounterSet,
    target: Target,
) -> Result<Binding> {
    bind_tagged(backend, set, target, 0)
}

/// [`bind_with`], with the binding's [`BoundSet::user_data`] set to `user_data` before counting
/// starts: an overflow that comes while the bind is still returning (a short distance on a
/// clock event) already carries it to the overflow hook. Setting it afterwards with
/// [`BoundSet::set_user_data`] would leave such an overflow untagged.
pub fn bind_tagged(
    backend: &'static dyn Backend,
    set: &CounterSet,
    target: Target,
    user_data: usize,
) -> Result<Binding> {
    let slots = plan(backend, set)?;
    watch_forks();
    let reqs = set.requests();
    let n = reqs.len();
    let notify = reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.flags.notify_overflow)
        .fold(0u64, |m, (i, _)| m | 1 << i);
    if notify != 0 {
        crate::base::signal::install_overflow_handler(crate::base::signal::Dispatch {
            on_fd: on_overflow_fd,
            on_unknown: on_overflow_unknown,
        })?;
    }
    let group = backend.open(reqs, &slots, target)?;
    let direct = group.direct_read();
    let b = Arc::new(BoundSet {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        n,
        names: reqs.iter().map(|r| r.event.clone()).collect(),
        target,
        owner: gettid(),
        kind: backend.shape().kind,
        group,
        direct,
        notify,
        seq: SeqCount::new(),
        preset: reqs.iter().map(|r| AtomicU64::new(r.preset)).collect(),
        base: zeroed(n),
        origin: zeroed(n),
        frozen_vals: zeroed(n),
        frozen_raw: zeroed(n),
        frozen_enabled: AtomicU64::new(0),
        frozen_running: AtomicU64::new(0),
        frozen_events: zeroed(n),
        sums: zeroed(n),
        state: AtomicU64::new(0),
        owner_key: crate::base::sigsafe::thread_key(),
        frozen_at: AtomicU64::new(0),
        overflowed: AtomicU64::new(0),
        enabled0: AtomicU64::new(0),
        running0: AtomicU64::new(0),
        gen: AtomicU64::new(0),
        detached: AtomicBool::new(false),
        quiet: AtomicBool::new(false),
        user_data: AtomicUsize::new(user_data),
        fork_gen: FORKS.load(Ordering::Relaxed),
    });
    let thread_bound = matches!(target, Target::CurrentThread | Target::CurrentThreadInherit);
    // The thread table serves `with_current` and the perf overflow signal's dispatch: a
    // binding that is neither thread-bound nor notifying needs no slot (perfex -mp holds many).
    if thread_bound || notify != 0 {
        register(&b, thread_bound)?;
    }
    let binding = Binding { inner: b };
    // Before counting starts: the first one starts the watcher thread, whose creation costs
    // this thread page faults.
    if notify != 0 && thread_bound && !binding.kind.is_emulated() {
        crate::base::watch::register(binding.inner.clone());
    }
    binding.write(|b| b.start_from_presets())?;
    if let Target::Thread(tid) = target {
        crate::base::held::bound(tid, binding.inner.clone());
    }
    // Backends that detect overflows themselves (the emulated PMUs) keep a weak handle.
    let weak: std::sync::Weak<BoundSet> = Arc::downgrade(&binding.inner);
    backend.attach(weak);
    Ok(binding)
}

impl BoundSet {
    /// The backend that counts it.
    pub fn backend_kind(&self) -> BackendKind {
        self.kind
    }
}

impl crate::base::held::Stoppable for BoundSet {
    fn stop_counting(&self) -> bool {
        self.stop().is_ok()
    }
    fn resume_counting(&self) -> bool {
        self.resume().is_ok()
    }
}

impl crate::base::watch::Watched for BoundSet {
    fn id(&self) -> u64 {
        self.id
    }
    fn owner(&self) -> i32 {
        self.owner
    }
    fn gone(&self) -> bool {
        BoundSet::gone(self)
    }
    fn overflow_fds(&self, out: &mut Vec<i32>) {
        self.group.overflow_fds(out);
    }
    fn record_pending(&self, fd: i32) -> bool {
        if self.is_frozen() || self.group.overflow_record_pending(fd) != Some(true) {
            return false;
        }
        // A record can outlive the overflow it reports (see `take_unsignalled`): only a
        // request past its wrap now has one to handle.
        let mut raw = [0u64; MAX_REQUESTS];
        self.group
            .read_from_elsewhere(&mut raw[..self.n])
            .is_ok_and(|_| self.wrapped(&raw, None) != 0)
    }
    fn handle(&self, fd: i32, owner_blocks: bool) {
        self.unsignalled(fd, owner_blocks);
    }
    fn record_mark(&self, fd: i32) -> Option<u64> {
        self.group.overflow_record_mark(fd)
    }
    fn quiet(&self) -> bool {
        self.is_quiet()
    }
    fn speak(&self) {
        self.speak_again();
    }
}

impl backend::Bound for BoundSet {
    fn group(&self) -> &dyn Group {
        BoundSet::group(self)
    }
    fn interrupt(&self, pc: usize) {
        BoundSet::interrupt(self, -1, false, pc);
    }
}

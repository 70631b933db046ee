//! Signal safety under load (issue 7, item 3): 100,000 SIGEMT overflow notifications on the perf
//! backend, taken while the interrupted threads are inside malloc and inside the library
//! (sampling, allocating, binding and unbinding), with a handler that samples, presets and
//! restarts as libcpc programs do.
//!
//! One test (signal handlers are process-wide), five threads:
//!
//! - three *measured* threads, each with its own `cpc_t` and a set of two notifying requests,
//!   `page-faults` preset to `UINT64_MAX` (a SIGEMT at every fault) and `task-clock` preset to
//!   overflow every [`TC_PERIOD`] ns of CPU time (a SIGEMT at any instruction). Their loop
//!   frees and allocates 80 KiB blocks with malloc tuned to give the memory back at every free
//!   and to take it again at every allocation, so that malloc writes its next chunk header on
//!   a fresh page and the fault (and so the signal) is taken inside malloc; and calls the
//!   library: `cpc_set_sample`, libperfex `start_counters`/`read_counters` on alternating
//!   event pairs (each start unbinds and binds), and sets, requests and buffers created and
//!   destroyed on a second `cpc_t` (allocating, taking the library's locks).
//!   Each thread also counts its page faults with a `perf_event_open` descriptor of its own,
//!   opened by this test, not the library. Page-fault overflow is exact, so the faults the
//!   set counted (1 for each page-fault overflow, as each is seen at exactly 1 event past the
//!   preset, plus what the set reads at the end) must equal that independent count: a lost
//!   SIGEMT leaves the set frozen and it stops counting; a lost engine signal lets it count
//!   on past the overflow (2 events, not 1); a duplicated one restarts the set and drops
//!   counts, or finds nothing overflowed.
//! - one *rebinding* thread: binds the same kind of set with `cpc_bind_curlwp` and unbinds it
//!   with `cpc_unbind` in a loop around its mallocs, so signals land during binds and unbinds
//!   of the very set the handler samples.
//! - one *unbound* thread: the same mallocs and library calls (no notifying binding): it must
//!   get no signal, neither SIGEMT nor the engine's own overflow signal.
//!
//! The handler records, without allocating, the interrupted program counter (`si_addr`) and
//! whether the thread was inside a library call or inside the allocator; after the run the
//! counters are resolved with `dladdr`. A watchdog turns a deadlock (30 s without a signal or a
//! loop round) into a failure.
//!
//! What it found (fixed): after a libperfex `start_counters` on the thread, the handler's
//! `cpc_set_restart` restarted libperfex's counters instead of the libcpc set, which stayed
//! frozen (one SIGEMT, then none); and a SIGEMT for a set being bound by `cpc_bind_curlwp`
//! could run before the set was recorded as bound, where `cpc_set_sample` failed (EINVAL).

use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use perfcompat_capi::cpc::*;
use perfcompat_capi::perfex::{read_counters, start_counters};

/// SIGEMT notifications to take in all.
const TARGET: u64 = 100_000;
/// The page-fault request's preset: every fault overflows.
const PF_PRESET: u64 = u64::MAX;
/// CPU time between two task-clock overflows, in ns.
const TC_PERIOD: u64 = 50_000;
/// The task-clock request's preset.
const TC_PRESET: u64 = u64::MAX - TC_PERIOD + 1;
/// Bytes a loop allocates at once: above glibc's 64 KiB trim trigger, below the mmap threshold.
const BLOCK: usize = 80 * 1024;

const MEASURED: u8 = 1;
const REBINDING: u8 = 2;
const UNBOUND: u8 = 3;
const THREADS: usize = 5;
/// Signals recorded (program counter and flags) per thread.
const RECORDS: usize = 60_000;

// An allocator that counts allocations per thread and says whether the thread is inside it.
struct Tracking;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static IN_ALLOC: Cell<u32> = const { Cell::new(0) };
    static IN_LIB: Cell<u32> = const { Cell::new(0) };
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn depth(c: &'static std::thread::LocalKey<Cell<u32>>, d: i32) {
    let _ = c.try_with(|c| c.set(c.get().wrapping_add_signed(d)));
    compiler_fence(SeqCst);
}

// SAFETY: forwards to the system allocator; only counts and flags.
unsafe impl std::alloc::GlobalAlloc for Tracking {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        depth(&IN_ALLOC, 1);
        // SAFETY: forwarded.
        let p = unsafe { std::alloc::System.alloc(l) };
        depth(&IN_ALLOC, -1);
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        depth(&IN_ALLOC, 1);
        // SAFETY: forwarded.
        unsafe { std::alloc::System.dealloc(p, l) };
        depth(&IN_ALLOC, -1);
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        depth(&IN_ALLOC, 1);
        // SAFETY: forwarded.
        let p = unsafe { std::alloc::System.realloc(p, l, n) };
        depth(&IN_ALLOC, -1);
        p
    }
}

#[global_allocator]
static A: Tracking = Tracking;

fn allocs() -> u64 {
    ALLOCS.try_with(Cell::get).unwrap_or(0)
}

/// Run a library call with the thread marked as inside the library.
fn lib<R>(f: impl FnOnce() -> R) -> R {
    depth(&IN_LIB, 1);
    let r = f();
    depth(&IN_LIB, -1);
    r
}

/// A thread's state, shared with its signal handlers.
struct Slot {
    role: AtomicU8,
    tid: AtomicI32,
    cpc: AtomicPtr<cpc_t>,
    set: AtomicPtr<cpc_set_t>,
    buf: AtomicPtr<cpc_buf_t>,
    /// Accounting on: overflows are added to `pf_closed`.
    measuring: AtomicBool,
    /// The final count is taken.
    finished: AtomicBool,
    sigemt: AtomicU64,
    engine_signals: AtomicU64,
    pf_overflows: AtomicU64,
    tc_overflows: AtomicU64,
    /// Page faults counted by the set in the intervals the handler closed.
    pf_closed: AtomicU64,
    /// Page-fault overflows seen more than 1 event past the preset.
    overshoot: AtomicU64,
    /// Signals for which nothing in this thread's set had overflowed.
    spurious: AtomicU64,
    errors: AtomicU64,
    /// The first handler error: the step that failed (1 `si_code`, 2 thread, 3 sample, 4 the
    /// buffer's values, 5 a preset, 6 the restart) in bits 56-63, `si_code` or `errno` below.
    first_error: AtomicU64,
    allocs: AtomicU64,
    /// Signals that arrived after the final count (their overflow is in it).
    late: AtomicU64,
    records: AtomicUsize,
}

const FLAG_LIB: u8 = 1;
const FLAG_ALLOC: u8 = 2;
const FLAG_PF: u8 = 4;
const FLAG_TC: u8 = 8;

#[allow(clippy::declare_interior_mutable_const)]
const SLOT_INIT: Slot = Slot {
    role: AtomicU8::new(0),
    tid: AtomicI32::new(0),
    cpc: AtomicPtr::new(null_mut()),
    set: AtomicPtr::new(null_mut()),
    buf: AtomicPtr::new(null_mut()),
    measuring: AtomicBool::new(false),
    finished: AtomicBool::new(false),
    sigemt: AtomicU64::new(0),
    engine_signals: AtomicU64::new(0),
    pf_overflows: AtomicU64::new(0),
    tc_overflows: AtomicU64::new(0),
    pf_closed: AtomicU64::new(0),
    overshoot: AtomicU64::new(0),
    spurious: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    first_error: AtomicU64::new(0),
    allocs: AtomicU64::new(0),
    late: AtomicU64::new(0),
    records: AtomicUsize::new(0),
};
static SLOTS: [Slot; THREADS] = [SLOT_INIT; THREADS];
static PCS: [[AtomicUsize; RECORDS]; THREADS] =
    [const { [const { AtomicUsize::new(0) }; RECORDS] }; THREADS];
static FLAGS: [[AtomicU8; RECORDS]; THREADS] =
    [const { [const { AtomicU8::new(0) }; RECORDS] }; THREADS];

static TOTAL: AtomicU64 = AtomicU64::new(0);
/// Loop rounds of all threads (the watchdog's sign of life besides signals).
static PROGRESS: AtomicU64 = AtomicU64::new(0);
/// Signals on threads without a slot (the test's own threads).
static STRAY: AtomicU64 = AtomicU64::new(0);
/// The engine's overflow handler, which ours forwards to.
static ENGINE_HANDLER: AtomicUsize = AtomicUsize::new(0);

fn my_slot() -> Option<(usize, &'static Slot)> {
    let i = SLOT.try_with(Cell::get).ok()?;
    SLOTS.get(i).map(|s| (i, s))
}

fn gettid() -> i32 {
    // SAFETY: a plain system call.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

extern "C" fn on_sigemt(_sig: i32, info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    let before = allocs();
    let Some((i, slot)) = my_slot() else {
        STRAY.fetch_add(1, SeqCst);
        return;
    };
    slot.sigemt.fetch_add(1, SeqCst);
    TOTAL.fetch_add(1, SeqCst);
    let role = slot.role.load(SeqCst);
    if role != MEASURED && role != REBINDING {
        // The unbound thread: this signal was meant for another thread.
        return;
    }
    // SAFETY: the kernel passes a siginfo.
    let (code, pc) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let (cpc, set, buf) = (
        slot.cpc.load(SeqCst),
        slot.set.load(SeqCst),
        slot.buf.load(SeqCst),
    );
    let (mut pf, mut tc) = (0u64, 0u64);
    // The step that failed first, for the report (see `Slot::first_error`).
    let failed = |step: u64, detail: i64| {
        let _ = slot.first_error.compare_exchange(
            0,
            step << 56 | (detail as u64 & 0xff_ffff_ffff_ffff),
            SeqCst,
            SeqCst,
        );
        false
    };
    // SAFETY: errno is thread-local.
    let errno = || i64::from(unsafe { *libc::__errno_location() });
    let mut ok = (code == EMT_CPCOVF || failed(1, i64::from(code)))
        && (slot.tid.load(SeqCst) == gettid() || failed(2, 0))
        && (cpc_set_sample(cpc, set, buf) == 0 || failed(3, errno()))
        // SAFETY: valid out-pointers.
        && (unsafe { cpc_buf_get(cpc, buf, 0, &mut pf) } == 0 || failed(4, errno()))
        && (unsafe { cpc_buf_get(cpc, buf, 1, &mut tc) } == 0 || failed(4, errno()));
    // Overflowed: wrapped past 2^64, so below the preset.
    let pf_wrapped = ok && pf < PF_PRESET;
    let tc_wrapped = ok && tc < TC_PRESET;
    if ok {
        if !pf_wrapped && !tc_wrapped {
            slot.spurious.fetch_add(1, SeqCst);
        }
        let measuring = slot.measuring.load(SeqCst);
        if pf_wrapped {
            slot.pf_overflows.fetch_add(1, SeqCst);
            // Taken at the fault that overflowed, not later. (Only while measuring: an overflow
            // while signals are blocked, as during a bind, is handled late by design.)
            if pf != 0 && measuring {
                slot.overshoot.fetch_add(1, SeqCst);
            }
        }
        if tc_wrapped {
            slot.tc_overflows.fetch_add(1, SeqCst);
        }
        if measuring {
            slot.pf_closed.fetch_add(pf.wrapping_sub(PF_PRESET), SeqCst);
        } else if slot.finished.load(SeqCst) {
            slot.late.fetch_add(1, SeqCst);
        }
    }
    ok = ok
        && (cpc_request_preset(cpc, 0, PF_PRESET) == 0 || failed(5, errno()))
        && (cpc_request_preset(cpc, 1, TC_PRESET) == 0 || failed(5, errno()))
        && (cpc_set_restart(cpc, set) == 0 || failed(6, errno()));
    if !ok {
        slot.errors.fetch_add(1, SeqCst);
    }
    let r = slot.records.fetch_add(1, SeqCst);
    if r < RECORDS {
        let in_lib = IN_LIB.try_with(Cell::get).unwrap_or(0) > 0;
        let in_alloc = IN_ALLOC.try_with(Cell::get).unwrap_or(0) > 0;
        let bit = |on: bool, flag: u8| if on { flag } else { 0 };
        let f = bit(in_lib, FLAG_LIB)
            | bit(in_alloc, FLAG_ALLOC)
            | bit(pf_wrapped, FLAG_PF)
            | bit(tc_wrapped, FLAG_TC);
        PCS[i][r].store(pc, SeqCst);
        FLAGS[i][r].store(f, SeqCst);
    }
    slot.allocs.fetch_add(allocs() - before, SeqCst);
}

/// Installed over the engine's overflow signal handler: counts which thread each engine signal
/// lands on, then forwards.
extern "C" fn on_engine_signal(sig: i32, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    match my_slot() {
        Some((_, slot)) => {
            slot.engine_signals.fetch_add(1, SeqCst);
        }
        None => {
            STRAY.fetch_add(1, SeqCst);
        }
    }
    let h = ENGINE_HANDLER.load(SeqCst);
    if h > libc::SIG_IGN {
        // SAFETY: the engine installed this SA_SIGINFO handler.
        let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, uc);
    }
}

fn install(sig: i32, h: usize) -> libc::sigaction {
    // SAFETY: plain sigaction calls.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        let mut old: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = h;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigfillset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, &mut old), 0);
        old
    }
}

/// This thread's page faults in user mode, counted with a perf descriptor the test opens itself
/// (as the library opens its `page-faults` with `CPC_COUNT_USER`: kernel and hypervisor
/// excluded).
struct Faults(i32);

impl Faults {
    fn open() -> Faults {
        #[repr(C)]
        struct Attr {
            type_: u32,
            size: u32,
            config: u64,
            sample_period: u64,
            sample_type: u64,
            read_format: u64,
            flags: u64,
            wakeup_events: u32,
            bp_type: u32,
            config1: u64,
        }
        let attr = Attr {
            type_: 1, // PERF_TYPE_SOFTWARE
            size: std::mem::size_of::<Attr>() as u32,
            config: 2, // PERF_COUNT_SW_PAGE_FAULTS
            sample_period: 0,
            sample_type: 0,
            read_format: 0,
            flags: 1 << 5 | 1 << 6, // exclude_kernel, exclude_hv; enabled
            wakeup_events: 0,
            bp_type: 0,
            config1: 0,
        };
        // SAFETY: perf_event_open with a valid attribute for the calling thread.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const Attr,
                0,
                -1,
                -1,
                8, // PERF_FLAG_FD_CLOEXEC
            )
        };
        assert!(fd >= 0, "perf_event_open(page-faults): {}", errno());
        Faults(fd as i32)
    }

    fn read(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a local.
        let n = unsafe { libc::read(self.0, (&mut v as *mut u64).cast(), 8) };
        assert_eq!(n, 8);
        v
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        // SAFETY: our descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Every signal blocked on this thread while alive.
struct Masked(libc::sigset_t);

impl Masked {
    fn new() -> Masked {
        // SAFETY: local sets.
        unsafe {
            let mut full: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut full);
            libc::pthread_sigmask(libc::SIG_BLOCK, &full, &mut old);
            Masked(old)
        }
    }
}

impl Drop for Masked {
    fn drop(&mut self) {
        // SAFETY: restores the saved mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, null_mut()) };
    }
}

/// `cpc_set_add_request` without attributes.
fn add(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    event: &std::ffi::CStr,
    preset: u64,
    flags: u32,
) -> i32 {
    // SAFETY: a NUL-terminated name and no attributes.
    unsafe { cpc_set_add_request(cpc, set, event.as_ptr(), preset, flags, 0, null_mut()) }
}

/// A `cpc_t` with a set of the two notifying requests and a buffer for it.
fn notifying_set() -> (*mut cpc_t, *mut cpc_set_t, *mut cpc_buf_t) {
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    let set = cpc_set_create(cpc);
    let flags = CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT;
    assert_eq!(add(cpc, set, c"page-faults", PF_PRESET, flags), 0);
    assert_eq!(add(cpc, set, c"task-clock", TC_PRESET, flags), 1);
    let buf = cpc_buf_create(cpc, set);
    assert!(!buf.is_null());
    (cpc, set, buf)
}

/// Touch `kib` KiB of stack below this frame, so that handlers running on it take no fault.
#[inline(never)]
fn warm_stack(kib: usize) {
    let mut a = [0u8; 1024];
    std::hint::black_box(&mut a);
    if kib > 1 {
        warm_stack(kib - 1);
    }
    std::hint::black_box(&mut a);
}

/// Allocate and free a block a few times: each allocation grows the heap onto pages the last
/// free gave back, and malloc's write of its header there faults.
fn malloc_cycles(n: usize) {
    for _ in 0..n {
        let v: Vec<u8> = Vec::with_capacity(BLOCK);
        std::hint::black_box(&v);
        drop(v);
    }
}

/// Library calls that allocate, lock and bind: libperfex on alternating pairs of events (so each
/// start unbinds one pair and binds another), and a set, request and buffer made and destroyed
/// on `cpc2`.
fn library_churn(cpc2: *mut cpc_t, round: u64) -> bool {
    let (e0, e1) = if round.is_multiple_of(2) {
        (0, 16)
    } else {
        (1, 17)
    };
    let mut ok = lib(|| start_counters(e0, e1)) > 0;
    let (mut c0, mut c1) = (0i64, 0i64);
    // SAFETY: valid out-pointers.
    ok &= lib(|| unsafe { read_counters(e0, &mut c0, e1, &mut c1) }) > 0;
    lib(|| {
        let s = cpc_set_create(cpc2);
        let r = add(cpc2, s, c"minor-faults", 0, CPC_COUNT_USER);
        let b = cpc_buf_create(cpc2, s);
        // SAFETY: live handles, destroyed once.
        ok &= !s.is_null() && r == 0 && !b.is_null();
        ok &= unsafe { cpc_buf_destroy(cpc2, b) } == 0 && unsafe { cpc_set_destroy(cpc2, s) } == 0;
    });
    ok
}

/// What a measured thread found: faults its set counted, faults its own descriptor counted.
struct Counted {
    by_set: u64,
    independent: u64,
    /// Of `by_set`: the faults dropped between an overflow and the stop (see both_counts).
    dropped: u64,
    loop_errors: u64,
}

/// Faults the set has counted so far and the independent count, read together with every
/// signal blocked, between two reads of the independent count that agree (no fault between).
fn both_counts(slot: &Slot, faults: &Faults, cpc: *mut cpc_t, set: *mut cpc_set_t) -> (u64, u64) {
    let buf = cpc_buf_create(cpc, set);
    assert!(!buf.is_null());
    loop {
        let _m = Masked::new();
        let r1 = faults.read();
        assert_eq!(cpc_set_sample(cpc, set, buf), 0);
        let mut pf = 0u64;
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cpc_buf_get(cpc, buf, 0, &mut pf) }, 0);
        // Faults between an overflow and the handler's stop are dropped by design (the set
        // freezes at the overflow's record): they are counted here, as the engine reports them.
        let by_set = slot.pf_closed.load(SeqCst)
            + pf.wrapping_sub(PF_PRESET)
            + perfcompat::engine::dropped_at_freezes(0);
        let r2 = faults.read();
        if r1 == r2 {
            // SAFETY: a live buffer.
            unsafe { cpc_buf_destroy(cpc, buf) };
            return (by_set, r1);
        }
    }
}

fn measured(i: usize, warmed: &std::sync::Barrier) -> Counted {
    let slot = &SLOTS[i];
    warm_stack(256);
    let (cpc, set, buf) = notifying_set();
    let cpc2 = cpc_open(CPC_VER_CURRENT);
    let sbuf = cpc_buf_create(cpc, set);
    let faults = Faults::open();
    slot.cpc.store(cpc, SeqCst);
    slot.set.store(set, SeqCst);
    slot.buf.store(buf, SeqCst);
    slot.tid.store(gettid(), SeqCst);
    slot.role.store(MEASURED, SeqCst);
    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
    // Run every path of the loop once on each measured thread before any measures: the first
    // run of a page of code faults, and where that is in a section that blocks signals, the
    // overflow at that fault is handled at the end of the section, after more faults.
    malloc_cycles(2);
    assert_eq!(cpc_set_sample(cpc, set, sbuf), 0);
    assert!(library_churn(cpc2, 0) && library_churn(cpc2, 1));
    warmed.wait();
    slot.measuring.store(true, SeqCst);
    let dropped0 = perfcompat::engine::dropped_at_freezes(0);
    let (set0, ind0) = both_counts(slot, &faults, cpc, set);
    let mut loop_errors = 0;
    let mut round = 0u64;
    while TOTAL.load(SeqCst) < TARGET {
        malloc_cycles(2);
        for _ in 0..4 {
            if lib(|| cpc_set_sample(cpc, set, sbuf)) != 0 {
                loop_errors += 1;
            }
        }
        if !library_churn(cpc2, round) {
            loop_errors += 1;
        }
        round += 1;
        PROGRESS.fetch_add(1, SeqCst);
    }
    let (set1, ind1) = both_counts(slot, &faults, cpc, set);
    let dropped = perfcompat::engine::dropped_at_freezes(0) - dropped0;
    slot.measuring.store(false, SeqCst);
    slot.finished.store(true, SeqCst);
    assert_eq!(cpc_unbind(cpc, set), 0);
    slot.role.store(0, SeqCst);
    // SAFETY: a live handle, not used afterwards.
    unsafe { cpc_close(cpc2) };
    Counted {
        by_set: set1 - set0,
        independent: ind1 - ind0,
        dropped,
        loop_errors,
    }
}

fn rebinding(i: usize) -> u64 {
    let slot = &SLOTS[i];
    warm_stack(256);
    let (cpc, set, buf) = notifying_set();
    let sbuf = cpc_buf_create(cpc, set);
    slot.cpc.store(cpc, SeqCst);
    slot.set.store(set, SeqCst);
    slot.buf.store(buf, SeqCst);
    slot.tid.store(gettid(), SeqCst);
    slot.role.store(REBINDING, SeqCst);
    let mut loop_errors = 0;
    while TOTAL.load(SeqCst) < TARGET {
        if lib(|| cpc_bind_curlwp(cpc, set, 0)) != 0 {
            loop_errors += 1;
        }
        malloc_cycles(2);
        if lib(|| cpc_set_sample(cpc, set, sbuf)) != 0 {
            loop_errors += 1;
        }
        if lib(|| cpc_unbind(cpc, set)) != 0 {
            loop_errors += 1;
        }
        malloc_cycles(1);
        PROGRESS.fetch_add(1, SeqCst);
    }
    slot.role.store(0, SeqCst);
    loop_errors
}

fn unbound(i: usize, done: &AtomicBool) -> u64 {
    let slot = &SLOTS[i];
    slot.tid.store(gettid(), SeqCst);
    slot.role.store(UNBOUND, SeqCst);
    let cpc2 = cpc_open(CPC_VER_CURRENT);
    let mut loop_errors = 0;
    let mut round = 0;
    while !done.load(SeqCst) {
        malloc_cycles(4);
        if !library_churn(cpc2, round) {
            loop_errors += 1;
        }
        round += 1;
    }
    loop_errors
}

/// Where the recorded signals landed: (in libc, in libc with the allocator running, in a library
/// call, in a library call and the allocator, page-fault overflows, page-fault overflows in libc
/// inside the allocator, task-clock overflows, the commonest libc symbols).
fn landings() -> String {
    let mut n = [0u64; 8];
    let mut names: std::collections::HashMap<String, u64> = Default::default();
    for t in 0..THREADS {
        let k = SLOTS[t].records.load(SeqCst).min(RECORDS);
        for r in 0..k {
            let pc = PCS[t][r].load(SeqCst);
            let f = FLAGS[t][r].load(SeqCst);
            // SAFETY: dladdr fills a local Dl_info; the strings it points to are the loader's.
            let (in_libc, sym) = unsafe {
                let mut dl: libc::Dl_info = std::mem::zeroed();
                if pc != 0 && libc::dladdr(pc as *const _, &mut dl) != 0 && !dl.dli_fname.is_null()
                {
                    let file = std::ffi::CStr::from_ptr(dl.dli_fname).to_string_lossy();
                    let sym = if dl.dli_sname.is_null() {
                        "?".to_string()
                    } else {
                        std::ffi::CStr::from_ptr(dl.dli_sname)
                            .to_string_lossy()
                            .into_owned()
                    };
                    (file.contains("libc.so"), sym)
                } else {
                    (false, String::new())
                }
            };
            let lib = f & FLAG_LIB != 0;
            let alloc = f & FLAG_ALLOC != 0;
            n[0] += 1;
            n[1] += u64::from(in_libc);
            n[2] += u64::from(in_libc && alloc);
            n[3] += u64::from(lib);
            n[4] += u64::from(lib && alloc);
            n[5] += u64::from(f & FLAG_PF != 0);
            n[6] += u64::from(f & FLAG_PF != 0 && in_libc && alloc);
            n[7] += u64::from(f & FLAG_TC != 0);
            if in_libc {
                *names.entry(sym).or_default() += 1;
            }
        }
    }
    let mut top: Vec<_> = names.into_iter().collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    top.truncate(6);
    let pct = |x: u64| 100.0 * x as f64 / n[0].max(1) as f64;
    format!(
        "{} signals recorded: {:.1}% interrupted libc ({:.1}% inside the allocator), \
         {:.1}% inside a library call ({:.1}% inside the allocator within it); \
         page-fault overflows {} ({:.1}% of them inside malloc), task-clock overflows {}; \
         libc symbols (dladdr) {:?}",
        n[0],
        pct(n[1]),
        pct(n[2]),
        pct(n[3]),
        pct(n[4]),
        n[5],
        100.0 * n[6] as f64 / n[5].max(1) as f64,
        n[7],
        top
    )
}

#[test]
fn a_hundred_thousand_sigemts_inside_malloc_and_the_library() {
    // A deadlock in the signal path would hang: turn it into a failure.
    // A deadlock in the signal path would hang: turn it into a failure when nothing moves (no
    // signal, no loop round) for 30 s. Progress, not time, so that a loaded machine only
    // makes it slower.
    std::thread::spawn(|| {
        let mut last = (u64::MAX, 0);
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            let now = PROGRESS.load(SeqCst) + TOTAL.load(SeqCst);
            last = if now == last.0 {
                (now, last.1 + 1)
            } else {
                (now, 0)
            };
            if last.1 < 30 {
                continue;
            }
            let state: Vec<_> = SLOTS
                .iter()
                .map(|s| (s.sigemt.load(SeqCst), s.engine_signals.load(SeqCst)))
                .collect();
            eprintln!(
                "signal_stress: no signal and no loop round for 30 s: deadlock in the overflow \
                 path? (SIGEMTs and engine signals per thread: {state:?})"
            );
            std::process::exit(101);
        }
    });
    let map = std::env::temp_dir().join(format!(
        "perfcompat-signal-stress-{}.map",
        std::process::id()
    ));
    std::fs::write(
        &map,
        "0 = task-clock\n1 = cpu-clock\n16 = page-faults\n17 = minor-faults\n",
    )
    .unwrap();
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    std::env::set_var("PERFCOMPAT_EVENTS", &map);
    // SAFETY: process settings: no transparent huge pages (a fault per page), and malloc
    // giving memory back at every free of 64 KiB or more and taking it again at each
    // allocation.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        assert_eq!(libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20), 1);
        assert_eq!(libc::mallopt(libc::M_TRIM_THRESHOLD, 0), 1);
        assert_eq!(libc::mallopt(libc::M_TOP_PAD, 0), 1);
    }
    install(63, on_sigemt as *const () as usize);
    // A first notifying binding installs the engine's handler: wrap it.
    {
        let c = cpc_open(CPC_VER_CURRENT);
        let s = cpc_set_create(c);
        let flags = CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT;
        // Preset 0: no overflow for 2^64 faults.
        let r = add(c, s, c"page-faults", 0, flags);
        assert_eq!(r, 0);
        assert_eq!(cpc_bind_curlwp(c, s, 0), 0);
        assert_eq!(cpc_unbind(c, s), 0);
        // SAFETY: a live handle, not used afterwards.
        unsafe { cpc_close(c) };
        let engine_sig = libc::SIGRTMAX() - 2;
        let old = install(engine_sig, on_engine_signal as *const () as usize);
        assert!(
            old.sa_flags & libc::SA_SIGINFO != 0,
            "the engine's handler is installed"
        );
        ENGINE_HANDLER.store(old.sa_sigaction, SeqCst);
    }
    let _ = std::fs::remove_file(&map);
    let done = AtomicBool::new(false);
    let warmed = std::sync::Barrier::new(3);
    let (counted, rebind_errors, unbound_errors) = std::thread::scope(|s| {
        let u = s.spawn(|| {
            SLOT.with(|c| c.set(4));
            unbound(4, &done)
        });
        let r = s.spawn(|| {
            SLOT.with(|c| c.set(3));
            rebinding(3)
        });
        let ms: Vec<_> = (0..3)
            .map(|i| {
                let warmed = &warmed;
                s.spawn(move || {
                    SLOT.with(|c| c.set(i));
                    measured(i, warmed)
                })
            })
            .collect();
        let counted: Vec<Counted> = ms.into_iter().map(|m| m.join().unwrap()).collect();
        let r = r.join().unwrap();
        done.store(true, SeqCst);
        (counted, r, u.join().unwrap())
    });
    let report = landings();
    let sum = |f: fn(&Slot) -> u64| SLOTS.iter().map(f).sum::<u64>();
    let line = format!(
        "signal_stress: {} SIGEMTs ({} page-fault and {} task-clock overflows, {} engine \
         signals, {} after the final count, page-fault overflows seen late per thread {:?}); \
         faults counted by the sets (dropped at freezes among them) / independently: {:?}; \
         {report}\n",
        TOTAL.load(SeqCst),
        sum(|s| s.pf_overflows.load(SeqCst)),
        sum(|s| s.tc_overflows.load(SeqCst)),
        sum(|s| s.engine_signals.load(SeqCst)),
        sum(|s| s.late.load(SeqCst)),
        SLOTS
            .iter()
            .map(|s| s.overshoot.load(SeqCst))
            .collect::<Vec<_>>(),
        counted
            .iter()
            .map(|c| (c.by_set, c.dropped, c.independent))
            .collect::<Vec<_>>(),
    );
    // SAFETY: write(2) of a local buffer (the harness does not capture it: the numbers show).
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    assert!(TOTAL.load(SeqCst) >= TARGET);
    assert_eq!(
        STRAY.load(SeqCst),
        0,
        "signals on threads without a binding"
    );
    let u = &SLOTS[4];
    assert_eq!(u.sigemt.load(SeqCst), 0, "SIGEMTs on the unbound thread");
    assert_eq!(
        u.engine_signals.load(SeqCst),
        0,
        "engine signals on the unbound thread"
    );
    for (i, slot) in SLOTS.iter().enumerate().take(4) {
        let first = slot.first_error.load(SeqCst);
        assert_eq!(
            slot.errors.load(SeqCst),
            0,
            "handler errors on thread {i}: the first at step {} (1 si_code, 2 thread, 3 sample, \
             4 buffer, 5 preset, 6 restart), si_code or errno {}, role {}",
            first >> 56,
            ((first << 8) as i64) >> 8,
            slot.role.load(SeqCst)
        );
        assert_eq!(
            slot.allocs.load(SeqCst),
            0,
            "allocations in the handler on thread {i}"
        );
        assert_eq!(
            slot.spurious.load(SeqCst),
            0,
            "SIGEMTs with nothing overflowed on thread {i}"
        );
        assert_eq!(
            slot.overshoot.load(SeqCst),
            0,
            "page-fault overflows seen past the first fault (an overflow missed) on thread {i}"
        );
        assert!(
            slot.pf_overflows.load(SeqCst) > 0,
            "no page-fault overflow on thread {i}"
        );
    }
    for (i, c) in counted.iter().enumerate() {
        assert!(
            SLOTS[i].tc_overflows.load(SeqCst) > 0,
            "no task-clock overflow on thread {i}"
        );
        assert_eq!(
            c.by_set, c.independent,
            "thread {i}: faults counted through SIGEMTs and the set vs counted independently"
        );
        assert_eq!(c.loop_errors, 0, "library calls failing on thread {i}");
    }
    assert_eq!(
        rebind_errors, 0,
        "bind/sample/unbind failing on the rebinding thread"
    );
    assert_eq!(
        unbound_errors, 0,
        "library calls failing on the unbound thread"
    );
}

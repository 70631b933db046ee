//! Concurrency on the perf backend (software events, user mode), through the libcpc and
//! libperfex C entry points of the rlib: 64 threads each binding, sampling and unbinding their
//! own sets at once; cross-thread calls; hundreds of threads created and exiting under an
//! inheriting bind, with and without an overflow-notifying request; `start_counters` /
//! `read_counters` / `print_counters` from 64 threads at once. Page-fault counts are checked
//! exactly against the pages each thread touches. `.ci/tsan` runs this file (and
//! `concurrency_sim.rs`) under ThreadSanitizer.
//!
//! Tests here share the process's file descriptors, its SIGEMT handler and its inheritance
//! state, so they run one at a time ([`serial`]); each checks that it left no descriptor open.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_longlong, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use perfcompat_capi::cpc::*;
use perfcompat_capi::perfex::{print_counters, read_counters, start_counters};

/// Threads of the 64-thread tests.
const THREADS: usize = 64;

#[path = "../../tests/common/mod.rs"]
mod common;
use common::Pages;

/// Touch pages `from..from + n` of `p` once each: `n` page faults.
fn touch(p: &Pages, from: usize, n: usize) {
    for i in from..from + n {
        p.touch(i);
    }
}

/// A barrier of atomics (std's Barrier waits on a Mutex and Condvar inside the uninstrumented
/// standard library, so ThreadSanitizer would not see the ordering it gives).
struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl Barrier {
    fn new(n: usize) -> Barrier {
        Barrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let g = self.generation.load(Ordering::SeqCst);
        if self.arrived.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            self.arrived.store(0, Ordering::SeqCst);
            self.generation.fetch_add(1, Ordering::SeqCst);
        } else {
            while self.generation.load(Ordering::SeqCst) == g {
                std::thread::yield_now();
            }
        }
    }
}

/// Check that `faults` page faults were counted for touching `pages` fresh pages: exactly,
/// except under ThreadSanitizer, whose shadow memory faults too (a few more per page).
#[track_caller]
fn assert_faults(faults: u64, pages: u64, what: &str) {
    if cfg!(perfcompat_tsan) {
        assert!(
            faults >= pages && faults <= pages * 8,
            "{what}: {faults} faults for {pages} pages"
        );
    } else {
        assert_eq!(faults, pages, "{what}: page faults for {pages} pages");
    }
}

/// One test at a time (see the module documentation); the first also chooses the backend and
/// maps R10000 events 0 and 25 to task-clock and page-faults for libperfex.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    static ENV: Once = Once::new();
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    ENV.call_once(|| {
        let map =
            std::env::temp_dir().join(format!("perfcompat-concurrency-{}.map", std::process::id()));
        std::fs::write(&map, "0 = task-clock\n25 = page-faults\n").unwrap();
        std::env::set_var("PERFCOMPAT_BACKEND", "perf");
        std::env::set_var("PERFCOMPAT_EVENTS", &map);
        // Read once, at the first use (here, on a thread of its own): the file can go.
        std::thread::spawn(|| assert!(start_counters(0, 25) > 0, "libperfex on perf"))
            .join()
            .unwrap();
        std::fs::remove_file(&map).unwrap();
    });
    // A hang is a failure, not a stuck CI job; a worker's panic ends the test at once.
    common::fail_fast("concurrency", 600);
    g
}

/// Open perf event descriptors of this process (only those: under ThreadSanitizer the
/// sanitizer opens pipes of its own to its symbolizer).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("perf_event"))
        .count()
}

fn errno() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Error-handler calls (errors with a subcode); none is expected in these tests.
static HANDLER_CALLS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_errors(_f: *const c_char, _sub: c_int, _fmt: *const c_char, _ap: *mut c_void) {
    HANDLER_CALLS.fetch_add(1, Ordering::SeqCst);
}

/// A `cpc_t` whose errors with a subcode are counted instead of printed.
fn open() -> *mut cpc_t {
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null(), "cpc_open: errno {}", errno());
    // SAFETY: a function of the handler's type (va_list is a pointer on x86_64 and aarch64).
    assert_eq!(
        unsafe { cpc_seterrhndlr(cpc, count_errors as *const () as *mut cpc_errhndlr_t) },
        0
    );
    cpc
}

/// A set of `events` (user mode, `flags` added) of `cpc`.
fn set_of(cpc: *mut cpc_t, events: &[&std::ffi::CStr], preset: u64, flags: u32) -> *mut cpc_set_t {
    let set = cpc_set_create(cpc);
    assert!(!set.is_null());
    for (i, e) in events.iter().enumerate() {
        // SAFETY: a valid name, no attributes.
        let r = unsafe {
            cpc_set_add_request(
                cpc,
                set,
                e.as_ptr(),
                preset,
                CPC_COUNT_USER | flags,
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(r, i as c_int, "add {e:?}: errno {}", errno());
    }
    set
}

/// Value `i` of `buf`.
fn get(cpc: *mut cpc_t, buf: *mut cpc_buf_t, i: c_int) -> u64 {
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cpc_buf_get(cpc, buf, i, &mut v) }, 0);
    v
}

/// What the 64-thread test counted.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    samples: AtomicU64,
    refused: AtomicU64,
}

/// 64 threads, each with its own `cpc_t`, sets and buffers, start together and for many rounds
/// bind a set of task-clock and page-faults, sample it while touching fresh pages (values never
/// go backwards; each sample's page-fault count is exactly the pages touched since the last),
/// unbind it (then sampling it is `EINVAL`), and every few rounds destroy and recreate the set
/// and its buffers. Between rounds each thread also makes the cross-thread calls the library
/// refuses: sampling, unbinding and binding a neighbour's set through its own `cpc_t` (a set
/// of another `cpc_t`: `EINVAL`), and `cpc_set_restart` / `cpc_request_preset` with no set
/// bound on the calling thread (`EINVAL`) and `cpc_enable` (0, nothing done), while the
/// neighbour has its set bound.
/// At the end every handle is closed and no descriptor is left open.
#[test]
fn sixty_four_threads_bind_sample_and_unbind_their_own_sets_at_once() {
    let _s = serial();
    const ROUNDS: usize = 40;
    const SAMPLES: usize = 5;
    const PAGES: usize = 4;
    let fds = open_fds();
    let handler_calls = HANDLER_CALLS.load(Ordering::SeqCst);
    // Each thread's cpc_t and current set, published for its neighbour's misuse.
    let cpcs: Arc<Vec<AtomicPtr<cpc_t>>> =
        Arc::new((0..THREADS).map(|_| AtomicPtr::new(null_mut())).collect());
    let sets: Arc<Vec<AtomicPtr<cpc_set_t>>> =
        Arc::new((0..THREADS).map(|_| AtomicPtr::new(null_mut())).collect());
    let ready = Arc::new(Barrier::new(THREADS));
    let tally = Arc::new(Tally::default());
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (cpcs, sets, ready, tally) =
                (cpcs.clone(), sets.clone(), ready.clone(), tally.clone());
            std::thread::spawn(move || {
                let cpc = open();
                cpcs[t].store(cpc, Ordering::SeqCst);
                let pages = Pages::new((ROUNDS * SAMPLES + 1) * PAGES);
                let mut touched = 0;
                let mut set: *mut cpc_set_t = null_mut();
                let mut buf: *mut cpc_buf_t = null_mut();
                let mut calls = 0u64;
                ready.wait();
                for round in 0..ROUNDS {
                    if round % 8 == 0 {
                        // libcpc: a set is not destroyed while another thread uses it (the
                        // neighbour's misuse below): everyone is past it before any set goes.
                        ready.wait();
                        if !set.is_null() {
                            // SAFETY: our own live handles.
                            unsafe {
                                assert_eq!(cpc_buf_destroy(cpc, buf), 0);
                                assert_eq!(cpc_set_destroy(cpc, set), 0);
                            }
                            calls += 2;
                        }
                        set = set_of(cpc, &[c"task-clock", c"page-faults"], 0, 0);
                        buf = cpc_buf_create(cpc, set);
                        assert!(!buf.is_null());
                        calls += 4;
                        sets[t].store(set, Ordering::SeqCst);
                        ready.wait();
                    }
                    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0, "bind: errno {}", errno());
                    calls += 1;
                    // The counts start inside the bind, and what the bind does after that can
                    // fault once (a malloc arena's fresh page, shared by 64 threads: which
                    // thread touches it first depends on timing; 5 faults for 4 pages under
                    // load). The pages touched are counted from a first sample on.
                    assert_eq!(cpc_set_sample(cpc, set, buf), 0, "errno {}", errno());
                    let mut last = [get(cpc, buf, 0), get(cpc, buf, 1)];
                    calls += 3;
                    if round == 0 {
                        // The loop below once, its faults counted loosely: the first call of a
                        // function can fault once in its code page (where the build put it;
                        // a debug build puts `touch` and `assert_faults` on pages of their
                        // own), and the exact count would take that for a page touched.
                        touch(&pages, touched, PAGES);
                        touched += PAGES;
                        assert_eq!(cpc_set_sample(cpc, set, buf), 0, "errno {}", errno());
                        let v = [get(cpc, buf, 0), get(cpc, buf, 1)];
                        // At least the pages touched; at most what ThreadSanitizer's shadow
                        // memory adds (see `assert_faults`).
                        let faults = v[1] - last[1];
                        assert!(
                            (PAGES as u64..=PAGES as u64 * 8).contains(&faults),
                            "rehearsal: {faults} faults for {PAGES} pages"
                        );
                        assert_faults(PAGES as u64, PAGES as u64, "rehearsal");
                        last = v;
                        calls += 3;
                    }
                    for _ in 0..SAMPLES {
                        touch(&pages, touched, PAGES);
                        touched += PAGES;
                        assert_eq!(cpc_set_sample(cpc, set, buf), 0, "errno {}", errno());
                        let v = [get(cpc, buf, 0), get(cpc, buf, 1)];
                        assert!(v[0] >= last[0], "task-clock went back: {last:?} {v:?}");
                        assert_faults(v[1] - last[1], PAGES as u64, "sample");
                        last = v;
                        calls += 3;
                    }
                    tally.samples.fetch_add(SAMPLES as u64, Ordering::Relaxed);
                    // The neighbour's set, through our cpc_t: a set of another cpc_t.
                    let n = (t + 1) % THREADS;
                    let theirs = sets[n].load(Ordering::SeqCst);
                    if !theirs.is_null() {
                        assert_eq!(cpc_set_sample(cpc, theirs, buf), -1);
                        assert_eq!(errno(), libc::EINVAL);
                        assert_eq!(cpc_unbind(cpc, theirs), -1);
                        assert_eq!(errno(), libc::EINVAL);
                        assert_eq!(cpc_bind_curlwp(cpc, theirs, 0), -1);
                        assert_eq!(errno(), libc::EINVAL);
                        calls += 3;
                        tally.refused.fetch_add(3, Ordering::Relaxed);
                    }
                    assert_eq!(cpc_unbind(cpc, set), 0);
                    assert_eq!(cpc_set_sample(cpc, set, buf), -1, "sampled unbound");
                    assert_eq!(errno(), libc::EINVAL);
                    // Nothing bound on this thread now, whatever the others hold.
                    assert_eq!(cpc_set_restart(cpc, set), -1);
                    assert_eq!(errno(), libc::EINVAL);
                    assert_eq!(cpc_request_preset(cpc, 0, 1), -1);
                    assert_eq!(errno(), libc::EINVAL);
                    // cpc_enable without a set here does nothing, the neighbour's untouched.
                    assert_eq!(cpc_enable(cpc), 0);
                    assert_eq!(cpc_unbind(cpc, set), -1, "unbound twice");
                    assert_eq!(errno(), libc::EINVAL);
                    calls += 6;
                    tally.refused.fetch_add(4, Ordering::Relaxed);
                }
                sets[t].store(null_mut(), Ordering::SeqCst);
                // Everyone is done with the others' handles before any is closed.
                ready.wait();
                cpcs[t].store(null_mut(), Ordering::SeqCst);
                // SAFETY: no other thread uses it any more.
                assert_eq!(unsafe { cpc_close(cpc) }, 0);
                calls += 1;
                tally.calls.fetch_add(calls, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        HANDLER_CALLS.load(Ordering::SeqCst),
        handler_calls,
        "no subcode errors"
    );
    assert_eq!(open_fds(), fds, "descriptors left open");
    eprintln!(
        "concurrency: {THREADS} threads x {ROUNDS} rounds: {} calls, {} samples, {} refusals",
        tally.calls.load(Ordering::Relaxed),
        tally.samples.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed)
    );
}

/// Sets of one shared `cpc_t`, each bound by its own thread, sampled by other threads while
/// their binders unbind and rebind them: a sample through the set's own `cpc_t` reads the
/// binder's counters (0, values never behind an earlier read of the same binding) or finds the
/// set unbound (`EINVAL`); it never crashes or reads freed state.
#[test]
fn sets_sampled_from_other_threads_while_their_binders_unbind_them() {
    let _s = serial();
    const BINDERS: usize = 16;
    const READERS: usize = 16;
    const ROUNDS: usize = 200;
    let fds = open_fds();
    let cpc = open();
    let cpc_addr = cpc as usize;
    let sets: Arc<Vec<usize>> = Arc::new(
        (0..BINDERS)
            .map(|_| set_of(cpc, &[c"page-faults"], 0, 0) as usize)
            .collect(),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let (ok, unbound) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut threads = Vec::new();
    for b in 0..BINDERS {
        let (sets, done) = (sets.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let (cpc, set) = (cpc_addr as *mut cpc_t, sets[b] as *mut cpc_set_t);
            let pages = Pages::new(ROUNDS);
            for r in 0..ROUNDS {
                assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
                pages.touch(r);
                assert_eq!(cpc_unbind(cpc, set), 0);
            }
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    for r in 0..READERS {
        let (sets, done, ok, unbound) = (sets.clone(), done.clone(), ok.clone(), unbound.clone());
        threads.push(std::thread::spawn(move || {
            let cpc = cpc_addr as *mut cpc_t;
            let bufs: Vec<*mut cpc_buf_t> = sets
                .iter()
                .map(|&s| cpc_buf_create(cpc, s as *mut cpc_set_t))
                .collect();
            let mut i = r;
            while done.load(Ordering::SeqCst) < BINDERS {
                let k = i % BINDERS;
                match cpc_set_sample(cpc, sets[k] as *mut cpc_set_t, bufs[k]) {
                    0 => {
                        // One binder round touches one page; its counts are its own.
                        assert!(get(cpc, bufs[k], 0) <= ROUNDS as u64 * 64);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        assert_eq!(errno(), libc::EINVAL);
                        unbound.fetch_add(1, Ordering::Relaxed);
                    }
                }
                i += 1;
            }
            for b in bufs {
                // SAFETY: ours, not used by anyone else.
                assert_eq!(unsafe { cpc_buf_destroy(cpc, b) }, 0);
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    // SAFETY: no thread uses it any more.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
    assert_eq!(open_fds(), fds, "descriptors left open");
    eprintln!(
        "concurrency: {READERS} readers of {BINDERS} binders' sets: {} samples, {} unbound",
        ok.load(Ordering::Relaxed),
        unbound.load(Ordering::Relaxed)
    );
}

/// Live threads at once under the inheriting binds.
const WAVE: usize = 32;
/// Waves of threads.
const WAVES: usize = 12;
/// Pages each inheriting thread touches.
const CHILD_PAGES: usize = 16;

/// Run `WAVES` waves of `WAVE` short threads, each touching `CHILD_PAGES` fresh pages and
/// running `body` first; while a wave runs and exits, `sample` is called in a loop. Before the
/// last wave, `before_last` runs (it may unbind). Returns the pages touched.
fn waves(
    body: impl Fn() + Send + Sync + 'static,
    mut sample: impl FnMut(),
    before_last: impl FnOnce(),
) -> u64 {
    let body = Arc::new(body);
    let mut before_last = Some(before_last);
    let mut pages = 0;
    for w in 0..WAVES {
        if w == WAVES - 1 {
            (before_last.take().unwrap())();
        }
        let finished = Arc::new(AtomicUsize::new(0));
        let wave: Vec<_> = (0..WAVE)
            .map(|_| {
                let (body, finished) = (body.clone(), finished.clone());
                std::thread::spawn(move || {
                    // Counted even if the thread panics, so that the sampling loop ends.
                    struct Finished(Arc<AtomicUsize>);
                    impl Drop for Finished {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    let _finished = Finished(finished);
                    body();
                    touch(&Pages::new(CHILD_PAGES), 0, CHILD_PAGES);
                })
            })
            .collect();
        // Sample while the wave works and exits.
        while finished.load(Ordering::SeqCst) < WAVE {
            sample();
        }
        sample();
        for t in wave {
            t.join().unwrap();
        }
        pages += (WAVE * CHILD_PAGES) as u64;
    }
    pages
}

/// `CPC_BIND_LWP_INHERIT` without a notifying request: 384 threads created in waves of 32,
/// each touching 16 fresh pages, while the binder samples (its count never goes back). After
/// the threads exit, the binder's page-fault count includes every page they touched (and a
/// little of their own start-up), as documented; then it unbinds; no descriptor is left open.
#[test]
fn threads_created_and_exiting_under_an_inheriting_bind_are_counted_by_the_binder() {
    let _s = serial();
    let fds = open_fds();
    let cpc = open();
    let set = set_of(cpc, &[c"page-faults"], 0, 0);
    let buf = cpc_buf_create(cpc, set);
    assert_eq!(cpc_bind_curlwp(cpc, set, CPC_BIND_LWP_INHERIT), 0);
    assert_eq!(cpc_set_sample(cpc, set, buf), 0);
    let start = get(cpc, buf, 0);
    let mut last = start;
    let mut samples = 0u64;
    let pages = waves(
        || {},
        || {
            assert_eq!(cpc_set_sample(cpc, set, buf), 0);
            let v = get(cpc, buf, 0);
            assert!(v >= last, "inherited count went back: {last} then {v}");
            last = v;
            samples += 1;
        },
        || {},
    );
    assert_eq!(cpc_set_sample(cpc, set, buf), 0);
    let counted = get(cpc, buf, 0) - start;
    let threads = (WAVES * WAVE) as u64;
    assert!(
        counted >= pages
            && counted <= pages * if cfg!(perfcompat_tsan) { 8 } else { 1 } + threads * 64,
        "the binder counted {counted} faults for {pages} pages touched by {threads} threads"
    );
    assert_eq!(cpc_unbind(cpc, set), 0);
    // SAFETY: no other thread uses it.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
    assert_eq!(open_fds(), fds, "descriptors left open");
    eprintln!(
        "concurrency: inherit: {threads} threads, {pages} pages, {counted} faults counted, \
         {samples} samples while they ran"
    );
}

static EMT_CPC: AtomicPtr<cpc_t> = AtomicPtr::new(null_mut());
static EMT_SET: AtomicPtr<cpc_set_t> = AtomicPtr::new(null_mut());
/// Buffers for the SIGEMT handlers of new threads, claimed in turn (a handler allocates none).
static EMT_BUFS: [AtomicPtr<cpc_buf_t>; WAVES * WAVE] =
    [const { AtomicPtr::new(null_mut()) }; WAVES * WAVE];
static EMT_NEXT: AtomicUsize = AtomicUsize::new(0);
static EMT_SIGNALS: AtomicUsize = AtomicUsize::new(0);
static EMT_ERRORS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread got its inherited copy's SIGEMT.
    static GOT_EMT: Cell<bool> = const { Cell::new(false) };
}

/// A new thread's first SIGEMT: its copy reads `UINT64_MAX`; preset it to 0 and restart.
extern "C" fn on_sigemt(_sig: c_int, info: *mut libc::siginfo_t, _uc: *mut c_void) {
    let (cpc, set) = (
        EMT_CPC.load(Ordering::SeqCst),
        EMT_SET.load(Ordering::SeqCst),
    );
    let i = EMT_NEXT.fetch_add(1, Ordering::SeqCst);
    let buf = EMT_BUFS
        .get(i)
        .map_or(null_mut(), |b| b.load(Ordering::SeqCst));
    let mut v = 0u64;
    // SAFETY: the kernel passes a siginfo; the handles are live while threads are created.
    let ok = unsafe { (*info).si_code } == EMT_CPCOVF
        && cpc_set_sample(cpc, set, buf) == 0
        // SAFETY: a valid out-pointer.
        && unsafe { cpc_buf_get(cpc, buf, 0, &mut v) } == 0
        && v == u64::MAX
        && cpc_request_preset(cpc, 0, 0) == 0
        && cpc_set_restart(cpc, set) == 0;
    if !ok {
        EMT_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    GOT_EMT.with(|g| g.set(true));
    EMT_SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// `CPC_BIND_LWP_INHERIT` with a `CPC_OVF_NOTIFY_EMT` request: 384 threads in waves of 32 each
/// get their own copy and a SIGEMT before their start routine (where the copy reads
/// `UINT64_MAX`, and is preset to 0 and restarted), then count exactly their own pages in it;
/// the binder samples meanwhile and counts only itself. Before the last wave the binder
/// unbinds: that wave's threads inherit nothing (no SIGEMT, their sample is `EINVAL`). The
/// copies are closed as their threads exit: no descriptor is left open.
#[test]
fn threads_under_an_inheriting_notifying_bind_get_their_own_copies_and_close_them() {
    let _s = serial();
    let fds = open_fds();
    common::on_signal(63, on_sigemt);
    let cpc = open();
    let set = set_of(cpc, &[c"page-faults"], 0, CPC_OVF_NOTIFY_EMT);
    for b in &EMT_BUFS {
        b.store(cpc_buf_create(cpc, set), Ordering::SeqCst);
    }
    EMT_CPC.store(cpc, Ordering::SeqCst);
    EMT_SET.store(set, Ordering::SeqCst);
    let buf = cpc_buf_create(cpc, set);
    assert_eq!(cpc_bind_curlwp(cpc, set, CPC_BIND_LWP_INHERIT), 0);
    assert_eq!(cpc_set_sample(cpc, set, buf), 0);
    let start = get(cpc, buf, 0);
    let (cpc_a, set_a) = (cpc as usize, set as usize);
    let copies = Arc::new(AtomicUsize::new(0));
    let copies2 = copies.clone();
    let mut last = start;
    let bound = Cell::new(true);
    let pages = waves(
        move || {
            let (cpc, set) = (cpc_a as *mut cpc_t, set_a as *mut cpc_set_t);
            let buf = cpc_buf_create(cpc, set);
            assert!(!buf.is_null());
            let got = GOT_EMT.with(Cell::get);
            if cpc_set_sample(cpc, set, buf) == 0 {
                // A copy: the SIGEMT came first (under ThreadSanitizer, which defers signals
                // to its next interceptor, before cpc_buf_create returned).
                assert!(got, "a copy without its SIGEMT");
                let before = get(cpc, buf, 0);
                let p = Pages::new(CHILD_PAGES);
                touch(&p, 0, CHILD_PAGES);
                assert_eq!(cpc_set_sample(cpc, set, buf), 0);
                assert_faults(get(cpc, buf, 0) - before, CHILD_PAGES as u64, "the copy");
                drop(p);
                copies2.fetch_add(1, Ordering::SeqCst);
            } else {
                assert_eq!(errno(), libc::EINVAL, "no copy after the binder unbound");
                assert!(!got, "a SIGEMT without a copy");
            }
            // SAFETY: ours.
            assert_eq!(unsafe { cpc_buf_destroy(cpc, buf) }, 0);
        },
        || {
            if bound.get() {
                assert_eq!(cpc_set_sample(cpc, set, buf), 0);
                let v = get(cpc, buf, 0);
                assert!(v >= last, "the binder's count went back: {last} then {v}");
                last = v;
            }
        },
        || {
            assert_eq!(cpc_unbind(cpc, set), 0);
            bound.set(false);
        },
    );
    let threads = (WAVES * WAVE) as u64;
    let with_copy = ((WAVES - 1) * WAVE) as u64;
    assert_eq!(
        EMT_ERRORS.load(Ordering::SeqCst),
        0,
        "a SIGEMT handler failed"
    );
    assert_eq!(EMT_SIGNALS.load(Ordering::SeqCst) as u64, with_copy);
    assert_eq!(copies.load(Ordering::SeqCst) as u64, with_copy);
    assert!(
        last - start < with_copy * CHILD_PAGES as u64 / 2,
        "the binder counted its children: {} faults",
        last - start
    );
    EMT_CPC.store(null_mut(), Ordering::SeqCst);
    EMT_SET.store(null_mut(), Ordering::SeqCst);
    // SAFETY: no other thread uses it.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
    assert_eq!(open_fds(), fds, "descriptors left open");
    eprintln!(
        "concurrency: inherit-emt: {threads} threads, {with_copy} copies and SIGEMTs, {pages} \
         pages"
    );
}

/// libperfex from 64 threads at once: counting state is per thread. Each thread, started on a
/// barrier, runs 30 `start_counters(0, 25)` / `read_counters` pairs (event 25 is page-faults
/// here, event 0 task-clock) around touching 4 fresh pages: the page-fault count is exactly 4
/// and the generation is the start's. A thread that never started reads `EINVAL` even while
/// the others have started, and a few `print_counters` calls run beside the others.
#[test]
fn start_and_read_counters_from_sixty_four_threads_at_once() {
    let _s = serial();
    const PAIRS: usize = 30;
    const PAGES: usize = 4;
    let fds = open_fds();
    let ready = Arc::new(Barrier::new(THREADS));
    let calls = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ready, calls) = (ready.clone(), calls.clone());
            std::thread::spawn(move || {
                let (mut c0, mut c1): (c_longlong, c_longlong) = (-1, -1);
                ready.wait();
                // SAFETY: valid out-pointers.
                assert_eq!(unsafe { read_counters(0, &mut c0, 25, &mut c1) }, -1);
                assert_eq!(errno(), libc::EINVAL, "not started on this thread");
                assert_eq!((c0, c1), (-1, -1), "nothing written");
                let pages = Pages::new(PAIRS * PAGES);
                let mut generation = 0;
                for i in 0..PAIRS {
                    let g = start_counters(0, 25);
                    assert!(g > 0, "start_counters: errno {}", errno());
                    touch(&pages, i * PAGES, PAGES);
                    // SAFETY: valid out-pointers.
                    let r = unsafe { read_counters(0, &mut c0, 25, &mut c1) };
                    assert_eq!(r, g, "generation");
                    assert_faults(c1 as u64, PAGES as u64, "read_counters");
                    assert!(c0 >= 0);
                    generation = r;
                }
                if t % 16 == 0 {
                    // The calling thread's generation: its last read's, not another thread's.
                    assert_eq!(print_counters(0, c0, 25, c1), generation);
                }
                calls.fetch_add(2 + 2 * PAIRS as u64, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Each thread's counters were closed at its exit.
    assert_eq!(open_fds(), fds, "descriptors left open");
    eprintln!(
        "concurrency: libperfex: {THREADS} threads, {} calls",
        calls.load(Ordering::Relaxed)
    );
}

//! Multiplexed counts are flagged, never silently scaled (issue 7, item 6). No backend here can
//! multiplex (software perf events never are, and there is no PMU), so a backend written for
//! this test reports whatever enabled/running times the test sets, as the kernel does for a
//! group it time-shared: the engine must say the interval was incomplete, change the
//! generation (what libperfex's `read_counters` and libcpc's `cpc_buf_generation` expose), and
//! return the raw counts unscaled.

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use perfcompat::backend::{
    Backend, BackendInfo, BackendKind, CounterInfo, EventInfo, Group, Times,
};
use perfcompat::base::sched::{Candidate, Slot};
use perfcompat::base::set::{CounterSet, Request, Target};
use perfcompat::base::sigsafe::{set_window_hook, WindowPoint};
use perfcompat::engine::bind_with;
use perfcompat::{Binding, Result};

/// The tests of this file take turns: they share the backend's count and times.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Take this test's turn, with the count and times at 0, and bind one request on the
/// time-shared backend.
fn turn() -> (std::sync::MutexGuard<'static, ()>, Binding) {
    let one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for x in [&COUNT, &ENABLED, &RUNNING] {
        x.store(0, Ordering::SeqCst);
    }
    let set = CounterSet::new()
        .with(Request::new("instructions"))
        .unwrap();
    (
        one,
        bind_with(backend(), &set, Target::CurrentThread).unwrap(),
    )
}

/// The count and times the group reports, set by the test.
static COUNT: AtomicU64 = AtomicU64::new(0);
static ENABLED: AtomicU64 = AtomicU64::new(0);
static RUNNING: AtomicU64 = AtomicU64::new(0);

struct TimeShared {
    info: BackendInfo,
}

struct SharedGroup;

impl Group for SharedGroup {
    fn read(&self, out: &mut [u64]) -> std::result::Result<Times, i32> {
        out[0] = COUNT.load(Ordering::SeqCst);
        Ok(Times {
            enabled: ENABLED.load(Ordering::SeqCst),
            running: RUNNING.load(Ordering::SeqCst),
        })
    }
    fn stop(&self) {}
    fn start(&self) {}
    fn arm(&self, _index: usize, _distance: Option<u64>) {}
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for TimeShared {
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn events(&self) -> Vec<EventInfo> {
        Vec::new()
    }
    fn candidate(&self, request: &Request) -> Result<Candidate> {
        Ok(Candidate {
            name: request.event.clone(),
            slots: vec![Slot {
                counter: 0,
                resource: None,
                tag: 0,
            }],
        })
    }
    fn open(&self, _: &[Request], _: &[Slot], _: Target) -> Result<Box<dyn Group>> {
        Ok(Box::new(SharedGroup))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn backend() -> &'static TimeShared {
    Box::leak(Box::new(TimeShared {
        info: BackendInfo {
            kind: BackendKind::Other("time-shared"),
            description: "a backend whose counters the kernel time-shares".into(),
            reference: String::new(),
            counters: vec![CounterInfo { width: 64 }],
            overflow_interrupt: false,
            overflow_precise: false,
            attributes: Vec::new(),
            notes: Vec::new(),
        },
    }))
}

#[test]
fn a_multiplexed_interval_is_flagged_and_changes_the_generation_unscaled() {
    let (_one, b) = turn();
    let g0 = b.generation();
    let mut v = [0u64];

    // Counted the whole time: complete, same generation.
    COUNT.store(1000, Ordering::SeqCst);
    ENABLED.store(5000, Ordering::SeqCst);
    RUNNING.store(5000, Ordering::SeqCst);
    let s = b.sample(&mut v).unwrap();
    assert_eq!((s.complete, s.generation, v[0]), (true, g0, 1000), "{s:?}");

    // The kernel then ran the counter only part of the time: incomplete, a new generation,
    // the times reported, and the count as counted (not scaled up to 2000).
    COUNT.store(1500, Ordering::SeqCst);
    ENABLED.store(10_000, Ordering::SeqCst);
    RUNNING.store(7_500, Ordering::SeqCst);
    let s = b.sample(&mut v).unwrap();
    assert!(!s.complete, "{s:?}");
    assert_ne!(
        s.generation, g0,
        "a multiplexed interval must change the generation"
    );
    assert_eq!(v[0], 1500, "counts are never scaled silently");
    assert!(s.running_ns < s.enabled_ns, "{s:?}");

    // After a restart the interval starts again: whole again, and the generation holds.
    b.restart().unwrap();
    let g1 = b.generation();
    COUNT.store(1600, Ordering::SeqCst);
    ENABLED.store(11_000, Ordering::SeqCst);
    RUNNING.store(8_500, Ordering::SeqCst);
    let s = b.sample(&mut v).unwrap();
    assert_eq!((s.complete, s.generation, v[0]), (true, g1, 100), "{s:?}");
}

thread_local! {
    /// The binding the window hook restarts, on the thread that armed it (0: none).
    static RESTART_AT_MARK: Cell<usize> = const { Cell::new(0) };
}

/// The window hook: when a sample of the armed thread is about to mark its set incomplete,
/// restart the set there, once (as a signal handler that interrupted the sample could).
fn restart_at_mark(at: WindowPoint) {
    if at != WindowPoint::BeforeIncompleteMark {
        return;
    }
    let p = RESTART_AT_MARK.with(|r| r.replace(0));
    if p != 0 {
        // SAFETY: armed by the test below with its live binding, on this thread.
        let b = unsafe { &*(p as *const Binding) };
        b.restart().unwrap();
        RESTARTS.fetch_add(1, Ordering::SeqCst);
    }
}

static RESTARTS: AtomicUsize = AtomicUsize::new(0);

/// A sample that saw its interval incomplete marks that interval, not the one a restart began
/// between the sample's read and its mark: the next sample of the new, whole interval is
/// complete, under the restart's generation. (Before the generation and the flag were one
/// word, the late mark landed on the new interval: incomplete, and a generation no start
/// returned.)
#[test]
fn an_incomplete_mark_does_not_reach_the_interval_a_restart_began() {
    let (_one, b) = turn();
    let mut v = [0u64];
    // The interval so far ran the counter only part of the time.
    COUNT.store(100, Ordering::SeqCst);
    ENABLED.store(2_000, Ordering::SeqCst);
    RUNNING.store(1_000, Ordering::SeqCst);
    set_window_hook(Some(restart_at_mark));
    RESTART_AT_MARK.with(|r| r.set(&b as *const Binding as usize));
    let s = b.sample(&mut v).unwrap();
    set_window_hook(None);
    assert_eq!(
        RESTARTS.load(Ordering::SeqCst),
        1,
        "the hook restarted the set"
    );
    assert!(
        !s.complete,
        "the sample's own interval was incomplete: {s:?}"
    );
    let g = b.generation();
    assert_ne!(s.generation, 0);
    // The new interval runs the counter the whole time.
    COUNT.store(150, Ordering::SeqCst);
    ENABLED.store(3_000, Ordering::SeqCst);
    RUNNING.store(2_000, Ordering::SeqCst);
    let s = b.sample(&mut v).unwrap();
    assert_eq!(
        (s.complete, s.generation, v[0]),
        (true, g, 50),
        "the restart's interval is whole and keeps its generation: {s:?}"
    );
}

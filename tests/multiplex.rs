//! Multiplexed counts are flagged, never silently scaled (issue 7, item 6). No backend here can
//! multiplex (software perf events never are, and there is no PMU), so a backend written for
//! this test reports whatever enabled/running times the test sets, as the kernel does for a
//! group it time-shared: the engine must say the interval was incomplete, change the
//! generation (what libperfex's `read_counters` and libcpc's `cpc_buf_generation` expose), and
//! return the raw counts unscaled.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};

use perfcompat::backend::{
    Backend, BackendInfo, BackendKind, CounterInfo, EventInfo, Group, Times,
};
use perfcompat::engine::bind_with;
use perfcompat::sched::{Candidate, Slot};
use perfcompat::set::{CounterSet, Request, Target};
use perfcompat::Result;

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
    let be = backend();
    let set = CounterSet::new()
        .with(Request::new("instructions"))
        .unwrap();
    let b = bind_with(be, &set, Target::CurrentThread).unwrap();
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

//! The perf backend's environment switches: `PERFCOMPAT_CYCLES_FALLBACK=0` refuses the CPU-time
//! estimate of `cycles` on a host without a PMU, and `PERFCOMPAT_OVERFLOW_SIGNAL` moves the
//! overflow signal. (Its own test binary: both are read once per process.)

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::Backend;
use perfcompat::{bind_with, CounterSet, Error, Request, Target};

mod common;
use common::{sample, skip, Pages};

#[test]
fn environment_switches() {
    std::env::set_var("PERFCOMPAT_CYCLES_FALLBACK", "0");
    std::env::set_var("PERFCOMPAT_OVERFLOW_SIGNAL", "40");
    let perf: &'static PerfBackend = Box::leak(Box::new(PerfBackend::new().unwrap()));
    let cycles = CounterSet::new().with(Request::new("cycles")).unwrap();
    if perf.caps().pmu {
        skip("PERFCOMPAT_CYCLES_FALLBACK: this host has a PMU, cycles are real");
    } else {
        let e = bind_with(perf, &cycles, Target::CurrentThread).unwrap_err();
        assert!(matches!(e, Error::EventUnavailable { .. }), "{e}");
        assert!(!perf.info().notes.iter().any(|n| n.contains("estimated")));
    }

    assert_eq!(perfcompat::base::signal::overflow_signal(), 40);
    let set = CounterSet::new()
        .with(Request::new("page-faults").preset(u64::MAX - 9).notify())
        .unwrap();
    let pages = Pages::new(20);
    let b = bind_with(perf, &set, Target::CurrentThread).unwrap();
    for i in 0..15 {
        pages.touch(i);
    }
    assert!(b.is_frozen(), "the overflow arrived on signal 40");
    assert_eq!(sample(&b), vec![0]);
    // SAFETY: queries the current disposition only.
    let handler = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(40, std::ptr::null(), &mut old);
        old.sa_sigaction
    };
    assert_ne!(
        handler,
        libc::SIG_DFL,
        "the engine's handler is on signal 40"
    );
}

//! `cpc_buf_hrtime` after `cpc_set_sample` is the `CLOCK_MONOTONIC` time (gethrtime's
//! timebase) of a moment during the call: the clock read just before and just after the call
//! brackets it, on every sample, across CPU migrations, never going back.

use std::ptr::null_mut;

use perfcompat_capi::cpc::*;

fn monotonic() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity reads it.
    unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut s);
        libc::sched_setaffinity(0, std::mem::size_of_val(&s), &s);
    }
}

#[test]
fn the_sample_time_is_bracketed_by_the_clock_around_the_call() {
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    for events in [
        &[c"page-faults"][..],
        &[c"task-clock", c"page-faults", c"context-switches"],
    ] {
        let set = cpc_set_create(cpc);
        for e in events {
            // SAFETY: a valid string and no attributes.
            let r = unsafe {
                cpc_set_add_request(cpc, set, e.as_ptr(), 0, CPC_COUNT_USER, 0, null_mut())
            };
            assert!(r >= 0);
        }
        let buf = cpc_buf_create(cpc, set);
        assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
        let mut last = 0;
        for i in 0..10_000 {
            if cpus > 1 && i % 100 == 0 {
                pin(i / 100 % 2);
            }
            let before = monotonic();
            assert_eq!(cpc_set_sample(cpc, set, buf), 0);
            let after = monotonic();
            let t = cpc_buf_hrtime(cpc, buf);
            assert!(
                before <= t && t <= after,
                "{} events, sample {i}: hrtime {t} outside [{before}, {after}]",
                events.len()
            );
            assert!(t >= last, "sample {i}: the time went back");
            last = t;
        }
        assert_eq!(cpc_unbind(cpc, set), 0);
    }
    // SAFETY: no other thread uses the handle.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
}

//! Version 1's async-signal-safe calls allocate nothing: `cpc_take_sample` from the program and
//! from the SIGEMT handler, and the handler's `cpc_bind_event` that only sets the presets again
//! (cpc_bind_event(3CPC)'s second example). Counted with a global allocator that tallies per
//! thread, as capi/tests/cpc_no_alloc.rs does for version 2.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use perfcompat_capi::cpc::*;

#[macro_use]
#[path = "../../tests/common/mod.rs"]
mod common;

counting_allocator!();

/// Faults between overflows.
const PERIOD: u64 = 10;
const PRESET: u64 = u64::MAX - PERIOD + 1;

/// The event the handler rebinds with (a leaked copy of the program's).
static EVENT: AtomicPtr<cpc_event_t> = AtomicPtr::new(std::ptr::null_mut());
static SIGNALS: AtomicU64 = AtomicU64::new(0);
static HANDLER_ALLOCS: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sigemt(_sig: i32, _info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    let before = allocs();
    let ev = EVENT.load(Ordering::SeqCst);
    // SAFETY: a live event only this handler uses while the signals come.
    let ok = unsafe {
        cpc_take_sample(ev) == 0 && {
            (*ev).ce_pic[0] = PRESET;
            cpc_bind_event(ev, CPC_BIND_EMT_OVF as i32) == 0
        }
    };
    if !ok {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    HANDLER_ALLOCS.fetch_add(allocs() - before, Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn take_sample_and_the_handlers_rebind_do_not_allocate() {
    // An allocation in the signal path can deadlock in malloc: turn a hang into a failure.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        eprintln!("cpc_v1_no_alloc: still running after 60 s: deadlock in the overflow path?");
        std::process::exit(101);
    });
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    common::on_signal(63, on_sigemt);
    // SAFETY: a zeroed cpc_event_t is a valid one to fill.
    let mut ev: Box<cpc_event_t> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: a valid specification and event.
    let r = unsafe {
        cpc_strtoevent(
            cpc_getcpuver(),
            c"pic0=page-faults,pic1=task-clock".as_ptr(),
            &mut *ev,
        )
    };
    assert_eq!(r, 0, "cpc_strtoevent");
    ev.ce_pic = [PRESET, 0];
    let ev = Box::into_raw(ev);
    EVENT.store(ev, Ordering::SeqCst);
    let n = 300;
    let mem = common::Pages::new(n);
    // SAFETY: a live event.
    assert_eq!(unsafe { cpc_bind_event(ev, CPC_BIND_EMT_OVF as i32) }, 0);
    // SAFETY: zeroed is a valid sample buffer.
    let mut sample: cpc_event_t = unsafe { std::mem::zeroed() };
    let before = allocs();
    for _ in 0..1000 {
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cpc_take_sample(&mut sample) }, 0);
    }
    for i in 0..n {
        mem.touch(i);
    }
    let used = allocs() - before;
    assert_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    assert_eq!(
        SIGNALS.load(Ordering::SeqCst),
        n as u64 / PERIOD,
        "a SIGEMT every {PERIOD} faults"
    );
    assert_eq!(
        HANDLER_ALLOCS.load(Ordering::SeqCst),
        0,
        "allocations in the handler"
    );
    assert_eq!(used, 0, "allocations in cpc_take_sample");
    assert_eq!(cpc_rele(), 0);
}

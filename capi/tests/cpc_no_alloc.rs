//! The async-signal-safe libcpc entry points allocate nothing, on success and on their error
//! paths, and neither does the SIGEMT delivery: counted with a global allocator that tallies
//! per thread, around calls made from the program and from the SIGEMT handler.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use perfcompat_capi::cpc::*;

#[macro_use]
#[path = "../../tests/common/mod.rs"]
mod common;

counting_allocator!();

static CPC: AtomicPtr<cpc_t> = AtomicPtr::new(null_mut());
static SET: AtomicPtr<cpc_set_t> = AtomicPtr::new(null_mut());
static BUF: AtomicPtr<cpc_buf_t> = AtomicPtr::new(null_mut());
static SIGNALS: AtomicU64 = AtomicU64::new(0);
static HANDLER_ALLOCS: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

const PRESET: u64 = u64::MAX - 9;

extern "C" fn on_sigemt(_sig: i32, info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    let before = allocs();
    let (cpc, set, buf) = (
        CPC.load(Ordering::SeqCst),
        SET.load(Ordering::SeqCst),
        BUF.load(Ordering::SeqCst),
    );
    let mut v = 0u64;
    // SAFETY: the kernel passes a siginfo; the handles are live.
    let code = unsafe { (*info).si_code };
    let ok = code == EMT_CPCOVF
        && cpc_set_sample(cpc, set, buf) == 0
        // SAFETY: a valid out-pointer.
        && unsafe { cpc_buf_get(cpc, buf, 0, &mut v) } == 0
        && v == 0
        && cpc_request_preset(cpc, 0, PRESET) == 0
        && cpc_set_restart(cpc, set) == 0;
    if !ok {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    HANDLER_ALLOCS.fetch_add(allocs() - before, Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn sample_restart_preset_and_sigemt_do_not_allocate() {
    // An allocation in the signal path can deadlock in malloc: turn a hang into a failure.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        eprintln!("cpc_no_alloc: still running after 60 s: deadlock in the overflow path?");
        std::process::exit(101);
    });
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    common::on_signal(63, on_sigemt);
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    let set = cpc_set_create(cpc);
    let unbound = cpc_set_create(cpc);
    let flags = CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT;
    // SAFETY: valid strings and no attributes.
    unsafe {
        assert_eq!(
            cpc_set_add_request(
                cpc,
                set,
                c"page-faults".as_ptr(),
                PRESET,
                flags,
                0,
                null_mut()
            ),
            0
        );
        assert_eq!(
            cpc_set_add_request(cpc, unbound, c"task-clock".as_ptr(), 0, 2, 0, null_mut()),
            0
        );
        assert_eq!(
            cpc_set_add_request(cpc, unbound, c"task-clock".as_ptr(), 0, 2, 0, null_mut()),
            1
        );
    }
    let buf = cpc_buf_create(cpc, set);
    let ubuf = cpc_buf_create(cpc, unbound);
    CPC.store(cpc, Ordering::SeqCst);
    SET.store(set, Ordering::SeqCst);
    BUF.store(buf, Ordering::SeqCst);
    // Pages mapped before counting, touched after.
    let n = 300;
    let mem = common::Pages::new(n);
    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
    let before = allocs();
    let mut v = 0u64;
    for _ in 0..1000 {
        assert_eq!(cpc_set_sample(cpc, set, buf), 0);
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cpc_buf_get(cpc, buf, 0, &mut v) }, 0);
    }
    // Error paths (each writes its reason to stderr from a stack buffer).
    assert_eq!(cpc_set_sample(cpc, unbound, ubuf), -1);
    assert_eq!(cpc_set_sample(cpc, set, ubuf), -1);
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cpc_buf_get(cpc, buf, 7, &mut v) }, -1);
    assert_eq!(cpc_request_preset(cpc, 5, 0), -1);
    assert_eq!(cpc_request_preset(cpc, 0, PRESET), 0);
    assert_eq!(cpc_set_restart(cpc, set), 0);
    for i in 0..n {
        mem.touch(i);
    }
    let used = allocs() - before;
    assert_eq!(
        SIGNALS.load(Ordering::SeqCst),
        30,
        "a SIGEMT every 10 faults"
    );
    assert_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    assert_eq!(
        HANDLER_ALLOCS.load(Ordering::SeqCst),
        0,
        "allocations in the handler"
    );
    assert_eq!(
        used, 0,
        "allocations in sample/get/preset/restart and SIGEMT delivery"
    );
    // SAFETY: the handle is live and not used afterwards.
    assert_eq!(unsafe { cpc_close(cpc) }, 0);
}

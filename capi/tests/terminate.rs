//! `cpc_terminate` is meant for signal handlers (a SIGINT handler ends a cputrack-style run):
//! with a handle that is not a live `cpc_t` it does nothing, and leaves `errno` alone, which
//! belongs to the interrupted code.

use perfcompat_capi::cpc::cpc_terminate;

fn errno() -> i32 {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

#[test]
fn cpc_terminate_with_a_bad_handle_leaves_errno_alone() {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = 12345 };
    cpc_terminate(std::ptr::null_mut());
    cpc_terminate(0x1000 as *mut _);
    assert_eq!(errno(), 12345);
}

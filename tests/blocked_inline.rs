//! Blocking every signal around the library's own critical sections (`base::sigsafe::Blocked`,
//! which a bind takes) makes its two `rt_sigprocmask` calls inline, not through the C library's
//! `sigfillset` and `pthread_sigmask` (issue 48, first use: the library is bound lazily, and a
//! first use looked each of them up, ~800 instructions a look-up in the arm64 guest). This test
//! program defines its own `pthread_sigmask`, which the library's calls would reach, and counts
//! them; the mask itself must be what `pthread_sigmask` made: every signal but glibc's two
//! internal ones (32, 33) blocked, and the old mask back after.

use std::sync::atomic::{AtomicUsize, Ordering};

use perfcompat::base::signal::Blocked;

static CALLS: AtomicUsize = AtomicUsize::new(0);

/// The C library's `pthread_sigmask`, counted: the kernel's call, as glibc makes it.
///
/// # Safety
/// As `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: libc::c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> libc::c_int {
    CALLS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the caller's pointers; 8 bytes is the kernel's mask on Linux's 64-bit targets.
    let r = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8) };
    if r < 0 {
        // SAFETY: the thread's errno.
        unsafe { *libc::__errno_location() }
    } else {
        0
    }
}

/// The calling thread's mask, signals 1-64, asked of the kernel.
fn mask() -> u64 {
    let mut old = 0u64;
    // SAFETY: SIG_BLOCK of nothing: the kernel writes the 8-byte mask.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null::<u64>(),
            &mut old as *mut u64,
            8,
        )
    };
    old
}

#[test]
fn blocking_every_signal_makes_no_pthread_sigmask_call() {
    let bit = |sig: i32| 1u64 << (sig - 1);
    let before = mask();
    assert_eq!(
        before & bit(libc::SIGUSR1),
        0,
        "SIGUSR1 blocked before the test"
    );
    let calls = CALLS.load(Ordering::SeqCst);
    {
        let _blocked = Blocked::all();
        let inside = mask();
        for sig in [libc::SIGUSR1, libc::SIGINT, libc::SIGSEGV, 34, 40, 64] {
            assert_ne!(
                inside & bit(sig),
                0,
                "signal {sig} not blocked: {inside:#x}"
            );
        }
        for sig in [32, 33, libc::SIGKILL, libc::SIGSTOP] {
            assert_eq!(inside & bit(sig), 0, "signal {sig} blocked: {inside:#x}");
        }
    }
    assert_eq!(mask(), before, "the old mask back");
    assert_eq!(
        CALLS.load(Ordering::SeqCst) - calls,
        0,
        "calls of the C library's pthread_sigmask"
    );
}

//! The few system facts every layer needs: the calling thread's id and the monotonic clock.
//! A leaf module (it imports nothing from the crate), so that backends need not import the
//! engine for them.

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: a plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Monotonic clock in nanoseconds (vDSO; async-signal-safe).
pub fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

//! The few system facts every layer needs: the calling thread's id, the monotonic clock and
//! the real-time signal that carries counter overflows. A leaf module (it imports nothing from
//! the crate), so that backends need not import the engine or the signal handler for them.

use std::sync::atomic::{AtomicI32, Ordering};

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: a plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Monotonic clock in nanoseconds (vDSO; async-signal-safe). Inlined across crates: the
/// sample reads it on every call.
#[inline]
pub fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The signal the perf backend asks the kernel to send on counter overflow. A real-time
/// signal, so that overflows queue instead of coalescing; `PERFCOMPAT_OVERFLOW_SIGNAL` can
/// name another one (a number) when the program uses this one itself.
pub fn overflow_signal() -> i32 {
    static SIG: AtomicI32 = AtomicI32::new(0);
    let s = SIG.load(Ordering::Relaxed);
    if s != 0 {
        return s;
    }
    let default = libc::SIGRTMAX() - 2;
    let s = std::env::var("PERFCOMPAT_OVERFLOW_SIGNAL")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|&n| n >= libc::SIGRTMIN() && n <= libc::SIGRTMAX())
        .unwrap_or(default);
    SIG.store(s, Ordering::Relaxed);
    s
}

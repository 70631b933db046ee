//! Signal plumbing: blocking signals around state changes, and the handler for the perf
//! backend's overflow signal.
//!
//! Every change to a bound set's state is made with all signals blocked on the changing thread
//! ([`Blocked`]). A signal handler therefore never sees a half-made change on its own thread,
//! and lock-free readers only ever wait (briefly) for another thread, never for the thread they
//! interrupted. That is what makes sample, restart and the overflow path async-signal-safe.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

thread_local! {
    /// How many [`Blocked`] scopes (and overflow handlers, which run with every signal
    /// blocked) are active on this thread: inside one, blocking again is a no-op, which saves
    /// two system calls per state change on the overflow path.
    static ALL_BLOCKED: Cell<u32> = const { Cell::new(0) };
}

/// All signals blocked on this thread until dropped (then the previous mask is restored).
pub struct Blocked {
    old: Option<libc::sigset_t>,
}

impl Blocked {
    /// Block every signal that can be blocked (nothing to do when they already are, inside
    /// another `Blocked` or the overflow handler).
    #[inline]
    pub fn all() -> Blocked {
        let depth = ALL_BLOCKED.with(|d| d.get());
        if depth > 0 {
            ALL_BLOCKED.with(|d| d.set(depth + 1));
            return Blocked { old: None };
        }
        // SAFETY: sigfillset/pthread_sigmask only write to the local sets.
        let old = unsafe {
            let mut full: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut full);
            libc::pthread_sigmask(libc::SIG_BLOCK, &full, &mut old);
            old
        };
        ALL_BLOCKED.with(|d| d.set(1));
        Blocked { old: Some(old) }
    }
}

impl Drop for Blocked {
    #[inline]
    fn drop(&mut self) {
        ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(1)));
        if let Some(old) = &self.old {
            // SAFETY: restores the mask saved in `all`.
            unsafe {
                libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut());
            }
        }
    }
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

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Where the overflow signal handler sends what it received: the engine's entry points,
/// passed in so that this module does not import the engine.
#[derive(Clone, Copy)]
pub struct Dispatch {
    /// An overflow signal for the counter descriptor `fd`, interrupted at `pc`.
    pub on_fd: fn(fd: i32, pc: usize),
    /// The kernel's SIGIO fallback: an overflow of an unknown counter, at `pc`.
    pub on_unknown: fn(pc: usize),
}

static ON_FD: AtomicUsize = AtomicUsize::new(0);
static ON_UNKNOWN: AtomicUsize = AtomicUsize::new(0);

/// Install the overflow signal handler once per process, sending what it receives to
/// `dispatch` (the first call's; the engine is the only caller).
pub fn install_overflow_handler(dispatch: Dispatch) -> crate::Result<()> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    ON_FD.store(dispatch.on_fd as usize, Ordering::Release);
    ON_UNKNOWN.store(dispatch.on_unknown as usize, Ordering::Release);
    let _b = Blocked::all();
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: a plain sigaction with an extern "C" handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_overflow_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // Every signal stays blocked while the handler runs, so the state changes it makes
        // need not block them again (see `Blocked`).
        libc::sigfillset(&mut sa.sa_mask);
        if libc::sigaction(overflow_signal(), &sa, std::ptr::null_mut()) != 0 {
            INSTALLED.store(false, Ordering::Release);
            return Err(crate::Error::last_os("sigaction for the overflow signal"));
        }
        // When the user's real-time signal queue is full (RLIMIT_SIGPENDING counts every
        // process of the user), the kernel sends a plain SIGIO instead of the overflow signal,
        // and SIGIO's default action ends the process. A program that handles or ignores
        // SIGIO keeps its choice; otherwise SIGIO becomes an overflow signal without a counter.
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGIO, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_DFL
        {
            sa.sa_sigaction = on_sigio as *const () as usize;
            libc::sigaction(libc::SIGIO, &sa, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// The kernel's fallback for an overflow signal it could not queue (see
/// `install_overflow_handler`): `si_code` is `SI_KERNEL` and there is no `si_fd`.
extern "C" fn on_sigio(_sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: errno is thread-local; saved and restored around the handler.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: installed with SA_SIGINFO: `info` and `uc` are the kernel's.
    let (code, pc) = unsafe { ((*info).si_code, interrupted_pc(uc)) };
    if code == libc::SI_KERNEL {
        ALL_BLOCKED.with(|d| d.set(d.get() + 1));
        let f = ON_UNKNOWN.load(Ordering::Acquire);
        if f != 0 {
            // SAFETY: stored from a `fn(usize)` by `install_overflow_handler`.
            let f: fn(usize) = unsafe { std::mem::transmute(f) };
            f(pc);
        }
        ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(1)));
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// `si_fd` of a SIGPOLL-style siginfo (Linux: after `si_band`, a `long` at offset 16).
///
/// # Safety
/// `info` must point to a siginfo delivered for an F_SETSIG signal.
unsafe fn si_fd(info: *const libc::siginfo_t) -> i32 {
    // SAFETY: the kernel's layout for SIGPOLL: int si_signo, si_errno, si_code, [pad], then
    // the union; in it `long si_band` then `int si_fd`.
    unsafe {
        let base = info as *const u8;
        let off = 3 * std::mem::size_of::<i32>();
        let off = off.next_multiple_of(std::mem::align_of::<libc::c_long>());
        *(base.add(off + std::mem::size_of::<libc::c_long>()) as *const i32)
    }
}

/// The interrupted program counter from a ucontext, 0 where not known.
///
/// # Safety
/// `uc` must be the third argument of an SA_SIGINFO handler, or null.
pub unsafe fn interrupted_pc(uc: *const libc::c_void) -> usize {
    if uc.is_null() {
        return 0;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    // SAFETY: the kernel passes a ucontext_t.
    unsafe {
        let uc = &*(uc as *const libc::ucontext_t);
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    // SAFETY: the kernel passes a ucontext_t.
    unsafe {
        let uc = &*(uc as *const libc::ucontext_t);
        uc.uc_mcontext.pc as usize
    }
    #[cfg(not(any(
        all(target_os = "linux", target_arch = "x86_64"),
        all(target_os = "linux", target_arch = "aarch64")
    )))]
    {
        0
    }
}

extern "C" fn on_overflow_signal(
    _sig: libc::c_int,
    info: *mut libc::siginfo_t,
    uc: *mut libc::c_void,
) {
    // SAFETY: errno is thread-local; save and restore it around the handler.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: installed with SA_SIGINFO for an F_SETSIG signal.
    let (fd, pc) = unsafe { (si_fd(info), interrupted_pc(uc)) };
    // Installed with a full sa_mask: every signal is blocked until the handler returns.
    ALL_BLOCKED.with(|d| d.set(d.get() + 1));
    let f = ON_FD.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: stored from a `fn(i32, usize)` by `install_overflow_handler`.
        let f: fn(i32, usize) = unsafe { std::mem::transmute(f) };
        f(fd, pc);
    }
    ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(1)));
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// A sequence counter guarding state that signal handlers read and change.
///
/// Writers claim it with a compare-and-swap (even to odd) and make their change with every
/// signal blocked on their thread; readers retry while it is odd or when it moved. So a handler
/// never observes a half-made change on its own thread, two threads never write at once, and a
/// reader only ever waits for a writer on another thread, which always finishes.
#[derive(Debug, Default)]
pub struct SeqCount(std::sync::atomic::AtomicU64);

impl SeqCount {
    /// A counter with no write in progress.
    pub const fn new() -> SeqCount {
        SeqCount(std::sync::atomic::AtomicU64::new(0))
    }

    /// Run `f` as the only writer, with every signal blocked on this thread.
    #[inline]
    pub fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        let _blocked = Blocked::all();
        loop {
            let s = self.0.load(Ordering::Relaxed);
            if s & 1 == 0
                && self
                    .0
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break;
            }
            std::hint::spin_loop();
        }
        let r = f();
        self.0.fetch_add(1, Ordering::Release);
        r
    }

    /// Start a read: the value to hand to [`SeqCount::valid`] (waits out a write in progress on
    /// another thread).
    #[inline]
    pub fn begin(&self) -> u64 {
        loop {
            let s = self.0.load(Ordering::Acquire);
            if s & 1 == 0 {
                return s;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether nothing was written since `begin` returned `s`.
    #[inline]
    pub fn valid(&self, s: u64) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.0.load(Ordering::Acquire) == s
    }
}

//! State that signal handlers read and change, made async-signal-safe: every change is made
//! with all signals blocked on the changing thread ([`Blocked`]), under a sequence counter that
//! lock-free readers retry on ([`SeqCount`]). A signal handler therefore never sees a half-made
//! change on its own thread, and readers only ever wait (briefly) for another thread, never for
//! the thread they interrupted. That is what makes sample, restart and the overflow path
//! async-signal-safe.
//!
//! A leaf module (it imports nothing from the crate): the engine and the backends both use it.

use std::cell::Cell;
use std::sync::atomic::Ordering;

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

/// Run `f` in a signal handler installed with a full `sa_mask` (every signal is blocked until it
/// returns), so that the [`Blocked`] scopes inside `f` need not block them again.
#[inline]
pub(crate) fn while_all_blocked<R>(f: impl FnOnce() -> R) -> R {
    ALL_BLOCKED.with(|d| d.set(d.get() + 1));
    let r = f();
    ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(1)));
    r
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

//! State that signal handlers read and change, made async-signal-safe: every change is made
//! with all signals blocked on the changing thread ([`Blocked`]), under a sequence counter that
//! lock-free readers retry on ([`SeqCount`]). A signal handler therefore never sees a half-made
//! change on its own thread, and readers only ever wait (briefly) for another thread, never for
//! the thread they interrupted. That is what makes sample, restart and the overflow path
//! async-signal-safe. The one exception, a change that takes effect in one compare-and-swap,
//! is made without blocking signals ([`SeqCount::write_unblocked`]): a handler on its thread
//! reads or writes through it instead of waiting.
//!
//! A leaf module (it imports nothing from the crate but `base::sys`'s inline system call): the
//! engine and the backends both use it.

use std::cell::Cell;
use std::sync::atomic::Ordering;

thread_local! {
    /// How many [`Blocked`] scopes (and overflow handlers, which run with every signal
    /// blocked) are active on this thread: inside one, blocking again is a no-op, which saves
    /// two system calls per state change on the overflow path.
    static ALL_BLOCKED: Cell<u32> = const { Cell::new(0) };
    /// The [`SeqCount`] (its address) whose unblocked write window this thread has open
    /// ([`SeqCount::write_unblocked`]), 0 for none.
    static WINDOW: Cell<usize> = const { Cell::new(0) };
    /// Signals 1-64 of the mask the outermost [`Blocked`] scope saved (the program's own while
    /// the library blocks every signal), `None` outside such a scope.
    static PROGRAM_MASK: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Inside the library's [`Blocked`] scopes entered from the program's code: whether the
/// program blocks signal `sig` (1-64) on this thread, from the mask the outermost scope saved
/// and will restore. `None` outside them, and inside the overflow handler (its scopes save
/// nothing: the handler's mask is not the program's). Async-signal-safe.
pub fn program_blocks(sig: i32) -> Option<bool> {
    if !(1..=64).contains(&sig) {
        return None;
    }
    PROGRAM_MASK
        .try_with(|m| m.get())
        .ok()
        .flatten()
        .map(|m| m & crate::base::sys::sig_bit(sig) != 0)
}

/// Whether the library has every signal blocked on this thread now (inside a [`Blocked`] scope
/// or the overflow handler): the thread's mask then says nothing of the program's.
/// Async-signal-safe.
pub fn blocked_by_library() -> bool {
    ALL_BLOCKED.try_with(|d| d.get() > 0).unwrap_or(true)
}

/// All signals blocked on this thread until dropped (then the previous mask is restored).
pub struct Blocked {
    /// The mask to restore (signals 1-64, the kernel's word).
    old: Option<u64>,
}

/// `rt_sigprocmask(how, set)` of the kernel's 8-byte mask, made inline
/// ([`crate::base::sys::syscall6`]: a bind blocks the signals on a first use, where the C
/// library's `sigfillset` and `pthread_sigmask` would each be looked up; issue 48): the previous
/// mask. glibc's two internal signals (SIGCANCEL 32 and SIGSETXID 33, which its `sigfillset`
/// leaves out and its `pthread_sigmask` never blocks) are never added here either.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn sigprocmask(how: libc::c_int, set: u64) -> u64 {
    let set = if how == libc::SIG_SETMASK {
        set
    } else {
        set & !(3u64 << 31)
    };
    let mut old = 0u64;
    // SAFETY: the kernel reads `set` and writes `old`, 8 bytes each (its sigset size here).
    unsafe {
        crate::base::sys::syscall6(
            libc::SYS_rt_sigprocmask,
            [
                how as usize,
                &set as *const u64 as usize,
                &mut old as *mut u64 as usize,
                8,
                0,
                0,
            ],
        )
    };
    old
}

/// [`sigprocmask`] through the C library, where the kernel's mask is not one 8-byte word.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn sigprocmask(how: libc::c_int, set: u64) -> u64 {
    // SAFETY: plain libc calls on local sets.
    unsafe {
        let mut new: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut new);
        for sig in 1..=64 {
            if set & (1u64 << (sig - 1)) != 0 {
                libc::sigaddset(&mut new, sig);
            }
        }
        libc::pthread_sigmask(how, &new, &mut old);
        (1..=64)
            .filter(|&sig| libc::sigismember(&old, sig) == 1)
            .fold(0, |m, sig| m | 1u64 << (sig - 1))
    }
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
        let old = sigprocmask(libc::SIG_BLOCK, !0);
        PROGRAM_MASK.with(|m| m.set(Some(old)));
        ALL_BLOCKED.with(|d| d.set(1));
        Blocked { old: Some(old) }
    }
}

impl Drop for Blocked {
    #[inline]
    fn drop(&mut self) {
        ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(1)));
        if let Some(old) = self.old {
            PROGRAM_MASK.with(|m| m.set(None));
            sigprocmask(libc::SIG_SETMASK, old);
        }
    }
}

/// What [`while_all_blocked`] adds to `ALL_BLOCKED` (a [`Blocked`] scope adds 1): the same
/// word then also says whether a handler's scope is open ([`in_while_all_blocked`]), one
/// thread-local where the overflow handler used two (issue 48).
const HANDLER_SCOPE: u32 = 1 << 16;

/// Run `f` in a signal handler installed with a full `sa_mask` (every signal is blocked until it
/// returns), so that the [`Blocked`] scopes inside `f` need not block them again.
#[inline]
pub(crate) fn while_all_blocked<R>(f: impl FnOnce() -> R) -> R {
    ALL_BLOCKED.with(|d| d.set(d.get() + HANDLER_SCOPE));
    let r = f();
    ALL_BLOCKED.with(|d| d.set(d.get().saturating_sub(HANDLER_SCOPE)));
    r
}

/// Whether the calling thread is inside [`while_all_blocked`] (a signal handler's scope).
/// Async-signal-safe.
#[inline]
pub(crate) fn in_while_all_blocked() -> bool {
    ALL_BLOCKED.with(|d| d.get() >= HANDLER_SCOPE)
}

/// A sequence counter guarding state that signal handlers read and change.
///
/// Writers claim it with a compare-and-swap (even to odd) and make their change with every
/// signal blocked on their thread; readers retry while it is odd or when it moved. So a handler
/// never observes a half-made change on its own thread, two threads never write at once, and a
/// reader only ever waits for a writer on another thread, which always finishes.
///
/// One kind of write leaves signals unblocked ([`SeqCount::write_unblocked`]): a change that
/// takes effect in one compare-and-swap, claimed only if nothing was written since a snapshot.
/// A handler that interrupts it on its own thread cannot wait for it to finish: a reader there
/// reads through the open window (every state it can see is whole: before or after the one
/// compare-and-swap), and a writer there writes through it (with every signal blocked, as
/// always), moving the counter on so that the interrupted write's compare-and-swap and the
/// handler's readers see the change.
#[derive(Debug, Default)]
pub struct SeqCount(std::sync::atomic::AtomicU64);

/// Where [`SeqCount::write_unblocked`] (and a sample that marks its set incomplete) calls the
/// hook of [`set_window_hook`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPoint {
    /// The window is open, the counter not claimed yet.
    BeforeClaim,
    /// Claimed, before the write.
    Claimed,
    /// Written, before the claim is released.
    Written,
    /// Not a write: a sample found its interval incomplete, after its sequence check, and is
    /// about to mark the set (`BoundSet::sample`); a write made here starts a new interval
    /// that the mark must not reach.
    BeforeIncompleteMark,
}

static WINDOW_HOOK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// For tests: call `hook` at each point of every unblocked write (where a signal handler could
/// interrupt it), on the writing thread, and where a sample is about to mark its set
/// incomplete ([`WindowPoint::BeforeIncompleteMark`]), on the sampling thread; `None` removes
/// it. Not part of the API.
#[doc(hidden)]
pub fn set_window_hook(hook: Option<fn(WindowPoint)>) {
    WINDOW_HOOK.store(hook.map_or(0, |h| h as usize), Ordering::Release);
}

#[inline]
pub(crate) fn window_hook(at: WindowPoint) {
    let h = WINDOW_HOOK.load(Ordering::Relaxed);
    if h != 0 {
        // SAFETY: only ever stored from a `fn(WindowPoint)` by `set_window_hook`.
        let h: fn(WindowPoint) = unsafe { std::mem::transmute(h) };
        h(at);
    }
}

/// The mark of a claim made by [`SeqCount::write_unblocked`] (never set in an even value).
const UNBLOCKED: u64 = 1 << 63;

/// A key for the calling thread, unique among live threads (the address of one of its
/// thread-locals), 0 while the thread's locals are being destroyed: what a caller of
/// [`SeqCount::write_unblocked`] can compare to make sure it is the one thread that makes
/// unblocked writes to a counter.
#[inline]
pub fn thread_key() -> usize {
    WINDOW
        .try_with(|w| w as *const Cell<usize> as usize)
        .unwrap_or(0)
}

impl SeqCount {
    /// A counter with no write in progress.
    pub const fn new() -> SeqCount {
        SeqCount(std::sync::atomic::AtomicU64::new(0))
    }

    /// Run `f` as the only writer, with every signal blocked on this thread.
    #[inline]
    pub fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        let _blocked = Blocked::all();
        let claimed = loop {
            let s = self.0.load(Ordering::Relaxed);
            if s & 1 == 0
                && self
                    .0
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break s;
            }
            if s & 1 != 0 && self.window_open_here(s) {
                // A handler interrupted this thread's unblocked write of this counter: write
                // through it (nothing can interrupt this write), and move the counter on, odd
                // still, for the interrupted write to release.
                let r = f();
                self.0.fetch_add(2, Ordering::Release);
                return r;
            }
            std::hint::spin_loop();
        };
        let r = f();
        // Released with a store, not an atomic add: while this claim (odd, without the
        // unblocked mark) is held nothing else changes the counter (other threads wait, no
        // handler interrupts this thread, and only an unblocked claim is written through), and
        // an atomic add is a call to an outline atomic on arm64 without LSE (issue 48).
        self.0.store(claimed + 2, Ordering::Release);
        r
    }

    /// Whether this thread has this counter's unblocked write window open (it is running a
    /// signal handler that interrupted that write), given the counter's odd value `s`.
    #[cold]
    fn window_open_here(&self, s: u64) -> bool {
        s & UNBLOCKED != 0
            && WINDOW.try_with(|w| w.get()).unwrap_or(0) == self as *const SeqCount as usize
    }

    /// A snapshot to hand to [`SeqCount::write_unblocked`], or `None` while a write is in
    /// progress.
    #[inline]
    pub fn snapshot(&self) -> Option<u64> {
        let s = self.0.load(Ordering::Acquire);
        (s & 1 == 0).then_some(s)
    }

    /// Run `f` as the only writer without blocking signals, if nothing was written since
    /// `snapshot` ([`SeqCount::snapshot`]); `None` (and `f` not run) otherwise.
    ///
    /// `f` must make its change take effect in one compare-and-swap of a word that every
    /// other write changes too, with only plain stores before it that the caller makes again
    /// (with signals blocked) when that compare-and-swap fails: a handler may interrupt `f` on
    /// this thread and read or write through the open window (see the type's documentation),
    /// and the compare-and-swap then fails.
    /// Only one thread may ever make unblocked writes to a counter (the claim is marked as
    /// the unblocked one, not as that thread's: a handler on another thread must not take it
    /// for its own).
    #[inline]
    pub fn write_unblocked<R>(&self, snapshot: u64, f: impl FnOnce() -> R) -> Option<R> {
        let me = self as *const SeqCount as usize;
        // Open before the claim: a handler that comes between finds the counter even (or
        // claimed by another thread's blocked write, without the mark) and waits as usual.
        let outer = WINDOW.try_with(|w| w.replace(me)).ok()?;
        window_hook(WindowPoint::BeforeClaim);
        let r = if self
            .0
            .compare_exchange(
                snapshot,
                (snapshot + 1) | UNBLOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            window_hook(WindowPoint::Claimed);
            let r = f();
            window_hook(WindowPoint::Written);
            // Writers through the window have moved the counter on by twos; nothing else can
            // change it while the claim is held.
            let s = self.0.load(Ordering::Relaxed);
            self.0.store((s & !UNBLOCKED) + 1, Ordering::Release);
            Some(r)
        } else {
            None
        };
        let _ = WINDOW.try_with(|w| w.set(outer));
        r
    }

    /// Start a read: the value to hand to [`SeqCount::valid`] (waits out a write in progress on
    /// another thread).
    #[inline]
    pub fn begin(&self) -> u64 {
        loop {
            let s = self.0.load(Ordering::Acquire);
            if s & 1 == 0 || self.window_open_here(s) {
                // (Odd with this thread's unblocked write open: every state is whole, and a
                // writer through the window moves the counter, see `write`.)
                return s;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether nothing was written since `begin` returned `s`.
    #[inline]
    pub fn valid(&self, s: u64) -> bool {
        // The reads of the section are ordered before the load by the fence: the load itself
        // needs no ordering of its own (on arm64 a plain load at an offset, where an acquire
        // load needs its address computed first: issue 48).
        std::sync::atomic::fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 48: the handler's scope and the library's blocked scopes share one thread-local
    // count. A blocked scope is never taken for the handler's (the SIGEMT hook would keep a
    // notification that no handler delivers), and a blocked scope inside the handler's neither
    // ends it nor blocks anything again.
    #[test]
    fn the_handlers_scope_is_told_apart_from_blocked_scopes() {
        assert!(!in_while_all_blocked());
        {
            let _a = Blocked::all();
            let _b = Blocked::all();
            assert!(blocked_by_library());
            assert!(
                !in_while_all_blocked(),
                "a blocked scope is not the handler's"
            );
        }
        assert!(!blocked_by_library());
        while_all_blocked(|| {
            assert!(in_while_all_blocked());
            assert!(blocked_by_library());
            {
                let inner = Blocked::all();
                assert!(
                    inner.old.is_none(),
                    "nothing blocked again inside the handler"
                );
                assert!(in_while_all_blocked());
            }
            assert!(
                in_while_all_blocked(),
                "an inner scope does not end the handler's"
            );
        });
        assert!(!in_while_all_blocked());
        assert!(!blocked_by_library());
        // A write inside the handler's scope releases the counter to the next even value.
        let seq = SeqCount::new();
        while_all_blocked(|| seq.write(|| ()));
        seq.write(|| ());
        assert_eq!(seq.snapshot(), Some(4));
        assert!(!in_while_all_blocked());
    }
}

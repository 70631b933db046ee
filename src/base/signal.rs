//! The perf backend's overflow signal: the handler the engine installs, and its fallback when
//! the kernel cannot queue the signal. The handler reaches the engine through the entry points
//! the engine passes in ([`Dispatch`]); the backends do not import this module (they take the
//! signal's number from [`crate::base::sys`] and block signals with [`crate::base::sigsafe`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::base::sigsafe::while_all_blocked;
pub use crate::base::sigsafe::{Blocked, SeqCount};
pub use crate::base::sys::overflow_signal;

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Where the overflow signal handler sends what it received: the engine's entry points,
/// passed in so that this module does not import the engine.
#[derive(Clone, Copy)]
pub struct Dispatch {
    /// An overflow signal for the counter descriptor `fd`, interrupted at `pc`; `hup` when
    /// its code is `POLL_HUP` (the kernel stopped the event at its overflow limit).
    pub on_fd: fn(fd: i32, hup: bool, pc: usize),
    /// The kernel's SIGIO fallback: an overflow of an unknown counter, at `pc`.
    pub on_unknown: fn(pc: usize),
}

static ON_FD: AtomicUsize = AtomicUsize::new(0);
static ON_UNKNOWN: AtomicUsize = AtomicUsize::new(0);
static AFTER: AtomicUsize = AtomicUsize::new(0);

/// True while the calling thread is inside the overflow signal handler's dispatch to the
/// engine, that is, while an overflow hook runs there: the function installed with
/// [`set_after_overflow`] will run when the dispatch is over, on this thread, before the
/// handler returns. Async-signal-safe.
pub fn in_overflow_dispatch() -> bool {
    // The dispatch is the only scope of `while_all_blocked`: its count says it (one
    // thread-local for both, issue 48).
    crate::base::sigsafe::in_while_all_blocked()
}

/// Install (or with `None` remove) what the overflow signal handler runs last, after the
/// engine has handled the overflow and every scope of the dispatch has ended, with the
/// interrupted context (the handler's `ucontext_t *`). The C layer delivers libcpc's SIGEMT
/// from it. It runs with every signal still blocked and must be async-signal-safe; it may
/// change the signal mask and call a user handler that never returns (`siglongjmp`): nothing
/// of the overflow handler's remains to be done or dropped then.
pub fn set_after_overflow(f: Option<fn(*mut libc::c_void)>) {
    AFTER.store(f.map_or(0, |f| f as usize), Ordering::Release);
}

/// Run the function [`set_after_overflow`] installed, if any.
fn after(uc: *mut libc::c_void) {
    let f = AFTER.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: only ever stored from a `fn(*mut c_void)` by `set_after_overflow`.
        let f: fn(*mut libc::c_void) = unsafe { std::mem::transmute(f) };
        f(uc);
    }
}

/// Run the engine's part of an overflow handler: every signal is blocked (see
/// `while_all_blocked`) and [`in_overflow_dispatch`] is true.
fn dispatch(f: impl FnOnce()) {
    while_all_blocked(f);
}

/// Install the overflow signal handler once per process, sending what it receives to
/// `dispatch` (the first call's; the engine is the only caller).
pub fn install_overflow_handler(dispatch: Dispatch) -> crate::Result<()> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    // INSTALLED turns true only once both handlers are in place: a thread that sees it true
    // may enable a counter at once, and an overflow signal at its default action ends the
    // process (tests/signal_install.rs). Concurrent first installs wait for each other here.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    ON_FD.store(dispatch.on_fd as usize, Ordering::Release);
    ON_UNKNOWN.store(dispatch.on_unknown as usize, Ordering::Release);
    let _b = Blocked::all();
    // SAFETY: a plain sigaction with an extern "C" handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_overflow_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // Every signal stays blocked while the handler runs, so the state changes it makes
        // need not block them again (see `Blocked`).
        libc::sigfillset(&mut sa.sa_mask);
        if libc::sigaction(overflow_signal(), &sa, std::ptr::null_mut()) != 0 {
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
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

/// What the overflow signal's disposition is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The engine's handler.
    Ours,
    /// `SIG_IGN`, or `SIG_DFL` (the handler was never installed, or the program reset it):
    /// the kernel discards (or dies of) the signal, nothing of the engine's runs.
    Dropped,
    /// A handler of the program's own (which may or may not pass the signal on).
    Foreign,
}

/// The overflow signal's action now (`None` if it cannot be read). Async-signal-safe (one
/// system call).
fn action() -> Option<libc::sigaction> {
    // SAFETY: a query of the disposition into a local.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(overflow_signal(), std::ptr::null(), &mut act) == 0).then_some(act)
    }
}

/// The overflow signal's disposition now. Async-signal-safe (one system call).
pub fn disposition() -> Disposition {
    let Some(act) = action() else {
        return Disposition::Foreign;
    };
    let h = act.sa_sigaction;
    if h == on_overflow_signal as *const () as usize {
        Disposition::Ours
    } else if h == libc::SIG_IGN || h == libc::SIG_DFL {
        Disposition::Dropped
    } else {
        Disposition::Foreign
    }
}

/// Whether an overflow signal sent now could end the process (issue 44 item 3): its action is
/// `SIG_DFL` (a real-time signal's default action ends the process), or a handler installed
/// with `SA_RESETHAND`, which the kernel puts back to `SIG_DFL` when it delivers the signal,
/// so that the next one ends the process. The engine then turns its bindings' signals off and
/// finds their overflows from the kernel's records (`crate::base::watch`). `SIG_IGN` and a
/// handler without `SA_RESETHAND` are not: a signal sent there is discarded or handled.
/// Async-signal-safe (one system call).
pub fn signal_would_kill() -> bool {
    action().is_some_and(|act| {
        act.sa_sigaction == libc::SIG_DFL
            || (act.sa_sigaction != libc::SIG_IGN && act.sa_flags & libc::SA_RESETHAND != 0)
    })
}

/// Discard the overflow signal wherever it is pending in the process (issue 44 item 4): its
/// action is set to `SIG_IGN` and put back at once, and the kernel drops an ignored signal
/// from every thread's pending set, blocked or not (POSIX; Linux's `do_sigaction`). A thread
/// that blocks the signal can carry a pending one across `execve`, where it ends the new
/// program at its default action; no other thread can take it off that thread's queue.
///
/// Limits: an overflow signal sent to any thread between the two calls is lost too (the
/// caller sends again for records still waiting: [`queue_overflow_signal`]), and an action
/// the program sets between them is overwritten by the one read first. Returns false when the
/// action could not be read (nothing was changed).
pub fn flush_pending_overflow_signal() -> bool {
    let _b = Blocked::all();
    let Some(old) = action() else {
        return false;
    };
    // SAFETY: sigaction with valid pointers: SIG_IGN, then the action read above.
    unsafe {
        let mut ign: libc::sigaction = std::mem::zeroed();
        ign.sa_sigaction = libc::SIG_IGN;
        libc::sigaction(overflow_signal(), &ign, std::ptr::null_mut());
        libc::sigaction(overflow_signal(), &old, std::ptr::null_mut());
    }
    true
}

/// Take every overflow signal pending on the calling thread off its queue, when the program
/// blocks the signal there (issue 44 item 4): a thread can dequeue its own pending signals
/// (`sigtimedwait` with a zero timeout), and one left there would survive an `execve` and end
/// the next program. For a thread inside the library (its sample that found the overflow's
/// record, its unbind): the overflows those signals report are handled from their records.
/// Inside the library's own blocked scopes the program's mask is the one they saved (a
/// signal the program does not block is taken by the handler when they end); nothing inside
/// the overflow handler. Async-signal-safe; one or two system calls, more only for the
/// signals taken.
pub fn discard_pending_here() {
    let blocks = if crate::base::sigsafe::blocked_by_library() {
        // The program's mask, saved by the library's scope (its unbind runs in one).
        crate::base::sigsafe::program_blocks(overflow_signal()).unwrap_or(false)
    } else {
        blocked_here()
    };
    if !blocks {
        return;
    }
    // SAFETY: plain libc calls on local sets; a zero timeout never waits.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, overflow_signal());
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut pending: libc::sigset_t = std::mem::zeroed();
        if libc::sigpending(&mut pending) != 0
            || libc::sigismember(&pending, overflow_signal()) != 1
        {
            return;
        }
        // Bounded: the queue holds at most the user's RLIMIT_SIGPENDING.
        for _ in 0..100_000 {
            if libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) != overflow_signal() {
                break;
            }
        }
    }
}

/// Where `si_value` is in a siginfo: after `si_pid` and `si_uid` in the union.
fn si_value_offset() -> usize {
    let union_at = (3 * std::mem::size_of::<i32>()).next_multiple_of(std::mem::align_of::<usize>());
    union_at + 2 * std::mem::size_of::<i32>()
}

/// Queue the overflow signal to thread `tid` of this process for the overflow whose record
/// waits on counter descriptor `fd`, as the kernel would have sent it: with `si_code`
/// `SI_QUEUE` (the only code Linux lets one thread queue to another) and the descriptor in
/// `si_value`. The engine's handler takes such a signal as one the kernel sent, with the
/// kernel's stop at the overflow assumed (`hup`), as the watcher assumes it; a signal whose
/// record is gone by then is stale and changes nothing. For a signal lost to
/// [`flush_pending_overflow_signal`], and for a record that waited while the binding's
/// signals were off. Returns whether the kernel queued it.
pub fn queue_overflow_signal(tid: i32, fd: i32) -> bool {
    let mut info = [0u64; 16];
    let bytes = info.as_mut_ptr().cast::<u8>();
    // SAFETY: writes inside the 128-byte local at the kernel's offsets; plain system calls.
    unsafe {
        let sig = overflow_signal();
        *(bytes as *mut i32) = sig;
        *(bytes.add(8) as *mut i32) = libc::SI_QUEUE;
        let union_at = si_value_offset() - 2 * std::mem::size_of::<i32>();
        *(bytes.add(union_at) as *mut i32) = libc::getpid();
        *(bytes.add(union_at + 4) as *mut u32) = libc::getuid();
        *(bytes.add(si_value_offset()) as *mut i32) = fd;
        libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), tid, sig, bytes) == 0
    }
}

/// Queue a signal with the 128 bytes of `info` (a `siginfo_t`: `si_signo` at 0, `si_code` at 8)
/// to thread `tid` of this process, with `info`'s own `si_code`; where Linux refuses that code
/// (`EPERM`: another thread may queue only a negative one) again with `SI_QUEUE`, the rest
/// unchanged. The one way libcpc's SIGEMT and perfctr's overflow signal are queued. Returns
/// whether the kernel queued it. Async-signal-safe.
pub fn queue_siginfo(tid: i32, info: &mut [u8; 128]) -> bool {
    let sig = i32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
    // SAFETY: plain system calls with a whole, live siginfo buffer.
    unsafe {
        let pid = libc::getpid();
        let send = |b: &[u8; 128]| {
            libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, b.as_ptr()) == 0
        };
        if send(info) {
            return true;
        }
        if *libc::__errno_location() != libc::EPERM {
            return false;
        }
        info[8..12].copy_from_slice(&libc::SI_QUEUE.to_ne_bytes());
        send(info)
    }
}

/// Whether the calling thread blocks the overflow signal. Async-signal-safe (one system call).
pub fn blocked_here() -> bool {
    // SAFETY: a query of the calling thread's mask into a local.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) == 0
            && libc::sigismember(&mask, overflow_signal()) == 1
    }
}

/// The kernel's fallback for an overflow signal it could not queue (see
/// `install_overflow_handler`): `si_code` is `SI_KERNEL` and there is no `si_fd`.
extern "C" fn on_sigio(_sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: errno is thread-local; saved and restored around the handler.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: installed with SA_SIGINFO: `info` and `uc` are the kernel's.
    let (code, pc) = unsafe { ((*info).si_code, interrupted_pc(uc)) };
    if code == libc::SI_KERNEL {
        dispatch(|| {
            let f = ON_UNKNOWN.load(Ordering::Acquire);
            if f != 0 {
                // SAFETY: stored from a `fn(usize)` by `install_overflow_handler`.
                let f: fn(usize) = unsafe { std::mem::transmute(f) };
                f(pc);
            }
        });
        after(uc);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Call the handler of signal `sig` on the calling thread now, from inside the overflow signal
/// handler whose context is `uc`, exactly as the kernel would deliver `sig` with siginfo `info`
/// where that handler's signal interrupted the thread: with `info` and `uc`, under the mask the
/// kernel sets (the interrupted mask, the handler's `sa_mask`, and `sig` unless `SA_NODEFER`),
/// after resetting the disposition for `SA_RESETHAND`. When the returned value is false nothing
/// was done, because a kernel delivery could differ from a call: `uc` is null; `sig` is ignored
/// or at its default action; its handler wants the alternate stack (`SA_ONSTACK`); `sig` is
/// blocked where the thread was interrupted (a `sigwaitinfo` or `signalfd` user); or, when
/// `maybe_pending`, an earlier `sig` is pending (it must come first). The caller then queues
/// the signal. `before_call` runs just before the handler is called.
///
/// Costs one `rt_sigaction` and one `rt_sigprocmask` (and one `rt_sigpending` when
/// `maybe_pending`) instead of a second signal's delivery and return. The handler may leave by
/// `siglongjmp`: nothing of the caller's frames needs dropping (the caller must make the same
/// true of its own), and the mask it leaves is the one a kernel delivery leaves.
/// Async-signal-safe; every signal is blocked on entry (the overflow handler's mask).
///
/// # Safety
/// `uc` is null or the `ucontext_t *` of the overflow signal handler running on this thread;
/// `info` points to a whole `siginfo_t` that stays valid during the call.
pub unsafe fn call_handler(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    uc: *mut libc::c_void,
    maybe_pending: bool,
    before_call: impl FnOnce(),
) -> bool {
    if uc.is_null() {
        return false;
    }
    // SAFETY: the kernel's sigaction and mask calls on locals; `uc` is the kernel's context
    // (caller's contract).
    unsafe {
        let interrupted = &(*(uc as *const libc::ucontext_t)).uc_sigmask;
        let pending = |sig| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut set) != 0 || libc::sigismember(&set, sig) != 0
        };
        let Some(act) = kernel_action(sig) else {
            return false;
        };
        if act.handler == libc::SIG_DFL
            || act.handler == libc::SIG_IGN
            || act.flags & libc::SA_ONSTACK as u64 != 0
            || kernel_mask(interrupted) & sig_bit(sig) != 0
            || (maybe_pending && pending(sig))
        {
            return false;
        }
        // The mask the kernel sets for a handler: the interrupted one, sa_mask, and the signal
        // itself unless SA_NODEFER. (Only the kernel's 64 signals: bytes past them in
        // `uc_sigmask` are whatever follows it in the signal frame, and the kernel reads no
        // more than its 64 bits of any set.)
        let mut during = kernel_mask(interrupted) | act.mask;
        if act.flags & libc::SA_NODEFER as u64 == 0 {
            during |= sig_bit(sig);
        }
        if act.flags & libc::SA_RESETHAND as u64 != 0 {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        before_call();
        set_mask(during);
        if act.flags & libc::SA_SIGINFO as u64 != 0 {
            let h: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(act.handler);
            h(sig, info, uc);
        } else {
            let h: extern "C" fn(libc::c_int) = std::mem::transmute(act.handler);
            h(sig);
        }
    }
    true
}

/// A signal's disposition as the kernel holds it: what its `rt_sigaction` answers.
struct KernelAction {
    handler: usize,
    flags: u64,
    mask: u64,
}

use crate::base::sys::sig_bit;

/// The kernel's 64 signals of a C library signal set (its first 8 bytes).
fn kernel_mask(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes on every target (glibc's is 128); an unaligned
    // read of its first 8.
    unsafe { (set as *const libc::sigset_t as *const u64).read_unaligned() }
}

/// Signal `sig`'s disposition, `None` where the C library's `sigaction` would fail. On Linux
/// x86_64 and aarch64 one raw `rt_sigaction` (the overflow path's SIGEMT delivery, issue 48):
/// glibc's `sigaction` makes that same system call and only copies the kernel's answer into
/// its own layout (the 8-byte mask widened to 128 bytes), after refusing the two signals it
/// keeps for itself (SIGCANCEL 32 and SIGSETXID 33), refused here too. Skipping the wrapper
/// skips the copies; the answer is the kernel's either way, the one a kernel delivery follows
/// (a `sigaction` interposed by a preloaded library is not asked, as the kernel does not ask
/// it). Async-signal-safe.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn kernel_action(sig: libc::c_int) -> Option<KernelAction> {
    // The kernel's `struct sigaction` on these two: handler, flags, restorer, 64-bit mask.
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    if sig == 32 || sig == 33 {
        return None;
    }
    let mut k = KernelSigaction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: a query (no new action) into a local of the kernel's layout and size.
    let rc = unsafe {
        syscall4(
            libc::SYS_rt_sigaction as usize,
            sig as usize,
            0,
            &mut k as *mut KernelSigaction as usize,
            8,
        )
    };
    (rc == 0).then_some(KernelAction {
        handler: k.handler,
        flags: k.flags,
        mask: k.mask,
    })
}

/// Signal `sig`'s disposition through the C library, `None` where `sigaction` fails.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn kernel_action(sig: libc::c_int) -> Option<KernelAction> {
    // SAFETY: a query into a local.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut act) == 0).then(|| KernelAction {
            handler: act.sa_sigaction,
            flags: act.sa_flags as u64,
            mask: kernel_mask(&act.sa_mask),
        })
    }
}

/// Set the calling thread's signal mask to the kernel set `mask`, as glibc's
/// `pthread_sigmask(SIG_SETMASK, ..)` does: without SIGCANCEL (32) and SIGSETXID (33), which it
/// never lets a program block, then one raw `rt_sigprocmask` of the kernel's 8 bytes (the one
/// system call glibc makes, without its 128-byte copy of the set). Async-signal-safe.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn set_mask(mask: u64) {
    let mask = mask & !(sig_bit(32) | sig_bit(33));
    // SAFETY: a new mask from a local of the kernel's size; the old one is not asked for.
    unsafe {
        syscall4(
            libc::SYS_rt_sigprocmask as usize,
            libc::SIG_SETMASK as usize,
            &mask as *const u64 as usize,
            0,
            8,
        );
    }
}

/// System call `nr` with four arguments, made inline: the kernel's result (a negated errno on
/// failure), `errno` untouched. The C library's `syscall()` moves all seven of its arguments
/// and sets `errno` around the same instruction (issue 48: the SIGEMT delivery's two calls).
///
/// # Safety
/// As the system call itself: pointer arguments valid for what the kernel reads or writes.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[inline(always)]
unsafe fn syscall4(nr: usize, a0: usize, a1: usize, a2: usize, a3: usize) -> isize {
    // SAFETY: the caller's contract; the one inline system call of the crate
    // ([`crate::base::sys::syscall6`]).
    unsafe { crate::base::sys::syscall6(nr as libc::c_long, [a0, a1, a2, a3, 0, 0]) }
}

/// A system call of three arguments that leaves `errno` alone: the kernel's result (a negated
/// errno on failure). For code that runs on another thread's `errno` (pctx's command before
/// its exec shares its creator's thread pointer); [`crate::base::sys::syscall6`]: inline on
/// Linux x86-64 and arm64, else through
/// the C library with `errno` saved and restored around it.
///
/// # Safety
/// As the system call itself: pointer arguments valid for what the kernel reads or writes.
pub(crate) unsafe fn syscall3_keeping_errno(
    nr: libc::c_long,
    a0: usize,
    a1: usize,
    a2: usize,
) -> isize {
    // SAFETY: the caller's contract.
    unsafe { crate::base::sys::syscall6(nr, [a0, a1, a2, 0, 0, 0]) }
}

/// Set the calling thread's signal mask to the kernel set `mask` through the C library.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn set_mask(mask: u64) {
    // SAFETY: plain libc calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in 1..=64 {
            if mask & sig_bit(sig) != 0 {
                libc::sigaddset(&mut set, sig);
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
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
    // The band's code: POLL_IN for an overflow, POLL_HUP for one at which the kernel stopped
    // the event (its overflow limit reached). POLL_HUP is 6 in asm-generic/siginfo.h.
    const POLL_HUP: i32 = 6;
    // SAFETY: installed with SA_SIGINFO: the kernel's siginfo, of an F_SETSIG signal unless
    // queued (`queue_overflow_signal`, whose descriptor is in `si_value`).
    let (fd, hup, pc) = unsafe {
        let code = (*info).si_code;
        let pc = interrupted_pc(uc);
        if code == libc::SI_QUEUE {
            let v = (info as *const u8).add(si_value_offset()) as *const i32;
            (*v, true, pc)
        } else {
            (si_fd(info), code == POLL_HUP, pc)
        }
    };
    // Installed with a full sa_mask: every signal is blocked until the handler returns.
    dispatch(|| {
        let f = ON_FD.load(Ordering::Acquire);
        if f != 0 {
            // SAFETY: stored from a `fn(i32, bool, usize)` by `install_overflow_handler`.
            let f: fn(i32, bool, usize) = unsafe { std::mem::transmute(f) };
            f(fd, hup, pc);
        }
    });
    // Last, with nothing of this handler's left to drop: a user handler called from here may
    // leave by `siglongjmp`.
    after(uc);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// The signals whose default action ends the process, that a program can catch, and for which
/// [`report_before_fatal_signals`] installs its handler: every one of them but SIGINT (an
/// interpreter installs its own SIGINT handler only where SIGINT is `SIG_DFL` at its start, as
/// Python does for `KeyboardInterrupt`: a handler of ours there would change what Ctrl-C does
/// to it) and the real-time signals (the library's own overflow signal and SIGEMT are among
/// them).
pub const FATAL_SIGNALS: &[i32] = &[
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGUSR1,
    libc::SIGSEGV,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSYS,
];

/// What [`report_before_fatal_signals`] calls (a `fn(i32)`, 0 until installed).
static BEFORE_FATAL: AtomicUsize = AtomicUsize::new(0);

/// Call `report(sig)` when a signal of [`FATAL_SIGNALS`] whose disposition is `SIG_DFL` now
/// arrives, then end the process by that signal's default action, as it would have ended
/// without the handler (its wait status, a core dump included, is the same): the handler puts
/// `SIG_DFL` back and raises the signal again, which is delivered when it returns. `report`
/// runs in a signal handler: it must be async-signal-safe. A program that installs a handler
/// of its own later replaces this one; one that ignores or handles a signal at this call
/// keeps it. Returns how many signals got the handler. The first call's `report` is kept.
pub fn report_before_fatal_signals(report: fn(i32)) -> usize {
    let _ = BEFORE_FATAL.compare_exchange(0, report as usize, Ordering::AcqRel, Ordering::Relaxed);
    let mut n = 0;
    for &sig in FATAL_SIGNALS {
        // SAFETY: sigaction with valid pointers and an extern "C" handler.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fatal_signal as *const () as usize;
            // Not on an alternate stack, which may be too small for the report: a stack
            // overflow's SIGSEGV then ends the process without one.
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0 {
                n += 1;
            }
        }
    }
    n
}

extern "C" fn on_fatal_signal(sig: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: errno is thread-local; the handler leaves it as it found it.
    let errno = unsafe { *libc::__errno_location() };
    let f = BEFORE_FATAL.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: stored from a `fn(i32)` by report_before_fatal_signals.
        let report: fn(i32) = unsafe { std::mem::transmute::<usize, fn(i32)>(f) };
        report(sig);
    }
    // SAFETY: sigaction and raise are async-signal-safe. The signal stays blocked until the
    // handler returns; then it is delivered at its default action.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
        *libc::__errno_location() = errno;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn nothing(_: libc::c_int) {}

    /// The raw `rt_sigaction` answer is what the C library's `sigaction` reports: handler, the
    /// flags the program set, its mask; and glibc's own two signals are refused as it refuses
    /// them (issue 48: the SIGEMT delivery's disposition without the wrapper).
    #[test]
    fn kernel_action_agrees_with_sigaction() {
        let sig = libc::SIGRTMAX() - 2;
        // SAFETY: a handler that does nothing, for a real-time signal nothing here sends.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as *const () as usize;
            sa.sa_flags = libc::SA_NODEFER | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaddset(&mut sa.sa_mask, libc::SIGUSR2);
            libc::sigaddset(&mut sa.sa_mask, libc::SIGRTMIN() + 1);
            assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(sig, std::ptr::null(), &mut old), 0);
            let k = kernel_action(sig).expect("a valid signal");
            assert_eq!(k.handler, old.sa_sigaction);
            assert_eq!(k.flags, old.sa_flags as u64);
            assert_eq!(k.mask, kernel_mask(&old.sa_mask));
            assert_eq!(
                k.mask,
                sig_bit(libc::SIGUSR2) | sig_bit(libc::SIGRTMIN() + 1)
            );
            libc::signal(sig, libc::SIG_DFL);
        }
        for sig in [0, 32, 33, 65] {
            // SAFETY: a query into a local.
            let libc_fails = unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old) != 0
            };
            assert!(libc_fails, "glibc answers for signal {sig}");
            assert!(kernel_action(sig).is_none(), "signal {sig} answered");
        }
    }

    /// The raw `rt_sigprocmask` sets the mask asked for, less glibc's two signals, as
    /// `pthread_sigmask` does.
    #[test]
    fn set_mask_is_pthread_sigmasks() {
        let ask = sig_bit(libc::SIGUSR1) | sig_bit(32) | sig_bit(33) | sig_bit(libc::SIGRTMAX());
        // SAFETY: the test thread's own mask, put back after.
        unsafe {
            let mut saved: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut saved);
            set_mask(ask);
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
            assert_eq!(
                kernel_mask(&now),
                sig_bit(libc::SIGUSR1) | sig_bit(libc::SIGRTMAX())
            );
        }
    }
}

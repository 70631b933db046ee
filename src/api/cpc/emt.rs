//! SIGEMT on Linux: libcpc's overflow notification.
//!
//! Linux has no SIGEMT on x86 and arm64 (signal 7 is SIGBUS there). `libcpc.h` defines `SIGEMT`
//! as real-time signal 63 (`SIGRTMAX - 1` with glibc and musl, where `SIGRTMAX` is 64), unless
//! the system already has a SIGEMT (MIPS, SPARC), and `EMT_CPCOVF` as 1 (Solaris x86's
//! value). A real-time signal queues: back-to-back overflows are not merged. A program that
//! must use signal 63 for something else compiles with `-DSIGEMT=<n>` and runs with
//! `PERFCOMPAT_SIGEMT=<n>` in the environment, which the library reads at its first
//! `cpc_open` (the engine's own overflow signal, `PERFCOMPAT_OVERFLOW_SIGNAL`, default
//! `SIGRTMAX - 2`, must differ).
//!
//! When a request with `CPC_OVF_NOTIFY_EMT` overflows, the engine freezes the set and runs the
//! process's overflow hook: inside its own signal handler on the perf backend, inside
//! `perfcompat_sim_advance` on the emulated PMUs. The hook queues SIGEMT to the thread that owns
//! the binding with `rt_tgsigqueueinfo(2)`, `si_code = EMT_CPCOVF` and `si_addr` = the
//! interrupted program counter; it allocates nothing and takes no lock. On the emulated PMUs,
//! where the binding's own thread queues the signal to itself, the interrupted program counter
//! is where that thread takes the signal: the instruction after the queueing system call,
//! which the hook writes into `si_addr` before making the call (x86-64 and arm64), so that
//! `si_addr` is the PC of the handler's context, as on the perf backend (unless the program
//! blocks SIGEMT and takes it later).
//!
//! The signal also says which requests overflowed, as perfctr's overflow signal does with its
//! `si_pmc_ovf_mask`: a 64-bit mask (bit i = the request whose index `cpc_set_add_request`
//! returned i) three pointers after `si_addr` in the siginfo (bytes 40..48 on 64-bit targets,
//! where a SIGSEGV would carry `si_upper`; 24..32 on 32-bit). Those bytes are inside the
//! part of the siginfo that the kernel copies from `rt_tgsigqueueinfo` to the handler, and no
//! Solaris field of an EMT signal lives there. `libcpc.h` reads it with the inline function
//! `perfcompat_cpc_ovf_mask(const siginfo_t *)`, 0 for a siginfo that did not come from
//! libcpc's overflow path.
//!
//! On the perf backend the overflow arrives as the engine's own signal, and SIGEMT is normally
//! not queued at all: when the hook runs inside the engine's overflow handler, the
//! notification is kept until the engine is done ([`crate::base::signal::set_after_overflow`])
//! and then delivered in that same handler the way the kernel would deliver SIGEMT at that
//! instant: the program's SIGEMT handler is called with the siginfo described above and the
//! interrupted context, under the signal mask the kernel would set (the interrupted mask, the
//! handler's `sa_mask` and SIGEMT unless `SA_NODEFER`; `SA_RESETHAND` honoured). One signal
//! per overflow instead of two (issue 19). SIGEMT is still queued, as above, whenever the
//! kernel's delivery could differ from a direct call: SIGEMT blocked where the overflow
//! interrupted (a `sigwaitinfo` or `signalfd` user), already pending (order is kept), ignored
//! or at its default action, or handled on an alternate stack (`SA_ONSTACK`). A handler that
//! leaves by `siglongjmp` or `longjmp` leaves the same mask as after a kernel delivery.
//!
//! Linux accepts a positive `si_code` only for a signal a thread sends to itself. That is the
//! case on the perf backend (the kernel routes the overflow to the binding thread) and for the
//! emulated PMUs' ordinary use; when another thread's events overflow an emulated inheriting
//! binding, the signal still reaches the binder with `si_addr` set, but with `si_code`
//! `SI_QUEUE`.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine::{self, OverflowEvent};

/// `si_code` of the SIGEMT that reports a counter overflow (Solaris x86's value; the C
/// header's `EMT_CPCOVF`).
pub const EMT_CPCOVF: c_int = 1;

/// `user_data` the libcpc layer gives its bindings that notify: the hook ignores others (the
/// engine's hook is per process).
pub const EMT_TAG: usize = 0x00c0_ffee_0e47;

/// The default SIGEMT number on Linux architectures without one: real-time signal 63.
pub const DEFAULT_SIGEMT: c_int = crate::base::sys::DEFAULT_SIGEMT;

/// The signal libcpc notifies with (`PERFCOMPAT_SIGEMT`, else the system's SIGEMT, else 63;
/// a value that is not a real-time signal distinct from the engine's overflow signal is
/// refused with a message: [`crate::base::sys::sigemt_signal`]). Read once; async-signal-safe
/// afterwards.
pub fn signal() -> c_int {
    crate::base::sys::sigemt_signal()
}

/// Install the overflow hook (once per process; idempotent).
pub fn install() {
    signal();
    engine::set_overflow_hook(Some(hook));
    crate::base::signal::set_after_overflow(Some(after_overflow));
}

thread_local! {
    /// The notification kept for delivery when the engine's overflow handler is done on this
    /// thread: (`si_addr`, overflow mask). At most one per handler (one signal, one binding).
    static KEPT: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
    /// A SIGEMT [`send`] queued to this thread may still be pending: `deliver` looks before
    /// calling the handler directly, so that notifications stay in order.
    static MAYBE_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Set once [`send`] has queued SIGEMT to another thread: from then on every direct delivery
/// first looks for a pending SIGEMT (the queued one may be for the delivering thread).
static SENT_TO_ANOTHER: AtomicBool = AtomicBool::new(false);

fn hook(ev: &OverflowEvent) {
    if ev.user_data != EMT_TAG {
        return;
    }
    // Inside the engine's overflow handler the binding is the interrupted thread's own (the
    // engine finds it in that thread's table): keep the notification for `after_overflow`.
    if crate::base::signal::in_overflow_dispatch()
        && KEPT
            .try_with(|k| {
                let free = k.get().is_none();
                if free {
                    k.set(Some((ev.pc, ev.overflowed)));
                }
                free
            })
            .unwrap_or(false)
    {
        return;
    }
    // Elsewhere (the emulated PMUs' perfcompat_sim_advance) the signal is queued to the
    // binding's own thread, which takes it as the queueing system call returns: its si_addr
    // is that return address, the PC the handler's context holds (issue 45 item 9).
    if ev.tid == crate::base::sys::gettid() && send_here(ev.overflowed) {
        return;
    }
    send(ev.tid, ev.pc, ev.overflowed);
}

/// Queue SIGEMT to the calling thread with `si_addr` = the address where the thread resumes
/// after the queueing system call: where the kernel delivers the signal (unless it is
/// blocked), so the interrupted PC of the handler's context. False where no such system call
/// is written (architectures other than x86-64 and arm64): then nothing was queued.
/// Async-signal-safe.
fn send_here(mask: u64) -> bool {
    let sig = signal();
    let mut info = info(sig, EMT_CPCOVF, 0, mask);
    let _ = MAYBE_PENDING.try_with(|m| m.set(true));
    let union_at = if cfg!(target_pointer_width = "64") {
        16
    } else {
        12
    };
    // SAFETY: plain system calls; `slot` points into the live siginfo buffer, where the asm
    // writes the pointer-sized si_addr before the kernel reads the buffer.
    unsafe {
        let pid = libc::getpid() as usize;
        let tid = crate::base::sys::gettid() as usize;
        let buf = info.0.as_mut_ptr();
        queue_with_resume_pc(pid, tid, sig as usize, buf, buf.add(union_at))
    }
}

/// `rt_tgsigqueueinfo(pid, tid, sig, info)` with the address of the instruction after the
/// system call written at `slot` first; false if it failed, or where it is not written
/// (architectures other than x86-64 and arm64: then nothing is queued).
///
/// # Safety
/// `info` is a whole siginfo, `slot` a pointer-sized place inside it.
#[allow(unused_variables)]
unsafe fn queue_with_resume_pc(
    pid: usize,
    tid: usize,
    sig: usize,
    info: *const u8,
    slot: *mut u8,
) -> bool {
    let ret: isize;
    // SAFETY (all three): the caller's contract; the system call clobbers rcx and r11 only on
    // x86-64, nothing but x0 on arm64.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "lea {t}, [rip + 2f]",
            "mov qword ptr [{slot}], {t}",
            "syscall",
            "2:",
            t = out(reg) _,
            slot = in(reg) slot,
            inlateout("rax") libc::SYS_rt_tgsigqueueinfo as isize => ret,
            in("rdi") pid,
            in("rsi") tid,
            in("rdx") sig,
            in("r10") info,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!(
            "adr {t}, 2f",
            "str {t}, [{slot}]",
            "svc 0",
            "2:",
            t = out(reg) _,
            slot = in(reg) slot,
            in("x8") libc::SYS_rt_tgsigqueueinfo as usize,
            inlateout("x0") pid => ret,
            in("x1") tid,
            in("x2") sig,
            in("x3") info,
            options(nostack),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        ret = -1;
    }
    ret == 0
}

/// The engine's overflow handler is done: deliver the notification kept by `hook`.
fn after_overflow(uc: *mut c_void) {
    if let Some((pc, mask)) = KEPT.try_with(|k| k.take()).ok().flatten() {
        // SAFETY: `uc` is the overflow handler's context, as `deliver` requires.
        unsafe { deliver(pc, mask, uc) };
    }
}

/// The siginfo of libcpc's overflow notification (see the module's documentation).
fn info(sig: c_int, code: c_int, pc: usize, mask: u64) -> SigInfo {
    let mut info = SigInfo([0; 128]);
    let put_int = |b: &mut [u8; 128], off: usize, v: c_int| {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    };
    let union_at = if cfg!(target_pointer_width = "64") {
        16
    } else {
        12
    };
    put_int(&mut info.0, 0, sig);
    put_int(&mut info.0, 8, code);
    let addr = pc.to_ne_bytes();
    info.0[union_at..union_at + addr.len()].copy_from_slice(&addr);
    let mask_at = union_at + OVF_MASK_FROM_ADDR;
    info.0[mask_at..mask_at + 8].copy_from_slice(&mask.to_ne_bytes());
    info
}

/// A `siginfo_t`'s 128 bytes: si_signo, si_errno, si_code (ints), then the union at 16
/// (8-byte aligned on 64-bit targets, 12 on 32-bit), whose first member is si_addr.
#[repr(C, align(8))]
struct SigInfo([u8; 128]);

/// Deliver SIGEMT to the calling thread now, from the engine's overflow handler, as the kernel
/// would deliver it where the overflow interrupted `uc` ([`crate::base::signal::call_handler`]);
/// queue it with [`send`] when a direct call could behave differently (see the module's
/// documentation). Async-signal-safe; every signal is blocked on entry. Nothing here needs
/// dropping: the handler may `siglongjmp`.
///
/// # Safety
/// `uc` is the `ucontext_t *` of the overflow signal handler that is running on this thread.
unsafe fn deliver(pc: usize, mask: u64, uc: *mut c_void) {
    let sig = signal();
    let mut info = info(sig, EMT_CPCOVF, pc, mask);
    let maybe_pending = MAYBE_PENDING.try_with(|m| m.get()).unwrap_or(true)
        || SENT_TO_ANOTHER.load(Ordering::Relaxed);
    // SAFETY: `uc` is the running overflow handler's context (caller's contract); `info` is a
    // whole siginfo.
    let called = unsafe {
        crate::base::signal::call_handler(
            sig,
            info.0.as_mut_ptr().cast(),
            uc,
            maybe_pending,
            // No SIGEMT is pending now (or the call would not be made): the next look can
            // wait for the next queueing. Runs before the handler, which may not return.
            || {
                let _ = MAYBE_PENDING.try_with(|m| m.set(false));
            },
        )
    };
    if !called {
        // SIGEMT blocked where the overflow interrupted: a `sigwaitinfo` or signalfd user
        // takes it from the queue, with `si_code` `EMT_CPCOVF` (see `send` for the limit).
        queue(crate::base::sys::gettid(), pc, mask);
    }
}

/// Where the overflow mask is in the siginfo, from `si_addr`: three pointers on.
/// `libcpc.h`'s `perfcompat_cpc_ovf_mask` reads the same place.
pub const OVF_MASK_FROM_ADDR: usize = 3 * std::mem::size_of::<usize>();

/// Send SIGEMT to thread `tid` of this process with `si_code = EMT_CPCOVF`, `si_addr = pc`
/// and the overflowed requests' `mask` (see the module's documentation): queued at once,
/// unless the thread blocks SIGEMT and does not wait for it (issue 44 item 4). Then it is
/// held by the library's overflow watcher (`crate::base::watch::hold_signal`), which queues
/// it (`SI_QUEUE`) once the thread unblocks SIGEMT or waits for it (`sigtimedwait`, a
/// signalfd): a SIGEMT left pending on a thread that blocks it would survive an `execve` and
/// end the next program. Held: from the binding's thread when it blocks SIGEMT (an overflow
/// taken by its sample), and from the watcher's thread when the owner blocks it and is not in
/// `sigtimedwait` for it with no signalfd for it in the process. Not held: the SIGEMT that the
/// engine's overflow handler queues because SIGEMT is blocked where the overflow interrupted
/// the thread (its `sigtimedwait` or signalfd read; nothing cheap there tells a thread that
/// waits from one that does not), nor where there is no watcher (the emulated PMUs).
/// Async-signal-safe.
pub fn send(tid: i32, pc: usize, mask: u64) {
    let sig = signal();
    let own = tid == crate::base::sys::gettid();
    let hold = if own {
        // Inside the library's own blocked scopes the mask says nothing of the program's.
        !crate::base::sigsafe::blocked_by_library()
            // SAFETY: a query of the calling thread's mask into a local.
            && unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) == 0
                && libc::sigismember(&set, sig) == 1
        }
    } else {
        crate::base::watch::would_only_wait(tid, sig)
    };
    // The watcher queues it from its own thread: Linux accepts only a negative si_code there.
    if hold && crate::base::watch::hold_signal(tid, sig, &info(sig, libc::SI_QUEUE, pc, mask).0) {
        // Queued later from the watcher's thread: a direct delivery must look for it first.
        SENT_TO_ANOTHER.store(true, Ordering::Relaxed);
        return;
    }
    queue(tid, pc, mask);
}

/// Queue SIGEMT to thread `tid` now (see [`send`]). Async-signal-safe.
fn queue(tid: i32, pc: usize, mask: u64) {
    let info = info(signal(), EMT_CPCOVF, pc, mask);
    if tid == crate::base::sys::gettid() {
        let _ = MAYBE_PENDING.try_with(|m| m.set(true));
    } else {
        SENT_TO_ANOTHER.store(true, Ordering::Relaxed);
    }
    // Another thread: the kernel accepts only a negative si_code, `SI_QUEUE`.
    let mut info = info;
    crate::base::signal::queue_siginfo(tid, &mut info.0);
}

//! Issue 48: an overflow whose signal the kernel sent but that never reached the engine's
//! handler, on a thread that does not block the signal and whose handler on it is the
//! program's, one that passes the signal on. The overflow watcher used to handle such a record
//! itself and queue SIGEMT from its own thread, where Linux allows only `si_code` `SI_QUEUE`:
//! a program that checks `si_code == EMT_CPCOVF` (as Solaris programs do) ignored that
//! overflow. `signal_stress` met it under load, about one debug run in 15 (its handler passes
//! the signal on, and some kernel signal was lost on the way). Here the program's handler
//! drops the kernel's overflow signals, as if lost, and passes on those the library queues
//! (`SI_QUEUE`): the watcher
//! must queue the signal again before it handles the record, so that SIGEMT comes from the
//! engine's handler on the thread itself, with `EMT_CPCOVF`.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering::SeqCst};

use perfcompat_capi::cpc::*;

/// The engine's overflow handler, which ours forwards to.
static ENGINE_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// Overflow signals our handler got.
static OVF_SIGNALS: AtomicU32 = AtomicU32::new(0);
static SIGEMTS: AtomicU32 = AtomicU32::new(0);
/// The `si_code` of the last SIGEMT.
static CODE: AtomicI32 = AtomicI32::new(i32::MIN);

extern "C" fn on_sigemt(_sig: i32, info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    SIGEMTS.fetch_add(1, SeqCst);
    // SAFETY: the kernel (or the library, as the kernel would) passes a siginfo.
    CODE.store(unsafe { (*info).si_code }, SeqCst);
}

/// The program's handler on the engine's signal: the kernel's are lost, those queued by the
/// library (`SI_QUEUE`) passed on.
extern "C" fn on_engine_signal(sig: i32, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    OVF_SIGNALS.fetch_add(1, SeqCst);
    // SAFETY: the kernel passes a siginfo.
    if unsafe { (*info).si_code } != libc::SI_QUEUE {
        return;
    }
    // SAFETY: the engine installed this SA_SIGINFO handler (checked at the wrap).
    let engine: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
        unsafe { std::mem::transmute(ENGINE_HANDLER.load(SeqCst)) };
    engine(sig, info, uc);
}

/// Put `h` on `sig` (every signal blocked while it runs); the action it replaces.
fn install(sig: i32, h: usize) -> libc::sigaction {
    // SAFETY: plain sigaction calls on locals.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        (act.sa_sigaction, act.sa_flags) = (h, libc::SA_SIGINFO);
        libc::sigfillset(&mut act.sa_mask);
        let mut was: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(sig, &act, &mut was), 0);
        was
    }
}

fn notifying_set(cpc: *mut cpc_t, preset: u64) -> *mut cpc_set_t {
    let set = cpc_set_create(cpc);
    let flags = CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT;
    // SAFETY: a NUL-terminated name and no attributes.
    let r = unsafe {
        cpc_set_add_request(
            cpc,
            set,
            c"page-faults".as_ptr(),
            preset,
            flags,
            0,
            null_mut(),
        )
    };
    assert_eq!(r, 0);
    set
}

#[test]
fn a_lost_overflow_signal_comes_again_with_emt_cpcovf() {
    std::env::set_var("PERFCOMPAT_BACKEND", "perf");
    install(
        perfcompat::api::cpc::emt::signal(),
        on_sigemt as *const () as usize,
    );
    let cpc = cpc_open(CPC_VER_CURRENT);
    assert!(!cpc.is_null());
    // A first notifying binding installs the engine's handler: wrap it.
    let s0 = notifying_set(cpc, 0);
    assert_eq!(cpc_bind_curlwp(cpc, s0, 0), 0);
    assert_eq!(cpc_unbind(cpc, s0), 0);
    let old = install(libc::SIGRTMAX() - 2, on_engine_signal as *const () as usize);
    assert!(
        old.sa_flags & libc::SA_SIGINFO != 0 && old.sa_sigaction > libc::SIG_IGN,
        "the engine's handler"
    );
    ENGINE_HANDLER.store(old.sa_sigaction, SeqCst);
    // Overflow at the 10th page fault.
    let set = notifying_set(cpc, u64::MAX - 9);
    assert_eq!(cpc_bind_curlwp(cpc, set, 0), 0);
    let pages = 64;
    // SAFETY: a fresh private mapping, touched once a page, unmapped below.
    unsafe {
        let p = libc::mmap(
            null_mut(),
            pages * 4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        ) as *mut u8;
        assert_ne!(p as *mut libc::c_void, libc::MAP_FAILED);
        for i in 0..pages {
            std::ptr::write_volatile(p.add(i * 4096), 1);
        }
        libc::munmap(p.cast(), pages * 4096);
    }
    // Wait (asleep, the signal unblocked) for the watcher: up to 5 s.
    for _ in 0..500 {
        if SIGEMTS.load(SeqCst) > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Time for a second (wrong) notification.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(OVF_SIGNALS.load(SeqCst) >= 1, "no overflow signal at all");
    assert_eq!(SIGEMTS.load(SeqCst), 1, "one SIGEMT for the one overflow");
    assert_eq!(
        CODE.load(SeqCst),
        EMT_CPCOVF,
        "the SIGEMT's si_code (-1 is SI_QUEUE: queued from the watcher's thread)"
    );
    assert_eq!(cpc_unbind(cpc, set), 0);
    // SAFETY: a live handle, not used afterwards.
    unsafe { cpc_close(cpc) };
}

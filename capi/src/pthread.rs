//! The `pthread_create` interposer: it forwards thread creation to the engine's hook
//! ([`perfcompat::api::threads::on_create`]), which says what a new thread does before its start
//! routine (libcpc's inherited copies, `CPC_BIND_LWP_INHERIT` with `CPC_OVF_NOTIFY_EMT`, see
//! [`perfcompat::api::cpc::thread`]; libperfex's counters under a `perfex` hand-over).
//!
//! # How thread creation is seen
//! The library defines `pthread_create` and forwards to the next definition
//! (`dlsym(RTLD_NEXT, "pthread_create")`, normally glibc's). Programs that link `-lcpc` (or
//! `-lperfex`, the same library) or preload it reach ours first: the dynamic linker searches
//! the executable's libraries in link order and libc comes last. C++ `std::thread` and Rust
//! threads go through `pthread_create` too. We chose this over the alternatives because it is
//! synchronous (the copy exists and the SIGEMT is handled before the thread's start routine
//! runs, as in Solaris where the kernel did it in `lwp_create`): perf's own inheritance
//! (`inherit=1`) gives no handle on the child's counters and no signal, and ptrace (the
//! engine's `pctx`, used by `perfex -mp`) cannot trace its own process. What it does not see:
//! threads made with a raw `clone` system call, and programs that link libc statically.
//!
//! Decided (issue 44, the last limit of item 6): this is the one C library function
//! `libperfcompat.so.1` defines, and it stays. glibc has no other synchronous hook at thread
//! creation (`pthread_atfork` is for `fork`, a thread-local's constructor runs at its first
//! use), and an interposer in a small library of its own works only where that library comes
//! before libc in the search order, that is linked by every `-lcpc` and `-lperfex` program: it
//! would interpose on them all the same. `capi/tests/install.rs`
//! (`the_library_defines_no_c_library_function_but_pthread_create`) checks that no other name
//! of glibc's objects is defined here; docs/differences.md says what it means for programs.
//!
//! The cost for everything else: two relaxed atomic loads per `pthread_create` (in the
//! engine's hook: the number of threads that hold an inheritable set, and whether the program
//! runs under a `perfex` hand-over, whose threads start libperfex counters here too; the
//! address of the real function is resolved at the first call and cached).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use perfcompat::api::threads::{self, NewThread};

type StartRoutine = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CreateFn = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    Option<StartRoutine>,
    *mut c_void,
) -> c_int;

static REAL: AtomicUsize = AtomicUsize::new(0);

// Under ThreadSanitizer (`.ci/tsan` builds with `--cfg perfcompat_tsan`) the sanitizer's
// runtime, linked into the program, defines `pthread_create` as a weak interceptor that this
// strong definition overrides, and `RTLD_NEXT` then finds glibc's: threads created behind the
// sanitizer's back crash it. Forward to its interceptor instead, which records the thread and
// calls glibc's.
#[cfg(perfcompat_tsan)]
extern "C" {
    fn __interceptor_pthread_create(
        thread: *mut libc::pthread_t,
        attr: *const libc::pthread_attr_t,
        start: Option<StartRoutine>,
        arg: *mut c_void,
    ) -> c_int;
}

/// The `pthread_create` after ours in the search order (glibc's; the sanitizer's under
/// ThreadSanitizer).
fn real() -> Option<CreateFn> {
    #[cfg(perfcompat_tsan)]
    return Some(__interceptor_pthread_create);
    #[cfg(not(perfcompat_tsan))]
    real_next()
}

/// `dlsym(RTLD_NEXT, "pthread_create")`, cached.
#[cfg_attr(perfcompat_tsan, allow(dead_code))]
fn real_next() -> Option<CreateFn> {
    let mut p = REAL.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: dlsym with a NUL-terminated name.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        if p == 0 || p == pthread_create as *const () as usize {
            return None;
        }
        REAL.store(p, Ordering::Relaxed);
    }
    // SAFETY: the address of a function of pthread_create's type.
    Some(unsafe { std::mem::transmute::<usize, CreateFn>(p) })
}

/// What the trampoline receives.
struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
    new: NewThread,
}

unsafe extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: made by Box::into_raw in pthread_create, handed to this thread only.
    let s = unsafe { Box::from_raw(p as *mut Start) };
    let Start { routine, arg, new } = *s;
    crate::ffi_boundary("pthread_create (new thread)", || {
        new.start(routine as usize)
    });
    // SAFETY: the program's start routine with its argument.
    unsafe { routine(arg) }
}

/// `pthread_create(3)`, as the C library does it; a thread created by a thread that holds a
/// libcpc set bound with `CPC_BIND_LWP_INHERIT` and a `CPC_OVF_NOTIFY_EMT` request starts with
/// its own copy of the set and a SIGEMT (see the libcpc documentation of inheritance); in a
/// program the `perfex` command runs, every new thread starts with libperfex counters of the
/// events perfex counts (see `perfcompat::api::perfex::adopt_handoff`).
///
/// # Safety
/// As `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<StartRoutine>,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real() else {
        return libc::ENOSYS;
    };
    let Some(p) = start.and_then(|routine| starter(routine, arg)) else {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { real(thread, attr, start, arg) };
    };
    // SAFETY: the trampoline takes ownership of `p` in the new thread.
    let r = unsafe { real(thread, attr, Some(trampoline), p.cast()) };
    if r != 0 {
        // SAFETY: no thread was created: still ours.
        drop(unsafe { Box::from_raw(p) });
    }
    r
}

/// What the trampoline of a new thread starting at `routine(arg)` needs, if the engine's hook
/// has something for the thread to do first.
fn starter(routine: StartRoutine, arg: *mut c_void) -> Option<*mut Start> {
    let new = threads::on_create()?;
    Some(Box::into_raw(Box::new(Start { routine, arg, new })))
}

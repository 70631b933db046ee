//! `CPC_BIND_LWP_INHERIT` with `CPC_OVF_NOTIFY_EMT` requests: a copy of the set per thread.
//!
//! cpc_bind_curlwp(3CPC): "any subsequent LWPs created by the current LWP will inherit a copy
//! of the request set", and when a request notifies on overflow "the process will immediately
//! dispatch a SIGEMT signal to the freshly created LWP so that it can preset its counters";
//! `cpc_set_sample` in that LWP then reads `UINT64_MAX` for those requests. Each copy is the new
//! thread's own: its handler presets and restarts it, its overflows are signalled to it.
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
//! The cost for everything else: two relaxed atomic loads per `pthread_create` ([`ACTIVE`],
//! the number of threads that hold an inheritable set, and whether the program runs under a
//! `perfex` hand-over, whose threads start libperfex counters here too; the address of the
//! real function is resolved at the first call and cached).
//!
//! # Lifetimes
//! - A binding made with `CPC_BIND_LWP_INHERIT` on a set with a notifying request binds the
//!   binder alone (no perf inheritance: the children's counts are theirs, not summed into the
//!   binder's) and records the set as inheritable by its thread.
//! - A thread created by a thread holding an inheritable set (the binder or a thread holding
//!   a copy, so copies are inherited again) runs, before its start routine: bind a copy of the
//!   set to itself (the requests as added, presets as given at add time), make it its current
//!   set, freeze it with the notifying requests at `UINT64_MAX` and overflowed
//!   ([`perfcompat::BoundSet::freeze_as_overflowed`]), and send itself SIGEMT (`EMT_CPCOVF`,
//!   `si_addr` = the start routine). Frozen rather than counting: Solaris's `kcpc_lwp_create`
//!   marks the counters overflowed, so the value stays `UINT64_MAX` until the handler restarts.
//! - The copy is unbound when its thread exits (a thread-local destructor), calls `cpc_unbind`
//!   on the set, binds another set, or destroys the set. Unbinding or destroying the set in
//!   the binder does not unbind the copies other threads hold (their contexts are per LWP, as
//!   in Solaris), but threads created afterwards inherit nothing.
//! - After `fork` the child inherits nothing: its only thread's inheritable set is forgotten.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{compiler_fence, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use perfcompat::backend::Backend;
use perfcompat::engine;
use perfcompat::set::{CounterSet, Target};
use perfcompat::signal::Blocked;
use perfcompat::Binding;

use super::emt;
use crate::edge::registry::{self, Kind};

/// Threads that hold an inheritable set: `pthread_create` does nothing more while it is 0.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// What a new thread inherits.
pub(crate) struct Spec {
    backend: &'static dyn Backend,
    /// The `cpc_set_t` (checked against the registry before each use).
    set: usize,
    reqs: CounterSet,
}

/// A thread's claim on a [`Spec`], counted in [`ACTIVE`].
struct Holder(Arc<Spec>);

impl Holder {
    fn new(spec: Arc<Spec>) -> Holder {
        ACTIVE.fetch_add(1, Ordering::AcqRel);
        Holder(spec)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A thread's inherited copy of a set.
struct Inherited {
    set: usize,
    /// Held for its `Drop`, which unbinds the copy.
    _binding: Binding,
}

#[derive(Default)]
struct State {
    /// What threads this thread creates inherit, while binding `.1` (this thread's own binding
    /// or copy) is live.
    inherit: Option<(Holder, u64)>,
    /// This thread's copy.
    copy: Option<Inherited>,
}

thread_local! {
    /// Touched only outside signal handlers (bind, unbind, destroy, thread creation and start).
    static STATE: RefCell<State> = const {
        RefCell::new(State {
            inherit: None,
            copy: None,
        })
    };
    /// The set this thread bound with `cpc_bind_curlwp` (or holds an inherited copy of), and
    /// the engine binding that is its counters here. Plain values without a destructor, so
    /// that signal handlers can read them (`cpc_set_sample`).
    static CURLWP: Cell<usize> = const { Cell::new(0) };
    static CURLWP_ID: Cell<u64> = const { Cell::new(0) };
}

/// The set this thread bound with `cpc_bind_curlwp` or inherited (0: none).
pub(crate) fn current_set() -> usize {
    CURLWP.try_with(Cell::get).unwrap_or(0)
}

/// Record `set`, counted here by binding `id`, as this thread's set (0: none).
pub(crate) fn set_current(set: usize, id: u64) {
    // A signal handler of this thread reads the pair: it sees 0 or a consistent pair.
    let _ = CURLWP.try_with(|c| c.set(0));
    compiler_fence(Ordering::SeqCst);
    let _ = CURLWP_ID.try_with(|c| c.set(id));
    compiler_fence(Ordering::SeqCst);
    let _ = CURLWP.try_with(|c| c.set(set));
}

/// Run `f` on this thread's own counters for `set` (its binding or its inherited copy), if it
/// has them: `cpc_set_sample`'s path for the calling thread's set, through thread-local state
/// only. Async-signal-safe and allocation-free.
#[inline]
pub(crate) fn with_mine<R>(set: usize, f: impl FnOnce(&perfcompat::BoundSet) -> R) -> Option<R> {
    if set == 0 || CURLWP.try_with(Cell::get).ok()? != set {
        return None;
    }
    let id = CURLWP_ID.try_with(Cell::get).ok()?;
    engine::with_thread_binding(id, f)
}

/// Run `f` on this thread's libcpc counters (the set it bound with `cpc_bind_curlwp`, or its
/// inherited copy), if it has them: what `cpc_request_preset`, `cpc_set_restart`,
/// `cpc_enable` and `cpc_disable` act on. Found by binding id, not as the engine's current
/// binding: a later libperfex `start_counters` on the thread binds counters too, and they must
/// not become the target of libcpc's restart (the SIGEMT handler's restart then restarted
/// them and left the libcpc set frozen: no overflow ever again; `tests/signal_stress.rs`).
/// Async-signal-safe and allocation-free.
#[inline]
pub(crate) fn with_curlwp<R>(f: impl FnOnce(&perfcompat::BoundSet) -> R) -> Option<R> {
    if CURLWP.try_with(Cell::get).ok()? == 0 {
        return None;
    }
    let id = CURLWP_ID.try_with(Cell::get).ok()?;
    engine::with_thread_binding(id, f)
}

/// This thread no longer uses `set` (unbound or destroyed): forget it, drop this thread's copy
/// of it and stop passing it on. Returns whether this thread held a copy of it (then the set
/// itself, bound by another thread, is left alone).
pub(crate) fn forget(set: usize) -> bool {
    if current_set() == set {
        set_current(0, 0);
    }
    let (copy, inherit) = STATE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let copy = s.copy.take_if(|c| c.set == set);
            let inherit = s.inherit.take_if(|(h, _)| h.0.set == set);
            (copy, inherit)
        })
        .unwrap_or((None, None));
    let had = copy.is_some();
    drop(copy);
    drop(inherit);
    had
}

/// Drop this thread's inherited copy and what it passes on, whatever the set: before it binds
/// another set (a thread holds one set).
pub(crate) fn forget_all() {
    let old = STATE
        .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
        .ok();
    drop(old);
}

/// The calling thread just bound `set` (made from `reqs`) with `CPC_BIND_LWP_INHERIT` and a
/// notifying request, as binding `id`: the threads it creates from now on get a copy.
pub(crate) fn enable(backend: &'static dyn Backend, set: usize, reqs: CounterSet, id: u64) {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registers a plain function.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
    let spec = Arc::new(Spec { backend, set, reqs });
    let _ = STATE.try_with(|s| s.borrow_mut().inherit = Some((Holder::new(spec), id)));
}

/// In the child of `fork`: inherit nothing (the one thread's claim is dropped without
/// touching the counters, which are the parent's).
extern "C" fn after_fork_in_child() {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if let Some((h, _)) = s.inherit.take() {
                std::mem::forget(h);
            }
            // The parent's counters: not ours to stop or close.
            if let Some(c) = s.copy.take() {
                std::mem::forget(c);
            }
        }
    });
    ACTIVE.store(0, Ordering::Release);
    set_current(0, 0);
}

/// What the creating thread passes on, if it holds a live inheritable set.
fn snapshot() -> Option<Arc<Spec>> {
    STATE
        .try_with(|s| {
            let s = s.try_borrow().ok()?;
            let (h, id) = s.inherit.as_ref()?;
            let live = registry::contains(h.0.set, Kind::Set)
                && engine::with_thread_binding(*id, |_| ()).is_some();
            live.then(|| h.0.clone())
        })
        .ok()
        .flatten()
}

/// Called in the new thread before its start routine: bind the copy, make it current, freeze
/// it overflowed and send SIGEMT to this thread. `start` is reported as `si_addr`.
fn adopt(spec: Arc<Spec>, start: usize) {
    if !registry::contains(spec.set, Kind::Set) {
        return;
    }
    let binding = match engine::bind_tagged(
        spec.backend,
        &spec.reqs,
        Target::CurrentThread,
        emt::EMT_TAG,
    ) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "libcpc: a new thread could not inherit the counters of its creator \
                 (CPC_BIND_LWP_INHERIT): {e}"
            );
            return;
        }
    };
    if let Err(e) = binding.freeze_as_overflowed() {
        eprintln!("libcpc: a new thread's inherited counters: {e}");
        return;
    }
    let id = binding.id();
    let mask = binding.overflowed();
    {
        let _blocked = Blocked::all();
        let _ = STATE.try_with(|s| {
            let mut s = s.borrow_mut();
            s.copy = Some(Inherited {
                set: spec.set,
                _binding: binding,
            });
            s.inherit = Some((Holder::new(spec.clone()), id));
        });
        set_current(spec.set, id);
    }
    emt::send(engine::gettid(), start, mask);
}

// ---------------------------------------------------------------------------------------------
// pthread_create.

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
    spec: Option<Arc<Spec>>,
    /// Under a `perfex` hand-over: start libperfex's counters first.
    perfex: bool,
}

unsafe extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: made by Box::into_raw in pthread_create, handed to this thread only.
    let s = unsafe { Box::from_raw(p as *mut Start) };
    let Start {
        routine,
        arg,
        spec,
        perfex,
    } = *s;
    if perfex {
        crate::ffi_boundary(
            "pthread_create (perfex hand-over)",
            perfcompat::perfex::thread_started,
        );
    }
    if let Some(spec) = spec {
        crate::ffi_boundary("pthread_create (libcpc inheritance)", || {
            adopt(spec, routine as usize)
        });
    }
    // SAFETY: the program's start routine with its argument.
    unsafe { routine(arg) }
}

/// `pthread_create(3)`, as the C library does it; a thread created by a thread that holds a
/// libcpc set bound with `CPC_BIND_LWP_INHERIT` and a `CPC_OVF_NOTIFY_EMT` request starts with
/// its own copy of the set and a SIGEMT (see the libcpc documentation of inheritance); in a
/// program the `perfex` command runs, every new thread starts with libperfex counters of the
/// events perfex counts (see `perfcompat::perfex::adopt_handoff`).
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

/// What a new thread starting at `routine(arg)` must do first, if anything: start libperfex's
/// counters under a `perfex` hand-over, take its copy of an inheritable libcpc set. Two relaxed
/// loads when there is nothing to do.
fn starter(routine: StartRoutine, arg: *mut c_void) -> Option<*mut Start> {
    let perfex = perfcompat::perfex::handed_over();
    if ACTIVE.load(Ordering::Relaxed) == 0 && !perfex {
        return None;
    }
    let spec = if ACTIVE.load(Ordering::Relaxed) == 0 {
        None
    } else {
        snapshot()
    };
    (perfex || spec.is_some()).then(|| {
        Box::into_raw(Box::new(Start {
            routine,
            arg,
            spec,
            perfex,
        }))
    })
}

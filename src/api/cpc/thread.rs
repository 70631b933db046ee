//! `CPC_BIND_LWP_INHERIT` with `CPC_OVF_NOTIFY_EMT` requests: a copy of the set per thread.
//!
//! cpc_bind_curlwp(3CPC): "any subsequent LWPs created by the current LWP will inherit a copy
//! of the request set", and when a request notifies on overflow "the process will immediately
//! dispatch a SIGEMT signal to the freshly created LWP so that it can preset its counters";
//! `cpc_set_sample` in that LWP then reads `UINT64_MAX` for those requests. Each copy is the new
//! thread's own: its handler presets and restarts it, its overflows are signalled to it.
//!
//! The per-thread state of libcpc lives here: the set each thread bound with
//! `cpc_bind_curlwp` (or holds an inherited copy of) and the engine binding that counts it there,
//! read by the sampling paths from signal handlers, and what the threads it creates inherit.
//! Sets are named by an opaque key (the C layer's `cpc_set_t` address) and checked alive
//! through the function the set module passes to [`enable`] ([`Alive`]). Thread creation reaches
//! [`crate::api::threads::on_create`] from the C layer's `pthread_create`; the copy's SIGEMT is the
//! process's overflow hook ([`crate::BoundSet::notify_overflowed`]).
//!
//! # Lifetimes
//! - A binding made with `CPC_BIND_LWP_INHERIT` on a set with a notifying request binds the
//!   binder alone (no perf inheritance: the children's counts are theirs, not summed into the
//!   binder's) and records the set as inheritable by its thread.
//! - A thread created by a thread holding an inheritable set (the binder or a thread holding
//!   a copy, so copies are inherited again) runs, before its start routine: bind a copy of the
//!   set to itself (the requests as added, presets as given at add time), make it its current
//!   set, freeze it with the notifying requests at `UINT64_MAX` and overflowed
//!   ([`BoundSet::freeze_as_overflowed`]), and send itself SIGEMT (`EMT_CPCOVF`,
//!   `si_addr` = the start routine). Frozen rather than counting: Solaris's `kcpc_lwp_create`
//!   marks the counters overflowed, so the value stays `UINT64_MAX` until the handler restarts.
//! - The copy is unbound when its thread exits (a thread-local destructor), calls `cpc_unbind`
//!   on the set, binds another set, or destroys the set. Unbinding or destroying the set in
//!   the binder does not unbind the copies other threads hold (their contexts are per LWP, as
//!   in Solaris), but threads created afterwards inherit nothing.
//! - After `fork` the child inherits nothing: its only thread's inheritable set is forgotten.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use crate::backend::Backend;
use crate::base::set::{CounterSet, Target};
use crate::base::signal::Blocked;
use crate::engine::{self, Binding, BoundSet, Owner};

/// Threads that hold an inheritable set: `pthread_create` does nothing more while it is 0.
pub(crate) static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether the set with this key is still alive (the C layer destroys sets; the set module
/// gives this function, so that this module needs no notion of a set).
pub type Alive = fn(usize) -> bool;

/// What a new thread inherits.
pub(crate) struct Spec {
    backend: &'static dyn Backend,
    /// The set's key (checked alive with `live` before each use).
    set: usize,
    live: Alive,
    /// The binding's tag ([`engine::bind_tagged`]): the overflow hook's way to know it.
    tag: usize,
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
}

/// What forgets, in the set this thread bound with `cpc_bind_curlwp`, that the binding is
/// this thread's own (the set's record of its binder, see `super::set`): run when the thread
/// exits (before its thread table drops the binding) and in the child of `fork`.
struct AtExit(Cell<Option<fn(usize)>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        forget_mine_here(self.0.get());
    }
}

thread_local! {
    /// Set by the thread's first `cpc_bind_curlwp` ([`clear_at_exit`]); its destructor runs
    /// at the thread's exit.
    static AT_EXIT: AtExit = const { AtExit(Cell::new(None)) };
}

/// Run `forget` with this thread's set (its key), if it has one.
fn forget_mine_here(forget: Option<fn(usize)>) {
    let key = current_set();
    if let (Some(f), false) = (forget, key == 0) {
        f(key);
    }
}

/// The calling thread just recorded itself as its set's binder: `forget` (given the set's
/// key) is to undo that when the thread exits (a thread created later may get its thread
/// pointer, which is how the set knows its binder). In a child of `fork` the one thread runs
/// it at its exit too (its thread-locals are the forking thread's), or when the child forgets
/// its set (`after_fork_in_child`); no handler of `fork` of its own (issue 48: registering one
/// at the first bind was instructions of every first use).
pub fn clear_at_exit(forget: fn(usize)) {
    let _ = AT_EXIT.try_with(|e| e.0.set(Some(forget)));
}

/// In the child of `fork`, before the thread forgets its set: the set's record of it goes
/// first (see [`clear_at_exit`]).
fn forget_mine_in_child() {
    forget_mine_here(AT_EXIT.try_with(|e| e.0.get()).ok().flatten());
}

// The set this thread bound with `cpc_bind_curlwp` (or holds an inherited copy of) and the
// engine binding that is its counters here are the engine's thread table's entry for
// `Owner::Libcpc`: signal handlers read it (`cpc_set_sample`).

/// The set this thread bound with `cpc_bind_curlwp` or inherited (0: none).
pub fn current_set() -> usize {
    engine::owned_key(Owner::Libcpc)
}

/// Record `set`, counted here by binding `id`, as this thread's set (0: none). A signal
/// handler of this thread sees no set or a consistent pair.
pub fn set_current(set: usize, id: u64) {
    engine::set_owned(Owner::Libcpc, set, id);
}

/// Run `f` on this thread's own counters for `set` (its binding or its inherited copy), if it
/// has them: `cpc_set_sample`'s path for the calling thread's set, through the thread's table
/// only. Async-signal-safe and allocation-free.
#[inline(always)]
pub fn with_mine<R>(set: usize, f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    engine::with_owned(Owner::Libcpc, Some(set), f)
}

/// This thread's own counters for `set`, as [`with_mine`] finds them, without a closure (see
/// [`engine::owned`], whose rules of use are this pointer's).
#[inline(always)]
pub fn mine(set: usize) -> Option<std::ptr::NonNull<BoundSet>> {
    engine::owned(Owner::Libcpc, Some(set))
}

/// [`mine`] whatever the binding's state (see [`engine::owned_any`]): the caller tests
/// [`BoundSet::is_gone`] before it takes it for this thread's counters.
#[inline(always)]
pub fn mine_any(set: usize) -> Option<std::ptr::NonNull<BoundSet>> {
    engine::owned_any(Owner::Libcpc, Some(set))
}

/// Run `f` on this thread's libcpc counters (the set it bound with `cpc_bind_curlwp`, or its
/// inherited copy), if it has them: what `cpc_request_preset`, `cpc_set_restart`,
/// `cpc_enable` and `cpc_disable` act on. Found by binding id, not as the engine's current
/// binding: a later libperfex `start_counters` on the thread binds counters too, and they must
/// not become the target of libcpc's restart (the SIGEMT handler's restart then restarted
/// them and left the libcpc set frozen: no overflow ever again; `tests/signal_stress.rs`).
/// Async-signal-safe and allocation-free.
#[inline]
pub fn with_curlwp<R>(f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    engine::with_owned(Owner::Libcpc, None, f)
}

/// This thread's libcpc counters, as [`with_curlwp`] finds them, without a closure (see
/// [`engine::owned`], whose rules of use are this pointer's): the SIGEMT handler's
/// `cpc_request_preset` and `cpc_set_restart` (issue 48).
#[inline(always)]
pub fn curlwp() -> Option<std::ptr::NonNull<BoundSet>> {
    engine::owned(Owner::Libcpc, None)
}

/// This thread no longer uses `set` (unbound or destroyed): forget it, drop this thread's copy
/// of it and stop passing it on. Returns whether this thread held a copy of it (then the set
/// itself, bound by another thread, is left alone).
pub fn forget(set: usize) -> bool {
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
pub fn forget_all() {
    let old = STATE
        .try_with(|s| std::mem::take(&mut *s.borrow_mut()))
        .ok();
    drop(old);
}

/// The calling thread just bound `set` (made from `reqs`) with `CPC_BIND_LWP_INHERIT` and a
/// notifying request, as binding `id` tagged `tag`: the threads it creates from now on get a
/// copy, tagged the same, as long as `live` finds the set.
pub fn enable(
    backend: &'static dyn Backend,
    set: usize,
    reqs: CounterSet,
    id: u64,
    tag: usize,
    live: Alive,
) {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        crate::base::sys::on_fork_in_child(after_fork_in_child);
    });
    let spec = Arc::new(Spec {
        backend,
        set,
        live,
        tag,
        reqs,
    });
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
    // Before the set is forgotten (the handlers of `fork` run in the order they were added).
    forget_mine_in_child();
    set_current(0, 0);
}

/// What the creating thread passes on, if it holds a live inheritable set.
pub(crate) fn snapshot() -> Option<Arc<Spec>> {
    STATE
        .try_with(|s| {
            let s = s.try_borrow().ok()?;
            let (h, id) = s.inherit.as_ref()?;
            let live = (h.0.live)(h.0.set) && engine::with_thread_binding(*id, |_| ()).is_some();
            live.then(|| h.0.clone())
        })
        .ok()
        .flatten()
}

/// Called in the new thread before its start routine: bind the copy, make it current, freeze
/// it overflowed and notify the overflow (SIGEMT to this thread). `start` is reported as the
/// overflow's program counter.
pub(crate) fn adopt(spec: Arc<Spec>, start: usize) {
    if !(spec.live)(spec.set) {
        return;
    }
    let binding =
        match engine::bind_tagged(spec.backend, &spec.reqs, Target::CurrentThread, spec.tag) {
            Ok(b) => b,
            Err(e) => {
                crate::stderr_line!(
                    "libcpc: a new thread could not inherit the counters of its creator \
                 (CPC_BIND_LWP_INHERIT): {e}"
                );
                return;
            }
        };
    if let Err(e) = binding.freeze_as_overflowed() {
        crate::stderr_line!("libcpc: a new thread's inherited counters: {e}");
        return;
    }
    let id = binding.id();
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
    with_curlwp(|b| b.notify_overflowed(start));
}

//! A libcpc set: its requests as added and its binding, and the binds and unbind of
//! cpc_bind_curlwp(3CPC): to the calling thread (with or without inheritance), to another
//! process's thread (`cpc_bind_pctx`), to a CPU (`cpc_bind_cpu`).
//!
//! A set is named by a key (the C layer's `cpc_set_t` address), which the per-thread state
//! ([`super::thread`]) records as the thread's current set. The binding sits in a bind slot
//! that signal handlers read without locks (`cpc_set_sample` in a SIGEMT handler).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::cpu::{self, CpuPin};
use super::thread as lwp;
use super::Requests;
use crate::backend::Backend;
use crate::base::error::{Error, Result};
use crate::base::set::Target;
use crate::base::signal::Blocked;
use crate::base::sys;
use crate::engine::{self, Binding, BoundSet};

/// How a set is bound.
enum How {
    /// `cpc_bind_curlwp` by thread `tid`.
    Lwp { tid: i32 },
    /// `cpc_bind_pctx`: to a thread of another process.
    Thread,
    /// `cpc_bind_cpu`: the binding thread moved to the CPU (back when the pin is dropped).
    Cpu(#[allow(dead_code)] CpuPin),
}

/// A bound set's engine state.
struct Bound {
    binding: Binding,
    how: How,
}

/// The binding of a set: a pointer that signal handlers read without locks, and a count of
/// readers so that unbinding never frees a binding a reader on another thread still uses.
///
/// Beside it, for `cpc_set_sample`'s common case (issue 48), the binder's own: the binding
/// `cpc_bind_curlwp` made and the thread pointer ([`sys::thread_pointer`]) of the thread that
/// made it, so that the binder finds its counters with one register read and two loads rather
/// than through a thread-local (a call to the TLS resolver in a shared library). While
/// `mine_owner` is thread T's pointer, T's thread table holds `mine` (so T may use it without
/// counting itself a reader): the pair is cleared before anything drops the binding from
/// that table: every unbind and rebind ([`BindSlot::replace`]), T's exit ([`forget_mine_at_exit`]
/// by way of `super::thread`). A thread created after T exited may get T's thread pointer: it
/// finds the pair cleared. In a child of `fork` every set's pair is cleared
/// ([`forget_pairs_in_child`], run by the engine's fork handler): the child's thread has the
/// forking thread's pointer, and threads the child creates may get those of the parent's
/// other threads, whose bindings are the parent's counters. So a binding found here is never
/// the parent's, and `cpc_set_sample` does not test the fork again (issue 48).
// `mine` first, and the slot first in `Set`: the C layer's set puts `Set` first too, so that
// `cpc_set_sample`'s acquiring load of it needs no address computed (issue 48).
#[repr(C)]
struct BindSlot {
    mine: AtomicPtr<BoundSet>,
    mine_owner: AtomicUsize,
    ptr: AtomicPtr<Bound>,
    readers: AtomicUsize,
}

impl BindSlot {
    const fn new() -> BindSlot {
        BindSlot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            readers: AtomicUsize::new(0),
            mine_owner: AtomicUsize::new(0),
            mine: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The binding the calling thread made with `cpc_bind_curlwp`, if this is it: read
    /// without a reader's count (see the type). Async-signal-safe: two loads beside the
    /// thread pointer, and the owner read again after the binding (a clear, then another
    /// thread's bind, between the two loads must not hand this thread that thread's binding).
    #[inline(always)]
    fn mine_here(&self) -> Option<NonNull<BoundSet>> {
        self.with_mine_here(Some, || None)
    }

    /// `found` on [`BindSlot::mine_here`]'s binding, else `not`: the branches taken on the
    /// loads' tests themselves (an `Option` of the binding was tested again for null, which
    /// it never is: issue 48, an instruction of every sample).
    #[inline(always)]
    fn with_mine_here<R>(
        &self,
        found: impl FnOnce(NonNull<BoundSet>) -> R,
        not: impl FnOnce() -> R,
    ) -> R {
        let tp = sys::thread_pointer();
        if self.mine_owner.load(Ordering::Relaxed) != tp {
            return not();
        }
        // Acquire: a binding stored after a clear (both stores release the owner's change
        // before them) makes the owner's clear visible to the load below.
        let p = self.mine.load(Ordering::Acquire);
        if self.mine_owner.load(Ordering::Relaxed) != tp {
            return not();
        }
        // SAFETY: not null. Only this thread stores its pointer as the owner, after a binding
        // that is not null (`set_mine`), which it does not run while here (it blocks signals);
        // a clear stores 0 as the owner before the null binding it releases, so the load above
        // that acquired a null binding sees the owner 0.
        found(unsafe { NonNull::new_unchecked(p) })
    }

    /// Record `b`, just bound by the calling thread to itself, as its own (see the type):
    /// never null (`mine_here` relies on it).
    fn set_mine(&self, b: NonNull<BoundSet>) {
        let b = b.as_ptr();
        self.mine.store(b, Ordering::Release);
        self.mine_owner
            .store(sys::thread_pointer(), Ordering::Release);
    }

    /// Forget the binder's own binding, whoever made it.
    fn clear_mine(&self) {
        self.mine_owner.store(0, Ordering::Relaxed);
        self.mine.store(std::ptr::null_mut(), Ordering::Release);
    }

    /// Forget the binder's own binding if the calling thread made it (it is exiting, or is
    /// the child's thread after `fork`).
    fn clear_mine_if_here(&self) {
        if self.mine_owner.load(Ordering::Relaxed) == sys::thread_pointer() {
            self.clear_mine();
        }
    }

    /// Run `f` on the binding, if bound. Async-signal-safe.
    fn with<R>(&self, f: impl FnOnce(&Bound) -> R) -> Option<R> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        let p = self.ptr.load(Ordering::SeqCst);
        // SAFETY: `replace` frees a binding only after taking it out of `ptr` and seeing no
        // reader that could have loaded it.
        let r = (!p.is_null()).then(|| f(unsafe { &*p }));
        self.readers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Whether bound.
    fn is_bound(&self) -> bool {
        !self.ptr.load(Ordering::SeqCst).is_null()
    }

    /// Put `new` in place (or unbind with `None`); the old binding is unbound and freed. Not
    /// for signal handlers: it waits for readers on other threads.
    fn replace(&self, new: Option<Box<Bound>>) {
        let _blocked = Blocked::all();
        // Before the old binding can leave its thread's table (see the type).
        self.clear_mine();
        let new = new.map_or(std::ptr::null_mut(), Box::into_raw);
        let old = self.ptr.swap(new, Ordering::SeqCst);
        if !old.is_null() {
            while self.readers.load(Ordering::SeqCst) != 0 {
                std::hint::spin_loop();
            }
            // SAFETY: made by Box::into_raw here, and no reader holds it any more.
            drop(unsafe { Box::from_raw(old) });
        }
    }
}

impl Drop for BindSlot {
    fn drop(&mut self) {
        self.replace(None);
    }
}

/// A libcpc set: its requests and, while bound, its binding.
#[repr(C)]
pub struct Set {
    // First: see `BindSlot`.
    bound: BindSlot,
    /// The requests as added.
    pub reqs: Requests,
}

impl Default for Set {
    fn default() -> Set {
        Set::new()
    }
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Set({} requests, bound: {})",
            self.reqs.len(),
            self.is_bound()
        )
    }
}

/// Where the sets are found by key: what the C layer knows of its live sets (a type, so that
/// the per-thread state, [`super::thread`], gets a plain "is it alive" function,
/// without knowing what a set is).
pub trait Sets {
    /// The live set at `key`, if any.
    fn by_key(key: usize) -> Option<&'static Set>;

    /// Run `f` on every live set: in a child of `fork`, from its fork handler (one thread,
    /// async-signal-safe: no allocation, no lock), to forget the bindings their binders made
    /// ([`Set::mine_here`]). A set it leaves out keeps its binder's binding there, the
    /// parent's counters: every set that can be bound with `cpc_bind_curlwp` must be given.
    fn each(f: &mut dyn FnMut(&Set));
}

/// Whether `S` finds a live set at `key`.
fn alive<S: Sets>(key: usize) -> bool {
    S::by_key(key).is_some()
}

impl Set {
    /// An empty, unbound set.
    pub const fn new() -> Set {
        Set {
            bound: BindSlot::new(),
            reqs: Requests::new(),
        }
    }

    /// Whether bound.
    pub fn is_bound(&self) -> bool {
        self.bound.is_bound()
    }

    /// [`Error::SetBound`] when bound (requests are added to unbound sets only).
    pub fn check_unbound(&self) -> Result<()> {
        match self.is_bound() {
            true => Err(Error::SetBound),
            false => Ok(()),
        }
    }

    /// Bind to `target`; on success the set holds the binding, described by `how`. `tag` marks
    /// the binding for the overflow hook when a request notifies.
    fn bind(
        &self,
        backend: &'static dyn Backend,
        target: Target,
        how: How,
        tag: usize,
    ) -> Result<()> {
        let set = self.reqs.counter_set()?;
        let notify = set.requests().iter().any(|r| r.flags.notify_overflow);
        // Tagged before counting starts: an overflow during the bind must reach the hook.
        let tag = if notify { tag } else { 0 };
        let binding = engine::bind_tagged(backend, &set, target, tag)?;
        self.bound.replace(Some(Box::new(Bound { binding, how })));
        Ok(())
    }

    /// `cpc_bind_curlwp`: bind this set (key `key`) to the calling thread, which holds one set:
    /// the one it bound before is unbound first (found in `S`). With `inherit`, threads
    /// created later are counted too: into this binding without a notifying request, else each
    /// with its own copy (alive while `S` finds the set; see [`super::thread`]).
    pub fn bind_curlwp<S: Sets>(
        &self,
        backend: &'static dyn Backend,
        key: usize,
        inherit: bool,
        tag: usize,
    ) -> Result<()> {
        // No signal handler of this thread may run between the unbinding of its old set and
        // the new one being recorded as its set (`set_current` below): a SIGEMT handler's
        // `cpc_set_sample`, `cpc_request_preset` and `cpc_set_restart` there would find no set
        // (EINVAL), for an overflow of the new binding that comes while it is being bound
        // (`tests/signal_stress.rs`). Overflows during the bind are handled once it is made.
        let blocked = Blocked::all();
        unbind_previous::<S>();
        self.bound.replace(None);
        // With a notifying request, each thread created later gets its own copy of the set
        // (see `super::thread`); without, their counts are summed into this binding.
        let emt = inherit && self.reqs.notifies();
        let target = if inherit && !emt {
            Target::CurrentThreadInherit
        } else {
            Target::CurrentThread
        };
        let tid = engine::gettid();
        self.bind(backend, target, How::Lwp { tid }, tag)?;
        let (id, mine) = self
            .bound
            .with(|b| (b.binding.id(), &*b.binding as *const BoundSet))
            .unwrap_or((0, std::ptr::null()));
        lwp::set_current(key, id);
        // Its own binding for `cpc_set_sample`, forgotten again when this thread exits, and
        // in a child of `fork` (without the child's handler, no pair: the thread's table
        // finds the binding, and its sample tests the fork).
        lwp::clear_at_exit(forget_mine_at_exit::<S>);
        if let (Some(mine), true) = (
            NonNull::new(mine.cast_mut()),
            engine::at_fork_child(forget_pairs_in_child::<S>),
        ) {
            self.bound.set_mine(mine);
        }
        drop(blocked);
        if emt {
            if let Ok(reqs) = self.reqs.counter_set() {
                lwp::enable(backend, key, reqs, id, tag, alive::<S>);
            }
        }
        Ok(())
    }

    /// `cpc_bind_pctx`: bind to thread `tid` of process `pid` (not inherited by its children).
    pub fn bind_thread(
        &self,
        backend: &'static dyn Backend,
        pid: i32,
        tid: i32,
        tag: usize,
    ) -> Result<()> {
        crate::api::pctx::check_thread(pid, tid)?;
        self.bound.replace(None);
        self.bind(backend, Target::Thread(tid), How::Thread, tag)
    }

    /// `cpc_bind_cpu`: count everything on processor `id`, the calling thread moved there until
    /// the set is unbound (see [`super::cpu`]).
    pub fn bind_cpu(&self, backend: &'static dyn Backend, id: i32, tag: usize) -> Result<()> {
        let cpu = cpu::processor(id)?;
        self.bound.replace(None);
        // On failure the pin is dropped: the thread's affinity is given back.
        let pin = CpuPin::take(cpu)?;
        self.bind(backend, Target::Cpu(cpu), How::Cpu(pin), tag)
    }

    /// `cpc_unbind` of this set (key `key`) by the calling thread: a thread holding an
    /// inherited copy unbinds its copy only (contexts are per LWP); otherwise the set's
    /// binding is unbound ([`Error::NotBound`] when there is none).
    pub fn unbind(&self, key: usize) -> Result<()> {
        // As in `bind_curlwp`: a handler of this thread sees the set bound or unbound, never
        // forgotten as the thread's set but still bound.
        let _blocked = Blocked::all();
        if !lwp::forget(key) {
            if !self.is_bound() {
                return Err(Error::NotBound);
            }
            self.bound.replace(None);
        }
        Ok(())
    }

    /// The binding the calling thread made of this set with `cpc_bind_curlwp`, if it did:
    /// `cpc_set_sample`'s common case, without a thread-local (issue 48); a thread holding an
    /// inherited copy finds it through [`lwp::mine`]. It may be gone (unbound on another
    /// thread meanwhile): the caller tests it ([`BoundSet::is_gone`], or the sample's own
    /// test). It is never the parent's in a child of `fork` (see [`Sets::each`]), so
    /// [`BoundSet::sample_binders_to_untimed`] may sample it. Valid while the calling thread does
    /// not unbind, bind or exit, as [`lwp::mine`]'s: use it at once, on this thread.
    /// Async-signal-safe.
    #[inline(always)]
    pub fn mine_here(&self) -> Option<NonNull<BoundSet>> {
        self.bound.mine_here()
    }

    /// `found` on [`Set::mine_here`]'s binding, else `not` (its rules), with no `Option`
    /// between (issue 48: one test fewer in `cpc_set_sample`). Async-signal-safe.
    #[inline(always)]
    pub fn with_mine_here<R>(
        &self,
        found: impl FnOnce(NonNull<BoundSet>) -> R,
        not: impl FnOnce() -> R,
    ) -> R {
        self.bound.with_mine_here(found, not)
    }

    /// Run `f` on the calling thread's counters for this set (key `key`): its binding or its
    /// inherited copy, found through thread-local state first, else the set's binding. `None`
    /// when unbound. Async-signal-safe and allocation-free.
    #[inline]
    pub fn with_counters<R>(&self, key: usize, mut f: impl FnMut(&BoundSet) -> R) -> Option<R> {
        lwp::with_mine(key, &mut f).or_else(|| self.bound.with(|b| f(&b.binding)))
    }
}

/// Unbind the set this thread bound before, if it is still a live set bound by this thread,
/// and this thread's inherited copy, if any.
/// libcpc: "an LWP holds at most one set; binding another silently unbinds the first". We also
/// mark the old set unbound (libcpc left it looking bound; sampling it then read the new set's
/// counters): sampling it is `EINVAL` until it is bound again.
fn unbind_previous<S: Sets>() {
    let prev = lwp::current_set();
    lwp::set_current(0, 0);
    lwp::forget_all();
    if let Some(s) = (prev != 0).then(|| S::by_key(prev)).flatten() {
        let mine = s
            .bound
            .with(|b| matches!(b.how, How::Lwp { tid } if tid == engine::gettid()))
            .unwrap_or(false);
        if mine {
            s.bound.replace(None);
        }
    }
}

/// In a child of `fork` (the engine's fork handler, [`engine::at_fork_child`]): every set
/// forgets its binder's binding, whoever made it (see [`BindSlot`]).
fn forget_pairs_in_child<S: Sets>() {
    S::each(&mut |s| s.bound.clear_mine());
}

/// The calling thread exits (or is the child's thread after `fork`): its set found in `S`
/// by key (`key`) forgets the thread's own binding ([`Set::mine_here`]), if the thread made
/// it: a thread created later may have its thread pointer. The set is looked up as
/// `unbind_previous` does it (the rule of the C layer: a handle is not destroyed while another
/// thread uses it).
fn forget_mine_at_exit<S: Sets>(key: usize) {
    if let Some(s) = S::by_key(key) {
        s.bound.clear_mine_if_here();
    }
}

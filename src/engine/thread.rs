//! Each thread's table of bindings: the bindings a thread made (the overflow signal's
//! handler finds its binding there by descriptor), its current one, and each library's entry
//! ([`Owner`]): libcpc's "the LWP's bound set", libperfex's start/read counters.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::{compiler_fence, Ordering};
use std::sync::Arc;

use super::BoundSet;
use crate::base::error::{Error, Result};
use crate::base::set::MAX_REQUESTS;
use crate::base::sigsafe::Blocked;

/// Bindings per thread the engine can track.
pub const MAX_THREAD_BINDINGS: usize = 64;

/// A library that keeps state of its own on each thread, in the engine's thread table: libcpc
/// one binding, recorded under its key ([`set_owned`]); libperfex its counters, a value of its
/// own type ([`with_owned_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// libcpc: the set `cpc_bind_curlwp` bound on the thread, or the thread's inherited copy.
    Libcpc = 0,
    /// libperfex: the thread's start/read counters (`crate::api::perfex`).
    Libperfex = 1,
}

/// The owners.
const OWNERS: usize = 2;

/// A library's state on a thread, kept in the thread's table ([`with_owned_state`]).
///
/// # Safety
/// An implementing type is the only one of its [`Owner`](OwnedState::OWNER): the table keeps
/// the state untyped and gives it back as this type.
pub unsafe trait OwnedState: Sized + 'static {
    /// The owner whose entry holds it.
    const OWNER: Owner;
}

/// One owner's entry on a thread: its binding, under the library's key for it (libcpc: its
/// set) and the binding's id (key 0: none); and its own state, if it keeps one.
///
/// `ptr` is the binding of `id` in the thread's table (null: not there), found once when the
/// entry is set rather than by a scan of the table on every lookup (issue 48: the scan was a
/// tenth of `cpc_set_sample`'s own work). It is valid while the table holds its strong count:
/// every place that drops a slot's count clears the `ptr` that names it first.
struct Owned {
    key: Cell<usize>,
    id: Cell<u64>,
    ptr: Cell<*const BoundSet>,
    /// A `Box<RefCell<Option<T>>>` of the owner's [`OwnedState`] type `T`, made at its first
    /// use ([`with_owned_state`]), or null.
    state: Cell<*mut ()>,
    /// How to free `state`.
    drop_state: Cell<Option<unsafe fn(*mut ())>>,
}

impl Owned {
    const fn none() -> Owned {
        Owned {
            key: Cell::new(0),
            id: Cell::new(0),
            ptr: Cell::new(std::ptr::null()),
            state: Cell::new(std::ptr::null_mut()),
            drop_state: Cell::new(None),
        }
    }
}

struct ThreadTable {
    slots: UnsafeCell<[*const BoundSet; MAX_THREAD_BINDINGS]>,
    current: Cell<*const BoundSet>,
}

/// Forget `p` as any owner's binding on this thread (its slot's strong count is about to be
/// dropped).
fn disown(p: *const BoundSet) {
    OWNED.with(|os| {
        for o in os {
            if o.ptr.get() == p {
                o.ptr.set(std::ptr::null());
            }
        }
    });
}

impl Drop for ThreadTable {
    fn drop(&mut self) {
        OWNED.with(|os| {
            for o in os {
                o.ptr.set(std::ptr::null());
            }
        });
        let slots = self.slots.get_mut();
        for s in slots.iter_mut() {
            if !s.is_null() {
                // SAFETY: every non-null slot holds one strong count from Arc::into_raw.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
        // The owners' own state last: what it holds (libperfex's binding) is unbound here.
        OWNED.with(|os| {
            for o in os {
                let p = o.state.replace(std::ptr::null_mut());
                if let (false, Some(free)) = (p.is_null(), o.drop_state.get()) {
                    // SAFETY: `p` was made by `with_owned_state` for the type `free` frees.
                    unsafe { free(p) };
                }
            }
        });
    }
}

thread_local! {
    static THREAD: ThreadTable = const {
        ThreadTable {
            slots: UnsafeCell::new([std::ptr::null(); MAX_THREAD_BINDINGS]),
            current: Cell::new(std::ptr::null()),
        }
    };

    /// Each owner's entry on this thread, by [`Owner`]: apart from the table, and without a
    /// destructor, so that reaching it is the thread-local's address alone (the table's, which
    /// has one, tests whether it ran: 3 instructions of each sample, start and read in the
    /// arm64 guest, issue 48). The table clears it when it is destroyed: its `ptr`s and the
    /// states it frees.
    static OWNED: [Owned; OWNERS] = const { [Owned::none(), Owned::none()] };
}

/// An address unique to the calling thread among the live threads of the process (that of
/// its owner entries, a thread-local without a destructor): how a sample tells whether it runs
/// on the thread a binding counts, the only thread whose counter pages a user-space read may
/// use. No system call; async-signal-safe.
#[inline(always)]
pub(super) fn thread_mark() -> usize {
    OWNED.with(|o| o.as_ptr() as usize)
}

/// Add a binding to this thread's table. Sweeps detached entries first.
pub(super) fn register(b: &Arc<BoundSet>, make_current: bool) -> Result<()> {
    let _blocked = Blocked::all();
    THREAD.with(|t| {
        // SAFETY: only this thread touches its table, and only with signals blocked, so no
        // handler observes the change half-made.
        let slots = unsafe { &mut *t.slots.get() };
        for s in slots.iter_mut() {
            // SAFETY: non-null slots are live Arcs.
            if !s.is_null() && unsafe { (**s).detached.load(Ordering::Acquire) } {
                if t.current.get() == *s {
                    t.current.set(std::ptr::null());
                }
                disown(*s);
                // SAFETY: releases this slot's strong count.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
        let free = slots.iter_mut().find(|s| s.is_null()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a thread can hold at most {MAX_THREAD_BINDINGS} bindings"
            ))
        })?;
        *free = Arc::into_raw(b.clone());
        if make_current {
            t.current.set(*free);
        }
        Ok(())
    })
}

pub(super) fn unregister(b: &Arc<BoundSet>) {
    let _blocked = Blocked::all();
    let _ = THREAD.try_with(|t| {
        // SAFETY: as in `register`.
        let slots = unsafe { &mut *t.slots.get() };
        let p = Arc::as_ptr(b);
        for s in slots.iter_mut() {
            if *s == p {
                if t.current.get() == p {
                    t.current.set(std::ptr::null());
                }
                disown(p);
                // SAFETY: releases this slot's strong count.
                unsafe { drop(Arc::from_raw(*s)) };
                *s = std::ptr::null();
            }
        }
    });
}

/// Run `f` on the calling thread's current binding (its most recent binding to itself). `None`
/// when there is none. (libcpc finds its set by id instead: [`with_thread_binding`].)
/// Async-signal-safe.
pub fn with_current<R>(f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    THREAD
        .try_with(|t| {
            let p = t.current.get();
            if p.is_null() {
                return None;
            }
            // SAFETY: the table holds a strong count for as long as `current` points here, and
            // only this thread changes it (never while a handler of this thread runs).
            let b = unsafe { &*p };
            if b.gone() {
                None
            } else {
                Some(f(b))
            }
        })
        .ok()
        .flatten()
}

/// Run `f` on the calling thread's binding `id` ([`BoundSet::id`]), if the thread holds it and
/// it is still bound. Unlike [`with_current`], this finds a binding whatever the thread bound
/// after it: libcpc's "the calling LWP's bound set" is the set `cpc_bind_curlwp` bound, even
/// when libperfex's `start_counters` bound counters on the same thread since.
/// Async-signal-safe.
pub fn with_thread_binding<R>(id: u64, f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    THREAD.try_with(|t| find(t, id, f)).ok().flatten()
}

/// `f` on binding `id` of table `t`, if it holds it and it is still bound.
#[inline]
fn find<R>(t: &ThreadTable, id: u64, f: impl FnOnce(&BoundSet) -> R) -> Option<R> {
    // SAFETY: as in `with_current`: the table holds a strong count for each non-null slot, and
    // only this thread changes it, with signals blocked.
    let slots = unsafe { &*t.slots.get() };
    slots
        .iter()
        .filter(|s| !s.is_null())
        // SAFETY: non-null slots are live.
        .map(|&s| unsafe { &*s })
        .find(|b| b.id == id && !b.gone())
        .map(f)
}

/// Record binding `id` of the calling thread as `owner`'s binding on it, under the library's
/// `key` (libcpc: its set); key 0 (and id 0): none. A signal handler of this thread sees none or
/// a consistent pair.
pub fn set_owned(owner: Owner, key: usize, id: u64) {
    OWNED.with(|os| {
        let o = &os[owner as usize];
        o.key.set(0);
        compiler_fence(Ordering::SeqCst);
        o.id.set(id);
        // The binding of `id` in the table, looked for whatever its state (a lookup checks
        // that it is still bound); none once the table is destroyed.
        let p = THREAD
            .try_with(|t| {
                // SAFETY: as in `with_current`.
                let slots = unsafe { &*t.slots.get() };
                slots
                    .iter()
                    .copied()
                    // SAFETY: non-null slots are live.
                    .find(|&s| id != 0 && !s.is_null() && unsafe { (*s).id } == id)
            })
            .ok()
            .flatten()
            .unwrap_or(std::ptr::null());
        o.ptr.set(p);
        compiler_fence(Ordering::SeqCst);
        o.key.set(key);
    });
}

/// The key of `owner`'s binding on the calling thread (0: none). Async-signal-safe.
pub fn owned_key(owner: Owner) -> usize {
    OWNED.with(|os| os[owner as usize].key.get())
}

/// Run `f` on `owner`'s binding on the calling thread (only if it is under `key`, when given),
/// if it has one and it is still bound. Async-signal-safe and allocation-free.
#[inline(always)]
pub fn with_owned<R>(
    owner: Owner,
    key: Option<usize>,
    f: impl FnOnce(&BoundSet) -> R,
) -> Option<R> {
    // SAFETY: used at once, on this thread (see `owned`).
    owned(owner, key).map(|b| f(unsafe { b.as_ref() }))
}

/// `owner`'s binding on the calling thread (only if it is under `key`, when given), if it has
/// one and it is still bound: [`with_owned`] without a closure, for the sampling paths, whose
/// sample inlined into a closure was not inlined into them (issue 48). Async-signal-safe and
/// allocation-free.
///
/// The binding stays valid while the calling thread does not bind, unbind or exit: the
/// thread's table holds a strong count of it, and only the thread itself drops it (never while
/// one of its signal handlers runs: signals are blocked then). Use it at once, on this thread.
#[inline(always)]
pub fn owned(owner: Owner, key: Option<usize>) -> Option<std::ptr::NonNull<BoundSet>> {
    // SAFETY: the pointer is live (see `owned_any`).
    owned_any(owner, key).filter(|b| !unsafe { b.as_ref() }.gone())
}

/// [`owned`] whatever the binding's state: it may be gone (unbound on another thread, or the
/// parent's after `fork`), which the caller tests ([`BoundSet::is_gone`]) before using it as
/// `owner`'s binding. For a sample that tests it anyway (the lean sample does, first): the
/// test is not made twice (issue 48). The same rules of use as [`owned`]'s.
#[inline(always)]
pub fn owned_any(owner: Owner, key: Option<usize>) -> Option<std::ptr::NonNull<BoundSet>> {
    OWNED.with(|os| {
        let o = &os[owner as usize];
        let k = o.key.get();
        if k == 0 || key.is_some_and(|key| key != k) {
            return None;
        }
        std::ptr::NonNull::new(o.ptr.get().cast_mut())
    })
}

/// `f` on the calling thread's state of `T`'s owner (empty until `f` fills it), in the
/// caller's frame: libperfex's start and read are inlined down to their counter read. Its
/// first use on a thread allocates the state; the thread's table frees it when the thread
/// exits. Not for signal handlers.
#[inline(always)]
pub fn with_owned_state<T: OwnedState, R>(f: impl FnOnce(&RefCell<Option<T>>) -> R) -> R {
    let mut p = OWNED.with(|os| os[T::OWNER as usize].state.get());
    if p.is_null() {
        p = new_state::<T>();
    }
    // SAFETY: made by `new_state::<T>` (`T` is the only type of its owner), freed only with
    // the thread's table, and used only on this thread.
    f(unsafe { &*(p as *const RefCell<Option<T>>) })
}

/// [`with_owned_state`] only when the calling thread's state of `T`'s owner was made (by an
/// earlier [`with_owned_state`]): `None` otherwise, with nothing allocated. For libperfex's
/// common start and read (issue 48), which leave anything else to the general path.
#[inline(always)]
pub fn with_made_state<T: OwnedState, R>(
    f: impl FnOnce(&RefCell<Option<T>>) -> Option<R>,
) -> Option<R> {
    let p = OWNED.with(|os| os[T::OWNER as usize].state.get());
    if p.is_null() {
        return None;
    }
    // SAFETY: as in `with_owned_state`.
    f(unsafe { &*(p as *const RefCell<Option<T>>) })
}

/// The calling thread's empty state of `T`'s owner, put in its table.
#[inline(never)]
fn new_state<T: OwnedState>() -> *mut () {
    /// Free a state made here.
    ///
    /// # Safety
    /// `p` is a state `new_state::<U>` made, not freed yet.
    unsafe fn free<U>(p: *mut ()) {
        // SAFETY: the caller's promise.
        drop(unsafe { Box::from_raw(p as *mut RefCell<Option<U>>) });
    }
    // The table's destructor frees the state: made sure to run (a thread that only uses
    // libperfex has not touched the table yet).
    THREAD.with(|_| ());
    let p = Box::into_raw(Box::new(RefCell::new(None::<T>))) as *mut ();
    OWNED.with(|os| {
        let o = &os[T::OWNER as usize];
        o.state.set(p);
        o.drop_state.set(Some(free::<T>));
    });
    p
}

/// The perf backend's overflow signal arrived carrying `fd`: find the calling thread's binding
/// that owns it and process the overflow. Async-signal-safe.
pub(crate) fn on_overflow_fd(fd: i32, hup: bool, pc: usize) {
    let _ = THREAD.try_with(|t| {
        // SAFETY: see `with_current`; the table is not being changed (signals are blocked while
        // it is).
        let slots = unsafe { &*t.slots.get() };
        for &s in slots.iter() {
            if s.is_null() {
                continue;
            }
            // SAFETY: non-null slots are live.
            let b = unsafe { &*s };
            if b.group.owns_fd(fd) {
                b.interrupt(fd, hup, pc);
                return;
            }
        }
    });
}

/// An overflow signal that says nothing of its counter arrived: the kernel's plain `SIGIO`,
/// sent instead of the overflow signal when the user's queue of real-time signals is full
/// (`RLIMIT_SIGPENDING`, shared by all of the user's processes). Every perf binding of the
/// calling thread with a notifying request that has wrapped is frozen, at a read after the
/// stop (there is no record to take). Async-signal-safe.
pub(crate) fn on_overflow_unknown(pc: usize) {
    let _ = THREAD.try_with(|t| {
        // SAFETY: as in `on_overflow_fd`.
        let slots = unsafe { &*t.slots.get() };
        for &s in slots.iter().filter(|s| !s.is_null()) {
            // SAFETY: non-null slots are live.
            let b = unsafe { &*s };
            if b.notify == 0 || b.kind.is_emulated() || b.gone() {
                continue;
            }
            if b.is_frozen() {
                // Possibly the next overflow of a group that counts on after its freeze.
                if b.runs_on() {
                    b.write(|b| b.stop_counting_on());
                }
                continue;
            }
            let mut raw = [0u64; MAX_REQUESTS];
            if b.read_raw(&mut raw).is_ok() && b.wrapped(&raw, None) != 0 {
                b.interrupt(-1, false, pc);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimBackend;
    use crate::base::set::{CounterSet, Request, Target};

    /// The pointer an owner's entry keeps to its binding (null: none).
    fn owned_ptr(owner: Owner) -> *const BoundSet {
        OWNED.with(|os| os[owner as usize].ptr.get())
    }

    fn bind_here() -> super::super::Binding {
        let backend: &'static SimBackend = Box::leak(Box::new(SimBackend::new("r10000").unwrap()));
        let set = CounterSet::new().with(Request::new("cycles")).unwrap();
        crate::engine::bind_with(backend, &set, Target::CurrentThread).unwrap()
    }

    // A binding's counter pages are read from user space on the thread that bound it alone:
    // the binding knows that thread, and a sample from any other thread is told apart (on a
    // PMU with several CPUs, another thread's `rdpmc`/`mrs` reads the counter of its own CPU).
    #[test]
    fn a_binding_tells_its_own_thread_from_the_others() {
        let b = bind_here();
        assert!(b.on_owner(), "the binding thread");
        let b = std::sync::Arc::new(b);
        let elsewhere = {
            let b = b.clone();
            std::thread::spawn(move || b.on_owner()).join().unwrap()
        };
        assert!(!elsewhere, "another thread took itself for the owner");
        // Two live threads never share a mark.
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(thread_mark()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
        });
        assert_ne!(rx.recv().unwrap(), thread_mark());
        t.join().unwrap();
    }

    // Issue 48: an owner's entry keeps its binding's address, not only its id. The table may
    // drop that binding (its own unbind on this thread, or a sweep after an unbind elsewhere)
    // while the entry still names it: the address must go with it, never left to a freed
    // binding that a sample in a signal handler would read.
    #[test]
    fn an_owners_entry_forgets_its_binding_when_the_table_drops_it() {
        let b = bind_here();
        set_owned(Owner::Libcpc, 0x1000, b.id());
        assert!(!owned_ptr(Owner::Libcpc).is_null());
        assert!(owned(Owner::Libcpc, Some(0x1000)).is_some());
        assert!(owned(Owner::Libcpc, Some(0x2000)).is_none(), "another key");
        drop(b);
        assert!(owned_ptr(Owner::Libcpc).is_null(), "unbound on this thread");
        assert!(owned(Owner::Libcpc, Some(0x1000)).is_none());

        // Unbound on another thread: detached there, dropped by this thread's next sweep.
        let b = bind_here();
        set_owned(Owner::Libcpc, 0x1000, b.id());
        std::thread::spawn(move || drop(b)).join().unwrap();
        assert!(owned(Owner::Libcpc, Some(0x1000)).is_none(), "gone");
        assert!(!owned_ptr(Owner::Libcpc).is_null(), "not swept yet");
        let any = owned_any(Owner::Libcpc, Some(0x1000)).expect("still in the table");
        // SAFETY: the table holds it until this thread's next sweep.
        assert!(unsafe { any.as_ref() }.is_gone());
        let other = bind_here();
        assert!(owned_ptr(Owner::Libcpc).is_null(), "swept");
        assert!(owned(Owner::Libcpc, Some(0x1000)).is_none());
        assert!(owned_any(Owner::Libcpc, Some(0x1000)).is_none());
        drop(other);
        set_owned(Owner::Libcpc, 0, 0);
    }
}

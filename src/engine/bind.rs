//! Binding a set: checking its requests against the backend, placing them on counters,
//! programming the group, and the [`Binding`] handle that unbinds on drop.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::thread::{on_overflow_fd, on_overflow_unknown, register, unregister};
use super::{BoundSet, LeanPages, NEXT_ID, NOT_LEAN};
use crate::backend::{self, Backend};
use crate::base::error::{Error, Result};
use crate::base::sched::{self, Candidate};
use crate::base::set::{CounterSet, Request, Target};
use crate::base::sigsafe::SeqCount;
use crate::base::sys::gettid;

/// fork()s this process has gone through (incremented in the child by a pthread_atfork
/// handler, registered at the first bind).
pub(super) static FORKS: AtomicU32 = AtomicU32::new(0);

/// What the API layers run in a child of `fork`, after [`FORKS`] is counted
/// ([`at_fork_child`]).
static CHILD_HOOKS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
    // No pair published by a thread of the parent is the child's (issue 48).
    super::pair::PAIR_SLOTS.clear_all();
    for h in &CHILD_HOOKS {
        let f = h.load(Ordering::Acquire);
        if f != 0 {
            // SAFETY: only `at_fork_child` stores, and only `fn()` pointers.
            let f = unsafe { std::mem::transmute::<usize, fn()>(f) };
            f();
        }
    }
}

/// Run `f` in every child of `fork` this process makes from now on, in the one thread the
/// child has, after the bindings made before are marked the parent's
/// ([`BoundSet::inherited_from_parent`]); async-signal-safe as a fork handler must be. Once per
/// function however often it is given; `false` when the room for them (4) is full. libcpc's
/// sets forget there the bindings their binders made (issue 48, `api::cpc::set`).
pub fn at_fork_child(f: fn()) -> bool {
    watch_forks();
    let f = f as usize;
    for h in &CHILD_HOOKS {
        match h.compare_exchange(0, f, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(g) if g == f => return true,
            Err(_) => {}
        }
    }
    false
}

fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The handler increments an atomic, clears a table of atomics and runs the hooks.
        crate::base::sys::on_fork_in_child(after_fork_in_child);
    });
}

fn zeroed(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// Check a set against a backend and find where its requests go, without binding.
pub fn plan(backend: &dyn Backend, set: &CounterSet) -> Result<Vec<crate::base::sched::Slot>> {
    if set.is_empty() {
        return Err(Error::EmptySet);
    }
    // A set that fits the host's counters without measuring them (the perf backend's few
    // requests, none pinned) is placed on the provisional ones: a first use does not pay the
    // measurement (issue 48).
    let unmeasured = backend.fits_unmeasured(set.requests());
    let info = if unmeasured {
        backend.shape_unmeasured()
    } else {
        backend.shape()
    };
    // Two requests pinned to one counter conflict whatever their events are, and whether or
    // not this host can count them (Solaris rejects duplicate picnums before configuring).
    let reqs = set.requests();
    for (j, b) in reqs.iter().enumerate() {
        if let Some((i, a)) = reqs[..j]
            .iter()
            .enumerate()
            .find(|(_, a)| a.counter.is_some() && a.counter == b.counter)
        {
            return Err(Error::Conflict(crate::base::error::Conflict {
                requests: vec![(i, a.event.clone()), (j, b.event.clone())],
                reason: crate::base::error::ConflictReason::SameCounter {
                    counters: vec![b.counter.unwrap_or(0)],
                },
            }));
        }
    }
    let mut cands: Vec<Candidate> = Vec::with_capacity(set.len());
    for r in set.requests() {
        if let Some(c) = r.counter {
            if c as usize >= info.counters {
                return Err(Error::InvalidPicnum {
                    picnum: c,
                    npic: info.counters as u32,
                });
            }
        }
        if r.flags.notify_overflow && !info.overflow_interrupt {
            return Err(Error::OverflowUnsupported {
                backend: info.kind.to_string(),
            });
        }
        cands.push(if unmeasured {
            backend.candidate_unmeasured(r)?
        } else {
            backend.candidate(r)?
        });
    }
    backend.check_set(set.requests())?;
    let names = resource_namer(backend);
    sched::schedule(&cands, info.counters, &*names)
}

/// Check one request on its own, before it joins a set: what libcpc's `cpc_set_add_request`
/// checks, in its order. The event must be countable on at least one counter
/// ([`Error::UnknownEvent`] or [`Error::EventUnavailable`]); every attribute name must be one
/// of the backend's ([`Error::InvalidAttribute`]); a pinned counter must exist
/// ([`Error::InvalidPicnum`]) and be able to count the event ([`Error::PicNotCapable`]).
/// Attribute *values*, flags and the set as a whole are checked at bind ([`plan`]).
pub fn check_request(backend: &dyn Backend, request: &Request) -> Result<()> {
    // The host's counters are measured only for a counter the backend cannot vouch for
    // without (issue 48): the checks of the event and its attributes do not place it.
    let unmeasured = backend.fits_unmeasured(std::slice::from_ref(request));
    let info = if unmeasured {
        backend.shape_unmeasured()
    } else {
        backend.shape()
    };
    let mut bare = request.clone();
    bare.attrs.clear();
    bare.counter = None;
    backend.candidate_unmeasured(&bare)?;
    if let Some(a) = request
        .attrs
        .iter()
        .find(|a| !info.attributes.contains(&a.name))
    {
        return Err(Error::InvalidAttribute {
            name: a.name.clone(),
            backend: info.kind.to_string(),
        });
    }
    if let Some(c) = request.counter {
        let npic = info.counters as u32;
        if c >= npic {
            return Err(Error::InvalidPicnum { picnum: c, npic });
        }
        bare.counter = Some(c);
        let placed = if unmeasured {
            backend.candidate_unmeasured(&bare)
        } else {
            backend.candidate(&bare)
        };
        if placed.is_err() {
            return Err(Error::PicNotCapable {
                event: request.event.clone(),
                picnum: c,
            });
        }
    }
    Ok(())
}

fn resource_namer(backend: &dyn Backend) -> Box<dyn Fn(u16) -> String + '_> {
    Box::new(move |r| backend.resource_name(r))
}

/// Whether [`bind_with`] of `set` to `target` would succeed, and with which error when not,
/// binding nothing: the set planned as the bind plans it, then opened and closed again
/// ([`Backend::check_open`]: the perf backend maps, moves, starts and registers nothing).
/// `cputrack` checks its sets so before the command runs (issue 48: its trial binds were most
/// of its fixed cost over its floor). A set that notifies on overflow is bound and dropped, so
/// that the signal's set-up is checked too.
pub fn check_bind(backend: &'static dyn Backend, set: &CounterSet, target: Target) -> Result<()> {
    if set.requests().iter().any(|r| r.flags.notify_overflow) {
        return bind_with(backend, set, target).map(drop);
    }
    let slots = plan(backend, set)?;
    backend.check_open(set.requests(), &slots, target)
}

/// Bind `set` to `target` on the process's backend ([`backend::global`]).
pub fn bind(set: &CounterSet, target: Target) -> Result<Binding> {
    bind_with(backend::global()?, set, target)
}

/// Bind `set` to `target` on a given backend.
pub fn bind_with(
    backend: &'static dyn Backend,
    set: &CounterSet,
    target: Target,
) -> Result<Binding> {
    bind_tagged(backend, set, target, 0)
}

/// [`bind_with`], with the binding's [`BoundSet::user_data`] set to `user_data` before counting
/// starts: an overflow that comes while the bind is still returning (a short distance on a
/// clock event) already carries it to the overflow hook. Setting it afterwards with
/// [`BoundSet::set_user_data`] would leave such an overflow untagged.
pub fn bind_tagged(
    backend: &'static dyn Backend,
    set: &CounterSet,
    target: Target,
    user_data: usize,
) -> Result<Binding> {
    let slots = plan(backend, set).inspect_err(|_| {
        // A set refused before it is opened leaves no counter open that its checks kept for
        // it (the perf backend's, issue 48): a bind takes or closes them.
        backend.release_kept();
    })?;
    watch_forks();
    // The clock's one-time look-up made here, not in the first sample: a sample costs the
    // same every time (the guest's count.libcpc_exact counts it to the instruction).
    crate::base::sys::prepare_clock();
    let reqs = set.requests();
    let n = reqs.len();
    let notify = reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.flags.notify_overflow)
        .fold(0u64, |m, (i, _)| m | 1 << i);
    if notify != 0 {
        crate::base::signal::install_overflow_handler(crate::base::signal::Dispatch {
            on_fd: on_overflow_fd,
            on_unknown: on_overflow_unknown,
        })?;
    }
    let group = backend.open(reqs, &slots, target)?;
    let direct = group.direct_read();
    // The lean kind: read from user space, no notifying request, one page per request (the
    // lean read indexes the pages, `base` and `origin` by request without a length test).
    let pages = direct
        .as_ref()
        .filter(|d| notify == 0 && d.reads_user())
        .and_then(|d| d.user_pages())
        .filter(|p| p.len() == n)
        .map_or(std::ptr::null(), |p| p.as_ptr());
    let lean = !pages.is_null();
    let b = Arc::new(BoundSet {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        n,
        names: reqs.iter().map(|r| r.event.clone()).collect(),
        target,
        owner: gettid(),
        owner_mark: super::thread::thread_mark(),
        kind: backend.shape_unmeasured().kind,
        group,
        lean,
        lean_pages: LeanPages(pages),
        direct,
        notify,
        seq: SeqCount::new(),
        preset: reqs.iter().map(|r| AtomicU64::new(r.preset)).collect(),
        base: zeroed(n),
        origin: zeroed(n),
        shift: zeroed(n),
        frozen_vals: zeroed(n),
        frozen_raw: zeroed(n),
        frozen_enabled: AtomicU64::new(0),
        frozen_running: AtomicU64::new(0),
        frozen_events: zeroed(n),
        sums: zeroed(n),
        state: AtomicU64::new(if lean { 0 } else { NOT_LEAN }),
        owner_key: crate::base::sigsafe::thread_key(),
        frozen_at: AtomicU64::new(0),
        overflowed: AtomicU64::new(0),
        enabled0: AtomicU64::new(0),
        running0: AtomicU64::new(0),
        bound_running0: AtomicU64::new(0),
        gen: AtomicU64::new(0),
        detached: AtomicBool::new(false),
        lost: AtomicI32::new(-1),
        quiet: AtomicBool::new(false),
        user_data: AtomicUsize::new(user_data),
        fork_gen: FORKS.load(Ordering::Relaxed),
    });
    let thread_bound = matches!(target, Target::CurrentThread | Target::CurrentThreadInherit);
    // The thread table serves `with_current` and the perf overflow signal's dispatch: a
    // binding that is neither thread-bound nor notifying needs no slot (perfex -mp holds many).
    if thread_bound || notify != 0 {
        register(&b, thread_bound)?;
    }
    let binding = Binding { inner: b };
    // Before counting starts: the first one starts the watcher thread, whose creation costs
    // this thread page faults.
    if notify != 0 && thread_bound && !binding.kind.is_emulated() {
        // An action of the overflow signal that could end the process must not get one
        // (issue 44 item 3): counting starts with the signals off, the overflows found from
        // their records (the watcher turns the signals on once the action is safe). A thread
        // that blocks the signal here keeps it on: it may unblock it at once (its overflow is
        // then handled where it unblocks); the watcher turns it off if it keeps it blocked.
        if crate::base::watch::register(binding.inner.clone())
            && crate::base::signal::signal_would_kill()
        {
            binding.inner.quieten();
        }
    } else if notify != 0 && !binding.kind.is_emulated() {
        // Counting another thread or a CPU: the signal goes to this thread, and a discard of
        // the signals pending on threads that block it for good (the watcher's, process-wide)
        // may take it while it waits; the watcher gives it back.
        crate::base::watch::register_for_resend(binding.inner.clone());
    }
    binding.write(|b| b.start_from_presets())?;
    if let Target::Thread(tid) = target {
        crate::base::held::bound(tid, binding.inner.clone());
    }
    // Backends that detect overflows themselves (the emulated PMUs) keep a weak handle.
    let weak: std::sync::Weak<BoundSet> = Arc::downgrade(&binding.inner);
    backend.attach(weak);
    Ok(binding)
}

/// A bound set, owned by the caller. Dropping it unbinds.
pub struct Binding {
    inner: Arc<BoundSet>,
}

impl Binding {
    /// The bound set, shared: for a handle that must keep it alive (`pair::UserPair`).
    pub(super) fn set_arc(&self) -> &Arc<BoundSet> {
        &self.inner
    }
}

impl std::ops::Deref for Binding {
    type Target = BoundSet;
    fn deref(&self) -> &BoundSet {
        &self.inner
    }
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("id", &self.id)
            .field("events", &self.names)
            .field("target", &self.target)
            .finish()
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.inner.detach();
        if gettid() == self.inner.owner {
            unregister(&self.inner);
            // The binding's overflow signals still queued on its thread, which blocks them,
            // would survive an `execve` (issue 44 item 4); its watcher no longer looks.
            if self.inner.notify != 0 {
                crate::base::signal::discard_pending_here();
            }
        }
        // Otherwise the owner thread sweeps its detached entries at its next bind, unbind or
        // exit; until then the stopped counters stay open.
    }
}

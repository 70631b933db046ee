//! libcpc version 1 binding and sampling: cpc_bind_event(3CPC) (`cpc_bind_event`,
//! `cpc_take_sample`, `cpc_rele`), cpc_count_usr_events(3CPC), cpc_pctx_bind_event(3CPC) and
//! cpc_shared_open(3CPC).
//!
//! A version 1 binding is a version 2 set of two requests (PIC0's and PIC1's, presets from
//! `ce_pic`) made from a handle of the library's own, and bound as `cpc_bind_curlwp`,
//! `cpc_bind_pctx` or `cpc_bind_cpu` bind: the same engine, presets, overflow notification,
//! inheritance and emulated models. A thread holds one set whichever version bound it (binding
//! with one version releases the other's), so one process can use both versions on different
//! threads. `cpc_take_sample` and a `cpc_bind_event` that only changes the presets of the
//! thread's bound event (the man page's SIGEMT handler) are async-signal-safe.

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use perfcompat::api::cpc::emt;
use perfcompat::api::cpc::thread as lwp;
use perfcompat::api::cpc::v1 as engine_v1;
use perfcompat::{BoundSet, Error};

use super::binding::LiveSets;
use super::handles::{self, Cpc, Set};
use super::v1::{arg, ctl, event_of, set_ctl, v1, V1Error, V1Result};
use super::{cpc_event_t, cpc_set_t, cpc_t, CPC_BIND_EMT_OVF, CPC_BIND_LWP_INHERIT};
use crate::edge;
use crate::pctx::pctx_t;

/// The library's own `cpc_t`, which version 1 sets are made from (0 until the first bind).
static HIDDEN: AtomicUsize = AtomicUsize::new(0);
static OPENING: Mutex<()> = Mutex::new(());

/// The library's own handle, opened on the process's backend at the first call.
fn hidden() -> V1Result<&'static Cpc> {
    if let Some(c) = hidden_now() {
        return Ok(c);
    }
    let _g = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = hidden_now() {
        return Ok(c);
    }
    let backend = perfcompat::backend::global()?;
    emt::install();
    let p = handles::new_cpc(backend)?;
    HIDDEN.store(p as usize, Ordering::Release);
    hidden_now().ok_or(V1Error::Engine(Error::OutOfHandles))
}

/// The library's own handle if it is open. Async-signal-safe.
fn hidden_now() -> Option<&'static Cpc> {
    edge::get(HIDDEN.load(Ordering::Acquire) as *mut cpc_t)
}

/// A version 1 context: the set that counts it and what a sample restores.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Context {
    set: usize,
    cpuver: c_int,
    ctl: [u32; 2],
    emt: bool,
    inherit: bool,
}

/// One version 1 set's context, readable from signal handlers without locks: `key` (the
/// set) is written last and read first, and read again after the rest.
struct Slot {
    key: AtomicUsize,
    cpuver: AtomicI32,
    ctl: AtomicU64,
    flags: AtomicU8,
    /// The set is destroyed, but threads may hold inherited copies of it, which count on
    /// (contexts are per LWP): kept until the slot is needed.
    retired: AtomicBool,
}

/// The contexts of the version 1 sets of `cpc_bind_event` (a thread that inherited one finds
/// its creator's set there: it holds a copy of it).
static SLOTS: [Slot; 256] = [const {
    Slot {
        key: AtomicUsize::new(0),
        cpuver: AtomicI32::new(0),
        ctl: AtomicU64::new(0),
        flags: AtomicU8::new(0),
        retired: AtomicBool::new(false),
    }
}; 256];
static SLOTS_WRITE: Mutex<()> = Mutex::new(());

/// Record `cx`, in a free slot or else a retired one; `false` when every slot is taken.
fn record(cx: Context) -> bool {
    let _g = SLOTS_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    // A retired set's address may be the new set's.
    for s in SLOTS
        .iter()
        .filter(|s| s.key.load(Ordering::Acquire) == cx.set)
    {
        s.key.store(0, Ordering::Release);
    }
    let free = SLOTS.iter().find(|s| s.key.load(Ordering::Acquire) == 0);
    let Some(s) = free.or_else(|| SLOTS.iter().find(|s| s.retired.load(Ordering::Acquire))) else {
        return false;
    };
    s.key.store(0, Ordering::Release);
    s.retired.store(false, Ordering::Release);
    s.cpuver.store(cx.cpuver, Ordering::Relaxed);
    s.ctl.store(
        u64::from(cx.ctl[0]) | u64::from(cx.ctl[1]) << 32,
        Ordering::Relaxed,
    );
    s.flags.store(
        u8::from(cx.emt) | u8::from(cx.inherit) << 1,
        Ordering::Relaxed,
    );
    s.key.store(cx.set, Ordering::Release);
    true
}

/// Set `key` is destroyed: its context stays for the inherited copies other threads may
/// hold (with `CPC_BIND_LWP_INHERIT`), and goes otherwise.
fn retire(key: usize) {
    let _g = SLOTS_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    for s in SLOTS
        .iter()
        .filter(|s| s.key.load(Ordering::Acquire) == key)
    {
        if s.flags.load(Ordering::Relaxed) & 2 != 0 {
            s.retired.store(true, Ordering::Release);
        } else {
            s.key.store(0, Ordering::Release);
        }
    }
}

/// The context of version 1 set `key`, if it is one. Async-signal-safe.
fn context_of(key: usize) -> Option<Context> {
    if key == 0 {
        return None;
    }
    SLOTS.iter().find_map(|s| {
        if s.key.load(Ordering::Acquire) != key {
            return None;
        }
        let (ctl, flags) = (
            s.ctl.load(Ordering::Relaxed),
            s.flags.load(Ordering::Relaxed),
        );
        let cx = Context {
            set: key,
            cpuver: s.cpuver.load(Ordering::Relaxed),
            ctl: [ctl as u32, (ctl >> 32) as u32],
            emt: flags & 1 != 0,
            inherit: flags & 2 != 0,
        };
        (s.key.load(Ordering::Acquire) == key && ours(key)).then_some(cx)
    })
}

/// Whether `key` is a set of the library's own handle, or no live set (a destroyed one, whose
/// inherited copies count on): not a version 2 set made at a retired set's address.
/// Async-signal-safe.
fn ours(key: usize) -> bool {
    match set_at(key) {
        Some(s) => hidden_now().is_some_and(|c| c.addr() == s.cpc),
        None => true,
    }
}

/// Run `f` on this thread's counters for version 1 set `key`: its binding or inherited copy,
/// or, the set destroyed, the copy alone. Async-signal-safe.
fn with_counters<R>(key: usize, f: impl FnMut(&BoundSet) -> R) -> Option<R> {
    match set_at(key) {
        Some(s) => s.with_counters(key, f),
        None => lwp::with_mine(key, f),
    }
}

/// The calling thread's version 1 context: the set it bound (or holds an inherited copy of),
/// if that is a version 1 set. Async-signal-safe.
fn current_context() -> Option<Context> {
    context_of(lwp::current_set())
}

thread_local! {
    /// The set this thread's `cpc_bind_event` made (its to destroy).
    static MINE: Cell<usize> = const { Cell::new(0) };
    /// Releases this thread's context when it exits.
    static REAPER: Reaper = const { Reaper };
}

struct Reaper;

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(set) = MINE.try_with(|m| m.replace(0)) {
            destroy(set);
        }
    }
}

/// Destroy a version 1 set (unbinding it).
fn destroy(set: usize) {
    if set == 0 {
        return;
    }
    retire(set);
    if let Some(c) = hidden_now() {
        lwp::forget(set);
        handles::destroy_child(c, set as *mut cpc_set_t);
    }
}

/// The set of a live version 1 context.
fn set_at<'a>(key: usize) -> Option<&'a Set> {
    edge::get(key as *mut cpc_set_t)
}

/// A new set of the library's handle with `ev`'s two requests (presets from `ce_pic`),
/// notifying on overflow with `emt`; checked to be for this process's processor.
fn make_set(c: &Cpc, ev: &cpc_event_t, emt: bool) -> V1Result<usize> {
    let here = engine_v1::cpuver(c.backend.shape().kind);
    if ev.ce_cpuver != here {
        return Err(V1Error::Text(
            format!(
                "the event is for cpuver {}, this process counts on cpuver {here}: make it \
                 with cpc_strtoevent(cpc_getcpuver(), ...)\n",
                ev.ce_cpuver
            ),
            libc::EINVAL,
        ));
    }
    let event = event_of(ev)?;
    let p = handles::new_set(c)?;
    let s = set_at(p as usize).ok_or(Error::OutOfHandles)?;
    for r in engine_v1::requests(&event, ev.ce_pic, emt) {
        if let Err(e) = s
            .reqs
            .add(c.backend, r.event.as_bytes(), r.preset, r.flags, r.attrs)
        {
            destroy(p as usize);
            return Err(e.into());
        }
    }
    Ok(p as usize)
}

/// Sample the set `key` (this thread's counters for it) into `ev`: counts, time, ticks, and
/// the cpuver and control fields of `cx`. Async-signal-safe.
fn sample(c: &Cpc, key: usize, cpuver: c_int, w: [u32; 2], ev: &mut cpc_event_t) -> V1Result<()> {
    let mut vals = [0u64; 2];
    let info =
        with_counters(key, |b: &BoundSet| b.sample(&mut vals)).unwrap_or(Err(Error::NotBound))?;
    ev.ce_pic = vals;
    ev.ce_hrt = info.hrtime;
    ev.ce_tsc = handles::ticks(info.bound_running_ns, c.tick_mult);
    ev.ce_cpuver = cpuver;
    set_ctl(ev, w);
    Ok(())
}

/// Rebind this thread's context to `ev` by changing its presets and restarting, when `ev` is
/// the bound event with the same flags (what the man page's SIGEMT handler does).
/// Async-signal-safe; `false` when it does not apply.
fn rebind_in_place(ev: &cpc_event_t, emt: bool, inherit: bool) -> bool {
    let Some(cx) = current_context() else {
        return false;
    };
    if cx.cpuver != ev.ce_cpuver || cx.ctl != ctl(ev) || cx.emt != emt || cx.inherit != inherit {
        return false;
    }
    let r = with_counters(cx.set, |b: &BoundSet| {
        b.set_preset(0, ev.ce_pic[0])?;
        b.set_preset(1, ev.ce_pic[1])?;
        b.restart()
    });
    matches!(r, Some(Ok(())))
}

/// `cpc_bind_event`'s work: bind `ev` to the calling thread.
fn bind_event(ev: &cpc_event_t, flags: c_int) -> V1Result<c_int> {
    let known = (CPC_BIND_EMT_OVF | CPC_BIND_LWP_INHERIT) as c_int;
    if flags & !known != 0 {
        return Err(V1Error::Text(
            format!("flags 0x{flags:x}: only CPC_BIND_LWP_INHERIT and CPC_BIND_EMT_OVF exist\n"),
            libc::EINVAL,
        ));
    }
    let emt = flags & CPC_BIND_EMT_OVF as c_int != 0;
    let inherit = flags & CPC_BIND_LWP_INHERIT as c_int != 0;
    if rebind_in_place(ev, emt, inherit) {
        return Ok(0);
    }
    let c = hidden()?;
    release();
    let key = make_set(c, ev, emt)?;
    let s = set_at(key).ok_or(Error::OutOfHandles)?;
    let (cpuver, ctl) = (ev.ce_cpuver, ctl(ev));
    // Recorded before the bind: an overflow during it finds the context.
    if !record(Context {
        set: key,
        cpuver,
        ctl,
        emt,
        inherit,
    }) {
        destroy(key);
        return Err(Error::OutOfHandles.into());
    }
    if let Err(e) = s.bind_curlwp::<LiveSets>(c.backend, key, inherit, emt::EMT_TAG) {
        destroy(key);
        return Err(e.into());
    }
    REAPER.with(|_| ());
    MINE.with(|m| m.set(key));
    Ok(0)
}

/// Release this thread's version 1 context, if any: the set it bound, or its inherited copy.
fn release() {
    if let Some(cx) = current_context() {
        lwp::forget(cx.set);
    }
    destroy(MINE.with(|m| m.replace(0)));
}

/// Bind `event`'s two events to the calling thread, each counter starting from its `ce_pic`
/// preset; a NULL `event` releases the context (cpc_bind_event(3CPC)). Flags:
/// `CPC_BIND_EMT_OVF`, the counter that wraps past 2^64 (e.g. from a preset of
/// `UINT64_MAX - 999` after 1000 events) freezes both and sends the thread `SIGEMT`
/// (`si_code` `EMT_CPCOVF`): counting stays stopped until the next `cpc_bind_event`, which a
/// SIGEMT handler may call (async-signal-safe when only the presets change);
/// `CPC_BIND_LWP_INHERIT`, threads created later are counted too (with `CPC_BIND_EMT_OVF`
/// each gets its own copy and a SIGEMT in which `cpc_take_sample` reads `UINT64_MAX`), as
/// `cpc_bind_curlwp` does. Binding replaces the thread's context, version 2's included.
///
/// # Returns
/// 0, or -1 with `errno` and a message to the error function: `EINVAL` for unknown flags, an
/// event for another cpuver or control fields `cpc_strtoevent` did not make, events the
/// processor cannot count together; `ENOTSUP` for `CPC_BIND_EMT_OVF` on a processor without
/// overflow interrupts (`sim:ultrasparc2`); `EACCES` when the kernel refuses.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_bind_event(event: *mut cpc_event_t, flags: c_int) -> c_int {
    v1(c"bind_event", -1, || {
        // SAFETY: the caller's promise.
        match unsafe { event.as_ref() } {
            None => release(),
            Some(ev) => return bind_event(ev, flags),
        }
        Ok(0)
    })
}

/// Sample the calling thread's context into `event`: `ce_pic` (64-bit values: preset + events;
/// frozen at the overflow after a `CPC_BIND_EMT_OVF` one), `ce_hrt`, `ce_tsc`, and the
/// `ce_cpuver` and control fields of the bound event (cpc_bind_event(3CPC)).
/// Async-signal-safe: a SIGEMT handler may call it.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and a message for a NULL `event` or a thread without a
/// context.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_take_sample(event: *mut cpc_event_t) -> c_int {
    v1(c"take_sample", -1, || {
        // SAFETY: the caller's promise.
        let ev = unsafe { arg(event, "cpc_event_t")? };
        let cx = current_context().ok_or(Error::NotBound)?;
        let c = hidden_now().ok_or(Error::NotBound)?;
        sample(c, cx.set, cx.cpuver, cx.ctl, ev)?;
        Ok(0)
    })
}

/// Remove the calling thread's version 1 context now (cpc_bind_event(3CPC)); otherwise it
/// goes when the thread exits.
///
/// # Returns
/// 0 (also when there was none).
#[no_mangle]
pub extern "C" fn cpc_rele() -> c_int {
    v1(c"rele", -1, || {
        release();
        Ok(0)
    })
}

/// `cpc_count_usr_events` and `cpc_count_sys_events`: rebind the context with user or system
/// counting on or off, each counter going on from its value.
fn count_mode(user: bool, enable: bool) -> V1Result<c_int> {
    let cx = current_context().ok_or_else(|| {
        V1Error::Text(
            "no performance counter context: bind one with cpc_bind_event\n".into(),
            libc::EINVAL,
        )
    })?;
    if !user && enable && cx.emt {
        return Err(V1Error::Text(
            "system events cannot be counted while overflow signals are delivered \
             (CPC_BIND_EMT_OVF)\n"
                .into(),
            libc::EINVAL,
        ));
    }
    let c = hidden()?;
    // SAFETY: all-zero bytes are a valid cpc_event_t.
    let mut ev: cpc_event_t = unsafe { std::mem::zeroed() };
    sample(c, cx.set, cx.cpuver, cx.ctl, &mut ev)?;
    let mut event = event_of(&ev)?;
    for p in &mut event.pics {
        *if user { &mut p.user } else { &mut p.system } = enable;
    }
    set_ctl(&mut ev, engine_v1::encode(&event));
    let flags = if cx.emt { CPC_BIND_EMT_OVF } else { 0 }
        | if cx.inherit { CPC_BIND_LWP_INHERIT } else { 0 };
    bind_event(&ev, flags as c_int)
}

/// Turn the counting of user-mode events on (`enable` non-zero) or off in the calling thread's
/// context without otherwise disturbing it: the counters keep their values
/// (cpc_count_usr_events(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and a message when the thread has no context.
#[no_mangle]
pub extern "C" fn cpc_count_usr_events(enable: c_int) -> c_int {
    v1(c"count_usr_events", -1, || count_mode(true, enable != 0))
}

/// Turn the counting of system-mode events on or off in the calling thread's context
/// (cpc_count_usr_events(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and a message when the thread has no context, or for
/// turning them on in a context bound with `CPC_BIND_EMT_OVF`.
#[no_mangle]
pub extern "C" fn cpc_count_sys_events(enable: c_int) -> c_int {
    v1(c"count_sys_events", -1, || count_mode(false, enable != 0))
}

// ---------------------------------------------------------------------------------------------
// Other processes (libpctx) and processors (the shared device).

/// A context bound from outside the counted thread: to LWP `id` of a libpctx process, or to
/// the CPU of a `cpc_shared_open` descriptor.
struct Outside {
    /// The `pctx_t` and LWP id, or the descriptor and its file's inode.
    owner: (usize, u64),
    set: usize,
    cpuver: c_int,
    ctl: [u32; 2],
    invalid: bool,
    /// The CPU of a shared binding.
    cpu: Option<u32>,
}

static OUTSIDE: Mutex<Vec<Outside>> = Mutex::new(Vec::new());

fn outside() -> std::sync::MutexGuard<'static, Vec<Outside>> {
    OUTSIDE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forget and destroy the contexts `dead` picks; whether there was one.
fn release_where(dead: impl Fn(&Outside) -> bool) -> bool {
    let gone: Vec<Outside> = {
        let mut o = outside();
        let (gone, keep) = std::mem::take(&mut *o).into_iter().partition(|x| dead(x));
        *o = keep;
        gone
    };
    gone.iter().for_each(|x| destroy(x.set));
    !gone.is_empty()
}

/// Forget and destroy the context of `owner`; whether there was one.
fn release_outside(owner: (usize, u64)) -> bool {
    release_where(|x| x.owner == owner)
}

/// Forget and destroy the contexts whose owner is gone without releasing them: a `pctx_t`
/// released (`pctx_release`) or a shared descriptor closed with `close` (its number may now
/// be another file's).
fn release_orphans() {
    release_where(|x| match x.cpu {
        None => crate::pctx::pid_of(x.owner.0 as *mut pctx_t).is_none(),
        Some(_) => inode(x.owner.0 as c_int) != Some(x.owner.1),
    });
}

/// Bind `ev` from outside for `owner` with `bind`, replacing its previous context.
fn bind_outside(
    owner: (usize, u64),
    ev: &cpc_event_t,
    cpu: Option<u32>,
    bind: impl FnOnce(&Cpc, &Set) -> perfcompat::Result<()>,
) -> V1Result<c_int> {
    let c = hidden()?;
    release_orphans();
    release_outside(owner);
    let key = make_set(c, ev, false)?;
    let s = set_at(key).ok_or(Error::OutOfHandles)?;
    if let Err(e) = bind(c, s) {
        destroy(key);
        return Err(e.into());
    }
    let (cpuver, ctl, invalid) = (ev.ce_cpuver, ctl(ev), false);
    outside().push(Outside {
        owner,
        set: key,
        cpuver,
        ctl,
        invalid,
        cpu,
    });
    Ok(0)
}

/// Sample the context of `owner` into `ev`.
fn sample_outside(owner: (usize, u64), ev: &mut cpc_event_t) -> V1Result<c_int> {
    let found = outside()
        .iter()
        .find(|x| x.owner == owner)
        .map(|x| (x.set, x.cpuver, x.ctl, x.invalid, x.cpu));
    let (set, cpuver, w, invalid, cpu) = found.ok_or(Error::NotBound)?;
    if invalid {
        return Err(V1Error::Text(
            "the context was invalidated (cpc_pctx_invalidate): release it with cpc_pctx_rele\n"
                .into(),
            libc::EAGAIN,
        ));
    }
    if let Some(cpu) = cpu.filter(|&c| engine_v1::bound_cpu().ok() != Some(c)) {
        return Err(V1Error::Text(
            format!("the calling thread is no longer bound to CPU {cpu}, where it opened the counters\n"),
            libc::EAGAIN,
        ));
    }
    sample(hidden()?, set, cpuver, w, ev)?;
    Ok(0)
}

/// The owner key of LWP `lwpid` of `pctx`, checked: `EINVAL` for a bad `pctx`, `ESRCH` for an
/// LWP it does not have.
fn lwp_of(pctx: *mut pctx_t, lwpid: libc::id_t) -> V1Result<((usize, u64), i32, i32)> {
    let pid = crate::pctx::pid_of(pctx).ok_or(Error::BadArgument(
        "not a pctx_t returned by pctx_create or pctx_capture",
    ))?;
    let tid = crate::pctx::tid_of(pctx, lwpid).ok_or(Error::NotAThreadOf {
        tid: lwpid as i32,
        pid,
    })?;
    Ok(((pctx as usize, u64::from(lwpid)), pid, tid))
}

/// Bind `event` to LWP `lwpid` (libpctx's id) of the process `pctx` controls, from one of its
/// callbacks; a NULL `event` releases it (cpc_pctx_bind_event(3CPC)). `flags` must be 0.
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx`, flags other than 0 and
/// `cpc_bind_event`'s reasons; `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle; `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_bind_event(
    pctx: *mut pctx_t,
    lwpid: libc::id_t,
    event: *mut cpc_event_t,
    flags: c_int,
) -> c_int {
    v1(c"pctx_bind_event", -1, || {
        let (owner, pid, tid) = lwp_of(pctx, lwpid)?;
        // SAFETY: the caller's promise.
        let Some(ev) = (unsafe { event.as_ref() }) else {
            release_outside(owner);
            return Ok(0);
        };
        no_flags(flags)?;
        bind_outside(owner, ev, None, |c, s| {
            s.bind_thread(c.backend, pid, tid, emt::EMT_TAG)
        })
    })
}

/// An engine error told as its own text (an invalid argument without the "invalid argument"
/// prefix).
fn plain(e: Error) -> V1Error {
    match e {
        Error::InvalidArgument(m) => V1Error::Text(m + "\n", libc::EINVAL),
        e => e.into(),
    }
}

/// `EINVAL` unless `flags` is 0.
fn no_flags(flags: c_int) -> V1Result<()> {
    match flags {
        0 => Ok(()),
        f => Err(V1Error::Text(
            format!("flags 0x{f:x}: must be 0 here\n"),
            libc::EINVAL,
        )),
    }
}

/// Sample LWP `lwpid`'s context into `event` (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx`, a NULL `event` or an LWP
/// without a context; `ESRCH` for an LWP the process does not have; `EAGAIN` after
/// `cpc_pctx_invalidate`.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle; `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_take_sample(
    pctx: *mut pctx_t,
    lwpid: libc::id_t,
    event: *mut cpc_event_t,
) -> c_int {
    v1(c"pctx_take_sample", -1, || {
        let (owner, _, _) = lwp_of(pctx, lwpid)?;
        // SAFETY: the caller's promise.
        sample_outside(owner, unsafe { arg(event, "cpc_event_t")? })
    })
}

/// Remove LWP `lwpid`'s context (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0 (also when it had none), or -1 with `errno` and a message: `EINVAL` for a bad `pctx`,
/// `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_rele(pctx: *mut pctx_t, lwpid: libc::id_t) -> c_int {
    v1(c"pctx_rele", -1, || {
        release_outside(lwp_of(pctx, lwpid)?.0);
        Ok(0)
    })
}

/// Invalidate LWP `lwpid`'s context: its samples fail with `EAGAIN` until it is released
/// (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx` or an LWP without a
/// context, `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_invalidate(pctx: *mut pctx_t, lwpid: libc::id_t) -> c_int {
    v1(c"pctx_invalidate", -1, || {
        let owner = lwp_of(pctx, lwpid)?.0;
        let mut o = outside();
        let x = o
            .iter_mut()
            .find(|x| x.owner == owner)
            .ok_or(Error::NotBound)?;
        x.invalid = true;
        Ok(0)
    })
}

/// The owner key of shared descriptor `fd`: `EINVAL` when it is not one `cpc_shared_open`
/// returned (and still open).
fn shared_fd(fd: c_int) -> V1Result<(usize, u64)> {
    let ino = inode(fd);
    let ok = ino.is_some_and(|i| {
        SHARED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(fd, i))
    });
    match (ok, ino) {
        (true, Some(i)) => Ok((fd as usize, i)),
        _ => Err(V1Error::Text(
            format!("descriptor {fd} was not returned by cpc_shared_open (or is closed)\n"),
            libc::EINVAL,
        )),
    }
}

/// The descriptors `cpc_shared_open` returned and their files' inodes.
static SHARED: Mutex<Vec<(c_int, u64)>> = Mutex::new(Vec::new());

fn inode(fd: c_int) -> Option<u64> {
    // SAFETY: fstat fills a plain struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some(st.st_ino)
    }
}

/// `cpc_shared_open`'s work: a descriptor of a file of its own (a memfd, whose inode no
/// other descriptor has).
fn open_shared() -> V1Result<c_int> {
    if perfcompat::backend::global().is_err() {
        return Err(V1Error::Text(
            "this machine's counters cannot be used\n".into(),
            libc::ENXIO,
        ));
    }
    // SAFETY: a plain system call with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"libcpc-shared".as_ptr(), libc::MFD_CLOEXEC) };
    let ino = (fd >= 0)
        .then(|| inode(fd))
        .flatten()
        .ok_or(Error::last_os("memfd_create"))?;
    SHARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((fd, ino));
    Ok(fd)
}

/// Open the counters of the processor the calling thread is bound to (cpc_shared_open(3CPC)):
/// a descriptor for `cpc_shared_bind_event`. On Linux, counting a CPU needs
/// `perf_event_paranoid` at 0 or below, `CAP_PERFMON` or root (checked at bind); per-thread
/// contexts are not invalidated.
///
/// # Returns
/// The descriptor, or -1 with `errno` and a message: `ENXIO` when no counters can be used.
#[no_mangle]
pub extern "C" fn cpc_shared_open() -> c_int {
    v1(c"shared_open", -1, open_shared)
}

/// Bind `event` to the counters of the CPU the calling thread is bound to (with
/// `sched_setaffinity` to one CPU, Solaris's `processor_bind`), counting everything that runs
/// there; a NULL `event` releases them (cpc_shared_open(3CPC)). `flags` must be 0.
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad descriptor, flags other than 0, a
/// thread not bound to one CPU, and `cpc_bind_event`'s reasons; `EACCES` without the
/// privilege to count a CPU.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_shared_bind_event(
    fd: c_int,
    event: *mut cpc_event_t,
    flags: c_int,
) -> c_int {
    v1(c"shared_bind_event", -1, || {
        let owner = shared_fd(fd)?;
        // SAFETY: the caller's promise.
        let Some(ev) = (unsafe { event.as_ref() }) else {
            release_outside(owner);
            return Ok(0);
        };
        no_flags(flags)?;
        let cpu = engine_v1::bound_cpu().map_err(plain)?;
        bind_outside(owner, ev, Some(cpu), |c, s| {
            s.bind_cpu(c.backend, cpu as i32, emt::EMT_TAG)
        })
    })
}

/// Sample the counters bound to descriptor `fd` into `event` (cpc_shared_open(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad descriptor, a NULL `event` or
/// nothing bound; `EAGAIN` when the thread is no longer bound to the CPU.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_shared_take_sample(fd: c_int, event: *mut cpc_event_t) -> c_int {
    v1(c"shared_take_sample", -1, || {
        let owner = shared_fd(fd)?;
        // SAFETY: the caller's promise.
        sample_outside(owner, unsafe { arg(event, "cpc_event_t")? })
    })
}

/// Release the counters bound to descriptor `fd` (cpc_shared_open(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and a message for a bad descriptor.
#[no_mangle]
pub extern "C" fn cpc_shared_rele(fd: c_int) -> c_int {
    v1(c"shared_rele", -1, || {
        release_outside(shared_fd(fd)?);
        Ok(0)
    })
}

/// Release the counters bound to descriptor `fd` and close it (cpc_shared_open(3CPC)). A bad
/// descriptor is told to the error function (`errno` `EINVAL`).
#[no_mangle]
pub extern "C" fn cpc_shared_close(fd: c_int) {
    v1(c"shared_close", (), || {
        let owner = shared_fd(fd)?;
        release_outside(owner);
        SHARED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&(f, i)| (f, i) != (fd, owner.1));
        // SAFETY: a descriptor this library opened.
        unsafe { libc::close(fd) };
        Ok(())
    })
}

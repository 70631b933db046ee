//! libcpc version 1's contexts (issue 45 item 11: moved here from the C layer):
//! cpc_bind_event(3CPC) (`cpc_bind_event`, `cpc_take_sample`, `cpc_rele`),
//! cpc_count_usr_events(3CPC), cpc_pctx_bind_event(3CPC) and cpc_shared_open(3CPC). The C
//! functions (`perfcompat-capi`'s `cpc` module) convert a `cpc_event_t` to and from
//! [`Words`] and [`Sample`] and call these.
//!
//! A version 1 binding is a version 2 set ([`Set`]) of two requests (PIC0's and PIC1's,
//! presets from `ce_pic`: [`v1::requests`]), owned here, and bound as `cpc_bind_curlwp`,
//! `cpc_bind_pctx` or `cpc_bind_cpu` bind: the same engine, presets, overflow notification,
//! inheritance and emulated models. A set is named by its key (its address here), as the C
//! layer's sets are by theirs. A thread holds one set whichever version bound it (binding
//! with one version releases the other's: the C layer's [`Sets`] finds these sets too, through
//! [`live`]), so one process can use both versions on different threads.
//!
//! # Async-signal-safety
//! [`take_sample`] and a [`bind_event`] that only changes the presets of the thread's bound
//! event (the man page's SIGEMT handler) take no lock and allocate nothing: the table of sets
//! is read with atomics, and a set is freed only after the readers that may have found it are
//! done (the binding thread's signals blocked meanwhile).
//!
//! # Without a context
//! On Solaris `cpc_take_sample`, `cpc_count_usr_events` and `cpc_count_sys_events` were bare
//! system calls: without a context they return -1 with `errno` `EINVAL` and say nothing
//! ([`V1Error::Quiet`], issue 45 item 5). A thread counted from outside (our `cputrack`, a
//! libpctx client's `cpc_pctx_bind_event` or `cpc_bind_pctx`) has its context in the
//! controller: `cpc_count_usr_events` there asks the controller to stop or resume the counters
//! it bound to the thread, as version 2's `cpc_disable` and `cpc_enable` do
//! ([`crate::api::pctx::tell_controller`], issue 45 item 4).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::emt;
use super::set::{Set, Sets};
use super::thread as lwp;
use super::v1::{self, V1Error, V1Result, NPIC};
use crate::backend::Backend;
use crate::base::error::Error;
use crate::base::signal::Blocked;
use crate::engine::BoundSet;

/// `cpc_bind_event`'s flag: threads created later inherit the context.
pub const BIND_LWP_INHERIT: i32 = 0x1;
/// `cpc_bind_event`'s flag: the counter that wraps freezes both and sends `SIGEMT`.
pub const BIND_EMT_OVF: i32 = 0x2;

/// What a `cpc_event_t` says to a bind: the processor, the control words (see
/// [`v1::encode`]) and the two presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Words {
    /// `ce_cpuver`.
    pub cpuver: i32,
    /// The control fields' two 32-bit halves.
    pub ctl: [u32; NPIC],
    /// `ce_pic`: the presets.
    pub pic: [u64; NPIC],
}

/// A sample of a version 1 context: the bound event's words with the counts, and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The bound event's `ce_cpuver`, control words, and the counter values as `pic`.
    pub words: Words,
    /// When sampled (`CLOCK_MONOTONIC` ns): `ce_hrt`.
    pub hrtime: i64,
    /// Nanoseconds the counters ran since the bind (not since the last restart: issue 45
    /// item 1): the C layer's `ce_tsc` clock.
    pub running_ns: u64,
}

/// What a version 1 set was bound with.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Context {
    cpuver: i32,
    ctl: [u32; NPIC],
    emt: bool,
    inherit: bool,
}

/// A version 1 set and its context.
struct Entry {
    set: Set,
    cx: Context,
    /// Destroyed, but threads may hold inherited copies of it, which count on (contexts are
    /// per LWP): kept (its context found by them) until its room in the table is needed.
    retired: AtomicBool,
}

const ROOM: usize = 256;

/// The version 1 sets: pointers to boxed entries, read without locks.
static TABLE: [AtomicPtr<Entry>; ROOM] = [const { AtomicPtr::new(std::ptr::null_mut()) }; ROOM];
/// Readers of [`TABLE`] now: an entry is freed only when there are none.
static READERS: AtomicUsize = AtomicUsize::new(0);
/// Held by the writers of [`TABLE`].
static WRITE: Mutex<()> = Mutex::new(());

fn write() -> MutexGuard<'static, ()> {
    WRITE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `f` on the entry of key `key`, retired or not. Async-signal-safe.
fn with_entry<R>(key: usize, f: impl FnOnce(&Entry) -> R) -> Option<R> {
    if key == 0 {
        return None;
    }
    READERS.fetch_add(1, Ordering::SeqCst);
    let found = TABLE
        .iter()
        .any(|p| p.load(Ordering::SeqCst) as usize == key);
    // SAFETY: a pointer in the table is a live box, freed only once out of the table and
    // with no reader left (`free`); this reader is counted.
    let r = found.then(|| f(unsafe { &*(key as *const Entry) }));
    READERS.fetch_sub(1, Ordering::SeqCst);
    r
}

/// The live (not retired) version 1 set of key `key`: for the C layer's [`Sets`], so that
/// binding a version 2 set releases a thread's version 1 context, and inheritance stops
/// when the set is destroyed.
pub fn live(key: usize) -> Option<&'static Set> {
    with_entry(key, |e| {
        // SAFETY: as in `with_entry`; the C layer's handles are used the same way (a set is
        // destroyed by the thread that uses it, or under the table's lock).
        (!e.retired.load(Ordering::Acquire)).then(|| unsafe { &*(&e.set as *const Set) })
    })
    .flatten()
}

/// Run `f` on every version 1 set, retired or not (the C layer's [`Sets::each`]).
/// Async-signal-safe: no lock, the readers counted as in `with_entry`.
pub fn each(f: &mut dyn FnMut(&Set)) {
    READERS.fetch_add(1, Ordering::SeqCst);
    for p in &TABLE {
        let e = p.load(Ordering::SeqCst);
        if !e.is_null() {
            // SAFETY: as in `with_entry`: in the table, and this reader is counted.
            f(&unsafe { &*e }.set);
        }
    }
    READERS.fetch_sub(1, Ordering::SeqCst);
}

/// Take entry `key` out of the table and free it (unbinding its set) once no reader can
/// hold it.
fn free(key: usize) {
    let taken = {
        let _g = write();
        TABLE
            .iter()
            .find(|p| p.load(Ordering::SeqCst) as usize == key)
            .map(|p| p.swap(std::ptr::null_mut(), Ordering::SeqCst))
    };
    let Some(p) = taken.filter(|p| !p.is_null()) else {
        return;
    };
    let _blocked = Blocked::all();
    while READERS.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
    // SAFETY: made by Box::into_raw in `insert`, out of the table, and no reader holds it.
    drop(unsafe { Box::from_raw(p) });
}

/// Put `e` in the table (in a free room, else a retired set's); its key.
fn insert(e: Box<Entry>) -> V1Result<usize> {
    let p = Box::into_raw(e);
    let retired = {
        let _g = write();
        if let Some(r) = TABLE.iter().find(|r| r.load(Ordering::SeqCst).is_null()) {
            r.store(p, Ordering::SeqCst);
            return Ok(p as usize);
        }
        TABLE.iter().map(|r| r.load(Ordering::SeqCst)).find(|&q| {
            // SAFETY: a live box of the table, under the writers' lock.
            unsafe { &*q }.retired.load(Ordering::Acquire)
        })
    };
    match retired {
        Some(q) => {
            free(q as usize);
            // SAFETY: made by Box::into_raw above, not in the table.
            insert(unsafe { Box::from_raw(p) })
        }
        None => {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(p) });
            Err(Error::OutOfHandles.into())
        }
    }
}

/// The context of version 1 set `key`. Async-signal-safe.
fn context_of(key: usize) -> Option<Context> {
    with_entry(key, |e| e.cx)
}

/// Run `f` on this thread's counters for version 1 set `key`: its binding or inherited copy,
/// or, the set destroyed, the copy alone. Async-signal-safe.
fn with_counters<R>(key: usize, mut f: impl FnMut(&BoundSet) -> R) -> Option<R> {
    lwp::with_mine(key, &mut f)
        .or_else(|| with_entry(key, |e| e.set.with_counters(key, &mut f)).flatten())
}

/// The calling thread's version 1 set and context: the set it bound (or holds an inherited
/// copy of), if that is a version 1 set. Async-signal-safe.
fn current() -> Option<(usize, Context)> {
    let key = lwp::current_set();
    context_of(key).map(|cx| (key, cx))
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

/// Destroy version 1 set `key` (unbinding it): it stays for the inherited copies other
/// threads may hold (with `CPC_BIND_LWP_INHERIT`), and goes otherwise.
fn destroy(key: usize) {
    if key == 0 {
        return;
    }
    lwp::forget(key);
    let inherit = with_entry(key, |e| {
        let _ = e.set.unbind(key);
        if e.cx.inherit {
            e.retired.store(true, Ordering::Release);
        }
        e.cx.inherit
    });
    if inherit == Some(false) {
        free(key);
    }
}

/// The process's backend, the overflow notification installed.
fn backend() -> V1Result<&'static dyn Backend> {
    let b = crate::backend::global()?;
    emt::install();
    Ok(b)
}

/// A new set for `w` (presets from `w.pic`), notifying on overflow with `emt`; checked to be
/// for this process's processor.
fn make_set(b: &'static dyn Backend, w: &Words, emt: bool, inherit: bool) -> V1Result<usize> {
    let here = v1::cpuver(b.shape_unmeasured().kind);
    if w.cpuver != here {
        return Err(V1Error::Text(
            format!(
                "the event is for cpuver {}, this process counts on cpuver {here}: make it \
                 with cpc_strtoevent(cpc_getcpuver(), ...)\n",
                w.cpuver
            ),
            libc::EINVAL,
        ));
    }
    let event = v1::decode(w.cpuver, w.ctl)?;
    let e = Box::new(Entry {
        set: Set::new(),
        cx: Context {
            cpuver: w.cpuver,
            ctl: w.ctl,
            emt,
            inherit,
        },
        retired: AtomicBool::new(false),
    });
    for r in v1::requests(&event, w.pic, emt) {
        e.set
            .reqs
            .add(b, r.event.as_bytes(), r.preset, r.flags, r.attrs)?;
    }
    insert(e)
}

/// Sample this thread's counters for set `key` with context `cx`. Async-signal-safe.
fn sample(key: usize, cx: Context) -> V1Result<Sample> {
    let mut pic = [0u64; NPIC];
    let info =
        with_counters(key, |b: &BoundSet| b.sample(&mut pic)).unwrap_or(Err(Error::NotBound))?;
    Ok(Sample {
        words: Words {
            cpuver: cx.cpuver,
            ctl: cx.ctl,
            pic,
        },
        hrtime: info.hrtime,
        running_ns: info.bound_running_ns,
    })
}

/// Rebind this thread's context to `w` by changing its presets and restarting, when `w` is
/// the bound event with the same flags (what the man page's SIGEMT handler does).
/// Async-signal-safe; `false` when it does not apply.
fn rebind_in_place(w: &Words, emt: bool, inherit: bool) -> bool {
    let Some((key, cx)) = current() else {
        return false;
    };
    if cx.cpuver != w.cpuver || cx.ctl != w.ctl || cx.emt != emt || cx.inherit != inherit {
        return false;
    }
    let r = with_counters(key, |b: &BoundSet| {
        b.set_preset(0, w.pic[0])?;
        b.set_preset(1, w.pic[1])?;
        b.restart()
    });
    matches!(r, Some(Ok(())))
}

/// `cpc_bind_event`: bind `w` to the calling thread (`None`: release its context). `S` finds
/// the C layer's sets (a thread's version 2 set is released by this bind) and these.
/// Async-signal-safe when only the presets of the bound event change.
pub fn bind_event<S: Sets>(w: Option<&Words>, flags: i32) -> V1Result<()> {
    let Some(w) = w else {
        release();
        return Ok(());
    };
    if flags & !(BIND_EMT_OVF | BIND_LWP_INHERIT) != 0 {
        return Err(V1Error::Text(
            format!("flags 0x{flags:x}: only CPC_BIND_LWP_INHERIT and CPC_BIND_EMT_OVF exist\n"),
            libc::EINVAL,
        ));
    }
    let emt = flags & BIND_EMT_OVF != 0;
    let inherit = flags & BIND_LWP_INHERIT != 0;
    if rebind_in_place(w, emt, inherit) {
        return Ok(());
    }
    let b = backend()?;
    release();
    let key = make_set(b, w, emt, inherit)?;
    let bound = with_entry(key, |e| {
        e.set.bind_curlwp::<S>(b, key, inherit, emt::EMT_TAG)
    })
    .unwrap_or(Err(Error::OutOfHandles));
    if let Err(e) = bound {
        destroy(key);
        return Err(e.into());
    }
    REAPER.with(|_| ());
    MINE.with(|m| m.set(key));
    Ok(())
}

/// `cpc_rele`: release this thread's version 1 context, if any: the set it bound, or its
/// inherited copy.
pub fn release() {
    if let Some((key, _)) = current() {
        lwp::forget(key);
    }
    destroy(MINE.with(|m| m.replace(0)));
}

/// `cpc_take_sample`: sample the calling thread's context. [`V1Error::Quiet`] `EINVAL`
/// without one. Async-signal-safe.
pub fn take_sample() -> V1Result<Sample> {
    let (key, cx) = current().ok_or(V1Error::Quiet(libc::EINVAL))?;
    sample(key, cx)
}

/// `cpc_count_usr_events` (`user`) and `cpc_count_sys_events`: rebind the calling thread's
/// context with user or system counting on or off, each counter going on from its value.
/// Without a context: `cpc_count_usr_events` asks the controller that counts the thread
/// from outside, if any, to resume (`enable`) or stop its counters there (0 when one did);
/// otherwise [`V1Error::Quiet`] `EINVAL`, as Solaris's system call.
pub fn count_mode<S: Sets>(user: bool, enable: bool) -> V1Result<()> {
    let Some((key, cx)) = current() else {
        return match user && crate::api::pctx::tell_controller(enable) {
            true => Ok(()),
            false => Err(V1Error::Quiet(libc::EINVAL)),
        };
    };
    if !user && enable && cx.emt {
        return Err(V1Error::Text(
            "system events cannot be counted while overflow signals are delivered \
             (CPC_BIND_EMT_OVF)\n"
                .into(),
            libc::EINVAL,
        ));
    }
    let now = sample(key, cx)?;
    let mut event = v1::decode(cx.cpuver, cx.ctl)?;
    for p in &mut event.pics {
        *if user { &mut p.user } else { &mut p.system } = enable;
    }
    let w = Words {
        ctl: v1::encode(&event),
        ..now.words
    };
    let flags =
        if cx.emt { BIND_EMT_OVF } else { 0 } | if cx.inherit { BIND_LWP_INHERIT } else { 0 };
    bind_event::<S>(Some(&w), flags)
}

// ---------------------------------------------------------------------------------------------
// Other processes (libpctx) and processors (the shared device).

/// Who owns a context bound from outside the counted thread: LWP `.1` of the libpctx handle
/// at `.0`, or the `cpc_shared_open` descriptor `.0` and its file's inode `.1`.
pub type Owner = (usize, u64);

/// Where a context bound from outside counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    /// Thread `tid` of process `pid` (`cpc_pctx_bind_event`).
    Thread {
        /// The process.
        pid: i32,
        /// The thread.
        tid: i32,
    },
    /// The CPU the calling thread is bound to (`cpc_shared_bind_event`).
    Cpu,
}

/// A context bound from outside.
struct Bound {
    owner: Owner,
    set: usize,
    cx: Context,
    invalid: bool,
    /// The CPU of a shared binding.
    cpu: Option<u32>,
}

static OUTSIDE: Mutex<Vec<Bound>> = Mutex::new(Vec::new());

fn outside() -> MutexGuard<'static, Vec<Bound>> {
    OUTSIDE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forget and destroy the contexts `dead` picks; whether there was one.
fn release_where(dead: impl Fn(&Bound) -> bool) -> bool {
    let gone: Vec<Bound> = {
        let mut o = outside();
        let (gone, keep) = std::mem::take(&mut *o).into_iter().partition(|x| dead(x));
        *o = keep;
        gone
    };
    gone.iter().for_each(|x| destroy(x.set));
    !gone.is_empty()
}

/// `cpc_pctx_rele`, `cpc_shared_rele`: forget and destroy the context of `owner`; whether
/// there was one.
pub fn release_outside(owner: Owner) -> bool {
    release_where(|x| x.owner == owner)
}

/// `cpc_pctx_bind_event` and `cpc_shared_bind_event`: bind `w` for `owner` where `to` says,
/// replacing its previous context (`None`: release it). `flags` must be 0. Contexts whose
/// owner is gone without releasing them are released first: a libpctx handle `pctx_alive`
/// does not know any more, a shared descriptor closed with `close` (its number may now be
/// another file's).
pub fn bind_outside(
    owner: Owner,
    w: Option<&Words>,
    flags: i32,
    to: Outside,
    pctx_alive: impl Fn(usize) -> bool,
) -> V1Result<()> {
    let Some(w) = w else {
        release_outside(owner);
        return Ok(());
    };
    if flags != 0 {
        return Err(V1Error::Text(
            format!("flags 0x{flags:x}: must be 0 here\n"),
            libc::EINVAL,
        ));
    }
    let cpu = match to {
        Outside::Cpu => Some(v1::bound_cpu().map_err(plain)?),
        Outside::Thread { .. } => None,
    };
    let b = backend()?;
    release_where(|x| match x.cpu {
        None => !pctx_alive(x.owner.0),
        Some(_) => inode(x.owner.0 as i32) != Some(x.owner.1),
    });
    release_outside(owner);
    let key = make_set(b, w, false, false)?;
    let bound = with_entry(key, |e| match (to, cpu) {
        (Outside::Thread { pid, tid }, _) => e.set.bind_thread(b, pid, tid, emt::EMT_TAG),
        (Outside::Cpu, Some(cpu)) => e.set.bind_cpu(b, cpu as i32, emt::EMT_TAG),
        (Outside::Cpu, None) => Err(Error::NotBound),
    })
    .unwrap_or(Err(Error::OutOfHandles));
    if let Err(e) = bound {
        destroy(key);
        return Err(e.into());
    }
    let cx = context_of(key).ok_or(Error::OutOfHandles)?;
    outside().push(Bound {
        owner,
        set: key,
        cx,
        invalid: false,
        cpu,
    });
    Ok(())
}

/// `cpc_pctx_take_sample`, `cpc_shared_take_sample`: sample the context of `owner`.
pub fn sample_outside(owner: Owner) -> V1Result<Sample> {
    let found = outside()
        .iter()
        .find(|x| x.owner == owner)
        .map(|x| (x.set, x.cx, x.invalid, x.cpu));
    let (set, cx, invalid, cpu) = found.ok_or(Error::NotBound)?;
    if invalid {
        return Err(V1Error::Text(
            "the context was invalidated (cpc_pctx_invalidate): release it with cpc_pctx_rele\n"
                .into(),
            libc::EAGAIN,
        ));
    }
    if let Some(cpu) = cpu.filter(|&c| v1::bound_cpu().ok() != Some(c)) {
        return Err(V1Error::Text(
            format!("the calling thread is no longer bound to CPU {cpu}, where it opened the counters\n"),
            libc::EAGAIN,
        ));
    }
    sample(set, cx)
}

/// `cpc_pctx_invalidate`: the samples of `owner`'s context fail with `EAGAIN` until it is
/// released; [`Error::NotBound`] without one.
pub fn invalidate(owner: Owner) -> V1Result<()> {
    let mut o = outside();
    let x = o
        .iter_mut()
        .find(|x| x.owner == owner)
        .ok_or(Error::NotBound)?;
    x.invalid = true;
    Ok(())
}

/// An engine error told as its own text (an invalid argument without the "invalid argument"
/// prefix).
fn plain(e: Error) -> V1Error {
    match e {
        Error::InvalidArgument(m) => V1Error::Text(m + "\n", libc::EINVAL),
        e => e.into(),
    }
}

/// The descriptors `cpc_shared_open` returned and their files' inodes.
static SHARED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

fn shared() -> MutexGuard<'static, Vec<(i32, u64)>> {
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

fn inode(fd: i32) -> Option<u64> {
    // SAFETY: fstat fills a plain struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some(st.st_ino)
    }
}

/// The owner of shared descriptor `fd`: `EINVAL` when it is not one `cpc_shared_open`
/// returned (and still open).
pub fn shared_owner(fd: i32) -> V1Result<Owner> {
    match inode(fd).filter(|&i| shared().contains(&(fd, i))) {
        Some(i) => Ok((fd as usize, i)),
        None => Err(V1Error::Text(
            format!("descriptor {fd} was not returned by cpc_shared_open (or is closed)\n"),
            libc::EINVAL,
        )),
    }
}

/// `cpc_shared_open`: a descriptor of a file of its own (a memfd, whose inode no other
/// descriptor has); `ENXIO` when no counters can be used.
pub fn shared_open() -> V1Result<i32> {
    if crate::backend::global().is_err() {
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
    shared().push((fd, ino));
    Ok(fd)
}

/// `cpc_shared_close`: release the counters bound to `fd` and close it.
pub fn shared_close(fd: i32) -> V1Result<()> {
    let owner = shared_owner(fd)?;
    release_outside(owner);
    shared().retain(|&(f, i)| (f, i) != (fd, owner.1));
    // SAFETY: a descriptor this library opened.
    unsafe { libc::close(fd) };
    Ok(())
}

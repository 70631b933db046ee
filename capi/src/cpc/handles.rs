//! What the libcpc handles point to: a `cpc_t` ([`Cpc`]) owns its sets ([`Set`]) and buffers
//! ([`Buf`]); a bound set holds the engine's [`Binding`] ([`Bound`]). Handles are checked
//! against the registry before they are dereferenced (the `edge` module's [`Handle`] lookup).

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use perfcompat::backend::Backend;
use perfcompat::cpc::cpu::CpuPin;
use perfcompat::cpc::Requests;
use perfcompat::signal::Blocked;
use perfcompat::{Binding, Error, Result};

use super::{cpc_buf_t, cpc_set_t, cpc_t};
use crate::edge::registry;
use crate::edge::{Handle, Handler, Kind, Tell, Tells};

/// What a `cpc_t` that is not a live one is told.
pub(crate) const NO_CPC: &str = "not a cpc_t returned by cpc_open (or already closed)";

// SAFETY: only `new_cpc` registers Kind::Cpc pointers, boxes of Cpc.
unsafe impl Handle for cpc_t {
    const KIND: Kind = Kind::Cpc;
    type Target = Cpc;
    const BAD: &'static str = NO_CPC;
}

// SAFETY: only `new_set` registers Kind::Set pointers, boxes of Set.
unsafe impl Handle for cpc_set_t {
    const KIND: Kind = Kind::Set;
    type Target = Set;
    const BAD: &'static str = super::NO_SET;
}

// SAFETY: only `new_buf` registers Kind::Buf pointers, boxes of Buf.
unsafe impl Handle for cpc_buf_t {
    const KIND: Kind = Kind::Buf;
    type Target = Buf;
    const BAD: &'static str = super::NO_BUF;
}

impl Tells for Cpc {
    #[inline]
    fn tell(&self) -> Tell {
        Tell::Cpc(self.handler())
    }
}

/// A `cpc_t`: the backend's description, cached at `cpc_open`, the error handler, and the
/// sets and buffers made from it (freed by `cpc_close`).
pub(crate) struct Cpc {
    pub backend: &'static dyn Backend,
    handler: AtomicUsize,
    pub npic: u32,
    pub caps: u32,
    pub cciname: CString,
    pub cpuref: CString,
    /// The backend's attribute names and `picnum`.
    pub attrs: Vec<CString>,
    /// The nominal clock, for `cpc_buf_tick`, as cycles per nanosecond in 32.32 fixed point:
    /// `cpc_set_sample` turns nanoseconds into ticks with one integer multiply (the float
    /// conversions showed in its profile).
    pub tick_mult: u64,
    /// Set by `cpc_terminate`.
    pub terminate: AtomicBool,
    children: Mutex<Vec<(usize, Kind)>>,
}

/// A `cpc_set_t`.
pub(crate) struct Set {
    /// The `cpc_t` it was made from.
    pub cpc: usize,
    /// The requests as added.
    pub reqs: Requests,
    pub bound: BindSlot,
}

impl Set {
    /// [`Error::SetBound`] when bound (requests are added to unbound sets only).
    pub fn check_unbound(&self) -> Result<()> {
        match self.bound.is_bound() {
            true => Err(Error::SetBound),
            false => Ok(()),
        }
    }
}

/// A `cpc_buf_t`: one value per request of its set at creation, the sample time and ticks.
/// Atomics, so that a signal handler may sample into a buffer the program reads.
pub(crate) struct Buf {
    pub cpc: usize,
    pub vals: Box<[AtomicU64]>,
    pub hrtime: AtomicI64,
    pub tick: AtomicU64,
}

/// How a set is bound.
pub(crate) enum How {
    /// `cpc_bind_curlwp` by thread `tid`.
    Lwp { tid: i32 },
    /// `cpc_bind_pctx` to thread `tid`.
    Pctx,
    /// `cpc_bind_cpu`: the binding thread moved to the CPU (back when the pin is dropped).
    Cpu(#[allow(dead_code)] CpuPin),
}

/// A bound set's engine state.
pub(crate) struct Bound {
    pub binding: Binding,
    pub how: How,
}

/// The binding of a set: a pointer that signal handlers read without locks, and a count of
/// readers so that unbinding never frees a binding a reader on another thread still uses.
pub(crate) struct BindSlot {
    ptr: AtomicPtr<Bound>,
    readers: AtomicUsize,
}

impl BindSlot {
    const fn new() -> BindSlot {
        BindSlot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            readers: AtomicUsize::new(0),
        }
    }

    /// Run `f` on the binding, if bound. Async-signal-safe.
    pub fn with<R>(&self, f: impl FnOnce(&Bound) -> R) -> Option<R> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        let p = self.ptr.load(Ordering::SeqCst);
        // SAFETY: `replace` frees a binding only after taking it out of `ptr` and seeing no
        // reader that could have loaded it.
        let r = (!p.is_null()).then(|| f(unsafe { &*p }));
        self.readers.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Whether bound.
    pub fn is_bound(&self) -> bool {
        !self.ptr.load(Ordering::SeqCst).is_null()
    }

    /// Put `new` in place (or unbind with `None`); the old binding is unbound and freed. Not
    /// for signal handlers: it waits for readers on other threads.
    pub fn replace(&self, new: Option<Box<Bound>>) {
        let _blocked = Blocked::all();
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

impl Cpc {
    /// Describe `backend` once, as libcpc did at `cpc_open`.
    pub fn new(backend: &'static dyn Backend) -> Cpc {
        let info = backend.info();
        // The limits of the libcpc header: names longer than the buffers are cut.
        let cstring = |s: &str, max: usize| {
            let mut end = s.len().min(max - 1);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            CString::new(s[..end].replace('\0', " ")).unwrap_or_default()
        };
        let mut cpuref = info.reference.clone();
        for n in &info.notes {
            cpuref.push_str(". Note: ");
            cpuref.push_str(n);
        }
        let mut attrs: Vec<CString> = info
            .attributes
            .iter()
            .map(|a| cstring(a, super::CPC_MAX_ATTR_LEN as usize))
            .collect();
        attrs.push(c"picnum".into());
        Cpc {
            backend,
            handler: AtomicUsize::new(0),
            npic: info.counters.len() as u32,
            caps: (if info.overflow_interrupt {
                super::CPC_CAP_OVERFLOW_INTERRUPT
            } else {
                0
            }) | (if info.overflow_interrupt && info.overflow_precise {
                super::CPC_CAP_OVERFLOW_PRECISE
            } else {
                0
            }),
            cciname: cstring(&info.description, super::CPC_MAX_IMPL_NAME as usize),
            cpuref: cstring(&cpuref, super::CPC_MAX_CPUREF as usize),
            attrs,
            tick_mult: tick_mult(perfcompat::backend::nominal_mhz()),
            terminate: AtomicBool::new(false),
            children: Mutex::new(Vec::new()),
        }
    }

    /// The error handler, if one is set.
    pub fn handler(&self) -> Option<Handler> {
        let h = self.handler.load(Ordering::Acquire);
        // SAFETY: only ever stored from a `Handler`.
        (h != 0).then(|| unsafe { std::mem::transmute::<usize, Handler>(h) })
    }

    /// Set (or with `None` remove) the error handler.
    pub fn set_handler(&self, h: Option<Handler>) {
        self.handler
            .store(h.map_or(0, |h| h as usize), Ordering::Release);
    }

    /// Register a new set or buffer made from this handle; `false` when the registry is full.
    fn adopt(&self, p: usize, kind: Kind) -> bool {
        if !registry::insert(p, kind) {
            return false;
        }
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((p, kind));
        true
    }

    /// Forget a child (it stays allocated: the caller frees it).
    fn disown(&self, p: usize, kind: Kind) -> bool {
        if !registry::remove(p, kind) {
            return false;
        }
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&(c, _)| c != p);
        true
    }
}

/// Whether `p` is a live `cpc_set_t` (what inherited copies check before they are made).
pub(crate) fn set_is_live(p: usize) -> bool {
    registry::contains(p, Kind::Set)
}

/// `mhz` as cycles per nanosecond in 32.32 fixed point (see [`Cpc::tick_mult`]).
fn tick_mult(mhz: f64) -> u64 {
    let m = mhz / 1000.0 * (1u64 << 32) as f64;
    if m.is_finite() && m > 0.0 {
        m.round() as u64
    } else {
        0
    }
}

/// `ns` nanoseconds as ticks of the clock `mult` describes ([`Cpc::tick_mult`]).
#[inline]
pub(crate) fn ticks(ns: u64, mult: u64) -> u64 {
    ((u128::from(ns) * u128::from(mult)) >> 32).min(u128::from(u64::MAX)) as u64
}

/// A new `cpc_t`, registered; NULL when the registry is full.
pub(crate) fn new_cpc(backend: &'static dyn Backend) -> *mut Cpc {
    let p = Box::into_raw(Box::new(Cpc::new(backend)));
    if !registry::insert(p as usize, Kind::Cpc) {
        // SAFETY: just made, never shared.
        drop(unsafe { Box::from_raw(p) });
        return std::ptr::null_mut();
    }
    p
}

/// Close a `cpc_t`: unbind and free every set and buffer made from it, then it.
/// `false` if `p` is not a live handle.
pub(crate) fn close_cpc(p: usize) -> bool {
    if !registry::remove(p, Kind::Cpc) {
        return false;
    }
    // SAFETY: it was registered, so it is a live Box<Cpc>, and we won the removal.
    let cpc = unsafe { Box::from_raw(p as *mut Cpc) };
    let children = std::mem::take(&mut *cpc.children.lock().unwrap_or_else(|e| e.into_inner()));
    for (c, kind) in children {
        if registry::remove(c, kind) {
            free_child(c, kind);
        }
    }
    true
}

fn free_child(p: usize, kind: Kind) {
    let _blocked = Blocked::all();
    // SAFETY: registered children are live boxes of their kind; the caller removed `p` from
    // the registry, so nobody else frees it.
    unsafe {
        match kind {
            Kind::Set => drop(Box::from_raw(p as *mut Set)),
            Kind::Buf => drop(Box::from_raw(p as *mut Buf)),
            _ => {}
        }
    }
}

/// A new empty set of `cpc`; NULL when the registry is full.
pub(crate) fn new_set(cpc: &Cpc) -> *mut Set {
    let p = Box::into_raw(Box::new(Set {
        cpc: cpc as *const Cpc as usize,
        reqs: Requests::new(),
        bound: BindSlot::new(),
    }));
    if !cpc.adopt(p as usize, Kind::Set) {
        // SAFETY: just made, never shared.
        drop(unsafe { Box::from_raw(p) });
        return std::ptr::null_mut();
    }
    p
}

/// A zeroed buffer for `set`'s current requests; NULL when the registry is full.
pub(crate) fn new_buf(cpc: &Cpc, set: &Set) -> *mut Buf {
    let n = set.reqs.len();
    let p = Box::into_raw(Box::new(Buf {
        cpc: cpc as *const Cpc as usize,
        vals: (0..n).map(|_| AtomicU64::new(0)).collect(),
        hrtime: AtomicI64::new(0),
        tick: AtomicU64::new(0),
    }));
    if !cpc.adopt(p as usize, Kind::Buf) {
        // SAFETY: just made, never shared.
        drop(unsafe { Box::from_raw(p) });
        return std::ptr::null_mut();
    }
    p
}

/// Destroy a set or buffer of `cpc` (unbinding a bound set). `false` if `p` is not a live
/// child of `cpc` of that kind.
pub(crate) fn destroy_child(cpc: &Cpc, p: usize, kind: Kind) -> bool {
    let owner = match kind {
        // SAFETY: checked live before reading its owner.
        Kind::Set if registry::contains(p, kind) => unsafe { (*(p as *const Set)).cpc },
        // SAFETY: as above.
        Kind::Buf if registry::contains(p, kind) => unsafe { (*(p as *const Buf)).cpc },
        _ => return false,
    };
    if owner != cpc as *const Cpc as usize || !cpc.disown(p, kind) {
        return false;
    }
    free_child(p, kind);
    true
}

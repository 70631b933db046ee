//! What the libcpc handles point to: a `cpc_t` ([`Cpc`]) owns its sets ([`Set`]) and buffers
//! ([`Buf`]); a set is the engine's libcpc set (its requests and binding). A handle is a value
//! of the registry, checked there before what it names is used (the `edge` module's
//! [`Handle`] lookup).

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use perfcompat::backend::Backend;
use perfcompat::base::signal::Blocked;
use perfcompat::Result;

use super::{cpc_buf_t, cpc_set_t, cpc_t};
use crate::edge::{self, registry};
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

/// A `cpc_t`: the backend's description, cached at `cpc_open` (its name, its reference and its
/// number of counters when first asked for), the error handler, and the sets and buffers made from it (freed by
/// `cpc_close`).
pub(crate) struct Cpc {
    pub backend: &'static dyn Backend,
    handler: AtomicUsize,
    npic: OnceLock<u32>,
    pub caps: u32,
    cciname: OnceLock<CString>,
    cpuref: OnceLock<CString>,
    /// The backend's attribute names and `picnum`, made on first request ([`Cpc::attrs`]).
    attrs: OnceLock<Vec<CString>>,
    /// Set by `cpc_terminate`.
    pub terminate: AtomicBool,
    /// Its handle (the value `cpc_open` returned), set once it is registered.
    handle: AtomicUsize,
    children: Mutex<Vec<(usize, Kind)>>,
}

/// A `cpc_set_t`: the engine's set ([`perfcompat::api::cpc::set::Set`]: requests and binding) and
/// the `cpc_t` it was made from.
// The engine's set first: `cpc_set_sample` loads its binder's binding at offset 0, with no
// address to compute for the acquiring load (issue 48).
#[repr(C)]
pub(crate) struct Set {
    set: perfcompat::api::cpc::set::Set,
    /// The handle of the `cpc_t` it was made from.
    pub cpc: usize,
}

impl std::ops::Deref for Set {
    type Target = perfcompat::api::cpc::set::Set;
    fn deref(&self) -> &perfcompat::api::cpc::set::Set {
        &self.set
    }
}

/// The engine's set of a live `cpc_set_t` at address `key` (how the engine finds a thread's
/// previous set and checks an inheritable one alive).
pub(crate) fn set_by_key(key: usize) -> Option<&'static perfcompat::api::cpc::set::Set> {
    edge::get(key as *mut cpc_set_t).map(|s: &Set| &s.set)
}

/// Run `f` on the engine's set of every live `cpc_set_t` (for a child of `fork`: see
/// [`registry::each`]).
pub(crate) fn each_set(mut f: impl FnMut(&perfcompat::api::cpc::set::Set)) {
    registry::each(Kind::Set, |p| {
        // SAFETY: registered under Kind::Set, a live box of Set (the Handle contract).
        f(&unsafe { &*(p as *const Set) }.set)
    });
}

/// A `cpc_buf_t`: one value per request of its set at creation, the sample time and ticks.
/// Atomics, so that a signal handler may sample into a buffer the program reads.
pub(crate) struct Buf {
    /// The handle of the `cpc_t` it was made from.
    pub cpc: usize,
    pub vals: Box<[AtomicU64]>,
    /// The sample time as a `timespec` (seconds, nanoseconds): `cpc_set_sample` has the clock
    /// write it here itself, as its last call, a jump (issue 48: turning it into nanoseconds
    /// there kept a frame around the call). Read through [`Buf::hrtime`]. The clock's stores
    /// are aligned 64-bit stores, single-copy atomic on the architectures this builds for, as
    /// the atomics' own.
    time: [AtomicI64; 2],
    pub tick: AtomicU64,
}

impl Buf {
    /// The sample time in nanoseconds (`cpc_buf_hrtime`).
    #[inline]
    pub fn hrtime(&self) -> i64 {
        let [sec, nsec] = &self.time;
        sec.load(Ordering::Relaxed)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(nsec.load(Ordering::Relaxed))
    }

    /// Set the sample time to `ns` nanoseconds.
    #[inline(always)]
    pub fn set_hrtime(&self, ns: i64) {
        // Any seconds and nanoseconds that add up to it: no division.
        self.time[0].store(0, Ordering::Relaxed);
        self.time[1].store(ns, Ordering::Relaxed);
    }

    /// Read `CLOCK_MONOTONIC` into the sample time: 0, else the clock's failure (see
    /// [`perfcompat::base::sys::monotonic_into`]). Async-signal-safe.
    #[inline(always)]
    pub fn clock_now(&self) -> std::ffi::c_int {
        // SAFETY: two aligned i64s, as a 64-bit Linux `timespec` is.
        unsafe { perfcompat::base::sys::monotonic_into(self.time.as_ptr() as *mut libc::timespec) }
    }
}

/// `s` as a C string cut to fit a libcpc buffer of `max` bytes (names longer than the
/// header's buffers are cut, at a character boundary).
fn cstring(s: &str, max: usize) -> CString {
    let mut end = s.len().min(max - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    CString::new(s[..end].replace('\0', " ")).unwrap_or_default()
}

impl Cpc {
    /// A handle on `backend`: its capabilities and attributes, as libcpc read them at
    /// `cpc_open`. The name and reference strings are made on first request
    /// ([`Cpc::cciname`]): the perf backend's read the CPU's name and clock, which counting
    /// does not need; so is the number of counters ([`Cpc::npic`]), which the perf backend
    /// measures (issue 48: most of a first use's instructions).
    pub fn new(backend: &'static dyn Backend) -> Cpc {
        let shape = backend.shape_unmeasured();
        Cpc {
            backend,
            handler: AtomicUsize::new(0),
            npic: OnceLock::new(),
            caps: (if shape.overflow_interrupt {
                super::CPC_CAP_OVERFLOW_INTERRUPT
            } else {
                0
            }) | (if shape.overflow_interrupt && shape.overflow_precise {
                super::CPC_CAP_OVERFLOW_PRECISE
            } else {
                0
            }),
            cciname: OnceLock::new(),
            cpuref: OnceLock::new(),
            attrs: OnceLock::new(),
            terminate: AtomicBool::new(false),
            handle: AtomicUsize::new(0),
            children: Mutex::new(Vec::new()),
        }
    }

    /// The backend's attribute names and `picnum` (`cpc_walk_attrs`), made on the first call:
    /// a first use that never walks them does not read their strings (issue 48: the merged
    /// strings lie in a window of the text of their own).
    pub fn attrs(&self) -> &[CString] {
        self.attrs.get_or_init(|| {
            let mut attrs: Vec<CString> = self
                .backend
                .shape_unmeasured()
                .attributes
                .iter()
                .map(|a| cstring(a, super::CPC_MAX_ATTR_LEN as usize))
                .collect();
            attrs.push(c"picnum".into());
            attrs
        })
    }

    /// The number of counters (`cpc_npic`), the backend's measured on the first call.
    pub fn npic(&self) -> u32 {
        *self
            .npic
            .get_or_init(|| self.backend.shape().counters as u32)
    }

    /// The implementation's name (`cpc_cciname`), owned by the handle.
    pub fn cciname(&self) -> &CString {
        self.cciname.get_or_init(|| {
            cstring(
                &self.backend.info().description,
                super::CPC_MAX_IMPL_NAME as usize,
            )
        })
    }

    /// Where the events are documented, then the backend's notes (`cpc_cpuref`), owned by the
    /// handle.
    pub fn cpuref(&self) -> &CString {
        self.cpuref.get_or_init(|| {
            let info = self.backend.info();
            let mut cpuref = info.reference.clone();
            for n in &info.notes {
                cpuref.push_str(". Note: ");
                cpuref.push_str(n);
            }
            cstring(&cpuref, super::CPC_MAX_CPUREF as usize)
        })
    }

    /// Its handle, which its sets and buffers record.
    pub fn addr(&self) -> usize {
        self.handle.load(Ordering::Relaxed)
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

    /// Register a new set or buffer (at address `p`) made from this handle: its handle, or
    /// `None` when the registry is full.
    fn adopt(&self, p: usize, kind: Kind) -> Option<usize> {
        let h = registry::insert(p, kind)?;
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((h, kind));
        Some(h)
    }

    /// Forget child `h`: the address of its value (still allocated: the caller frees it).
    fn disown(&self, h: usize, kind: Kind) -> Option<usize> {
        let p = registry::remove(h, kind)?;
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&(c, _)| c != h);
        Some(p)
    }
}

pub(crate) use perfcompat::api::cpc::clock::ticks;

/// The nominal clock of the ticks, looked up by the first call that needs it (a sample, not
/// `cpc_open`: issue 48, first use): the engine's ([`perfcompat::api::cpc::clock`]).
pub(crate) use perfcompat::api::cpc::clock::{clock_mult, known_clock_mult};

/// A new `cpc_t`, registered ([`perfcompat::Error::OutOfHandles`] when the registry is full).
pub(crate) fn new_cpc(backend: &'static dyn Backend) -> Result<*mut cpc_t> {
    edge::new_handle(Cpc::new(backend), |p| {
        let h = registry::insert(p, Kind::Cpc)?;
        // SAFETY: `p` is the new box, not shared yet (the handle is not returned yet).
        unsafe { &*(p as *const Cpc) }
            .handle
            .store(h, Ordering::Relaxed);
        Some(h)
    })
}

/// Close a `cpc_t`: unbind and free every set and buffer made from it, then it.
/// `false` if `p` is not a live handle.
pub(crate) fn close_cpc(p: *mut cpc_t) -> bool {
    let Some(cpc) = edge::take(p) else {
        return false;
    };
    let children = std::mem::take(&mut *cpc.children.lock().unwrap_or_else(|e| e.into_inner()));
    for (c, kind) in children {
        if let Some(p) = registry::remove(c, kind) {
            let _blocked = Blocked::all();
            // SAFETY: a registered child of its kind, whose removal this call won.
            match kind {
                Kind::Set => drop(unsafe { edge::reclaim::<cpc_set_t>(p) }),
                Kind::Buf => drop(unsafe { edge::reclaim::<cpc_buf_t>(p) }),
                _ => {}
            }
        }
    }
    // The counters the checks of its requests kept for a bind (see perfcompat's
    // `backend::perf::kept`) are not left open after the handle.
    cpc.backend.release_kept();
    true
}

/// A new empty set of `cpc` ([`perfcompat::Error::OutOfHandles`] when the registry is full).
pub(crate) fn new_set(cpc: &Cpc) -> Result<*mut cpc_set_t> {
    let set = Set {
        set: perfcompat::api::cpc::set::Set::new(),
        cpc: cpc.addr(),
    };
    edge::new_handle(set, |p| cpc.adopt(p, Kind::Set))
}

/// A zeroed buffer for `set`'s current requests ([`perfcompat::Error::OutOfHandles`] when the
/// registry is full).
pub(crate) fn new_buf(cpc: &Cpc, set: &Set) -> Result<*mut cpc_buf_t> {
    let buf = Buf {
        cpc: cpc.addr(),
        vals: (0..set.reqs.len()).map(|_| AtomicU64::new(0)).collect(),
        time: [AtomicI64::new(0), AtomicI64::new(0)],
        tick: AtomicU64::new(0),
    };
    edge::new_handle(buf, |p| cpc.adopt(p, Kind::Buf))
}

/// What a `cpc_t` makes: sets and buffers, each knowing its `cpc_t`.
pub(crate) trait Child {
    /// The address of the `cpc_t` it was made from.
    fn owner(&self) -> usize;
}

impl Child for Set {
    fn owner(&self) -> usize {
        self.cpc
    }
}

impl Child for Buf {
    fn owner(&self) -> usize {
        self.cpc
    }
}

/// Destroy a set or buffer of `cpc` (unbinding a bound set). `false` if `p` is not a live
/// child of `cpc` of that type.
pub(crate) fn destroy_child<H: Handle>(cpc: &Cpc, p: *mut H) -> bool
where
    H::Target: Child,
{
    let mine = edge::get(p).is_some_and(|c| c.owner() == cpc.addr());
    let Some(addr) = mine.then(|| cpc.disown(p as usize, H::KIND)).flatten() else {
        return false;
    };
    let _blocked = Blocked::all();
    // SAFETY: a live child of its type, whose removal from the registry `disown` just won.
    drop(unsafe { edge::reclaim::<H>(addr) });
    true
}

//! Solaris `libcpc` version 2 (`libcpc.h`, libcpc(3LIB)): every v2 function and
//! `cpc_terminate`, as shims over the engine.
//!
//! Each function checks its handles against the registry of live handles (a stale, foreign
//! or mistyped handle is `EINVAL`, never dereferenced), converts, calls the engine and reports
//! failures the libcpc way (see the `report` module): -1 (or NULL) with `errno`, through the error
//! handler with a subcode where libcpc had one, else on standard error. `cpc_set_sample`,
//! `cpc_buf_get`, `cpc_buf_set`, `cpc_request_preset`, `cpc_set_restart`, `cpc_enable` and
//! `cpc_disable` are async-signal-safe (no allocation, no locks, no stdio), so a SIGEMT handler
//! may call them. Overflow notification is described in the `emt` module.
//!
//! Decisions where the man pages and the original code disagree, or Linux differs, are
//! commented where they are implemented and listed in the README.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::atomic::Ordering;

use perfcompat::engine;
use perfcompat::set::{Attr, CounterSet, Request, RequestFlags, Target};
use perfcompat::Error;

use crate::ffi_boundary;
use crate::pctx::pctx_t;

pub(crate) mod emt;
pub(crate) mod handles;
pub(crate) mod inherit;
pub(crate) mod registry;
pub(crate) mod report;

use handles::{get, Bound, Buf, Cpc, How, Set, BAD_HANDLE};
use registry::Kind;
use report::{report, report_error, set_errno, Handler};

/// Solaris `uint_t`.
pub type uint_t = c_uint;
/// Solaris `hrtime_t`: nanoseconds of a monotonic clock (here `CLOCK_MONOTONIC`).
pub type hrtime_t = std::ffi::c_longlong;
/// Solaris `processorid_t`: a CPU number.
pub type processorid_t = c_int;

/// The libcpc version this library implements; the only one `cpc_open` accepts.
pub const CPC_VER_CURRENT: c_int = 2;
/// Bind flag: threads the bound thread creates later inherit the set.
pub const CPC_BIND_LWP_INHERIT: c_uint = 0x1;
/// The libcpc v1 bind flag; v2 binds refuse it (`EINVAL`).
pub const CPC_BIND_EMT_OVF: c_uint = 0x2;
/// Request flag: freeze the set and send `SIGEMT` when this request's counter overflows.
pub const CPC_OVF_NOTIFY_EMT: c_uint = 0x1;
/// Request flag: count in user mode.
pub const CPC_COUNT_USER: c_uint = 0x2;
/// Request flag: count in kernel mode.
pub const CPC_COUNT_SYSTEM: c_uint = 0x4;
/// Request flag: count while the hypervisor runs.
pub const CPC_COUNT_HV: c_uint = 0x8;
/// Capability: counter overflow can interrupt (`CPC_OVF_NOTIFY_EMT` works).
pub const CPC_CAP_OVERFLOW_INTERRUPT: c_uint = 0x1;
/// Capability: the interrupt says which counter overflowed.
pub const CPC_CAP_OVERFLOW_PRECISE: c_uint = 0x2;
/// Size of the buffer `cpc_cciname` fits in.
pub const CPC_MAX_IMPL_NAME: c_uint = 512;
/// Size of the buffer `cpc_cpuref` fits in.
pub const CPC_MAX_CPUREF: c_uint = 1024;
/// Longest event name.
pub const CPC_MAX_EVENT_LEN: c_uint = 512;
/// Longest attribute name.
pub const CPC_MAX_ATTR_LEN: c_uint = 32;

/// Subcode: a specified event is not supported by the processor.
pub const CPC_INVALID_EVENT: c_int = 1;
/// Subcode: the counter number does not fall in the range of available counters.
pub const CPC_INVALID_PICNUM: c_int = 2;
/// Subcode: a specified attribute is not supported by the processor.
pub const CPC_INVALID_ATTRIBUTE: c_int = 3;
/// Subcode: the value of an attribute is outside the range supported by the processor.
pub const CPC_ATTRIBUTE_OUT_OF_RANGE: c_int = 4;
/// Subcode: a hardware resource necessary for completing an operation was unavailable.
pub const CPC_RESOURCE_UNAVAIL: c_int = 5;
/// Subcode: the requested counter cannot count an assigned event.
pub const CPC_PIC_NOT_CAPABLE: c_int = 6;
/// Subcode: one or more requests has invalid flags.
pub const CPC_REQ_INVALID_FLAGS: c_int = 7;
/// Subcode: the requests in a set cannot be programmed onto the hardware at the same time.
pub const CPC_CONFLICTING_REQS: c_int = 8;
/// Subcode: a request contains an attribute which requires the cpc_cpu privilege.
pub const CPC_ATTR_REQUIRES_PRIVILEGE: c_int = 9;
/// Subcode: the calling thread could not be bound to the requested processor.
pub const CPC_PBIND_FAILED: c_int = 10;
/// Subcode: hypervisor event access denied.
pub const CPC_HV_NO_ACCESS: c_int = 11;

/// `si_code` of the `SIGEMT` that reports a counter overflow (Solaris x86's value).
pub const EMT_CPCOVF: c_int = 1;

/// Every request flag libcpc knows.
const REQ_ALL_FLAGS: c_uint = 0xF;

/// A libcpc handle (opaque): made by `cpc_open`, freed by `cpc_close`.
pub struct cpc_t {
    _opaque: [u8; 0],
}

/// A set of requests (opaque): made by `cpc_set_create`.
pub struct cpc_set_t {
    _opaque: [u8; 0],
}

/// A sample buffer (opaque): made by `cpc_buf_create`.
pub struct cpc_buf_t {
    _opaque: [u8; 0],
}

/// An attribute of a request: a name and a value (`emask`, `picnum`...).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cpc_attr_t {
    /// The attribute's name.
    pub ca_name: *mut c_char,
    /// Its value.
    pub ca_val: u64,
}

const _: () = assert!(std::mem::size_of::<cpc_attr_t>() == 16 || cfg!(target_pointer_width = "32"));

/// The error handler type (`cpc_errhndlr_t`): declared in the header by hand, because its last
/// parameter is a `va_list`, which Rust cannot name.
pub type cpc_errhndlr_t = c_void;

// ---------------------------------------------------------------------------------------------
// Handle lookups.

fn cpc_ref<'a>(cpc: *mut cpc_t) -> Option<&'a Cpc> {
    // SAFETY: registered cpc_t are live Cpc boxes; libcpc's rule is that a handle is not closed
    // while another thread uses it.
    unsafe { get(cpc as *const Cpc, Kind::Cpc) }
}

/// A live set of `cpc`.
fn set_of<'a>(cpc: &Cpc, set: *mut cpc_set_t) -> Option<&'a Set> {
    // SAFETY: as in `cpc_ref`.
    unsafe { get(set as *const Set, Kind::Set) }.filter(|s| s.cpc == cpc as *const Cpc as usize)
}

/// A live buffer of `cpc`.
fn buf_of<'a>(cpc: &Cpc, buf: *mut cpc_buf_t) -> Option<&'a Buf> {
    // SAFETY: as in `cpc_ref`.
    unsafe { get(buf as *const Buf, Kind::Buf) }.filter(|b| b.cpc == cpc as *const Cpc as usize)
}

/// The live `cpc_t`, or `None` after reporting that it is not one.
fn cpc_or_report<'a>(cpc: *mut cpc_t, func: &CStr) -> Option<&'a Cpc> {
    let c = cpc_ref(cpc);
    if c.is_none() {
        bad(None, func, NO_CPC);
    }
    c
}

/// The live `cpc_t` and its live set, or `None` after reporting which is not.
fn set_or_report<'a>(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    func: &CStr,
) -> Option<(&'a Cpc, &'a Set)> {
    let c = cpc_or_report(cpc, func)?;
    match set_of(c, set) {
        Some(s) => Some((c, s)),
        None => {
            bad(Some(c), func, NO_SET);
            None
        }
    }
}

/// Say why a handle was refused (no subcode: only errno and, without a handler, a line).
fn bad(cpc: Option<&Cpc>, func: &CStr, what: &'static str) {
    report(
        cpc.and_then(Cpc::handler),
        func,
        -1,
        BAD_HANDLE,
        Some(&format_args!("{what}")),
    );
}

const NO_CPC: &str = "not a cpc_t returned by cpc_open (or already closed)";
const NO_SET: &str = "not a set of this cpc_t (destroyed, never created, or another handle's)";
const NO_BUF: &str = "not a buffer of this cpc_t (destroyed, never created, or another handle's)";

// ---------------------------------------------------------------------------------------------
// Opening and describing.

/// Open the library for version `ver` of the interface (`CPC_VER_CURRENT`); see
/// cpc_open(3CPC). The handle describes this process's backend (`PERFCOMPAT_BACKEND`).
///
/// # Returns
/// A handle, or NULL with `errno` `EINVAL` when `ver` is not `CPC_VER_CURRENT` (the program
/// needs recompiling), the backend's errno when no backend can be opened, `ENOMEM` when too
/// many handles are live.
#[no_mangle]
pub extern "C" fn cpc_open(ver: c_int) -> *mut cpc_t {
    ffi_boundary("cpc_open", || {
        if ver != CPC_VER_CURRENT {
            report(
                None,
                c"cpc_open",
                -1,
                libc::EINVAL,
                Some(&format_args!(
                    "version {ver} requested, this library implements version {CPC_VER_CURRENT}"
                )),
            );
            return std::ptr::null_mut();
        }
        let backend = match perfcompat::backend::global() {
            Ok(b) => b,
            Err(e) => {
                report_error(None, c"cpc_open", &e);
                return std::ptr::null_mut();
            }
        };
        emt::install();
        let p = handles::new_cpc(backend);
        if p.is_null() {
            set_errno(libc::ENOMEM);
        }
        p.cast()
    })
}

/// A `cpc_t` over a given backend instead of the process's (`PERFCOMPAT_BACKEND`): a Rust-only
/// entry point (not exported to C) for tests and fuzzing, which check the request path on every
/// emulated PMU and on perf in one process. Everything else about the handle is as
/// [`cpc_open`] makes it; close it with [`cpc_close`].
///
/// # Returns
/// A handle, or NULL with `errno` `ENOMEM` when too many handles are live.
pub fn cpc_open_on(backend: &'static dyn perfcompat::backend::Backend) -> *mut cpc_t {
    emt::install();
    let p = handles::new_cpc(backend);
    if p.is_null() {
        set_errno(libc::ENOMEM);
    }
    p.cast()
}

/// Close a handle: unbind and free every set and buffer made from it, then the handle; see
/// cpc_open(3CPC).
///
/// # Returns
/// 0; -1 with `errno` `EINVAL` when `cpc` is not a live handle (libcpc would crash).
///
/// # Safety
/// `cpc` is not used by another thread meanwhile, nor afterwards.
#[no_mangle]
pub unsafe extern "C" fn cpc_close(cpc: *mut cpc_t) -> c_int {
    ffi_boundary("cpc_close", || {
        if handles::close_cpc(cpc as usize) {
            0
        } else {
            bad(None, c"cpc_close", NO_CPC);
            -1
        }
    })
}

/// Number of counters (`picnum` 0 to n-1); see cpc_npic(3CPC). The perf backend reports 16
/// virtual counters (the kernel places events on the real ones and a set may hold up to 16
/// requests); emulated PMUs their real number.
///
/// # Returns
/// The number, or 0 with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_npic(cpc: *mut cpc_t) -> uint_t {
    ffi_boundary("cpc_npic", || {
        cpc_or_report(cpc, c"cpc_npic").map_or(0, |c| c.npic)
    })
}

/// Capabilities: `CPC_CAP_OVERFLOW_INTERRUPT` and `CPC_CAP_OVERFLOW_PRECISE`; see
/// cpc_npic(3CPC). The perf backend has both (software events too).
///
/// # Returns
/// The bits, or 0 with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_caps(cpc: *mut cpc_t) -> uint_t {
    ffi_boundary("cpc_caps", || {
        cpc_or_report(cpc, c"cpc_caps").map_or(0, |c| c.caps)
    })
}

/// The name of the counter implementation (shorter than `CPC_MAX_IMPL_NAME`); see
/// cpc_npic(3CPC). On a host without a hardware PMU it says so: "Linux perf_event, software
/// events only (no PMU) on" and the CPU model.
///
/// # Returns
/// A string owned by the handle, or NULL with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_cciname(cpc: *mut cpc_t) -> *const c_char {
    ffi_boundary("cpc_cciname", || {
        cpc_or_report(cpc, c"cpc_cciname").map_or(std::ptr::null(), |c| c.cciname.as_ptr())
    })
}

/// Where the events are documented, followed by the backend's notes (no PMU, approximated
/// events, permissions), shorter than `CPC_MAX_CPUREF`; see cpc_npic(3CPC).
///
/// # Returns
/// A string owned by the handle, or NULL with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_cpuref(cpc: *mut cpc_t) -> *const c_char {
    ffi_boundary("cpc_cpuref", || {
        cpc_or_report(cpc, c"cpc_cpuref").map_or(std::ptr::null(), |c| c.cpuref.as_ptr())
    })
}

/// Set the error handler of `cpc` (NULL: the default, a line on standard error); see
/// cpc_seterrhndlr(3CPC). The handler is called as `fn(name, subcode, fmt, ap)` with the
/// function's name, the subcode (`CPC_INVALID_EVENT`...) and libcpc's message, for the errors
/// that have a subcode; `errno` is preserved around it.
///
/// # Returns
/// 0 (the header's signature; the man page's is `void`); -1 with `errno` `EINVAL` when `cpc`
/// is not a live handle.
///
/// # Safety
/// `fn_` is NULL or a function of type `cpc_errhndlr_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_seterrhndlr(cpc: *mut cpc_t, fn_: *mut cpc_errhndlr_t) -> c_int {
    ffi_boundary("cpc_seterrhndlr", || {
        let Some(c) = cpc_or_report(cpc, c"cpc_seterrhndlr") else {
            return -1;
        };
        // SAFETY: the caller passes a cpc_errhndlr_t (or NULL).
        let h =
            (!fn_.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Handler>(fn_) });
        c.set_handler(h);
        0
    })
}

// ---------------------------------------------------------------------------------------------
// Sets and requests.

/// Make an empty set; see cpc_set_create(3CPC).
///
/// # Returns
/// The set, or NULL with `errno` `EINVAL` (bad handle) or `ENOMEM`.
#[no_mangle]
pub extern "C" fn cpc_set_create(cpc: *mut cpc_t) -> *mut cpc_set_t {
    ffi_boundary("cpc_set_create", || {
        let Some(c) = cpc_or_report(cpc, c"cpc_set_create") else {
            return std::ptr::null_mut();
        };
        let p = handles::new_set(c);
        if p.is_null() {
            set_errno(libc::ENOMEM);
        }
        p.cast()
    })
}

/// Destroy a set, unbinding it first if bound; its buffers stay; see cpc_set_create(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when `set` is not a live set of `cpc`.
///
/// # Safety
/// `set` is not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn cpc_set_destroy(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    ffi_boundary("cpc_set_destroy", || {
        let Some(c) = cpc_or_report(cpc, c"cpc_set_destroy") else {
            return -1;
        };
        // Only a set of this cpc_t is forgotten and destroyed: a refused call changes nothing
        // (it used to unbind the thread's set first; found by fuzz/state_machine).
        if set_of(c, set).is_none() {
            bad(Some(c), c"cpc_set_destroy", NO_SET);
            return -1;
        }
        forget_current(set as usize);
        if handles::destroy_child(c, set as usize, Kind::Set) {
            0
        } else {
            bad(Some(c), c"cpc_set_destroy", NO_SET);
            -1
        }
    })
}

/// The engine request for one `cpc_set_add_request` call (`picnum` pins the counter).
fn to_request(
    event: &CStr,
    preset: u64,
    flags: c_uint,
    attrs: &[(CString, u64)],
) -> Result<Request, Error> {
    let event = event.to_str().map_err(|_| Error::UnknownEvent {
        event: event.to_string_lossy().into_owned(),
        backend: "any".into(),
    })?;
    let mut r = Request::new(event).preset(preset).flags(RequestFlags {
        user: flags & CPC_COUNT_USER != 0,
        system: flags & CPC_COUNT_SYSTEM != 0,
        hypervisor: flags & CPC_COUNT_HV != 0,
        notify_overflow: flags & CPC_OVF_NOTIFY_EMT != 0,
    });
    for (name, val) in attrs {
        let name = name.to_string_lossy();
        if name == "picnum" {
            let n = u32::try_from(*val).unwrap_or(u32::MAX);
            r = r.on_counter(n);
        } else {
            r.attrs.push(Attr {
                name: name.into_owned(),
                value: *val,
            });
        }
    }
    Ok(r)
}

/// Copy the caller's attributes (names cut to `CPC_MAX_ATTR_LEN - 1` bytes, as libcpc does).
///
/// # Safety
/// `attrs` is NULL or points to `nattrs` attributes whose names are NULL or strings.
unsafe fn copy_attrs(
    nattrs: uint_t,
    attrs: *const cpc_attr_t,
) -> Result<Vec<(CString, u64)>, Error> {
    if nattrs == 0 {
        return Ok(Vec::new());
    }
    if attrs.is_null() {
        return Err(Error::InvalidArgument(format!(
            "{nattrs} attributes but a NULL array"
        )));
    }
    if nattrs as usize > perfcompat::set::MAX_ATTRS {
        return Err(Error::InvalidArgument(format!(
            "{nattrs} attributes: a request has at most {}",
            perfcompat::set::MAX_ATTRS
        )));
    }
    // SAFETY: the caller promises nattrs attributes.
    let attrs = unsafe { std::slice::from_raw_parts(attrs, nattrs as usize) };
    let mut out = Vec::with_capacity(attrs.len());
    for a in attrs {
        if a.ca_name.is_null() {
            return Err(Error::InvalidAttribute {
                name: "(NULL)".into(),
                backend: "any".into(),
            });
        }
        // SAFETY: a NUL-terminated name, per the caller.
        let name = unsafe { CStr::from_ptr(a.ca_name) }.to_bytes();
        let name = &name[..name.len().min(CPC_MAX_ATTR_LEN as usize - 1)];
        // An empty name is left to the engine's check, which reports it (no backend has such
        // an attribute) after the event, as for any unknown name: refusing it here made an
        // unknown event with an empty attribute name CPC_INVALID_ATTRIBUTE instead of
        // CPC_INVALID_EVENT (found by fuzz/event_spec).
        out.push((CString::new(name).unwrap_or_default(), a.ca_val));
    }
    Ok(out)
}

/// Add a request to an unbound set; see cpc_set_add_request(3CPC). `event` is a platform
/// event name, a generic `PAPI_*` name, a raw code the backend accepts or an alias from
/// `PERFCOMPAT_EVENTS`; `flags` are `CPC_COUNT_USER`, `CPC_COUNT_SYSTEM`, `CPC_COUNT_HV`,
/// `CPC_OVF_NOTIFY_EMT`; the attribute `picnum` pins the request to a counter. As in libcpc,
/// flags and attribute values are checked at bind.
///
/// # Returns
/// The request's index (0, 1, ... in the order added), or -1 with `errno` `EINVAL`: a bad or
/// bound set (no subcode), an unknown event (`CPC_INVALID_EVENT`), an unknown attribute
/// (`CPC_INVALID_ATTRIBUTE`), `picnum` out of range (`CPC_INVALID_PICNUM`) or on a counter that
/// cannot count the event (`CPC_PIC_NOT_CAPABLE`).
///
/// # Safety
/// `event` is NULL or a string; `attrs` is NULL or points to `nattrs` attributes.
#[no_mangle]
pub unsafe extern "C" fn cpc_set_add_request(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    event: *const c_char,
    preset: u64,
    flags: uint_t,
    nattrs: uint_t,
    attrs: *const cpc_attr_t,
) -> c_int {
    const F: &CStr = c"cpc_set_add_request";
    ffi_boundary("cpc_set_add_request", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        if s.bound.is_bound() {
            report(
                c.handler(),
                F,
                -1,
                libc::EINVAL,
                Some(&"the set is bound: unbind it first"),
            );
            return -1;
        }
        if event.is_null() {
            report(
                c.handler(),
                F,
                CPC_INVALID_EVENT,
                libc::EINVAL,
                Some(&"NULL event name"),
            );
            return -1;
        }
        // SAFETY: a string, per the caller.
        let ev = unsafe { CStr::from_ptr(event) };
        // An empty name is an unknown event on every backend (perf's parser calls it an
        // invalid argument, which has no subcode).
        if ev.is_empty() {
            report(
                c.handler(),
                F,
                CPC_INVALID_EVENT,
                libc::EINVAL,
                Some(&"empty event name"),
            );
            return -1;
        }
        // SAFETY: the caller's promise about attrs.
        let copied = unsafe { copy_attrs(nattrs, attrs) };
        let checked = copied.and_then(|a| {
            let r = to_request(ev, preset, flags, &a)?;
            engine::check_request(c.backend, &r)?;
            Ok(a)
        });
        let a = match checked {
            Ok(a) => a,
            Err(e) => {
                report_error(c.handler(), F, &e);
                return -1;
            }
        };
        let mut reqs = s.reqs.lock().unwrap_or_else(|p| p.into_inner());
        if reqs.len() >= perfcompat::set::MAX_REQUESTS {
            report(
                c.handler(),
                F,
                -1,
                libc::EINVAL,
                Some(&format_args!(
                    "a set holds at most {} requests",
                    perfcompat::set::MAX_REQUESTS
                )),
            );
            return -1;
        }
        reqs.push(handles::CReq {
            event: ev.to_owned(),
            preset,
            flags,
            attrs: a,
        });
        s.nreqs.store(reqs.len(), Ordering::Release);
        (reqs.len() - 1) as c_int
    })
}

/// Call `action(arg, index, event, preset, flags, nattrs, attrs)` for every request of `set`,
/// newest first as libcpc did, with the preset given when it was added; see
/// cpc_set_add_request(3CPC). The strings and the attribute array are valid during the call
/// only.
///
/// On a bad handle nothing is called and `errno` is `EINVAL`.
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_requests(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    arg: *mut c_void,
    action: Option<
        unsafe extern "C" fn(
            arg: *mut c_void,
            index: c_int,
            event: *const c_char,
            preset: u64,
            flags: uint_t,
            nattrs: c_int,
            attrs: *const cpc_attr_t,
        ),
    >,
) {
    const F: &CStr = c"cpc_walk_requests";
    ffi_boundary("cpc_walk_requests", || {
        let Some(c) = cpc_ref(cpc) else {
            return bad(None, F, NO_CPC);
        };
        let Some(s) = set_of(c, set) else {
            return bad(Some(c), F, NO_SET);
        };
        let Some(action) = action else {
            return report(c.handler(), F, -1, libc::EINVAL, Some(&"NULL action"));
        };
        // A copy: the callback may add requests or destroy the set.
        let reqs = s.reqs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (i, r) in reqs.iter().enumerate().rev() {
            let attrs: Vec<cpc_attr_t> = r
                .attrs
                .iter()
                .map(|(n, v)| cpc_attr_t {
                    ca_name: n.as_ptr() as *mut c_char,
                    ca_val: *v,
                })
                .collect();
            let ap = if attrs.is_empty() {
                std::ptr::null()
            } else {
                attrs.as_ptr()
            };
            // SAFETY: the program's callback with valid arguments.
            unsafe {
                action(
                    arg,
                    i as c_int,
                    r.event.as_ptr(),
                    r.preset,
                    r.flags,
                    attrs.len() as c_int,
                    ap,
                )
            };
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Buffers.

/// Make a zeroed buffer for `set`'s current requests; see cpc_buf_create(3CPC). A buffer made
/// before requests were added no longer fits the set (`cpc_set_sample` refuses it).
///
/// # Returns
/// The buffer, or NULL with `errno` `EINVAL` (bad handle, or a set of another handle) or
/// `ENOMEM`.
#[no_mangle]
pub extern "C" fn cpc_buf_create(cpc: *mut cpc_t, set: *mut cpc_set_t) -> *mut cpc_buf_t {
    ffi_boundary("cpc_buf_create", || {
        let Some((c, s)) = set_or_report(cpc, set, c"cpc_buf_create") else {
            return std::ptr::null_mut();
        };
        let p = handles::new_buf(c, s);
        if p.is_null() {
            set_errno(libc::ENOMEM);
        }
        p.cast()
    })
}

/// Free a buffer; see cpc_buf_create(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when `buf` is not a live buffer of `cpc`.
///
/// # Safety
/// `buf` is not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn cpc_buf_destroy(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> c_int {
    ffi_boundary("cpc_buf_destroy", || {
        let Some(c) = cpc_or_report(cpc, c"cpc_buf_destroy") else {
            return -1;
        };
        if handles::destroy_child(c, buf as usize, Kind::Buf) {
            0
        } else {
            bad(Some(c), c"cpc_buf_destroy", NO_BUF);
            -1
        }
    })
}

/// Read value `index` of a buffer into `*val`; see cpc_buf_create(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle, an index outside the buffer or a NULL
/// `val` (libcpc did not check; its man page documents -1).
///
/// # Safety
/// `val` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_buf_get(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: *mut u64,
) -> c_int {
    ffi_boundary("cpc_buf_get", || {
        buf_index(cpc, buf, index, c"cpc_buf_get", |b, i| {
            // SAFETY: NULL or writable, per the caller.
            match unsafe { val.as_mut() } {
                Some(v) => {
                    *v = b.vals[i].load(Ordering::Relaxed);
                    true
                }
                None => false,
            }
        })
    })
}

/// Set value `index` of a buffer (the counters are not affected); see cpc_buf_create(3CPC).
/// Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle or an index outside the buffer.
#[no_mangle]
pub extern "C" fn cpc_buf_set(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: u64,
) -> c_int {
    ffi_boundary("cpc_buf_set", || {
        buf_index(cpc, buf, index, c"cpc_buf_set", |b, i| {
            b.vals[i].store(val, Ordering::Relaxed);
            true
        })
    })
}

/// The checks of `cpc_buf_get`/`cpc_buf_set`, then `f(buf, index)` (false: NULL pointer).
fn buf_index(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    func: &CStr,
    f: impl FnOnce(&Buf, usize) -> bool,
) -> c_int {
    let Some(c) = cpc_ref(cpc) else {
        bad(None, func, NO_CPC);
        return -1;
    };
    let Some(b) = buf_of(c, buf) else {
        bad(Some(c), func, NO_BUF);
        return -1;
    };
    let len = b.vals.len();
    let Some(i) = usize::try_from(index).ok().filter(|&i| i < len) else {
        let e = Error::IndexOutOfRange {
            index: index.max(0) as usize,
            len,
        };
        report(c.handler(), func, -1, libc::EINVAL, Some(&e));
        return -1;
    };
    if f(b, i) {
        0
    } else {
        report(
            c.handler(),
            func,
            -1,
            libc::EINVAL,
            Some(&"NULL value pointer"),
        );
        -1
    }
}

/// The time of the sample in the buffer (`CLOCK_MONOTONIC` nanoseconds, libcpc's gethrtime
/// timebase); see cpc_buf_create(3CPC).
///
/// # Returns
/// The time, or 0 with `errno` `EINVAL` for a bad handle.
#[no_mangle]
pub extern "C" fn cpc_buf_hrtime(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> hrtime_t {
    ffi_boundary("cpc_buf_hrtime", || {
        match cpc_ref(cpc).and_then(|c| buf_of(c, buf)) {
            Some(b) => b.hrtime.load(Ordering::Relaxed),
            None => {
                bad(cpc_ref(cpc), c"cpc_buf_hrtime", NO_BUF);
                0
            }
        }
    })
}

/// The buffer's cycle count: the time the counters ran since the bind (for a thread, its time
/// on a CPU) multiplied by the nominal clock, Linux having no per-thread virtual TSC; see
/// cpc_buf_create(3CPC).
///
/// # Returns
/// The ticks, or 0 with `errno` `EINVAL` for a bad handle.
#[no_mangle]
pub extern "C" fn cpc_buf_tick(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> u64 {
    ffi_boundary("cpc_buf_tick", || {
        match cpc_ref(cpc).and_then(|c| buf_of(c, buf)) {
            Some(b) => b.tick.load(Ordering::Relaxed),
            None => {
                bad(cpc_ref(cpc), c"cpc_buf_tick", NO_BUF);
                0
            }
        }
    })
}

/// The buffers of a `cpc_buf_sub`-style call, if all are live buffers of `cpc` of the same
/// size (libcpc silently does nothing otherwise; we also set `errno` to `EINVAL`).
fn same_size<'a, const N: usize>(
    cpc: *mut cpc_t,
    bufs: [*mut cpc_buf_t; N],
) -> Option<[&'a Buf; N]> {
    let c = cpc_ref(cpc)?;
    let mut out: [Option<&Buf>; N] = [None; N];
    for (o, &b) in out.iter_mut().zip(&bufs) {
        *o = buf_of(c, b);
    }
    let len = out[0]?.vals.len();
    if out.iter().all(|b| b.is_some_and(|b| b.vals.len() == len)) {
        Some(out.map(|b| b.unwrap()))
    } else {
        None
    }
}

fn combine(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
    op: fn(u64, u64) -> u64,
) {
    let Some([d, a, b]) = same_size(cpc, [ds, a, b]) else {
        set_errno(libc::EINVAL);
        return;
    };
    // Read both operands first: ds may be a or b.
    for i in 0..d.vals.len() {
        let v = op(
            a.vals[i].load(Ordering::Relaxed),
            b.vals[i].load(Ordering::Relaxed),
        );
        d.vals[i].store(v, Ordering::Relaxed);
    }
    let h = a
        .hrtime
        .load(Ordering::Relaxed)
        .max(b.hrtime.load(Ordering::Relaxed));
    let t = op(
        a.tick.load(Ordering::Relaxed),
        b.tick.load(Ordering::Relaxed),
    );
    d.hrtime.store(h, Ordering::Relaxed);
    d.tick.store(t, Ordering::Relaxed);
}

/// `ds = a - b` element by element (wrapping), `ds.tick = a.tick - b.tick`, `ds.hrtime` the
/// later of the two; `ds` may be `a` or `b`. Does nothing (and sets `errno` to `EINVAL`)
/// unless all three are live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_sub(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    ffi_boundary("cpc_buf_sub", || combine(cpc, ds, a, b, u64::wrapping_sub))
}

/// `ds = a + b` element by element (wrapping), ticks added, `ds.hrtime` the later of the two;
/// `ds` may be `a` or `b`. Does nothing (and sets `errno` to `EINVAL`) unless all three are
/// live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_add(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    ffi_boundary("cpc_buf_add", || combine(cpc, ds, a, b, u64::wrapping_add))
}

/// Copy `src` (values, time, ticks) into `ds`. Does nothing (and sets `errno` to `EINVAL`)
/// unless both are live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_copy(cpc: *mut cpc_t, ds: *mut cpc_buf_t, src: *mut cpc_buf_t) {
    ffi_boundary("cpc_buf_copy", || combine(cpc, ds, src, src, |a, _| a))
}

/// Zero a buffer's values, time and ticks. Does nothing (and sets `errno` to `EINVAL`) for a
/// bad handle; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_zero(cpc: *mut cpc_t, buf: *mut cpc_buf_t) {
    ffi_boundary("cpc_buf_zero", || {
        let Some([b]) = same_size(cpc, [buf]) else {
            return set_errno(libc::EINVAL);
        };
        for v in b.vals.iter() {
            v.store(0, Ordering::Relaxed);
        }
        b.hrtime.store(0, Ordering::Relaxed);
        b.tick.store(0, Ordering::Relaxed);
    })
}

// ---------------------------------------------------------------------------------------------
// Binding.

/// If `set` is this thread's curlwp set, it no longer is (and this thread's inherited copy of
/// it is unbound). Returns whether this thread held a copy of it.
fn forget_current(set: usize) -> bool {
    inherit::forget(set)
}

/// Unbind the set this thread bound before, if it is still a live set bound by this thread,
/// and this thread's inherited copy, if any.
/// libcpc: "an LWP holds at most one set; binding another silently unbinds the first". We also
/// mark the old set unbound (libcpc left it looking bound; sampling it then read the new set's
/// counters): sampling it is `EINVAL` until it is bound again.
fn unbind_previous() {
    let prev = inherit::current_set();
    inherit::set_current(0, 0);
    inherit::forget_all();
    // SAFETY: looked up in the registry first.
    if let Some(s) = unsafe { get(prev as *const Set, Kind::Set) } {
        let mine = s
            .bound
            .with(|b| matches!(b.how, How::Lwp { tid } if tid == engine::gettid()))
            .unwrap_or(false);
        if mine {
            s.bound.replace(None);
        }
    }
}

/// The engine set for a libcpc set, after the bind-time checks libcpc makes on it.
fn counter_set(s: &Set) -> Result<CounterSet, Error> {
    let reqs = s.reqs.lock().unwrap_or_else(|p| p.into_inner());
    if reqs.is_empty() {
        return Err(Error::EmptySet);
    }
    let mut set = CounterSet::new();
    for r in reqs.iter() {
        if r.flags & !REQ_ALL_FLAGS != 0 {
            return Err(Error::InvalidFlags { flags: r.flags });
        }
        set.add(to_request(&r.event, r.preset, r.flags, &r.attrs)?)?;
    }
    Ok(set)
}

/// Bind `s` to `target`; on success it holds the binding, described by `how`.
fn bind_set(c: &Cpc, s: &Set, func: &CStr, target: Target, how: How) -> c_int {
    let bound = counter_set(s).and_then(|set| {
        let notify = set.requests().iter().any(|r| r.flags.notify_overflow);
        // Tagged before counting starts: an overflow during the bind must reach the hook.
        let tag = if notify { emt::EMT_TAG } else { 0 };
        engine::bind_tagged(c.backend, &set, target, tag)
    });
    match bound {
        Ok(binding) => {
            s.bound.replace(Some(Box::new(Bound { binding, how })));
            0
        }
        Err(e) => {
            report_error(c.handler(), func, &e);
            -1
        }
    }
}

/// Bind `set` to the calling thread and start counting from the presets; see
/// cpc_bind_curlwp(3CPC). With `CPC_BIND_LWP_INHERIT`, threads it creates later are counted
/// too: into this set (their counts are included in this thread's samples) when no request
/// has `CPC_OVF_NOTIFY_EMT`; otherwise each new thread (`pthread_create`, also from a thread
/// holding a copy) gets its own copy of the set and, before its start routine runs, a
/// `SIGEMT` in which `cpc_set_sample` reads `UINT64_MAX` for the notifying requests; there
/// `cpc_request_preset` and `cpc_set_restart` act on the copy, whose overflows are signalled
/// to that thread; it is unbound when the thread exits. A thread holds at most one set:
/// binding another unbinds the first.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, a set of another handle (libcpc skipped
/// that check, its man page documents it), flags other than 0 and `CPC_BIND_LWP_INHERIT`, an
/// empty set, bad request flags (`CPC_REQ_INVALID_FLAGS`), attribute values out of range
/// (`CPC_ATTRIBUTE_OUT_OF_RANGE`), requests that cannot be counted together
/// (`CPC_RESOURCE_UNAVAIL` or `CPC_CONFLICTING_REQS`, with the engine's reason on standard
/// error), more requests than counters; `ENOTSUP` for `CPC_OVF_NOTIFY_EMT` without overflow
/// interrupts; `EACCES` when the kernel refuses (a line says what and how to allow it).
#[no_mangle]
pub extern "C" fn cpc_bind_curlwp(cpc: *mut cpc_t, set: *mut cpc_set_t, flags: uint_t) -> c_int {
    const F: &CStr = c"cpc_bind_curlwp";
    ffi_boundary("cpc_bind_curlwp", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        if flags & !CPC_BIND_LWP_INHERIT != 0 {
            report(
                c.handler(),
                F,
                -1,
                libc::EINVAL,
                Some(&format_args!(
                    "invalid flags {flags:#x}: only CPC_BIND_LWP_INHERIT (0x1) is allowed"
                )),
            );
            return -1;
        }
        // No signal handler of this thread may run between the unbinding of its old set and
        // the new one being recorded as its set (`set_current` below): a SIGEMT handler's
        // `cpc_set_sample`, `cpc_request_preset` and `cpc_set_restart` there would find no set
        // (EINVAL), for an overflow of the new binding that comes while it is being bound
        // (`tests/signal_stress.rs`). Overflows during the bind are handled once it is made.
        let blocked = perfcompat::signal::Blocked::all();
        unbind_previous();
        s.bound.replace(None);
        let inherit = flags & CPC_BIND_LWP_INHERIT != 0;
        // With a notifying request, each thread created later gets its own copy of the set
        // (see the `inherit` module); without, their counts are summed into this binding.
        let emt = inherit
            && s.reqs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|r| r.flags & CPC_OVF_NOTIFY_EMT != 0);
        let target = if inherit && !emt {
            Target::CurrentThreadInherit
        } else {
            Target::CurrentThread
        };
        let tid = engine::gettid();
        let r = bind_set(c, s, F, target, How::Lwp { tid });
        if r == 0 {
            let id = s.bound.with(|b| b.binding.id()).unwrap_or(0);
            inherit::set_current(set as usize, id);
            drop(blocked);
            if emt {
                if let Ok(reqs) = counter_set(s) {
                    inherit::enable(c.backend, set as usize, reqs, id);
                }
            }
        }
        r
    })
}

/// Bind `set` to thread `id` (a Linux thread id, as the libpctx callbacks pass it) of the
/// process `pctx` controls; see cpc_bind_curlwp(3CPC). Counting starts from the presets; the
/// thread's children do not inherit it.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, `flags` not 0 and the errors of
/// `cpc_bind_curlwp`; `ESRCH` when thread `id` is not a thread of that process.
///
/// # Safety
/// `pctx` is NULL or a handle from `pctx_create`/`pctx_capture`.
#[no_mangle]
pub unsafe extern "C" fn cpc_bind_pctx(
    cpc: *mut cpc_t,
    pctx: *mut pctx_t,
    id: libc::id_t,
    set: *mut cpc_set_t,
    flags: uint_t,
) -> c_int {
    const F: &CStr = c"cpc_bind_pctx";
    ffi_boundary("cpc_bind_pctx", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        let Some(pid) = crate::pctx::pid_of(pctx) else {
            bad(
                Some(c),
                F,
                "not a pctx_t returned by pctx_create or pctx_capture",
            );
            return -1;
        };
        if flags != 0 {
            report(
                c.handler(),
                F,
                -1,
                libc::EINVAL,
                Some(&format_args!("flags {flags:#x}: must be 0")),
            );
            return -1;
        }
        let tid = id as i32;
        if tid <= 0 || !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
            report(
                c.handler(),
                F,
                -1,
                libc::ESRCH,
                Some(&format_args!(
                    "thread {tid} is not a thread of process {pid}"
                )),
            );
            return -1;
        }
        s.bound.replace(None);
        bind_set(c, s, F, Target::Thread(tid), How::Pctx)
    })
}

/// Whether CPU `cpu` is online (CPU 0 and CPUs without an `online` file always are).
fn cpu_online(cpu: u32) -> bool {
    std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/online"))
        .map_or(true, |s| s.trim() != "0")
}

/// Count everything that runs on CPU `id` with `set`, and bind the calling thread to that CPU
/// until `cpc_unbind` (which restores its previous affinity); see cpc_bind_curlwp(3CPC). The
/// thread must not change its affinity meanwhile.
///
/// On Linux, CPU-wide counting needs `perf_event_paranoid` at 0 or below, `CAP_PERFMON` or
/// root; per-thread counting goes on beside it (libcpc invalidated every per-thread set
/// instead). Only one set of this process may be bound to a CPU; other processes are not
/// known.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, `flags` not 0, a CPU that does not exist,
/// and the errors of `cpc_bind_curlwp`; `ENOSYS` for an offline CPU; `EAGAIN` when a set of
/// this process is already bound to it; `EACCES` without the privilege (a line says how to get
/// it); the `sched_setaffinity` errno with `CPC_PBIND_FAILED` when the thread cannot be moved.
#[no_mangle]
pub extern "C" fn cpc_bind_cpu(
    cpc: *mut cpc_t,
    id: processorid_t,
    set: *mut cpc_set_t,
    flags: uint_t,
) -> c_int {
    const F: &CStr = c"cpc_bind_cpu";
    ffi_boundary("cpc_bind_cpu", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        let h = c.handler();
        if flags != 0 {
            report(
                h,
                F,
                -1,
                libc::EINVAL,
                Some(&format_args!("flags {flags:#x}: must be 0")),
            );
            return -1;
        }
        // SAFETY: plain libc call.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let cpu = match u32::try_from(id) {
            Ok(cpu) if i64::from(cpu) < ncpu && (cpu as usize) < libc::CPU_SETSIZE as usize => cpu,
            _ => {
                report(
                    h,
                    F,
                    -1,
                    libc::EINVAL,
                    Some(&format_args!(
                        "processor {id} does not exist (this machine has {ncpu})"
                    )),
                );
                return -1;
            }
        };
        if !cpu_online(cpu) {
            report(
                h,
                F,
                -1,
                libc::ENOSYS,
                Some(&format_args!("processor {id} is offline")),
            );
            return -1;
        }
        s.bound.replace(None);
        {
            let mut cpus = handles::BOUND_CPUS
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if cpus.contains(&cpu) {
                report(
                    h,
                    F,
                    -1,
                    libc::EAGAIN,
                    Some(&format_args!("a set is already bound to processor {id}")),
                );
                return -1;
            }
            cpus.push(cpu);
        }
        let tid = engine::gettid();
        // SAFETY: cpu_set_t is plain data; the calls get valid pointers.
        let (old, moved) = unsafe {
            let mut old: Box<libc::cpu_set_t> = Box::new(std::mem::zeroed());
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let got = libc::sched_getaffinity(0, size, &mut *old) == 0;
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            (old, got && libc::sched_setaffinity(0, size, &one) == 0)
        };
        if !moved {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            handles::BOUND_CPUS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|&x| x != cpu);
            report(
                h,
                F,
                CPC_PBIND_FAILED,
                errno,
                Some(&format_args!("cannot move this thread to processor {id}")),
            );
            return -1;
        }
        // On failure the Bound is never made: put the affinity back here.
        let r = bind_set(
            c,
            s,
            F,
            Target::Cpu(cpu),
            How::Cpu {
                cpu,
                tid,
                old: old.clone(),
            },
        );
        if r != 0 {
            // SAFETY: the affinity saved above.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &*old) };
            handles::BOUND_CPUS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|&x| x != cpu);
        }
        r
    })
}

/// Unbind a set: its counters are freed, a CPU-bound thread gets its previous affinity back;
/// the set can be bound again and its buffers stay; see cpc_bind_curlwp(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when `set` is not a live set of `cpc` or is not bound.
#[no_mangle]
pub extern "C" fn cpc_unbind(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    const F: &CStr = c"cpc_unbind";
    ffi_boundary("cpc_unbind", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        // As in cpc_bind_curlwp: a handler of this thread sees the set bound or unbound, never
        // forgotten as the thread's set but still bound.
        let _blocked = perfcompat::signal::Blocked::all();
        // A thread holding an inherited copy unbinds its copy only (contexts are per LWP).
        if forget_current(set as usize) {
            return 0;
        }
        if !s.bound.is_bound() {
            report_error(c.handler(), F, &Error::NotBound);
            return -1;
        }
        s.bound.replace(None);
        0
    })
}

/// Sample a bound set into `buf`: each request's 64-bit value (preset + events), the time
/// and the ticks; on a frozen set (after an overflow notification or `cpc_disable`) the
/// values at the freeze. See cpc_set_sample(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when a handle is bad or of another `cpc_t`, the set is not
/// bound, or the buffer was made for a different number of requests; the engine's errno when
/// the counters cannot be read (`ESRCH`: the thread it counted has exited).
#[no_mangle]
pub extern "C" fn cpc_set_sample(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
) -> c_int {
    const F: &CStr = c"cpc_set_sample";
    ffi_boundary("cpc_set_sample", || {
        let Some((c, s)) = set_or_report(cpc, set, F) else {
            return -1;
        };
        let Some(b) = buf_of(c, buf) else {
            bad(Some(c), F, NO_BUF);
            return -1;
        };
        let n = s.nreqs.load(Ordering::Acquire);
        if b.vals.len() != n {
            let e = Error::BufferTooSmall {
                len: b.vals.len(),
                need: n,
            };
            report(c.handler(), F, -1, libc::EINVAL, Some(&e));
            return -1;
        }
        // This thread's own counters for the set (its binding, or its inherited copy): found
        // through thread-local state, without the shared slot's reader count. The closures
        // return a bool and leave an error aside: moving a `Result<_, Error>` out of them
        // through the lookups showed in the profile.
        let mut err = None;
        let r = inherit::with_mine(set as usize, |bs| {
            sample_into(bs, b, n, c.tick_mult, &mut err)
        })
        .or_else(|| {
            s.bound
                .with(|bd| sample_into(&bd.binding, b, n, c.tick_mult, &mut err))
        });
        match (r, err) {
            (Some(true), _) => 0,
            (Some(false), Some(e)) => {
                report(c.handler(), F, -1, e.errno(), Some(&e));
                -1
            }
            _ => {
                report(c.handler(), F, -1, libc::EINVAL, Some(&Error::NotBound));
                -1
            }
        }
    })
}

/// Sample `n` requests of `binding` into `buf` (values, time, ticks); on failure `false`, with
/// the reason in `err`. Async-signal-safe.
///
/// Small sets go through an 8-value stack buffer: zeroing a `MAX_REQUESTS` buffer on every
/// call showed in the profile, as it did in the engine (see `BoundSet::sample`).
#[inline]
fn sample_into(
    binding: &perfcompat::BoundSet,
    buf: &Buf,
    n: usize,
    tick_mult: u64,
    err: &mut Option<Error>,
) -> bool {
    let mut small = [0u64; 8];
    let mut big;
    let vals: &mut [u64] = if n <= small.len() {
        &mut small[..n]
    } else {
        big = [0u64; perfcompat::set::MAX_REQUESTS];
        &mut big[..n]
    };
    let info = match binding.sample(vals) {
        Ok(info) => info,
        Err(e) => {
            *err = Some(e);
            return false;
        }
    };
    for (d, v) in buf.vals.iter().zip(vals.iter()) {
        d.store(*v, Ordering::Relaxed);
    }
    buf.hrtime.store(info.hrtime, Ordering::Relaxed);
    buf.tick.store(
        handles::ticks(info.running_ns, tick_mult),
        Ordering::Relaxed,
    );
    true
}

/// Run `f` on the calling thread's bound set (libcpc's request_preset, restart, enable and
/// disable act on it and ignore their set argument). Async-signal-safe.
fn on_current(
    cpc: *mut cpc_t,
    func: &CStr,
    f: impl FnOnce(&perfcompat::BoundSet) -> Result<(), Error>,
) -> c_int {
    let Some(c) = cpc_ref(cpc) else {
        bad(None, func, NO_CPC);
        return -1;
    };
    match inherit::with_curlwp(f) {
        Some(Ok(())) => 0,
        Some(Err(e)) => {
            report(c.handler(), func, -1, e.errno(), Some(&e));
            -1
        }
        None => {
            report(
                c.handler(),
                func,
                -1,
                libc::EINVAL,
                Some(&"the calling thread has no bound set"),
            );
            -1
        }
    }
}

/// Change request `index`'s preset in the calling thread's bound set; it takes effect at the
/// next `cpc_set_restart` (a later bind starts from the preset given when the request was
/// added); see cpc_bind_curlwp(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set or `index` is not one of its
/// requests.
#[no_mangle]
pub extern "C" fn cpc_request_preset(cpc: *mut cpc_t, index: c_int, preset: u64) -> c_int {
    ffi_boundary("cpc_request_preset", || {
        on_current(cpc, c"cpc_request_preset", |b| {
            let i = usize::try_from(index).map_err(|_| Error::IndexOutOfRange {
                index: 0,
                len: b.len(),
            })?;
            b.set_preset(i, preset)
        })
    })
}

/// Restart the calling thread's bound set: every request counts again from its preset (the
/// one given to `cpc_request_preset`, else the original), and a freeze is lifted. Meant for
/// the SIGEMT handler; async-signal-safe. Like libcpc, it acts on the calling thread's set
/// whatever `set` is. See cpc_bind_curlwp(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set.
#[no_mangle]
pub extern "C" fn cpc_set_restart(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    let _ = set;
    ffi_boundary("cpc_set_restart", || {
        on_current(cpc, c"cpc_set_restart", |b| b.restart())
    })
}

/// Resume counting on the calling thread's bound set after `cpc_disable`; see cpc_enable(3CPC).
/// Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set or its counters are running
/// (libcpc's behaviour).
#[no_mangle]
pub extern "C" fn cpc_enable(cpc: *mut cpc_t) -> c_int {
    ffi_boundary("cpc_enable", || {
        on_current(cpc, c"cpc_enable", |b| b.resume())
    })
}

/// Stop counting on the calling thread's bound set (samples return the values at this
/// moment); see cpc_enable(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set or its counters are already
/// stopped.
#[no_mangle]
pub extern "C" fn cpc_disable(cpc: *mut cpc_t) -> c_int {
    ffi_boundary("cpc_disable", || {
        on_current(cpc, c"cpc_disable", |b| b.stop())
    })
}

/// Ask a libpctx run driven for `cpc` (cputrack-style tools) to end: the next `pctx_run` tick
/// returns. libcpc's private interface; async-signal-safe (a SIGINT handler calls it).
#[no_mangle]
pub extern "C" fn cpc_terminate(cpc: *mut cpc_t) {
    ffi_boundary("cpc_terminate", || {
        if let Some(c) = cpc_ref(cpc) {
            c.terminate.store(true, Ordering::Release);
            crate::pctx::terminate_all();
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Walkers.

/// The backend's events: (name, counters bitmask, generic), first appearance kept.
fn events(c: &Cpc) -> Vec<(CString, u64, bool)> {
    let mut seen = std::collections::HashSet::new();
    c.backend
        .events()
        .into_iter()
        .filter(|e| seen.insert(e.name.clone()))
        .filter_map(|e| {
            // libcpc's rule: generic names are those that start with "PAPI".
            let generic = e.name.starts_with("PAPI");
            CString::new(e.name).ok().map(|n| (n, e.counters, generic))
        })
        .collect()
}

fn walk_all(
    cpc: *mut cpc_t,
    func: &CStr,
    generic: bool,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
) {
    let Some(c) = cpc_ref(cpc) else {
        return bad(None, func, NO_CPC);
    };
    let Some(action) = action else {
        return report(c.handler(), func, -1, libc::EINVAL, Some(&"NULL action"));
    };
    for (name, _, g) in events(c) {
        if g == generic {
            // SAFETY: the program's callback.
            unsafe { action(arg, name.as_ptr()) };
        }
    }
}

fn walk_pic(
    cpc: *mut cpc_t,
    func: &CStr,
    generic: bool,
    picno: uint_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(*mut c_void, uint_t, *const c_char)>,
) {
    let Some(c) = cpc_ref(cpc) else {
        return bad(None, func, NO_CPC);
    };
    if picno >= c.npic {
        let e = Error::InvalidPicnum {
            picnum: picno,
            npic: c.npic,
        };
        return report(c.handler(), func, -1, libc::EINVAL, Some(&e));
    }
    let Some(action) = action else {
        return report(c.handler(), func, -1, libc::EINVAL, Some(&"NULL action"));
    };
    for (name, counters, g) in events(c) {
        if g == generic && picno < 64 && counters & (1 << picno) != 0 {
            // SAFETY: the program's callback.
            unsafe { action(arg, picno, name.as_ptr()) };
        }
    }
}

/// Call `action(arg, name)` once for every platform event this host's backend can count (not
/// the generic `PAPI_*` names): the perf backend's countable events (software events only
/// without a PMU), aliases from `PERFCOMPAT_EVENTS`; an emulated PMU's event table. See
/// cpc_walk_events_all(3CPC).
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_events_all(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(arg: *mut c_void, event: *const c_char)>,
) {
    ffi_boundary("cpc_walk_events_all", || {
        walk_all(cpc, c"cpc_walk_events_all", false, arg, action)
    })
}

/// Call `action(arg, name)` once for every generic (`PAPI_*`) event this host can count; see
/// cpc_walk_events_all(3CPC).
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_generic_events_all(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(arg: *mut c_void, event: *const c_char)>,
) {
    ffi_boundary("cpc_walk_generic_events_all", || {
        walk_all(cpc, c"cpc_walk_generic_events_all", true, arg, action)
    })
}

/// Call `action(arg, picno, name)` for every platform event counter `picno` can count; see
/// cpc_walk_events_all(3CPC). Nothing is called, and `errno` is `EINVAL`, when `picno` is not
/// below `cpc_npic`.
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_events_pic(
    cpc: *mut cpc_t,
    picno: uint_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(arg: *mut c_void, picno: uint_t, event: *const c_char)>,
) {
    ffi_boundary("cpc_walk_events_pic", || {
        walk_pic(cpc, c"cpc_walk_events_pic", false, picno, arg, action)
    })
}

/// Call `action(arg, picno, name)` for every generic event counter `picno` can count; see
/// cpc_walk_events_all(3CPC). Nothing is called, and `errno` is `EINVAL`, when `picno` is not
/// below `cpc_npic`.
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_generic_events_pic(
    cpc: *mut cpc_t,
    picno: uint_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(arg: *mut c_void, picno: uint_t, event: *const c_char)>,
) {
    ffi_boundary("cpc_walk_generic_events_pic", || {
        walk_pic(
            cpc,
            c"cpc_walk_generic_events_pic",
            true,
            picno,
            arg,
            action,
        )
    })
}

/// Call `action(arg, name)` for every attribute requests may carry: the backend's, then
/// `picnum` (always there); see cpc_walk_attrs(3CPC).
///
/// # Safety
/// `action` is NULL or a function of this type.
#[no_mangle]
pub unsafe extern "C" fn cpc_walk_attrs(
    cpc: *mut cpc_t,
    arg: *mut c_void,
    action: Option<unsafe extern "C" fn(arg: *mut c_void, attr: *const c_char)>,
) {
    ffi_boundary("cpc_walk_attrs", || {
        let Some(c) = cpc_ref(cpc) else {
            return bad(None, c"cpc_walk_attrs", NO_CPC);
        };
        let Some(action) = action else {
            return report(
                c.handler(),
                c"cpc_walk_attrs",
                -1,
                libc::EINVAL,
                Some(&"NULL action"),
            );
        };
        for a in &c.attrs {
            // SAFETY: the program's callback.
            unsafe { action(arg, a.as_ptr()) };
        }
    })
}

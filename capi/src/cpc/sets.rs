//! Sets and requests: cpc_set_create(3CPC), cpc_set_add_request(3CPC). What a set's requests
//! are and how they are checked is the engine's ([`perfcompat::api::cpc::Requests`]); this file
//! converts the C arguments.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use perfcompat::api::cpc::thread as lwp;
use perfcompat::api::cpc::AddedRequest;
use perfcompat::{Error, Result};

use super::handles::{self, Cpc};
use super::{cpc_attr_t, cpc_set_t, cpc_t, set_of, uint_t, BAD};
use super::{CPC_MAX_ATTR_LEN, NO_SET};
use crate::edge::call;

/// Make an empty set; see cpc_set_create(3CPC).
///
/// # Returns
/// The set, or NULL with `errno` `EINVAL` (bad handle) or `ENOMEM`.
#[no_mangle]
pub extern "C" fn cpc_set_create(cpc: *mut cpc_t) -> *mut cpc_set_t {
    call(
        c"cpc_set_create",
        cpc,
        BAD,
        std::ptr::null_mut(),
        |c: &Cpc| handles::new_set(c),
    )
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
    call(c"cpc_set_destroy", cpc, BAD, -1, |c: &Cpc| {
        // Only a set of this cpc_t is forgotten and destroyed: a refused call changes nothing
        // (it used to unbind the thread's set first; found by fuzz/state_machine).
        set_of(c, set)?;
        lwp::forget(set as usize);
        handles::destroy_child(c, set)
            .then_some(0)
            .ok_or(Error::BadArgument(NO_SET))
    })
}

/// The event name the program passed: NULL or empty is an unknown event.
///
/// # Safety
/// `event` is NULL or a string.
unsafe fn c_event<'a>(event: *const c_char) -> Result<&'a CStr> {
    if event.is_null() {
        return Err(Error::MissingEvent("NULL event name"));
    }
    // SAFETY: a string, per the caller: its bytes and the NUL after them (measured without
    // the C library's strlen, which a first use would look up, issue 48).
    let event = unsafe {
        let n = perfcompat::base::sys::c_bytes(event).len();
        CStr::from_bytes_with_nul_unchecked(std::slice::from_raw_parts(event.cast(), n + 1))
    };
    if event.is_empty() {
        return Err(Error::MissingEvent("empty event name"));
    }
    Ok(event)
}

/// Copy the caller's attributes (names cut to `CPC_MAX_ATTR_LEN - 1` bytes, as libcpc does).
///
/// # Safety
/// `attrs` is NULL or points to `nattrs` attributes whose names are NULL or strings.
unsafe fn copy_attrs(nattrs: uint_t, attrs: *const cpc_attr_t) -> Result<Vec<(String, u64)>> {
    if nattrs == 0 {
        return Ok(Vec::new());
    }
    if attrs.is_null() {
        return Err(Error::InvalidArgument(format!(
            "{nattrs} attributes but a NULL array"
        )));
    }
    if nattrs as usize > perfcompat::base::set::MAX_ATTRS {
        return Err(Error::InvalidArgument(format!(
            "{nattrs} attributes: a request has at most {}",
            perfcompat::base::set::MAX_ATTRS
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
        out.push((String::from_utf8_lossy(name).into_owned(), a.ca_val));
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
    call(c"cpc_set_add_request", cpc, BAD, -1, |c: &Cpc| {
        let s = set_of(c, set)?;
        s.check_unbound()?;
        // SAFETY: the caller's promises about event and attrs.
        let (event, attrs) = unsafe { (c_event(event)?, copy_attrs(nattrs, attrs)) };
        let i = s
            .reqs
            .add(c.backend, event.to_bytes(), preset, flags, attrs?)?;
        Ok(i as c_int)
    })
}

/// The walker's callback type.
type RequestAction =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, u64, uint_t, c_int, *const cpc_attr_t);

/// Call `f` with request `i` as C sees it.
fn walk_one(f: RequestAction, arg: *mut c_void, i: usize, r: &AddedRequest) {
    let cstring = |s: &str| CString::new(s).unwrap_or_default();
    let names: Vec<CString> = r.attrs.iter().map(|(n, _)| cstring(n)).collect();
    let attrs: Vec<cpc_attr_t> = (names.iter().zip(&r.attrs))
        .map(|(n, (_, v))| cpc_attr_t {
            ca_name: n.as_ptr() as *mut c_char,
            ca_val: *v,
        })
        .collect();
    let ap = if attrs.is_empty() {
        std::ptr::null()
    } else {
        attrs.as_ptr()
    };
    let event = cstring(&r.event);
    let n = attrs.len() as c_int;
    // SAFETY: the program's callback with valid arguments.
    unsafe { f(arg, i as c_int, event.as_ptr(), r.preset, r.flags, n, ap) };
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
    call(c"cpc_walk_requests", cpc, BAD, (), |c: &Cpc| {
        let s = set_of(c, set)?;
        let f = super::action(action)?;
        // A copy: the callback may add requests or destroy the set.
        for (i, r) in s.reqs.snapshot().iter().enumerate().rev() {
            walk_one(f, arg, i, r);
        }
        Ok(())
    })
}

//! Walkers: cpc_walk_events_all(3CPC), cpc_walk_attrs(3CPC). Which events a walker shows is the
//! engine's ([`perfcompat::api::cpc::walk_events`]); this file calls the program's callbacks.

use std::ffi::{c_char, c_void, CStr, CString};

use super::handles::Cpc;
use super::{action, cpc_t, uint_t, BAD};
use crate::edge::call;

type AllFn = unsafe extern "C" fn(*mut c_void, *const c_char);
type PicFn = unsafe extern "C" fn(*mut c_void, uint_t, *const c_char);

/// The names as C strings.
fn c_names(names: Vec<String>) -> impl Iterator<Item = CString> {
    names.into_iter().filter_map(|n| CString::new(n).ok())
}

fn walk_all(func: &CStr, cpc: *mut cpc_t, generic: bool, arg: *mut c_void, f: Option<AllFn>) {
    call(func, cpc, BAD, (), |c: &Cpc| {
        let names = perfcompat::api::cpc::walk_events(c.backend, generic, None)?;
        let f = action(f)?;
        for n in c_names(names) {
            // SAFETY: the program's callback.
            unsafe { f(arg, n.as_ptr()) };
        }
        Ok(())
    })
}

fn walk_pic(
    func: &CStr,
    cpc: *mut cpc_t,
    generic: bool,
    picno: uint_t,
    arg: *mut c_void,
    f: Option<PicFn>,
) {
    call(func, cpc, BAD, (), |c: &Cpc| {
        let pic = Some((picno, c.npic()));
        let names = perfcompat::api::cpc::walk_events(c.backend, generic, pic)?;
        let f = action(f)?;
        for n in c_names(names) {
            // SAFETY: the program's callback.
            unsafe { f(arg, picno, n.as_ptr()) };
        }
        Ok(())
    })
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
    walk_all(c"cpc_walk_events_all", cpc, false, arg, action)
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
    walk_all(c"cpc_walk_generic_events_all", cpc, true, arg, action)
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
    walk_pic(c"cpc_walk_events_pic", cpc, false, picno, arg, action)
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
    let f = c"cpc_walk_generic_events_pic";
    walk_pic(f, cpc, true, picno, arg, action)
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
    call(c"cpc_walk_attrs", cpc, BAD, (), |c: &Cpc| {
        let f = super::action(action)?;
        for a in c.attrs() {
            // SAFETY: the program's callback.
            unsafe { f(arg, a.as_ptr()) };
        }
        Ok(())
    })
}

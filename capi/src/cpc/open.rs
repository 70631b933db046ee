//! Opening the library and describing the counters: cpc_open(3CPC), cpc_npic(3CPC).

use std::ffi::{c_char, c_int};

use perfcompat::{Error, Result};

use super::handles::{self, Cpc};
use perfcompat::api::cpc::emt;

use super::{cpc_t, uint_t, BAD, CPC_VER_CURRENT};
use crate::edge::{call, run, Tell};

/// A new `cpc_t` over `backend`, the overflow notification installed.
fn open_on(backend: &'static dyn perfcompat::backend::Backend) -> Result<*mut cpc_t> {
    emt::install();
    handles::new_cpc(backend)
}

/// Open the library for version `ver` of the interface (`CPC_VER_CURRENT`); see
/// cpc_open(3CPC). The handle describes this process's backend (`PERFCOMPAT_BACKEND`).
///
/// # Returns
/// A handle, or NULL with `errno` `EINVAL` when `ver` is not `CPC_VER_CURRENT` (the program
/// needs recompiling), the backend's errno when no backend can be opened, `ENOMEM` when too
/// many handles are live.
#[no_mangle]
pub extern "C" fn cpc_open(ver: c_int) -> *mut cpc_t {
    run(BAD, c"cpc_open", std::ptr::null_mut(), || {
        if ver != CPC_VER_CURRENT {
            return Err(Error::Version {
                requested: ver,
                implemented: CPC_VER_CURRENT,
            });
        }
        open_on(perfcompat::backend::global()?)
    })
}

/// A `cpc_t` over a given backend instead of the process's (`PERFCOMPAT_BACKEND`): a Rust-only
/// entry point (not exported to C) for tests and fuzzing, which check the request path on every
/// emulated PMU and on perf in one process. Everything else about the handle is as
/// [`cpc_open`] makes it; close it with [`super::cpc_close`].
///
/// # Returns
/// A handle, or NULL with `errno` `ENOMEM` when too many handles are live.
pub fn cpc_open_on(backend: &'static dyn perfcompat::backend::Backend) -> *mut cpc_t {
    run(Tell::Errno, c"cpc_open", std::ptr::null_mut(), || {
        open_on(backend)
    })
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
    run(BAD, c"cpc_close", -1, || {
        handles::close_cpc(cpc)
            .then_some(0)
            .ok_or(Error::BadArgument(handles::NO_CPC))
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
    call(c"cpc_npic", cpc, BAD, 0, |c: &Cpc| Ok(c.npic()))
}

/// Capabilities: `CPC_CAP_OVERFLOW_INTERRUPT` and `CPC_CAP_OVERFLOW_PRECISE`; see
/// cpc_npic(3CPC). The perf backend has both (software events too).
///
/// # Returns
/// The bits, or 0 with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_caps(cpc: *mut cpc_t) -> uint_t {
    call(c"cpc_caps", cpc, BAD, 0, |c: &Cpc| Ok(c.caps))
}

/// The name of the counter implementation (shorter than `CPC_MAX_IMPL_NAME`); see
/// cpc_npic(3CPC). On a host without a hardware PMU it says so: "Linux perf_event, software
/// events only (no PMU) on" and the CPU model.
///
/// # Returns
/// A string owned by the handle, or NULL with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_cciname(cpc: *mut cpc_t) -> *const c_char {
    call(c"cpc_cciname", cpc, BAD, std::ptr::null(), |c: &Cpc| {
        Ok(c.cciname().as_ptr())
    })
}

/// Where the events are documented, followed by the backend's notes (no PMU, approximated
/// events, permissions), shorter than `CPC_MAX_CPUREF`; see cpc_npic(3CPC).
///
/// # Returns
/// A string owned by the handle, or NULL with `errno` `EINVAL` when `cpc` is not a live handle.
#[no_mangle]
pub extern "C" fn cpc_cpuref(cpc: *mut cpc_t) -> *const c_char {
    call(c"cpc_cpuref", cpc, BAD, std::ptr::null(), |c: &Cpc| {
        Ok(c.cpuref().as_ptr())
    })
}

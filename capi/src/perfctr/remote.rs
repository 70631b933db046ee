//! perfctr's remote forms (`rvperfctr_*`, issue 47 item 1) over
//! [`perfcompat::api::perfctr::remote`]: another thread's counters. A `struct rvperfctr *`
//! holds the engine's [`Remote`]; any thread of the caller may use it.

use std::ffi::c_int;

use perfcompat::api::perfctr::remote::Remote;

use super::{control_in, null, perfctr_info, perfctr_sum_ctrs, sums_out, write_info};
use super::{vperfctr_control, write_to};
use crate::edge::{self, registry, Handle, Kind, Tell, Tells};

/// The opaque `struct rvperfctr`.
pub struct rvperfctr {
    _private: [u8; 0],
}

// SAFETY: only `rvperfctr_open` registers Kind::Rvperfctr pointers, boxes of Remote.
unsafe impl Handle for rvperfctr {
    const KIND: Kind = Kind::Rvperfctr;
    type Target = Remote;
    const BAD: &'static str = "invalid argument: not a struct rvperfctr * from rvperfctr_open";
}

impl Tells for Remote {
    fn tell(&self) -> Tell {
        Tell::Stderr
    }
}

/// Open thread `pid`'s counters (a thread id; a process's id is its first thread). NULL with
/// `errno` `ESRCH` when there is no such thread, `ENOTSUP` on an emulated PMU for another
/// process's.
#[no_mangle]
pub extern "C" fn rvperfctr_open(pid: c_int) -> *mut rvperfctr {
    edge::run(
        Tell::Stderr,
        c"rvperfctr_open",
        std::ptr::null_mut(),
        || {
            edge::new_handle::<rvperfctr>(Remote::open(pid)?, |p| {
                registry::insert(p, Kind::Rvperfctr)
            })
        },
    )
}

/// The thread's id (-1 for a bad handle).
#[no_mangle]
pub extern "C" fn rvperfctr_pid(rvp: *mut rvperfctr) -> c_int {
    edge::call(c"rvperfctr_pid", rvp, Tell::Stderr, -1, |r| Ok(r.tid()))
}

/// As `vperfctr_info`. 0, or -1 with `errno`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn rvperfctr_info(rvp: *mut rvperfctr, info: *mut perfctr_info) -> c_int {
    edge::call(c"rvperfctr_info", rvp, Tell::Stderr, -1, |_| {
        // SAFETY: as the contract says.
        unsafe { write_info(info) }
    })
}

/// Program the thread's counters (a-mode counters and the TSC; `ENOTSUP` for i-mode ones).
/// 0, or -1 with `errno`.
///
/// # Safety
/// `control` is NULL or points to a `struct vperfctr_control`.
#[no_mangle]
pub unsafe extern "C" fn rvperfctr_control(
    rvp: *mut rvperfctr,
    control: *mut vperfctr_control,
) -> c_int {
    edge::call(c"rvperfctr_control", rvp, Tell::Stderr, -1, |r| {
        // SAFETY: a non-null `control` points to a struct vperfctr_control (the contract).
        let c = unsafe { control.as_ref() }.ok_or(null("control is NULL"))?;
        r.control(&control_in(c)).map(|()| 0)
    })
}

/// The TSC's and every counter's sum. 0, or -1 with `errno`.
///
/// # Safety
/// `sum` is NULL or points to a writable `struct perfctr_sum_ctrs`.
#[no_mangle]
pub unsafe extern "C" fn rvperfctr_read_ctrs(
    rvp: *mut rvperfctr,
    sum: *mut perfctr_sum_ctrs,
) -> c_int {
    edge::call(c"rvperfctr_read_ctrs", rvp, Tell::Stderr, -1, |r| {
        let s = sums_out(&r.read()?);
        // SAFETY: as the contract says.
        unsafe { write_to(sum, s, "sum is NULL") }
    })
}

/// The sums and the control (either pointer may be NULL). 0, or -1 with `errno`.
///
/// # Safety
/// `sum` and `control` are NULL or point to writable structures of their types.
#[no_mangle]
pub unsafe extern "C" fn rvperfctr_read_state(
    rvp: *mut rvperfctr,
    sum: *mut perfctr_sum_ctrs,
    control: *mut vperfctr_control,
) -> c_int {
    edge::call(c"rvperfctr_read_state", rvp, Tell::Stderr, -1, |r| {
        let (s, c) = r.read_state()?;
        // SAFETY: as the contract says.
        unsafe { super::write_state(sum, &s, control, &c) };
        Ok(0)
    })
}

/// Stop the counters and the TSC, keeping their sums. 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn rvperfctr_stop(rvp: *mut rvperfctr) -> c_int {
    edge::call(c"rvperfctr_stop", rvp, Tell::Stderr, -1, |r| {
        r.stop().map(|()| 0)
    })
}

/// No remote i-mode counters: -1 with `errno` `EPERM` (no overflow to resume from).
#[no_mangle]
pub extern "C" fn rvperfctr_iresume(rvp: *mut rvperfctr) -> c_int {
    edge::call(c"rvperfctr_iresume", rvp, Tell::Stderr, -1, |r| {
        r.iresume().map(|()| 0)
    })
}

/// End the thread's counting and forget its sums and control. 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn rvperfctr_unlink(rvp: *mut rvperfctr) -> c_int {
    edge::call(c"rvperfctr_unlink", rvp, Tell::Stderr, -1, |r| {
        r.unlink().map(|()| 0)
    })
}

/// Free the handle (its counters end with it).
#[no_mangle]
pub extern "C" fn rvperfctr_close(rvp: *mut rvperfctr) {
    crate::ffi_boundary("rvperfctr_close", || drop(edge::take(rvp)));
}

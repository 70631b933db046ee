//! The error handler: cpc_seterrhndlr(3CPC). How errors are told (errno, subcode, the handler
//! or a line on standard error) is the crate's `edge` module.

use std::ffi::{c_int, c_void};

use super::handles::Cpc;
use super::{cpc_errhndlr_t, cpc_t, BAD};
use crate::edge::{call, Handler};

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
    call(c"cpc_seterrhndlr", cpc, BAD, -1, |c: &Cpc| {
        // SAFETY: the caller passes a cpc_errhndlr_t (or NULL).
        let h =
            (!fn_.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Handler>(fn_) });
        c.set_handler(h);
        Ok(0)
    })
}

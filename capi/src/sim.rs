//! perfcompat's own extensions (`perfcompat.h`): the emulated PMUs' test hook
//! `perfcompat_sim_advance`, for C and Fortran.

use std::ffi::{c_char, c_int, CStr};

use crate::{fail_with, ffi_boundary, perfex};

/// Test hook of the emulated PMUs: `n` occurrences of `event` happen now on the calling thread.
///
/// `event` is a name the emulated model knows (an event name such as `Cycle_cnt`, a generic
/// name such as `PAPI_tot_cyc`, an alias from `PERFCOMPAT_EVENTS`), and for `r10000`/`r12000`
/// also the decimal event number (`"25"`); on the other models a decimal R10000 event number
/// that `PERFCOMPAT_EVENTS` maps is the mapped event. Every bound set of the calling thread (and the
/// inheriting, process and CPU bindings that cover it) that counts the event advances by `n`;
/// overflow notifications fire synchronously inside this call at the exact count.
///
/// # Returns
/// The number of bound sets that counted the event (0 or more), or -1 with `errno` set:
/// `EINVAL` for a NULL or unknown event (a message on stderr names it), `ENOTSUP` when the
/// process's backend is not emulated.
///
/// # Safety
/// `event` is NULL or points to a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_sim_advance(event: *const c_char, n: u64) -> c_int {
    ffi_boundary("perfcompat_sim_advance", || {
        if event.is_null() {
            return fail_with(
                c"perfcompat_sim_advance",
                &perfcompat::Error::BadArgument("NULL event name"),
            );
        }
        // SAFETY: the caller promises a NUL-terminated string.
        sim_advance_impl(unsafe { CStr::from_ptr(event) }.to_bytes(), n)
    })
}

/// What both spellings of the hook do once they have the event name and the count.
fn sim_advance_impl(event: &[u8], n: u64) -> c_int {
    match perfcompat::backend::sim::advance(&String::from_utf8_lossy(event), n) {
        Ok(hit) => hit.min(c_int::MAX as usize) as c_int,
        Err(e) => fail_with(c"perfcompat_sim_advance", &e),
    }
}

/// The Fortran hook behind both trailing-underscore spellings.
///
/// # Safety
/// As [`perfcompat_sim_advance_`].
unsafe fn sim_advance_fortran(event: *const c_char, n: *const u64, len: usize) -> c_int {
    ffi_boundary("perfcompat_sim_advance_", || {
        // SAFETY: the caller promises NULL or a valid reference.
        let Some(&n) = (unsafe { n.as_ref() }) else {
            return fail_with(
                c"perfcompat_sim_advance",
                &perfcompat::Error::Fault("NULL count"),
            );
        };
        if event.is_null() {
            return fail_with(
                c"perfcompat_sim_advance",
                &perfcompat::Error::BadArgument("NULL event name"),
            );
        }
        // SAFETY: Fortran passes the string and its length.
        let bytes = unsafe { std::slice::from_raw_parts(event.cast::<u8>(), len) };
        sim_advance_impl(perfex::fortran_string(bytes), n)
    })
}

/// Fortran spelling of [`perfcompat_sim_advance`] (gfortran's external name):
/// `INTEGER*4 FUNCTION PERFCOMPAT_SIM_ADVANCE(EVENT, N)` with `CHARACTER*(*) EVENT` and
/// `INTEGER*8 N`, both by reference; gfortran passes the length of `EVENT` as a hidden trailing
/// `size_t`. Trailing blanks of `EVENT` are trimmed, so a blank-padded `CHARACTER` variable
/// names the same event as a literal. The `perfex` Fortran module (`fortran/perfex.f90`) declares it.
///
/// # Returns
/// As [`perfcompat_sim_advance`]; also -1 with `errno` `EFAULT` when `n` is NULL.
///
/// # Safety
/// `event` is NULL or points to `len` readable bytes; `n` is NULL or points to an `INTEGER*8`.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_sim_advance_(
    event: *const c_char,
    n: *const u64,
    len: usize,
) -> c_int {
    // SAFETY: the caller's promise is passed on.
    unsafe { sim_advance_fortran(event, n, len) }
}

/// [`perfcompat_sim_advance_`] under the name compilers that append two underscores to names
/// containing one use (g77, `gfortran -fsecond-underscore`).
///
/// # Returns
/// As [`perfcompat_sim_advance_`].
///
/// # Safety
/// As [`perfcompat_sim_advance_`].
#[no_mangle]
pub unsafe extern "C" fn perfcompat_sim_advance__(
    event: *const c_char,
    n: *const u64,
    len: usize,
) -> c_int {
    // SAFETY: the caller's promise is passed on.
    unsafe { sim_advance_fortran(event, n, len) }
}

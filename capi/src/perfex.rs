//! IRIX `libperfex` entry points (C and Fortran): shims over [`perfcompat::api::perfex`], which
//! holds the semantics. Each checks its pointers, calls the engine and maps the result to the
//! libperfex convention: a positive generation number, or -1 with `errno` set and a message on
//! stderr naming the cause.

use std::ffi::{c_char, c_int, c_longlong, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use perfcompat::api::perfex;

use crate::{fail_with, ffi_boundary};

// Out of line (as `read_impl`): the common case's function tail-calls the general path, which
// must not be inlined into it (its frame would be the common case's, issue 48).
#[inline(never)]
fn start_impl(e0: c_int, e1: c_int) -> c_int {
    match perfex::start(e0, e1) {
        Ok(g) => g as c_int,
        Err(e) => fail_with(c"start_counters", &e),
    }
}

#[inline(never)]
fn read_impl(e0: c_int, c0: Option<&mut i64>, e1: c_int, c1: Option<&mut i64>) -> c_int {
    let (Some(c0), Some(c1)) = (c0, c1) else {
        return fail_with(
            c"read_counters",
            &perfcompat::Error::Fault("NULL count pointer"),
        );
    };
    match perfex::read(e0, e1) {
        Ok(c) => {
            *c0 = c.c0;
            *c1 = c.c1;
            c.generation as c_int
        }
        Err(e) => fail_with(c"read_counters", &e),
    }
}

fn print_impl(e0: c_int, c0: i64, e1: c_int, c1: i64) -> c_int {
    match perfex::format_counters(e0, c0, e1, c1) {
        Ok(s) => {
            perfcompat::stderr_text!("{s}");
            perfex::generation() as c_int
        }
        Err(e) => fail_with(c"print_counters", &e),
    }
}

fn costs_impl(e0: c_int, c0: i64, e1: c_int, c1: i64) -> c_int {
    match perfex::format_costs(e0, c0, e1, c1) {
        Ok(s) => {
            perfcompat::stderr_text!("{s}");
            perfex::generation() as c_int
        }
        Err(e) => fail_with(c"print_costs", &e),
    }
}

fn load_impl(name: &[u8]) -> c_int {
    if name.is_empty() {
        return fail_with(c"load_costs", &perfcompat::Error::NoFileName);
    }
    match perfex::load_costs(Path::new(OsStr::from_bytes(name))) {
        Ok(()) => perfex::generation() as c_int,
        Err(e) => fail_with(c"load_costs", &e),
    }
}

/// Start counting events `e0` and `e1` (R10000 event numbers) on the calling thread, with
/// zeroed counts; the same event twice is counted once. See libperfex(3C).
///
/// # Returns
/// A positive generation number, or -1 with `errno` set and a message on stderr: event out of
/// range or conflicting counters (`EINVAL`), event not available on this host (`EINVAL`),
/// permission denied (`EACCES`).
#[no_mangle]
pub extern "C" fn start_counters(e0: c_int, e1: c_int) -> c_int {
    // The common case first, outside the unwind boundary (it cannot panic): the thread's
    // published pair, found by its thread pointer; the rest a tail call (issue 48).
    match perfex::published() {
        Some(h) => start_fast(e0, e1, h),
        None => start_other(e0, e1),
    }
}

/// `start_counters`' common case ([`perfex::start_published`]), or the general one (a tail
/// call) when it does not answer. Inlined on arm64 (the export is then a leaf with no frame,
/// issue 48); out of line on x86-64, where inlined it made the export save six registers
/// before its look-up, which every call of a thread without a published pair paid (the
/// host's software events: `benches/ab`'s interval 3.6% slower).
#[cfg_attr(target_arch = "x86_64", inline(never))]
#[cfg_attr(not(target_arch = "x86_64"), inline(always))]
fn start_fast(e0: c_int, e1: c_int, h: perfex::Published) -> c_int {
    match perfex::start_published(h, e0, e1) {
        Some(g) => g as c_int,
        None => start_other(e0, e1),
    }
}

/// `start_counters` when its common case does not answer. Out of line.
#[inline(never)]
fn start_other(e0: c_int, e1: c_int) -> c_int {
    ffi_boundary("start_counters", || start_impl(e0, e1))
}

/// Read the counts of `e0` and `e1` since the matching `start_counters` on this thread into
/// `*c0` and `*c1`, and stop counting. See libperfex(3C). In a program run by the `perfex`
/// command, a thread that has not called `start_counters` reads its counts since it started,
/// for the events perfex counts (those keep running).
///
/// # Returns
/// The generation number: equal to the one `start_counters` returned when the counts cover the
/// whole interval. -1 with `errno` set and a message on stderr when the counters were not
/// started on this thread, the events differ from the started ones or are not counted by
/// perfex (`EINVAL`), or a pointer is NULL (`EFAULT`). The counts are written only on success.
///
/// # Safety
/// `c0` and `c1` are NULL or point to writable `long long`s.
#[no_mangle]
pub unsafe extern "C" fn read_counters(
    e0: c_int,
    c0: *mut c_longlong,
    e1: c_int,
    c1: *mut c_longlong,
) -> c_int {
    // As `start_counters`. The counts are written only where the common case answers, and
    // only through pointers that are not NULL (else the general case says so).
    if let (false, false, Some(h)) = (c0.is_null(), c1.is_null(), perfex::published()) {
        // SAFETY: the caller's promise, passed on.
        return unsafe { read_fast(e0, c0, e1, c1, h) };
    }
    // SAFETY: as above.
    unsafe { read_other(e0, c0, e1, c1) }
}

/// `read_counters`' common case ([`perfex::read_published`]), with pointers that are not
/// NULL, or the general one (a tail call) when it does not answer (nothing written). Inlined
/// or not as [`start_fast`].
///
/// # Safety
/// As `read_counters`.
#[cfg_attr(target_arch = "x86_64", inline(never))]
#[cfg_attr(not(target_arch = "x86_64"), inline(always))]
unsafe fn read_fast(
    e0: c_int,
    c0: *mut c_longlong,
    e1: c_int,
    c1: *mut c_longlong,
    h: perfex::Published,
) -> c_int {
    if let Some(c) = perfex::read_published(h, e0, e1) {
        // SAFETY: not NULL, so writable (the caller's promise).
        unsafe {
            *c0 = c.c0;
            *c1 = c.c1;
        }
        return c.generation as c_int;
    }
    // SAFETY: the caller's promise, passed on.
    unsafe { read_other(e0, c0, e1, c1) }
}

/// `read_counters` when its common case does not answer. Out of line.
///
/// # Safety
/// As `read_counters`.
#[inline(never)]
unsafe fn read_other(e0: c_int, c0: *mut c_longlong, e1: c_int, c1: *mut c_longlong) -> c_int {
    ffi_boundary("read_counters", || {
        // SAFETY: the caller promises NULL or valid pointers.
        let (c0, c1) = unsafe { (c0.as_mut(), c1.as_mut()) };
        read_impl(e0, c0, e1, c1)
    })
}

/// Print the counts `c0` and `c1` of events `e0` and `e1` to standard error. Has no effect on
/// the counters.
///
/// # Returns
/// The calling thread's current generation number (a fresh one if it never started counters),
/// or -1 with `errno` `EINVAL` when an event number is out of range.
#[no_mangle]
pub extern "C" fn print_counters(e0: c_int, c0: c_longlong, e1: c_int, c1: c_longlong) -> c_int {
    ffi_boundary("print_counters", || print_impl(e0, c0, e1, c1))
}

/// Print the counts `c0` and `c1` of events `e0` and `e1` to standard error with their time
/// estimates under the cost table in force, most costly first, then the derived statistics
/// the two events allow. Has no effect on the counters.
///
/// # Returns
/// The calling thread's current generation number, or -1 with `errno` `EINVAL` when an event
/// number is out of range.
#[no_mangle]
pub extern "C" fn print_costs(e0: c_int, c0: c_longlong, e1: c_int, c1: c_longlong) -> c_int {
    ffi_boundary("print_costs", || costs_impl(e0, c0, e1, c1))
}

/// Load a cost table from the file `CostFileName` over the default table (built-in, then
/// `/etc/perfex.costs`), for the whole process; it replaces any table loaded before. The file
/// format is what `perfex -t` prints; partial tables are allowed.
///
/// # Returns
/// A positive number (the calling thread's generation number) on success. -1 with `errno` set
/// and a message naming the file, the line and the reason when the file cannot be read
/// (`errno` from the system) or is malformed (`EINVAL`); the table in force is then unchanged.
///
/// # Safety
/// `CostFileName` is NULL or points to a NUL-terminated string.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn load_costs(CostFileName: *const c_char) -> c_int {
    ffi_boundary("load_costs", || {
        if CostFileName.is_null() {
            return fail_with(c"load_costs", &perfcompat::Error::Fault("NULL file name"));
        }
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(CostFileName) };
        load_impl(name.to_bytes())
    })
}

/// The text a Fortran `CHARACTER*(*)` argument (a file or event name) holds: `len` bytes,
/// blank-padded (trailing blanks trimmed), cut at a NUL if the program passed a C-style string.
pub(crate) fn fortran_string(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &bytes[..end]
}

/// Call `f` on the values behind four Fortran references, or fail with `EFAULT` for NULL.
///
/// # Safety
/// Every pointer is NULL or points to its Fortran variable.
unsafe fn by_ref(
    func: &CStr,
    e0: *const c_int,
    c0: *const i64,
    e1: *const c_int,
    c1: *const i64,
    f: fn(c_int, i64, c_int, i64) -> c_int,
) -> c_int {
    // SAFETY: the caller promises NULL or valid pointers.
    match unsafe { (e0.as_ref(), c0.as_ref(), e1.as_ref(), c1.as_ref()) } {
        (Some(e0), Some(c0), Some(e1), Some(c1)) => f(*e0, *c0, *e1, *c1),
        _ => fail_with(func, &perfcompat::Error::Fault("NULL argument")),
    }
}

// Fortran (libperfex(3F)): every argument by reference; gfortran appends one underscore, some
// compilers two.

/// Fortran entry points.
pub mod fortran {
    use super::*;

    macro_rules! entry {
        (
            $start:ident, $read:ident, $print:ident, $costs:ident, $load:ident,
            $s:literal, $r:literal, $p:literal, $c:literal, $l:literal
        ) => {
            /// Fortran `INTEGER*4 FUNCTION START_COUNTERS(E0, E1)`: see [`start_counters`].
            ///
            /// # Safety
            /// Both arguments are NULL or point to `INTEGER`s.
            #[export_name = $s]
            pub unsafe extern "C" fn $start(e0: *const c_int, e1: *const c_int) -> c_int {
                ffi_boundary($s, || {
                    // SAFETY: Fortran passes valid references.
                    match unsafe { (e0.as_ref(), e1.as_ref()) } {
                        (Some(e0), Some(e1)) => start_impl(*e0, *e1),
                        _ => fail_with(
                            c"start_counters",
                            &perfcompat::Error::Fault("NULL argument"),
                        ),
                    }
                })
            }

            /// Fortran `INTEGER*4 FUNCTION READ_COUNTERS(E0, C0, E1, C1)` with `INTEGER*8`
            /// counts: see [`read_counters`].
            ///
            /// # Safety
            /// Every argument is NULL or points to its Fortran variable.
            #[export_name = $r]
            pub unsafe extern "C" fn $read(
                e0: *const c_int,
                c0: *mut i64,
                e1: *const c_int,
                c1: *mut i64,
            ) -> c_int {
                ffi_boundary($r, || {
                    // SAFETY: Fortran passes valid references.
                    match unsafe { (e0.as_ref(), e1.as_ref()) } {
                        // SAFETY: as above.
                        (Some(e0), Some(e1)) => unsafe {
                            read_impl(*e0, c0.as_mut(), *e1, c1.as_mut())
                        },
                        _ => {
                            fail_with(c"read_counters", &perfcompat::Error::Fault("NULL argument"))
                        }
                    }
                })
            }

            /// Fortran `INTEGER*4 FUNCTION PRINT_COUNTERS(E0, C0, E1, C1)`: see
            /// [`print_counters`].
            ///
            /// # Safety
            /// Every argument is NULL or points to its Fortran variable.
            #[export_name = $p]
            pub unsafe extern "C" fn $print(
                e0: *const c_int,
                c0: *const i64,
                e1: *const c_int,
                c1: *const i64,
            ) -> c_int {
                // SAFETY: the caller's promise is passed on.
                ffi_boundary($p, || unsafe {
                    by_ref(c"print_counters", e0, c0, e1, c1, print_impl)
                })
            }

            /// Fortran `INTEGER*4 FUNCTION PRINT_COSTS(E0, C0, E1, C1)`: see [`print_costs`].
            ///
            /// # Safety
            /// Every argument is NULL or points to its Fortran variable.
            #[export_name = $c]
            pub unsafe extern "C" fn $costs(
                e0: *const c_int,
                c0: *const i64,
                e1: *const c_int,
                c1: *const i64,
            ) -> c_int {
                // SAFETY: the caller's promise is passed on.
                ffi_boundary($c, || unsafe {
                    by_ref(c"print_costs", e0, c0, e1, c1, costs_impl)
                })
            }

            /// Fortran `INTEGER*4 FUNCTION LOAD_COSTS(COSTFILENAME)` with a `CHARACTER*(*)`
            /// argument: gfortran passes its length as a hidden trailing `size_t`. Trailing
            /// blanks are trimmed. See [`load_costs`].
            ///
            /// # Safety
            /// `name` is NULL or points to `len` readable bytes.
            #[export_name = $l]
            pub unsafe extern "C" fn $load(name: *const c_char, len: usize) -> c_int {
                ffi_boundary($l, || {
                    if name.is_null() {
                        return fail_with(
                            c"load_costs",
                            &perfcompat::Error::Fault("NULL file name"),
                        );
                    }
                    // SAFETY: Fortran passes the string and its length.
                    let bytes = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), len) };
                    load_impl(fortran_string(bytes))
                })
            }
        };
    }

    entry!(
        start_counters_,
        read_counters_,
        print_counters_,
        print_costs_,
        load_costs_,
        "start_counters_",
        "read_counters_",
        "print_counters_",
        "print_costs_",
        "load_costs_"
    );
    entry!(
        start_counters__,
        read_counters__,
        print_counters__,
        print_costs__,
        load_costs__,
        "start_counters__",
        "read_counters__",
        "print_counters__",
        "print_costs__",
        "load_costs__"
    );
}

#[cfg(test)]
mod tests {
    use super::fortran_string;

    #[test]
    fn fortran_strings_lose_trailing_blanks_and_stop_at_nul() {
        assert_eq!(fortran_string(b"costs.txt      "), b"costs.txt");
        assert_eq!(fortran_string(b" a b  "), b" a b");
        assert_eq!(fortran_string(b"x.costs\0garbage"), b"x.costs");
        assert_eq!(fortran_string(b"     "), b"");
        assert_eq!(fortran_string(b""), b"");
    }
}

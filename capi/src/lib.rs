//! The C ABI of perfcompat: `libperfex`, `libcpc` (later issues) and the `perfcompat_*`
//! extensions, as thin shims over the engine: check pointers, convert, call the engine, map the
//! result to the C convention.
//!
//! A panic never unwinds into C: every export runs inside [`ffi_boundary`], which prints the
//! panic message on stderr and aborts the process.

#![allow(non_camel_case_types)]

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub mod cpc;
pub mod mpi;
pub mod pctx;
pub mod perfex;
pub mod pfm;
pub mod preload;
pub mod sim;

/// Run `f`; if it panics, say so on stderr and abort (a panic must not unwind into C).
pub fn ffi_boundary<R>(name: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            eprintln!("perfcompat: internal error in {name}: {msg}; aborting");
            std::process::abort();
        }
    }
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// The C error convention of every export: the message on stderr prefixed with the function
/// name, `errno` set, -1 returned.
pub(crate) fn fail(func: &str, errno: c_int, msg: impl std::fmt::Display) -> c_int {
    eprintln!("{func}: {msg}");
    set_errno(errno);
    -1
}

/// [`fail`] for an engine error: its own errno and message.
pub(crate) fn fail_with(func: &str, e: &perfcompat::Error) -> c_int {
    fail(func, e.errno(), e)
}

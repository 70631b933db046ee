//! The C ABI of perfcompat: `libperfex`, `libcpc`, `libpctx`, Tru64's pfm device and the
//! `perfcompat_*` extensions, as thin shims over the engine: check pointers and handles,
//! convert, call one engine function, map the result to the C convention. Every export goes
//! through the `edge` module (handle lookup, the one error path).
//!
//! A panic never unwinds into C: every export runs inside [`ffi_boundary`], which prints the
//! panic message on stderr and aborts the process.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, CStr};

pub mod cpc;
pub(crate) mod edge;
pub mod mpi;
pub mod pctx;
pub mod perfctr;
pub mod perfex;
pub mod pfm;
pub mod preload;
pub mod pthread;
pub mod sim;

pub use edge::ffi_boundary;

/// libperfex's and the `perfcompat_*` extensions' failure: `e` told on standard error as
/// `<func>: <message>`, `errno` set, -1 returned.
pub(crate) fn fail_with(func: &CStr, e: &perfcompat::Error) -> c_int {
    edge::fail(edge::Tell::Stderr, func, e);
    -1
}

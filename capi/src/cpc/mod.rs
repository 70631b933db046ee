//! Solaris `libcpc` version 2 (`libcpc.h`, libcpc(3LIB)): every v2 function and
//! `cpc_terminate`, as shims over the engine.
//!
//! Each function checks its handles against the registry of live handles (a stale, foreign
//! or mistyped handle is `EINVAL`, never dereferenced), converts, calls the engine and reports
//! failures the libcpc way through the crate's `edge` module: -1 (or NULL) with `errno`,
//! through the error handler with a subcode where libcpc had one, else on standard error. What
//! a call does is the engine's (`perfcompat::api::cpc`). `cpc_set_sample`,
//! `cpc_buf_get`, `cpc_buf_set`, `cpc_request_preset`, `cpc_set_restart`, `cpc_enable` and
//! `cpc_disable` are async-signal-safe (no allocation, no locks, no stdio), so a SIGEMT handler
//! may call them. Overflow notification (SIGEMT, its siginfo and how it is delivered) is the
//! engine's `perfcompat::api::cpc::emt`.
//!
//! Decisions where the man pages and the original code disagree, or Linux differs, are
//! commented where they are implemented and listed in the README.

use std::ffi::{c_char, c_int, c_uint, c_void};

use perfcompat::{Error, Result};

use crate::edge::{self, Tell};

pub(crate) mod handles;

mod binding;
mod buffers;
mod errors;
mod open;
mod sampling;
mod sets;
mod v1;
mod v1_bind;
mod walkers;

pub use binding::*;
pub use buffers::*;
pub use errors::*;
pub use open::*;
pub use sampling::*;
pub use sets::*;
pub use v1::*;
pub use v1_bind::*;
pub use walkers::*;

use handles::{Buf, Cpc, Set};

/// Solaris `uint_t`.
pub type uint_t = c_uint;
/// Solaris `hrtime_t`: nanoseconds of a monotonic clock (here `CLOCK_MONOTONIC`).
pub type hrtime_t = std::ffi::c_longlong;
/// Solaris `processorid_t`: a CPU number.
pub type processorid_t = c_int;

/// The libcpc version this library implements; the only one `cpc_open` accepts (version 1's
/// functions are served too: `cpc_version`).
pub const CPC_VER_CURRENT: c_int = 2;
/// Bind flag: threads the bound thread creates later inherit the set.
pub const CPC_BIND_LWP_INHERIT: c_uint = 0x1;
/// `cpc_bind_event`'s flag: the counter that wraps freezes both and sends `SIGEMT`; version 2
/// binds refuse it (`EINVAL`).
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

// libcpc's flags and subcodes are the engine's and the error channel's numbers.
const _: () = assert!(
    EMT_CPCOVF == perfcompat::api::cpc::emt::EMT_CPCOVF
        && CPC_OVF_NOTIFY_EMT == perfcompat::api::cpc::OVF_NOTIFY_EMT
        && CPC_COUNT_USER == perfcompat::api::cpc::COUNT_USER
        && CPC_COUNT_SYSTEM == perfcompat::api::cpc::COUNT_SYSTEM
        && CPC_COUNT_HV == perfcompat::api::cpc::COUNT_HV
        && CPC_BIND_LWP_INHERIT as c_int == perfcompat::api::cpc::v1_bind::BIND_LWP_INHERIT
        && CPC_BIND_EMT_OVF as c_int == perfcompat::api::cpc::v1_bind::BIND_EMT_OVF
        && CPC_INVALID_EVENT == 1
        && CPC_PBIND_FAILED == 10
        && CPC_HV_NO_ACCESS == 11
);

// ---------------------------------------------------------------------------------------------
// Handle lookups (the files of this module are grouped as the man pages are: opening and
// describing, errors, sets and requests, buffers, binding, sampling and overflow, walkers).

/// How a bad `cpc_t` is told: no handler to call.
const BAD: Tell = Tell::Cpc(None);

const NO_SET: &str = "not a set of this cpc_t (destroyed, never created, or another handle's)";
const NO_BUF: &str = "not a buffer of this cpc_t (destroyed, never created, or another handle's)";

/// A live set of `cpc`.
#[inline]
fn set_of<'a>(cpc: &Cpc, set: *mut cpc_set_t) -> Result<&'a Set> {
    match edge::get(set) {
        Some(s) if s.cpc == cpc.addr() => Ok(s),
        _ => Err(Error::BadArgument(NO_SET)),
    }
}

/// A live buffer of `cpc`.
#[inline]
fn buf_of<'a>(cpc: &Cpc, buf: *mut cpc_buf_t) -> Result<&'a Buf> {
    match edge::get(buf) {
        Some(b) if b.cpc == cpc.addr() => Ok(b),
        _ => Err(Error::BadArgument(NO_BUF)),
    }
}

/// A callback the program passed, or the error for a NULL one.
fn action<F>(f: Option<F>) -> Result<F> {
    f.ok_or(Error::BadArgument("NULL action"))
}

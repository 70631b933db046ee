//! The edge between C and the engine, which every export goes through: the panic boundary,
//! the typed lookup of C handles in the [`registry`], and the one place an engine [`Error`]
//! becomes the C failure convention (the failure value, `errno`, libcpc's subcode, the error
//! handler or a line on standard error: [`fail`]).
//!
//! An export checks its pointers and handles, converts its C arguments, calls one engine
//! function and hands the result to [`ret`] (or [`call`], which also looks its handle up).

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use perfcompat::{Error, Result};

pub(crate) mod errfn;
pub(crate) mod registry;
pub(crate) mod report;

pub(crate) use registry::Kind;
pub(crate) use report::Handler;

/// Run `f`; if it panics, say so on stderr and abort (a panic must not unwind into C).
pub fn ffi_boundary<R>(name: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => abort_after_panic(name, p),
    }
}

/// [`ffi_boundary`] with the C name, turned into text only if `f` panics (the sampling paths
/// pass here on every call).
#[inline]
pub(crate) fn boundary<R>(name: &CStr, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => abort_after_panic(&name.to_string_lossy(), p),
    }
}

#[cold]
fn abort_after_panic(name: &str, p: Box<dyn std::any::Any + Send>) -> ! {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    perfcompat::stderr_line!("perfcompat: internal error in {name}: {msg}; aborting");
    std::process::abort();
}

/// Set `errno` (the only place that does).
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// This thread's `errno`.
pub(crate) fn errno() -> c_int {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() }
}

/// How a library tells its callers about a failure.
#[derive(Clone, Copy)]
pub(crate) enum Tell {
    /// libcpc: the handle's error handler for an error with a subcode, else
    /// `libcpc: <fn>: <message>` on standard error (see [`report`]); async-signal-safe.
    Cpc(Option<Handler>),
    /// libpctx: `libpctx: <fn>: <message>` on standard error, no subcode.
    Pctx,
    /// libperfex and the `perfcompat_*` extensions: `<fn>: <message>` on standard error.
    Stderr,
    /// Only `errno` (the interposed system calls, and libcpc's functions that fail silently).
    Errno,
}

/// A C handle type: what it points to and the registry kind it is recorded under.
///
/// # Safety
/// Every pointer registered under [`Handle::KIND`] is a live `Box<Self::Target>` until it is
/// removed from the registry.
pub(crate) unsafe trait Handle {
    /// Its kind in the registry.
    const KIND: Kind;
    /// The Rust value it points to.
    type Target;
    /// What a pointer that is not a live handle of this type is told.
    const BAD: &'static str;
}

/// The value behind handle `p` if it is a live handle of its type (async-signal-safe,
/// constant time; never dereferences anything the registry does not hold).
///
/// A handle must not be freed while the reference is used: libcpc's and libpctx's rule that a
/// handle is not destroyed while another thread uses it.
#[inline(always)]
pub(crate) fn get<'a, H: Handle>(p: *mut H) -> Option<&'a H::Target> {
    // SAFETY: registered addresses of H::KIND are live boxes of H::Target (the Handle
    // contract).
    registry::get(p as usize, H::KIND).map(|a| unsafe { &*a.as_ptr().cast::<H::Target>() })
}

/// Take back the value of the live handle `p`, which is no longer one (`None` if it is not a
/// live handle of its type, or another caller took it first: only one frees it).
pub(crate) fn take<H: Handle>(p: *mut H) -> Option<Box<H::Target>> {
    // SAFETY: registered addresses of H::KIND are live boxes of H::Target (the Handle
    // contract), and only the caller that wins the removal gets here.
    registry::remove(p as usize, H::KIND).map(|a| unsafe { Box::from_raw(a as *mut H::Target) })
}

/// The value at `addr`, the address of a handle of type `H` that the caller has just removed
/// from the registry itself (a parent handle forgetting its children).
///
/// # Safety
/// `addr` is what [`registry::remove`] returned for a handle of type `H` to this caller.
pub(crate) unsafe fn reclaim<H: Handle>(addr: usize) -> Box<H::Target> {
    // SAFETY: as the caller promises.
    unsafe { Box::from_raw(addr as *mut H::Target) }
}

/// A new handle of type `H` for `value`, recorded by `record` (the registry's insert, or the
/// parent handle's adoption), which is given the value's address and returns the handle;
/// [`Error::OutOfHandles`] (and `value` dropped) when it cannot be.
pub(crate) fn new_handle<H: Handle>(
    value: H::Target,
    record: impl FnOnce(usize) -> Option<usize>,
) -> Result<*mut H> {
    let p = Box::into_raw(Box::new(value));
    let Some(h) = record(p as usize) else {
        // SAFETY: just made, never shared.
        drop(unsafe { Box::from_raw(p) });
        return Err(Error::OutOfHandles);
    };
    Ok(h as *mut H)
}

/// Tell the caller of `func` about `e` the way `tell` says, and set `errno`.
#[cold]
pub(crate) fn fail(tell: Tell, func: &CStr, e: &Error) {
    match tell {
        Tell::Cpc(h) => report::report(h, func, report::subcode(e), e.errno(), Some(e)),
        Tell::Pctx => report::report(None, func, -1, e.errno(), Some(e)),
        Tell::Stderr => {
            perfcompat::stderr_line!("{}: {e}", func.to_string_lossy());
            set_errno(e.errno());
        }
        Tell::Errno => set_errno(e.errno()),
    }
}

/// The C result of `r`: its value, or `failed` after [`fail`].
#[inline]
pub(crate) fn ret<T>(tell: Tell, func: &CStr, failed: T, r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            fail(tell, func, &e);
            failed
        }
    }
}

/// An engine value that says how its errors are told (a `cpc_t` has an error handler).
pub(crate) trait Tells {
    /// How.
    fn tell(&self) -> Tell;
}

/// The whole body of an export on handle `p`: inside the panic boundary, look `p` up (a bad
/// handle is told as `tell_bad` says), run `f` on it and turn its result into the C one
/// (`failed` on error, told as the handle says).
#[inline]
pub(crate) fn call<H: Handle, T>(
    func: &CStr,
    p: *mut H,
    tell_bad: Tell,
    failed: T,
    f: impl FnOnce(&H::Target) -> Result<T>,
) -> T
where
    H::Target: Tells,
{
    boundary(func, || match get(p) {
        // How the handle tells an error is read only when there is one.
        Some(t) => match f(t) {
            Ok(v) => v,
            Err(e) => {
                fail(t.tell(), func, &e);
                failed
            }
        },
        None => {
            fail(tell_bad, func, &Error::BadArgument(H::BAD));
            failed
        }
    })
}

/// [`ret`] inside the panic boundary, for exports without a handle.
#[inline]
pub(crate) fn run<T>(tell: Tell, func: &CStr, failed: T, f: impl FnOnce() -> Result<T>) -> T {
    // The name is read only for a message (a panic, an error): a first use read the merged
    // strings' window of the text for it (issue 48).
    boundary(func, || ret(tell, func, failed, f()))
}

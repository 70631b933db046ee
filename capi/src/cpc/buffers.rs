//! Buffers: cpc_buf_create(3CPC). A buffer's values are atomics, so that a signal handler may
//! sample into a buffer the program reads; `cpc_buf_get` and `cpc_buf_set` are
//! async-signal-safe.

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use perfcompat::{Error, Result};

use super::handles::{self, Buf, Cpc};
use super::{buf_of, cpc_buf_t, cpc_set_t, cpc_t, hrtime_t, set_of, BAD, NO_BUF};
use crate::edge::{self, call, ffi_boundary, Tell};

/// Make a zeroed buffer for `set`'s current requests; see cpc_buf_create(3CPC). A buffer made
/// before requests were added no longer fits the set (`cpc_set_sample` refuses it).
///
/// # Returns
/// The buffer, or NULL with `errno` `EINVAL` (bad handle, or a set of another handle) or
/// `ENOMEM`.
#[no_mangle]
pub extern "C" fn cpc_buf_create(cpc: *mut cpc_t, set: *mut cpc_set_t) -> *mut cpc_buf_t {
    call(
        c"cpc_buf_create",
        cpc,
        BAD,
        std::ptr::null_mut(),
        |c: &Cpc| handles::new_buf(c, set_of(c, set)?),
    )
}

/// Free a buffer; see cpc_buf_create(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when `buf` is not a live buffer of `cpc`.
///
/// # Safety
/// `buf` is not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn cpc_buf_destroy(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> c_int {
    call(c"cpc_buf_destroy", cpc, BAD, -1, |c: &Cpc| {
        handles::destroy_child(c, buf)
            .then_some(0)
            .ok_or(Error::BadArgument(NO_BUF))
    })
}

/// Read value `index` of a buffer into `*val`; see cpc_buf_create(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle, an index outside the buffer or a NULL
/// `val` (libcpc did not check; its man page documents -1).
///
/// # Safety
/// `val` is NULL or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_buf_get(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: *mut u64,
) -> c_int {
    call(c"cpc_buf_get", cpc, BAD, -1, |c: &Cpc| {
        let (b, i) = buf_index(c, buf, index)?;
        // SAFETY: NULL or writable, per the caller.
        let v = unsafe { val.as_mut() }.ok_or(Error::BadArgument("NULL value pointer"))?;
        *v = b.vals[i].load(Ordering::Relaxed);
        Ok(0)
    })
}

/// Set value `index` of a buffer (the counters are not affected); see cpc_buf_create(3CPC).
/// Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle or an index outside the buffer.
#[no_mangle]
pub extern "C" fn cpc_buf_set(
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    index: c_int,
    val: u64,
) -> c_int {
    call(c"cpc_buf_set", cpc, BAD, -1, |c: &Cpc| {
        let (b, i) = buf_index(c, buf, index)?;
        b.vals[i].store(val, Ordering::Relaxed);
        Ok(0)
    })
}

/// A live buffer of `cpc` and `index` if it is one of its values.
fn buf_index<'a>(cpc: &Cpc, buf: *mut cpc_buf_t, index: c_int) -> Result<(&'a Buf, usize)> {
    let b = buf_of(cpc, buf)?;
    let len = b.vals.len();
    match usize::try_from(index).ok().filter(|&i| i < len) {
        Some(i) => Ok((b, i)),
        None => Err(Error::IndexOutOfRange {
            index: index.into(),
            len,
        }),
    }
}

/// `read(buf)` of a live buffer of `cpc`; 0 with `errno` `EINVAL` for a bad handle, which is
/// always told as a bad buffer.
fn buf_value<T: Default>(
    func: &std::ffi::CStr,
    cpc: *mut cpc_t,
    buf: *mut cpc_buf_t,
    read: impl FnOnce(&Buf) -> T,
) -> T {
    ffi_boundary(func.to_str().unwrap_or("?"), || {
        let c: Option<&Cpc> = edge::get(cpc);
        let tell = c.map_or(BAD, |c| Tell::Cpc(c.handler()));
        let b = c
            .ok_or(Error::BadArgument(NO_BUF))
            .and_then(|c| buf_of(c, buf));
        edge::ret(tell, func, T::default(), b.map(read))
    })
}

/// The time of the sample in the buffer (`CLOCK_MONOTONIC` nanoseconds, libcpc's gethrtime
/// timebase); see cpc_buf_create(3CPC).
///
/// # Returns
/// The time, or 0 with `errno` `EINVAL` for a bad handle.
#[no_mangle]
pub extern "C" fn cpc_buf_hrtime(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> hrtime_t {
    buf_value(c"cpc_buf_hrtime", cpc, buf, |b| b.hrtime())
}

/// The buffer's cycle count: the time the counters ran since the bind (for a thread, its time
/// on a CPU) multiplied by the nominal clock, Linux having no per-thread virtual TSC; see
/// cpc_buf_create(3CPC).
///
/// # Returns
/// The ticks, or 0 with `errno` `EINVAL` for a bad handle.
#[no_mangle]
pub extern "C" fn cpc_buf_tick(cpc: *mut cpc_t, buf: *mut cpc_buf_t) -> u64 {
    buf_value(c"cpc_buf_tick", cpc, buf, |b| {
        b.tick.load(Ordering::Relaxed)
    })
}

/// The buffers of a `cpc_buf_sub`-style call, if all are live buffers of `cpc` of the same
/// size (libcpc silently does nothing otherwise; we also set `errno` to `EINVAL`).
fn same_size<'a, const N: usize>(
    cpc: *mut cpc_t,
    bufs: [*mut cpc_buf_t; N],
) -> Result<[&'a Buf; N]> {
    let bad = Error::BadArgument(NO_BUF);
    let c: &Cpc = edge::get(cpc).ok_or(bad.clone())?;
    let mut out: [Option<&Buf>; N] = [None; N];
    for (o, &b) in out.iter_mut().zip(&bufs) {
        *o = buf_of(c, b).ok();
    }
    let len = out[0].ok_or(bad.clone())?.vals.len();
    if out.iter().all(|b| b.is_some_and(|b| b.vals.len() == len)) {
        Ok(out.map(|b| b.unwrap()))
    } else {
        Err(bad)
    }
}

/// `ds = op(a, b)` value by value and for the ticks, `ds.hrtime` the later of the two.
fn combine(bufs: [&Buf; 3], op: fn(u64, u64) -> u64) {
    let [d, a, b] = bufs;
    // Read both operands first: ds may be a or b.
    for i in 0..d.vals.len() {
        let v = op(
            a.vals[i].load(Ordering::Relaxed),
            b.vals[i].load(Ordering::Relaxed),
        );
        d.vals[i].store(v, Ordering::Relaxed);
    }
    let h = a.hrtime().max(b.hrtime());
    let t = op(
        a.tick.load(Ordering::Relaxed),
        b.tick.load(Ordering::Relaxed),
    );
    d.set_hrtime(h);
    d.tick.store(t, Ordering::Relaxed);
}

/// The silent buffer arithmetic: `f` on the buffers if they fit, else only `errno` `EINVAL`.
fn silently<const N: usize>(
    func: &std::ffi::CStr,
    cpc: *mut cpc_t,
    bufs: [*mut cpc_buf_t; N],
    f: impl FnOnce([&Buf; N]),
) {
    edge::run(Tell::Errno, func, (), || same_size(cpc, bufs).map(f))
}

/// `ds = a - b` element by element (wrapping), `ds.tick = a.tick - b.tick`, `ds.hrtime` the
/// later of the two; `ds` may be `a` or `b`. Does nothing (and sets `errno` to `EINVAL`)
/// unless all three are live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_sub(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    silently(c"cpc_buf_sub", cpc, [ds, a, b], |b| {
        combine(b, u64::wrapping_sub)
    })
}

/// `ds = a + b` element by element (wrapping), ticks added, `ds.hrtime` the later of the two;
/// `ds` may be `a` or `b`. Does nothing (and sets `errno` to `EINVAL`) unless all three are
/// live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_add(
    cpc: *mut cpc_t,
    ds: *mut cpc_buf_t,
    a: *mut cpc_buf_t,
    b: *mut cpc_buf_t,
) {
    silently(c"cpc_buf_add", cpc, [ds, a, b], |b| {
        combine(b, u64::wrapping_add)
    })
}

/// Copy `src` (values, time, ticks) into `ds`. Does nothing (and sets `errno` to `EINVAL`)
/// unless both are live buffers of `cpc` of one size; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_copy(cpc: *mut cpc_t, ds: *mut cpc_buf_t, src: *mut cpc_buf_t) {
    silently(c"cpc_buf_copy", cpc, [ds, src, src], |b| {
        combine(b, |a, _| a)
    })
}

/// Zero a buffer's values, time and ticks. Does nothing (and sets `errno` to `EINVAL`) for a
/// bad handle; see cpc_buf_create(3CPC).
#[no_mangle]
pub extern "C" fn cpc_buf_zero(cpc: *mut cpc_t, buf: *mut cpc_buf_t) {
    silently(c"cpc_buf_zero", cpc, [buf], |[b]| {
        for v in b.vals.iter() {
            v.store(0, Ordering::Relaxed);
        }
        b.set_hrtime(0);
        b.tick.store(0, Ordering::Relaxed);
    })
}

//! Sampling and overflow: cpc_set_sample(3CPC), and what cpc_bind_curlwp(3CPC) and
//! cpc_enable(3CPC) say a SIGEMT handler does (`cpc_request_preset`, `cpc_set_restart`,
//! `cpc_enable`, `cpc_disable`). All of them are async-signal-safe: no allocation, no locks,
//! errors told through the stack-formatted error channel. The notification itself is the
//! engine's `perfcompat::api::cpc::emt`.

use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use perfcompat::api::cpc::thread as lwp;
use perfcompat::{BoundSet, Error, Result, Sampled};

use super::handles::{self, Buf, Cpc, Set};
use super::{buf_of, cpc_buf_t, cpc_set_t, cpc_t, set_of, BAD};
use crate::edge::{self, call};

/// Sample `n` requests of `binding` into `buf` (values, time, ticks) the general way; on
/// failure `false`, with the reason in `err`. Async-signal-safe.
///
/// Small sets go through an 8-value stack buffer: zeroing a `MAX_REQUESTS` buffer on every
/// call showed in the profile, as it did in the engine (see `BoundSet::sample`). The common
/// case does not come here ([`cpc_set_sample`] tries [`BoundSet::sample_to`] first).
#[inline(always)]
fn sample_into(binding: &BoundSet, buf: &Buf, n: usize, err: &mut Option<Error>) -> bool {
    let mut small = [0u64; 8];
    let mut big;
    let vals: &mut [u64] = if n <= small.len() {
        &mut small[..n]
    } else {
        big = [0u64; perfcompat::base::set::MAX_REQUESTS];
        &mut big[..n]
    };
    match binding.sample(vals) {
        Ok(info) => {
            // The clock's multiplier after the read (its first lookup is not counted).
            store(
                buf,
                vals,
                info.hrtime,
                info.bound_running_ns,
                handles::clock_mult(),
            );
            true
        }
        Err(e) => {
            *err = Some(e);
            false
        }
    }
}

/// Put a sample in `buf`: `vals` (one per request), the time, and the ticks of the clock
/// `tick_mult` describes in the running time `bound_running_ns`.
#[inline(always)]
fn store(buf: &Buf, vals: &[u64], hrtime: i64, bound_running_ns: u64, tick_mult: u64) {
    let n = vals.len();
    let dest = &buf.vals[..n];
    perfcompat::base::virt::each_index(n, |i| dest[i].store(vals[i], Ordering::Relaxed));
    buf.set_hrtime(hrtime);
    buf.tick.store(
        handles::ticks(bound_running_ns, tick_mult),
        Ordering::Relaxed,
    );
}

/// Sample `s` (the `cpc_set_t` `set`) into `b`; `mine` is the calling thread's own counters
/// for the set ([`lwp::mine`]), looked up by the caller. Async-signal-safe.
#[inline(always)]
fn sample_with(s: &Set, set: usize, b: &Buf, mine: Option<NonNull<BoundSet>>) -> Result<c_int> {
    let n = s.reqs.len();
    if b.vals.len() != n {
        return Err(Error::BufferTooSmall {
            len: b.vals.len(),
            need: n,
        });
    }
    // This thread's own counters for the set (its binding, or its inherited copy). The
    // closure returns a bool and leaves an error aside: moving a `Result<_, Error>` out of it
    // through the lookups showed in the profile.
    let mut err = None;
    // The calling thread's own binding or copy first, with the sample inlined here; a set
    // bound elsewhere (another thread, a CPU) out of line: with one closure for both, the
    // sample was called rather than inlined (issue 48).
    let r = match mine {
        // SAFETY: used at once, on this thread (`lwp::mine`'s rules).
        Some(bs) => Some(sample_into(unsafe { bs.as_ref() }, b, n, &mut err)),
        None => sample_bound_elsewhere(s, set, b, n, &mut err),
    };
    match r {
        Some(true) => Ok(0),
        _ => Err(not_sampled(err)),
    }
}

/// Sample `s` (the `cpc_set_t` `set`) into `b`. Async-signal-safe.
#[inline(always)]
fn sample(s: &Set, set: usize, b: &Buf) -> Result<c_int> {
    sample_with(s, set, b, lwp::mine(set))
}

/// [`sample`] of a set the calling thread does not hold a binding of: through the set's own
/// binding (`None`: not bound).
#[inline(never)]
fn sample_bound_elsewhere(
    s: &Set,
    set: usize,
    b: &Buf,
    n: usize,
    err: &mut Option<Error>,
) -> Option<bool> {
    s.with_counters(set, |bs| sample_into(bs, b, n, err))
}

/// Why a sample failed: the error left aside, else (no counters found) not bound.
#[cold]
fn not_sampled(err: Option<Error>) -> Error {
    err.unwrap_or(Error::NotBound)
}

/// Sample a bound set into `buf`: each request's 64-bit value (preset + events), the time
/// and the ticks; on a frozen set (after an overflow notification or `cpc_disable`) the
/// values at the freeze. See cpc_set_sample(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when a handle is bad or of another `cpc_t`, the set is not
/// bound, or the buffer was made for a different number of requests; the engine's errno when
/// the counters cannot be read (`ESRCH`: the thread it counted has exited).
// long-export: the common case is answered here, outside the unwind boundary and inlined to the engine's lean read (issue 48: each call and frame between them was instructions of every sample), the rest goes out of line to `sample_general`.
#[no_mangle]
pub extern "C" fn cpc_set_sample(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
) -> c_int {
    // The common case here, outside the unwind boundary (nothing in it can panic: no
    // indexing, no arithmetic that checks), everything else in `sample_general`, out of line
    // (issue 48): the calling thread's own binding of the set, running and read from user
    // space or stopped, answers `BoundSet::sample_to`, which writes the values straight into
    // the buffer; then its time and ticks.
    //
    // The set and the buffer are looked up first (each an index and a generation in the
    // registry: O(1), a garbage pointer is never dereferenced), each checked to be made from
    // `cpc`: then `cpc` is live too (`cpc_close` destroys its sets and buffers), and is not
    // looked up itself. The buffer's size is checked against the binding's number of
    // requests (`sample_to`), which is the set's: requests are added to unbound sets only,
    // and a thread's inherited copy is bound from the same requests.
    let Some(s) = edge::get(set).filter(|s: &&Set| s.cpc == cpc as usize) else {
        return checked(cpc, set, buf);
    };
    let Some(b) = edge::get(buf).filter(|b: &&Buf| b.cpc == cpc as usize) else {
        return checked(cpc, set, buf);
    };
    // The binder's own binding, kept in the set with its thread pointer (one register read
    // and two loads, no thread-local: issue 48, the TLS resolver's call and the entry's tests
    // were ~14 instructions). It is never the parent's after `fork`: every set's pair is
    // cleared in a child of `fork` (`perfcompat::api::cpc::set`), so the sample does not test
    // the fork again. Anything else (an inherited copy, a set bound elsewhere, not bound)
    // out of line, through the thread's table.
    // The out-of-line paths are given the three arguments as they came, in the registers
    // they came in, then what was found (issue 48: moving them aside for `checked` was
    // instructions of every call).
    s.with_mine_here(
        |bs| {
            // SAFETY: used at once, on this thread (`Set::mine_here`'s rules).
            let binding = unsafe { bs.as_ref() };
            // A one-request buffer here, with no loop over members: with the loop's live
            // values in it, this function saved and restored six registers on every call
            // (issue 48). Larger ones (and a buffer of another size than the binding's, which
            // the sample tells) out of line, by the same steps.
            if (b.vals.len() != 1) | (binding.len() != 1) {
                return sample_many(cpc, set, buf, s, b, bs);
            }
            // The nominal clock, for the ticks (issue 48: looked up by the first sample, not
            // by `cpc_open`): where it was not yet, `first_sample` looks it up and comes back.
            let mult = handles::known_clock_mult();
            if mult == u64::MAX {
                return first_sample(cpc, set, buf);
            }
            match binding.sample_binders_to_untimed(&b.vals[..1]) {
                Some(r) => answered(b, r, mult),
                None => sample_general(cpc, set, buf, s, b, Some(bs)),
            }
        },
        || sample_by_table(cpc, set, buf, s, b),
    )
}

/// [`cpc_set_sample`]'s common case for a buffer of more than one request: `bs` is the set's
/// binder's own binding (`Set::mine_here`); `s` and `b` are `set` and `buf`.
#[inline(never)]
fn sample_many(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
    s: &Set,
    b: &Buf,
    bs: NonNull<BoundSet>,
) -> c_int {
    // As in `cpc_set_sample`: the clock looked up before anything is read.
    let mult = handles::known_clock_mult();
    if mult == u64::MAX {
        return first_sample(cpc, set, buf);
    }
    // SAFETY: used at once, on this thread (`Set::mine_here`'s rules).
    match unsafe { bs.as_ref() }.sample_binders_to_untimed(&b.vals) {
        Some(r) => answered(b, r, mult),
        None => sample_general(cpc, set, buf, s, b, Some(bs)),
    }
}

/// The end of [`cpc_set_sample`]'s common case: `r`'s ticks and time into `b`, 0. Without a
/// frame of its own where the set runs: the clock writes the time into the buffer itself, and
/// is called last, a jump (issue 48: turning its answer into nanoseconds here made a call,
/// and a frame around it, of every sample). Its answer is the sample's: 0 (the clock's
/// failure else, which `CLOCK_MONOTONIC` never has on Linux).
#[inline(always)]
fn answered(b: &Buf, r: Sampled, mult: u64) -> c_int {
    b.tick
        .store(handles::ticks(r.bound_running_ns, mult), Ordering::Relaxed);
    match r.frozen_at {
        Some(t) => {
            b.set_hrtime(t);
            0
        }
        // The clock last (a running set), after everything else is stored.
        None => b.clock_now(),
    }
}

/// [`cpc_set_sample`] of the process's first sample: the nominal clock looked up
/// ([`handles::clock_mult`]), then the sample made again from the start, before it reads
/// anything. Not on the way of the read: the instructions between a sample's read and the
/// next one's are the same for the first sample as for every other (guest test
/// `count.libcpc_exact`), and `cpc_set_sample` has no frame (a call in it would give it one).
#[inline(never)]
fn first_sample(cpc: *mut cpc_t, set: *mut cpc_set_t, buf: *mut cpc_buf_t) -> c_int {
    handles::clock_mult();
    cpc_set_sample(cpc, set, buf)
}

/// [`cpc_set_sample`] when the calling thread is not the set's binder: its inherited copy of
/// the set (found through its thread table), tested not to be the parent's after `fork`, is
/// sampled as the binder's is; else the general sample. `s` and `b` are `set` and `buf`.
#[inline(never)]
fn sample_by_table(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
    s: &Set,
    b: &Buf,
) -> c_int {
    let any = lwp::mine_any(set as usize);
    if let Some(bs) = any {
        // SAFETY: used at once, on this thread (`lwp::mine`'s rules).
        if let Some(r) = unsafe { bs.as_ref() }.sample_to_untimed(&b.vals) {
            return answered(b, r, handles::clock_mult());
        }
    }
    sample_general(cpc, set, buf, s, b, any)
}

/// [`cpc_set_sample`] when its common case does not answer: the general sample, and the
/// failure told. `any` is the calling thread's own counters for the set whatever their state
/// ([`lwp::mine_any`], or the set's binder's pair); `s` and `b` are `set` and `buf`. Out of
/// line, inside the unwind boundary.
#[inline(never)]
fn sample_general(
    cpc: *mut cpc_t,
    set: *mut cpc_set_t,
    buf: *mut cpc_buf_t,
    s: &Set,
    b: &Buf,
    any: Option<NonNull<BoundSet>>,
) -> c_int {
    // (`buf` unused: the compiler drops it from the out-of-line paths' arguments, and the
    // fast path puts `s` in its register. Used, it kept six values live there, one more
    // than the registers it needs no frame for: issue 48.)
    let _ = buf;
    edge::boundary(c"cpc_set_sample", || {
        // SAFETY: as in `cpc_set_sample`.
        let mine = any.filter(|bs| !unsafe { bs.as_ref() }.is_gone());
        match sample_with(s, set as usize, b, mine) {
            Ok(v) => v,
            Err(e) => failed(cpc, e),
        }
    })
}

/// `cpc_set_sample` with every handle checked in turn, the first bad one told.
#[cold]
#[inline(never)]
fn checked(cpc: *mut cpc_t, set: *mut cpc_set_t, buf: *mut cpc_buf_t) -> c_int {
    call(c"cpc_set_sample", cpc, BAD, -1, |c: &Cpc| {
        let s = set_of(c, set)?;
        sample(s, set as usize, buf_of(c, buf)?)
    })
}

/// `cpc_set_sample`'s failure `e`, told through `cpc`'s error handler.
#[cold]
#[inline(never)]
fn failed(cpc: *mut cpc_t, e: Error) -> c_int {
    call(c"cpc_set_sample", cpc, BAD, -1, |_: &Cpc| Err(e))
}

/// Run `f` on the calling thread's bound set (libcpc's request_preset, restart, enable and
/// disable act on it and ignore their set argument); without one, `without` (an error, or
/// `Ok` for the calls that do nothing then). Async-signal-safe.
#[inline]
fn on_current(
    func: &std::ffi::CStr,
    cpc: *mut cpc_t,
    without: Result<()>,
    f: impl FnOnce(&BoundSet) -> Result<()>,
) -> c_int {
    call(func, cpc, BAD, -1, |_: &Cpc| {
        lwp::with_curlwp(f).unwrap_or(without).map(|()| 0)
    })
}

/// Change request `index`'s preset in the calling thread's bound set; it takes effect at the
/// next `cpc_set_restart` (a later bind starts from the preset given when the request was
/// added); see cpc_bind_curlwp(3CPC). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set or `index` is not one of its
/// requests.
#[no_mangle]
pub extern "C" fn cpc_request_preset(cpc: *mut cpc_t, index: c_int, preset: u64) -> c_int {
    edge::boundary(c"cpc_request_preset", || {
        // The SIGEMT handler's call first (issue 48): a live handle and the thread's bound
        // set found, the preset stored, with no error slot set up. Anything else, and a
        // failure, takes the checks in their usual order, which tell what is wrong.
        if let (Some(_), Some(b), Ok(i)) = (edge::get(cpc), lwp::curlwp(), usize::try_from(index)) {
            // SAFETY: used at once, on this thread (`lwp::curlwp`'s rules).
            if unsafe { b.as_ref() }.set_preset(i, preset).is_ok() {
                return 0;
            }
        }
        request_preset_checked(cpc, index, preset)
    })
}

/// `cpc_request_preset` with every check made in turn, the first failure told.
#[cold]
#[inline(never)]
fn request_preset_checked(cpc: *mut cpc_t, index: c_int, preset: u64) -> c_int {
    on_current(c"cpc_request_preset", cpc, Err(Error::NoCurrentSet), |b| {
        let i = usize::try_from(index).map_err(|_| Error::IndexOutOfRange {
            index: index.into(),
            len: b.len(),
        })?;
        b.set_preset(i, preset)
    })
}

/// Restart the calling thread's bound set: every request counts again from its preset (the
/// one given to `cpc_request_preset`, else the original), and a freeze is lifted. Meant for
/// the SIGEMT handler; async-signal-safe. Like libcpc, it acts on the calling thread's set
/// whatever `set` is. See cpc_bind_curlwp(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when the thread has no bound set.
#[no_mangle]
pub extern "C" fn cpc_set_restart(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    let _ = set;
    edge::boundary(c"cpc_set_restart", || {
        // The SIGEMT handler's call first (issue 48): a live handle and the thread's bound
        // set found once, restarted; a failure told as the handle says. Without either, the
        // checks in their usual order.
        let (Some(_), Some(b)) = (edge::get(cpc), lwp::curlwp()) else {
            return restart_checked(cpc);
        };
        // SAFETY: used at once, on this thread (`lwp::curlwp`'s rules).
        match unsafe { b.as_ref() }.restart() {
            Ok(()) => 0,
            Err(e) => failed_in(c"cpc_set_restart", cpc, e),
        }
    })
}

/// `cpc_set_restart` with every check made in turn, the first failure told.
#[cold]
#[inline(never)]
fn restart_checked(cpc: *mut cpc_t) -> c_int {
    on_current(c"cpc_set_restart", cpc, Err(Error::NoCurrentSet), |b| {
        b.restart()
    })
}

/// `func`'s failure `e` on the live handle `cpc`, told through its error handler.
#[cold]
#[inline(never)]
fn failed_in(func: &std::ffi::CStr, cpc: *mut cpc_t, e: Error) -> c_int {
    call(func, cpc, BAD, -1, |_: &Cpc| Err(e))
}

// What `cpc_enable` and `cpc_disable` do in a thread without a bound set: 0, and a word to a
// controller. cpc_enable(3CPC) has a program call them around code it does not want counted
// whether or not it runs under cputrack, and "no harm will ensue" when it does not: libcpc
// failed with `EINVAL` there, which its own example ignored. A thread counted from outside
// (`cpc_bind_pctx`: cputrack's counters are the controller's perf events on the thread) has no
// set here, and Linux gives a task no way to stop counters another process opened on it
// (`PR_TASK_PERF_EVENTS_DISABLE` stops only the events the caller opened, whatever prctl(2)
// says: checked), so the controller does it, told through a traced system call
// (`perfcompat::api::pctx`'s `hear` module).

/// Resume counting on the calling thread's bound set after `cpc_disable`; see cpc_enable(3CPC).
/// A thread without a bound set gets 0 (the page's "no harm will ensue"), and the counters a
/// libpctx controller (cputrack) bound to it go on counting, if its `cpc_disable` stopped them
/// (see [`perfcompat::pctx::tell_controller`]). Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle or when the thread's counters are running
/// (libcpc's behaviour).
// The header (include/libcpc.h) keeps the engine's path as it was written; rustdoc resolves it
// through this link definition, which cbindgen does not copy (it reads `doc` attributes only).
#[cfg_attr(doc, doc = "")]
#[cfg_attr(
    doc,
    doc = "[`perfcompat::pctx::tell_controller`]: perfcompat::api::pctx::tell_controller"
)]
#[no_mangle]
pub extern "C" fn cpc_enable(cpc: *mut cpc_t) -> c_int {
    on_current_or_controller(c"cpc_enable", cpc, true, |b| b.resume())
}

/// Stop counting on the calling thread's bound set (samples return the values at this
/// moment); see cpc_enable(3CPC). A thread without a bound set gets 0; when it runs under a
/// libpctx controller that started it (cputrack, `pctx_create`), the counters the controller
/// bound to it stop until its `cpc_enable`, before this returns (a process taken with
/// `pctx_capture` cannot be heard; see [`perfcompat::pctx::tell_controller`]).
/// Async-signal-safe.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` for a bad handle or when the thread's counters are already
/// stopped.
// The header (include/libcpc.h) keeps the engine's path as it was written; rustdoc resolves it
// through this link definition, which cbindgen does not copy (it reads `doc` attributes only).
#[cfg_attr(doc, doc = "")]
#[cfg_attr(
    doc,
    doc = "[`perfcompat::pctx::tell_controller`]: perfcompat::api::pctx::tell_controller"
)]
#[no_mangle]
pub extern "C" fn cpc_disable(cpc: *mut cpc_t) -> c_int {
    on_current_or_controller(c"cpc_disable", cpc, false, |b| b.stop())
}

/// `cpc_enable`/`cpc_disable`: `f` on the calling thread's bound set, or, when it has none,
/// the word to a controller (`counting`): the LWP's counting context is the LWP's, whoever
/// bound it.
fn on_current_or_controller(
    func: &std::ffi::CStr,
    cpc: *mut cpc_t,
    counting: bool,
    f: impl FnOnce(&BoundSet) -> Result<()>,
) -> c_int {
    call(func, cpc, BAD, -1, |_: &Cpc| {
        lwp::with_curlwp(f)
            .unwrap_or_else(|| {
                perfcompat::api::pctx::tell_controller(counting);
                Ok(())
            })
            .map(|()| 0)
    })
}

/// Ask a libpctx run driven for `cpc` (cputrack-style tools) to end: the next `pctx_run` tick
/// returns. libcpc's private interface; async-signal-safe (a SIGINT handler calls it).
#[no_mangle]
pub extern "C" fn cpc_terminate(cpc: *mut cpc_t) {
    // A bad handle does nothing, errno included: a signal handler must not change it.
    crate::ffi_boundary("cpc_terminate", || {
        if let Some(c) = crate::edge::get::<cpc_t>(cpc) {
            c.terminate.store(true, Ordering::Release);
            crate::pctx::terminate_all();
        }
    })
}

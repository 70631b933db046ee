//! libcpc version 1 binding and sampling: cpc_bind_event(3CPC) (`cpc_bind_event`,
//! `cpc_take_sample`, `cpc_rele`), cpc_count_usr_events(3CPC), cpc_pctx_bind_event(3CPC) and
//! cpc_shared_open(3CPC). Thin shims: what a version 1 context is, the per-thread table, the
//! contexts bound from outside and the shared descriptors are the engine's
//! ([`perfcompat::api::cpc::v1_bind`]); these convert a `cpc_event_t` and a `pctx_t`.

use std::ffi::c_int;

use perfcompat::api::cpc::v1_bind::{self as engine, Outside, Owner, Sample, Words};
use perfcompat::Error;

use super::binding::LiveSets;
use super::cpc_event_t;
use super::handles;
use super::v1::{arg, ctl, set_ctl, v1, V1Result};
use crate::pctx::pctx_t;

/// What `ev` says to a bind.
fn words(ev: &cpc_event_t) -> Words {
    Words {
        cpuver: ev.ce_cpuver,
        ctl: ctl(ev),
        pic: ev.ce_pic,
    }
}

/// The clock of `ce_tsc` (`cpc_buf_tick`'s): looked up once (at bind), async-signal-safe.
fn tick_mult() -> u64 {
    handles::clock_mult()
}

/// Store sample `s` in `ev`. Async-signal-safe ([`tick_mult`] too).
fn fill(ev: &mut cpc_event_t, s: Sample) -> c_int {
    ev.ce_pic = s.words.pic;
    ev.ce_hrt = s.hrtime;
    ev.ce_tsc = handles::ticks(s.running_ns, tick_mult());
    ev.ce_cpuver = s.words.cpuver;
    set_ctl(ev, s.words.ctl);
    0
}

/// Bind `event`'s two events to the calling thread, each counter starting from its `ce_pic`
/// preset; a NULL `event` releases the context (cpc_bind_event(3CPC)). Flags:
/// `CPC_BIND_EMT_OVF`, the counter that wraps past 2^64 (e.g. from a preset of
/// `UINT64_MAX - 999` after 1000 events) freezes both and sends the thread `SIGEMT`
/// (`si_code` `EMT_CPCOVF`): counting stays stopped until the next `cpc_bind_event`, which a
/// SIGEMT handler may call (async-signal-safe when only the presets change);
/// `CPC_BIND_LWP_INHERIT`, threads created later are counted too (with `CPC_BIND_EMT_OVF`
/// each gets its own copy and a SIGEMT in which `cpc_take_sample` reads `UINT64_MAX`), as
/// `cpc_bind_curlwp` does. Binding replaces the thread's context, version 2's included.
///
/// # Returns
/// 0, or -1 with `errno` and a message to the error function: `EINVAL` for unknown flags, an
/// event for another cpuver or control fields `cpc_strtoevent` did not make, events the
/// processor cannot count together; `ENOTSUP` for `CPC_BIND_EMT_OVF` on a processor without
/// overflow interrupts (`sim:ultrasparc2`); `EACCES` when the kernel refuses.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_bind_event(event: *mut cpc_event_t, flags: c_int) -> c_int {
    v1(c"bind_event", -1, || {
        tick_mult();
        // SAFETY: the caller's promise.
        let w = unsafe { event.as_ref() }.map(words);
        engine::bind_event::<LiveSets>(w.as_ref(), flags)?;
        Ok(0)
    })
}

/// Sample the calling thread's context into `event`: `ce_pic` (64-bit values: preset + events;
/// frozen at the overflow after a `CPC_BIND_EMT_OVF` one), `ce_hrt`, `ce_tsc`, and the
/// `ce_cpuver` and control fields of the bound event (cpc_bind_event(3CPC)).
/// Async-signal-safe: a SIGEMT handler may call it.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL`: with a message for a NULL `event`; without one (Solaris's
/// system call) for a thread without a context.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_take_sample(event: *mut cpc_event_t) -> c_int {
    v1(c"take_sample", -1, || {
        // SAFETY: the caller's promise.
        let ev = unsafe { arg(event, "cpc_event_t")? };
        Ok(fill(ev, engine::take_sample()?))
    })
}

/// Remove the calling thread's version 1 context now (cpc_bind_event(3CPC)); otherwise it
/// goes when the thread exits.
///
/// # Returns
/// 0 (also when there was none).
#[no_mangle]
pub extern "C" fn cpc_rele() -> c_int {
    v1(c"rele", -1, || {
        engine::release();
        Ok(0)
    })
}

/// Turn the counting of user-mode events on (`enable` non-zero) or off in the calling thread's
/// context without otherwise disturbing it: the counters keep their values
/// (cpc_count_usr_events(3CPC)). A thread without a context of its own that a libpctx
/// controller counts from outside (our `cputrack`, `cpc_pctx_bind_event`, `cpc_bind_pctx`)
/// has the controller's counters on it resumed or stopped (all of them: system-mode ones
/// too), as `cpc_enable` and `cpc_disable` do there.
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and no message (Solaris's system call) when the thread has
/// no context and no controller counts it.
#[no_mangle]
pub extern "C" fn cpc_count_usr_events(enable: c_int) -> c_int {
    v1(c"count_usr_events", -1, || {
        engine::count_mode::<LiveSets>(true, enable != 0)?;
        Ok(0)
    })
}

/// Turn the counting of system-mode events on or off in the calling thread's context
/// (cpc_count_usr_events(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL`: without a message (Solaris's system call) when the thread
/// has no context of its own (one bound from outside is not changed), with one for turning
/// them on in a context bound with `CPC_BIND_EMT_OVF`.
#[no_mangle]
pub extern "C" fn cpc_count_sys_events(enable: c_int) -> c_int {
    v1(c"count_sys_events", -1, || {
        engine::count_mode::<LiveSets>(false, enable != 0)?;
        Ok(0)
    })
}

// ---------------------------------------------------------------------------------------------
// Other processes (libpctx) and processors (the shared device).

/// The owner of LWP `lwpid` of `pctx`, and its process and thread ids, checked: `EINVAL` for
/// a bad `pctx`, `ESRCH` for an LWP it does not have.
fn lwp_of(pctx: *mut pctx_t, lwpid: libc::id_t) -> V1Result<(Owner, Outside)> {
    let pid = crate::pctx::pid_of(pctx).ok_or(Error::BadArgument(
        "not a pctx_t returned by pctx_create or pctx_capture",
    ))?;
    let tid = crate::pctx::tid_of(pctx, lwpid).ok_or(Error::NotAThreadOf {
        tid: lwpid as i32,
        pid,
    })?;
    Ok((
        (pctx as usize, u64::from(lwpid)),
        Outside::Thread { pid, tid },
    ))
}

/// Whether the libpctx handle at `p` is still one.
fn pctx_alive(p: usize) -> bool {
    crate::pctx::pid_of(p as *mut pctx_t).is_some()
}

/// Bind `event` to LWP `lwpid` (libpctx's id) of the process `pctx` controls, from one of its
/// callbacks; a NULL `event` releases it (cpc_pctx_bind_event(3CPC)). `flags` must be 0.
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx`, flags other than 0 and
/// `cpc_bind_event`'s reasons; `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle; `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_bind_event(
    pctx: *mut pctx_t,
    lwpid: libc::id_t,
    event: *mut cpc_event_t,
    flags: c_int,
) -> c_int {
    v1(c"pctx_bind_event", -1, || {
        let (owner, to) = lwp_of(pctx, lwpid)?;
        // SAFETY: the caller's promise.
        let w = unsafe { event.as_ref() }.map(words);
        engine::bind_outside(owner, w.as_ref(), flags, to, pctx_alive)?;
        Ok(0)
    })
}

/// Sample LWP `lwpid`'s context into `event` (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx`, a NULL `event` or an LWP
/// without a context; `ESRCH` for an LWP the process does not have; `EAGAIN` after
/// `cpc_pctx_invalidate`.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle; `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_take_sample(
    pctx: *mut pctx_t,
    lwpid: libc::id_t,
    event: *mut cpc_event_t,
) -> c_int {
    v1(c"pctx_take_sample", -1, || {
        let (owner, _) = lwp_of(pctx, lwpid)?;
        // SAFETY: the caller's promise.
        let ev = unsafe { arg(event, "cpc_event_t")? };
        Ok(fill(ev, engine::sample_outside(owner)?))
    })
}

/// Remove LWP `lwpid`'s context (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0 (also when it had none), or -1 with `errno` and a message: `EINVAL` for a bad `pctx`,
/// `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_rele(pctx: *mut pctx_t, lwpid: libc::id_t) -> c_int {
    v1(c"pctx_rele", -1, || {
        engine::release_outside(lwp_of(pctx, lwpid)?.0);
        Ok(0)
    })
}

/// Invalidate LWP `lwpid`'s context: its samples fail with `EAGAIN` until it is released
/// (cpc_pctx_bind_event(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad `pctx` or an LWP without a
/// context, `ESRCH` for an LWP the process does not have.
///
/// # Safety
/// `pctx` is NULL or a libpctx handle.
#[no_mangle]
pub unsafe extern "C" fn cpc_pctx_invalidate(pctx: *mut pctx_t, lwpid: libc::id_t) -> c_int {
    v1(c"pctx_invalidate", -1, || {
        engine::invalidate(lwp_of(pctx, lwpid)?.0)?;
        Ok(0)
    })
}

/// Open the counters of the processor the calling thread is bound to (cpc_shared_open(3CPC)):
/// a descriptor for `cpc_shared_bind_event`. On Linux, counting a CPU needs
/// `perf_event_paranoid` at 0 or below, `CAP_PERFMON` or root (checked at bind); per-thread
/// contexts are not invalidated.
///
/// # Returns
/// The descriptor, or -1 with `errno` and a message: `ENXIO` when no counters can be used.
#[no_mangle]
pub extern "C" fn cpc_shared_open() -> c_int {
    v1(c"shared_open", -1, engine::shared_open)
}

/// Bind `event` to the counters of the CPU the calling thread is bound to (with
/// `sched_setaffinity` to one CPU, Solaris's `processor_bind`), counting everything that runs
/// there; a NULL `event` releases them (cpc_shared_open(3CPC)). `flags` must be 0.
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad descriptor, flags other than 0, a
/// thread not bound to one CPU, and `cpc_bind_event`'s reasons; `EACCES` without the
/// privilege to count a CPU.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_shared_bind_event(
    fd: c_int,
    event: *mut cpc_event_t,
    flags: c_int,
) -> c_int {
    v1(c"shared_bind_event", -1, || {
        let owner = engine::shared_owner(fd)?;
        // SAFETY: the caller's promise.
        let w = unsafe { event.as_ref() }.map(words);
        engine::bind_outside(owner, w.as_ref(), flags, Outside::Cpu, pctx_alive)?;
        Ok(0)
    })
}

/// Sample the counters bound to descriptor `fd` into `event` (cpc_shared_open(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` and a message: `EINVAL` for a bad descriptor, a NULL `event` or
/// nothing bound; `EAGAIN` when the thread is no longer bound to the CPU.
///
/// # Safety
/// `event` is NULL or points to a `cpc_event_t`.
#[no_mangle]
pub unsafe extern "C" fn cpc_shared_take_sample(fd: c_int, event: *mut cpc_event_t) -> c_int {
    v1(c"shared_take_sample", -1, || {
        let owner = engine::shared_owner(fd)?;
        // SAFETY: the caller's promise.
        let ev = unsafe { arg(event, "cpc_event_t")? };
        Ok(fill(ev, engine::sample_outside(owner)?))
    })
}

/// Release the counters bound to descriptor `fd` (cpc_shared_open(3CPC)).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` and a message for a bad descriptor.
#[no_mangle]
pub extern "C" fn cpc_shared_rele(fd: c_int) -> c_int {
    v1(c"shared_rele", -1, || {
        engine::release_outside(engine::shared_owner(fd)?);
        Ok(0)
    })
}

/// Release the counters bound to descriptor `fd` and close it (cpc_shared_open(3CPC)). A bad
/// descriptor is told to the error function (`errno` `EINVAL`).
#[no_mangle]
pub extern "C" fn cpc_shared_close(fd: c_int) {
    v1(c"shared_close", (), || engine::shared_close(fd))
}

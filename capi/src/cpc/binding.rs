//! Binding: cpc_bind_curlwp(3CPC) (`cpc_bind_curlwp`, `cpc_bind_pctx`, `cpc_bind_cpu`,
//! `cpc_unbind`). What a bind does (a thread's one set, inheritance, the CPU checks, table and
//! affinity) is the engine's ([`perfcompat::api::cpc::set::Set`]); this file checks the handles and
//! flags.

use std::ffi::c_int;

use perfcompat::{Error, Result};

use super::handles::{set_by_key, Cpc};
use super::CPC_BIND_LWP_INHERIT;
use perfcompat::api::cpc::emt;

use super::{cpc_set_t, cpc_t, processorid_t, set_of, uint_t, BAD};
use crate::edge::call;
use crate::pctx::pctx_t;

/// Bind `set` to the calling thread and start counting from the presets; see
/// cpc_bind_curlwp(3CPC). With `CPC_BIND_LWP_INHERIT`, threads it creates later are counted
/// too: into this set (their counts are included in this thread's samples) when no request
/// has `CPC_OVF_NOTIFY_EMT`; otherwise each new thread (`pthread_create`, also from a thread
/// holding a copy) gets its own copy of the set and, before its start routine runs, a
/// `SIGEMT` in which `cpc_set_sample` reads `UINT64_MAX` for the notifying requests; there
/// `cpc_request_preset` and `cpc_set_restart` act on the copy, whose overflows are signalled
/// to that thread; it is unbound when the thread exits. A thread holds at most one set:
/// binding another unbinds the first.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, a set of another handle (libcpc skipped
/// that check, its man page documents it), flags other than 0 and `CPC_BIND_LWP_INHERIT`, an
/// empty set, bad request flags (`CPC_REQ_INVALID_FLAGS`), attribute values out of range
/// (`CPC_ATTRIBUTE_OUT_OF_RANGE`), requests that cannot be counted together
/// (`CPC_RESOURCE_UNAVAIL` or `CPC_CONFLICTING_REQS`, with the engine's reason on standard
/// error), more requests than counters; `ENOTSUP` for `CPC_OVF_NOTIFY_EMT` without overflow
/// interrupts; `EACCES` when the kernel refuses (a line says what and how to allow it).
#[no_mangle]
pub extern "C" fn cpc_bind_curlwp(cpc: *mut cpc_t, set: *mut cpc_set_t, flags: uint_t) -> c_int {
    call(c"cpc_bind_curlwp", cpc, BAD, -1, |c: &Cpc| {
        let s = set_of(c, set)?;
        if flags & !CPC_BIND_LWP_INHERIT != 0 {
            return Err(Error::BindFlags {
                flags,
                inherit_allowed: true,
            });
        }
        let inherit = flags & CPC_BIND_LWP_INHERIT != 0;
        s.bind_curlwp::<LiveSets>(c.backend, set as usize, inherit, emt::EMT_TAG)?;
        Ok(0)
    })
}

/// Refuse bind flags where only 0 is allowed.
fn no_flags(flags: uint_t) -> Result<()> {
    match flags {
        0 => Ok(()),
        flags => Err(Error::BindFlags {
            flags,
            inherit_allowed: false,
        }),
    }
}

/// Bind `set` to LWP `id` (libpctx's id, as its callbacks pass it: 1 for the process's
/// first thread, then 2, 3, ... in creation order) of the process `pctx` controls; see cpc_bind_curlwp(3CPC). Counting starts from the presets; the
/// thread's children do not inherit it.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, `flags` not 0 and the errors of
/// `cpc_bind_curlwp`; `ESRCH` when thread `id` is not a thread of that process.
///
/// # Safety
/// `pctx` is NULL or a handle from `pctx_create`/`pctx_capture`.
#[no_mangle]
pub unsafe extern "C" fn cpc_bind_pctx(
    cpc: *mut cpc_t,
    pctx: *mut pctx_t,
    id: libc::id_t,
    set: *mut cpc_set_t,
    flags: uint_t,
) -> c_int {
    call(c"cpc_bind_pctx", cpc, BAD, -1, |c: &Cpc| {
        let s = set_of(c, set)?;
        let pid = crate::pctx::pid_of(pctx).ok_or(Error::BadArgument(
            "not a pctx_t returned by pctx_create or pctx_capture",
        ))?;
        no_flags(flags)?;
        // `id` is libpctx's LWP id (1, 2, ...), as its callbacks pass it.
        let tid = crate::pctx::tid_of(pctx, id).ok_or(Error::NotAThreadOf {
            tid: id as i32,
            pid,
        })?;
        s.bind_thread(c.backend, pid, tid, emt::EMT_TAG)?;
        Ok(0)
    })
}

/// Count everything that runs on CPU `id` with `set`, and bind the calling thread to that CPU
/// until `cpc_unbind` (which restores its previous affinity); see cpc_bind_curlwp(3CPC). The
/// thread must not change its affinity meanwhile.
///
/// On Linux, CPU-wide counting needs `perf_event_paranoid` at 0 or below, `CAP_PERFMON` or
/// root; per-thread counting goes on beside it (libcpc invalidated every per-thread set
/// instead). Only one set of this process may be bound to a CPU; other processes are not
/// known.
///
/// # Returns
/// 0, or -1 with `errno`: `EINVAL` for a bad handle, `flags` not 0 and the errors of
/// `cpc_bind_curlwp`; `EAGAIN` when a set of this process is already bound to the CPU;
/// `EACCES` without the privilege (a line says how to get it). The thread is moved to the CPU
/// first (libcpc's `processor_bind`), and when that fails the handler gets `CPC_PBIND_FAILED`
/// (without one, the libcpc line and the reason are written to standard error): `EINVAL` for a
/// CPU that does not exist, `ENOSYS` for an offline CPU, the `sched_setaffinity` errno when the
/// thread cannot be moved.
#[no_mangle]
pub extern "C" fn cpc_bind_cpu(
    cpc: *mut cpc_t,
    id: processorid_t,
    set: *mut cpc_set_t,
    flags: uint_t,
) -> c_int {
    call(c"cpc_bind_cpu", cpc, BAD, -1, |c: &Cpc| {
        let s = set_of(c, set)?;
        no_flags(flags)?;
        s.bind_cpu(c.backend, id, emt::EMT_TAG)?;
        Ok(0)
    })
}

/// Unbind a set: its counters are freed, a CPU-bound thread gets its previous affinity back;
/// the set can be bound again and its buffers stay; see cpc_bind_curlwp(3CPC).
///
/// # Returns
/// 0, or -1 with `errno` `EINVAL` when `set` is not a live set of `cpc` or is not bound.
#[no_mangle]
pub extern "C" fn cpc_unbind(cpc: *mut cpc_t, set: *mut cpc_set_t) -> c_int {
    call(c"cpc_unbind", cpc, BAD, -1, |c: &Cpc| {
        set_of(c, set)?.unbind(set as usize)?;
        Ok(0)
    })
}

/// Where the engine finds this library's live sets by key (the `cpc_set_t` address, and the
/// engine's version 1 sets: `perfcompat::api::cpc::v1_bind::live`): a
/// thread's previous set when it binds another, and whether an inheritable set is still alive
/// when a thread it counts creates another.
pub(crate) struct LiveSets;

impl perfcompat::api::cpc::set::Sets for LiveSets {
    fn by_key(key: usize) -> Option<&'static perfcompat::api::cpc::set::Set> {
        set_by_key(key).or_else(|| perfcompat::api::cpc::v1_bind::live(key))
    }

    fn each(f: &mut dyn FnMut(&perfcompat::api::cpc::set::Set)) {
        super::handles::each_set(|s| f(s));
        perfcompat::api::cpc::v1_bind::each(f);
    }
}

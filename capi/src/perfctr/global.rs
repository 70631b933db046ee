//! perfctr's global-mode counters (`gperfctr_*`, issue 47 item 2) over
//! [`perfcompat::api::perfctr::global`], and the CPU-list calls (`perfctr_cpus_info`,
//! `vperfctr_cpus_info`, `gperfctr_cpus_info`, `perfctr_cpus_info_print`) and the
//! descriptor forms of the information calls (`perfctr_info`, `perfctr_get_info`).

use std::ffi::{c_int, c_uint};

use perfcompat::api::perfctr::{self as pc, global::Global};

use super::{cpu_in, cpu_out, null, perfctr_cpu_control, perfctr_info, write_info};
use super::{perfctr_sum_ctrs, sums_out, vperfctr};
use crate::edge::{self, registry, Handle, Kind, Tell, Tells};

/// `struct gperfctr_cpu_control`: one CPU's control data.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gperfctr_cpu_control {
    /// The CPU.
    pub cpu: c_uint,
    /// What it counts (a-mode counters and the TSC).
    pub cpu_control: perfctr_cpu_control,
    /// Reserved.
    pub _reserved1: c_uint,
    /// Reserved.
    pub _reserved2: c_uint,
    /// Reserved.
    pub _reserved3: c_uint,
    /// Reserved.
    pub _reserved4: c_uint,
}

/// `struct gperfctr_cpu_state`: one CPU's control data and sums.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gperfctr_cpu_state {
    /// The CPU (set by the caller).
    pub cpu: c_uint,
    /// Its control data.
    pub cpu_control: perfctr_cpu_control,
    /// Its sums.
    pub sum: perfctr_sum_ctrs,
    /// Reserved.
    pub _reserved1: c_uint,
    /// Reserved.
    pub _reserved2: c_uint,
    /// Reserved.
    pub _reserved3: c_uint,
    /// Reserved.
    pub _reserved4: c_uint,
}

/// `struct perfctr_cpu_mask`: `nrwords` words of CPU bits (bit `i % 32` of word `i / 32` for
/// CPU `i`); the structure is as long as its words.
#[repr(C)]
#[derive(Debug)]
pub struct perfctr_cpu_mask {
    /// Words in `mask`.
    pub nrwords: c_uint,
    /// The first word (the others follow).
    pub mask: [c_uint; 1],
}

/// `struct perfctr_cpus_info`: the CPUs, and those the counters may not be used on (none
/// here); one `malloc` block with its masks, freed with `free`.
#[repr(C)]
#[derive(Debug)]
pub struct perfctr_cpus_info {
    /// The online CPUs.
    pub cpus: *mut perfctr_cpu_mask,
    /// The forbidden CPUs (empty).
    pub cpus_forbidden: *mut perfctr_cpu_mask,
}

/// The opaque `struct gperfctr`.
pub struct gperfctr {
    _private: [u8; 0],
}

// SAFETY: only `gperfctr_open` registers Kind::Gperfctr pointers, boxes of Global.
unsafe impl Handle for gperfctr {
    const KIND: Kind = Kind::Gperfctr;
    type Target = Global;
    const BAD: &'static str = "invalid argument: not a struct gperfctr * from gperfctr_open";
}

impl Tells for Global {
    fn tell(&self) -> Tell {
        Tell::Stderr
    }
}

/// Open the process's global-mode counters. NULL with `errno` when the backend cannot count.
#[no_mangle]
pub extern "C" fn gperfctr_open() -> *mut gperfctr {
    edge::run(Tell::Stderr, c"gperfctr_open", std::ptr::null_mut(), || {
        edge::new_handle::<gperfctr>(Global::open()?, |p| registry::insert(p, Kind::Gperfctr))
    })
}

/// Free the handle; its counters stop.
#[no_mangle]
pub extern "C" fn gperfctr_close(gp: *mut gperfctr) {
    crate::ffi_boundary("gperfctr_close", || drop(edge::take(gp)));
}

/// Give `control->cpu` its control data for the next start: the number of CPUs with control
/// data, or -1 with `errno` (`EINVAL` bad data or CPU, `EPERM` i-mode counters, `EBUSY`
/// while running).
///
/// # Safety
/// `control` is NULL or points to a `struct gperfctr_cpu_control`.
#[no_mangle]
pub unsafe extern "C" fn gperfctr_control(
    gp: *mut gperfctr,
    control: *mut gperfctr_cpu_control,
) -> c_int {
    edge::call(c"gperfctr_control", gp, Tell::Stderr, -1, |g| {
        // SAFETY: a non-null `control` points to a struct gperfctr_cpu_control (the contract).
        let c = unsafe { control.as_ref() }.ok_or(null("control is NULL"))?;
        g.control(c.cpu, &cpu_in(&c.cpu_control))
            .map(|n| n as c_int)
    })
}

/// Start every CPU with control data: how many, or -1 with `errno` (`EACCES` where the
/// kernel does not allow CPU-wide counting, `EINVAL` for an `interval_usec` under 10000).
#[no_mangle]
pub extern "C" fn gperfctr_start(gp: *mut gperfctr, interval_usec: c_uint) -> c_int {
    edge::call(c"gperfctr_start", gp, Tell::Stderr, -1, |g| {
        g.start(interval_usec).map(|n| n as c_int)
    })
}

/// `state->cpu`'s control data and sums. 0, or -1 with `errno`.
///
/// # Safety
/// `state` is NULL or points to a writable `struct gperfctr_cpu_state`.
#[no_mangle]
pub unsafe extern "C" fn gperfctr_read(gp: *mut gperfctr, state: *mut gperfctr_cpu_state) -> c_int {
    edge::call(c"gperfctr_read", gp, Tell::Stderr, -1, |g| {
        // SAFETY: a non-null `state` points to a writable struct (the contract).
        let st = unsafe { state.as_mut() }.ok_or(null("state is NULL"))?;
        let (s, c) = g.read(st.cpu)?;
        st.cpu_control = cpu_out(&c);
        st.sum = sums_out(&s);
        Ok(0)
    })
}

/// Stop every CPU (the sums stay readable). 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn gperfctr_stop(gp: *mut gperfctr) -> c_int {
    edge::call(c"gperfctr_stop", gp, Tell::Stderr, -1, |g| {
        g.stop().map(|()| 0)
    })
}

/// As `vperfctr_info`. 0, or -1 with `errno`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn gperfctr_info(gp: *mut gperfctr, info: *mut perfctr_info) -> c_int {
    edge::call(c"gperfctr_info", gp, Tell::Stderr, -1, |_| {
        // SAFETY: as the contract says.
        unsafe { write_info(info) }
    })
}

/// The CPUs, in one `malloc` block the caller frees with `free` (NULL with `errno` `ENOMEM`).
fn cpus_info() -> perfcompat::Result<*mut perfctr_cpus_info> {
    let words = pc::global::cpu_mask_words();
    let n = words.len();
    let head = std::mem::size_of::<perfctr_cpus_info>();
    let mask = 4 * (1 + n);
    // SAFETY: a plain allocation, checked below.
    let p = unsafe { libc::calloc(1, head + 2 * mask) }.cast::<u8>();
    if p.is_null() {
        return Err(perfcompat::Error::Os {
            op: "allocating the CPU masks",
            errno: libc::ENOMEM,
        });
    }
    // SAFETY: `p` has room for the head and two masks of `n` words, each 4-byte aligned (the
    // head's size is a multiple of 8); calloc zeroed the forbidden mask's words.
    unsafe {
        let cpus = p.add(head).cast::<c_uint>();
        let forbidden = p.add(head + mask).cast::<c_uint>();
        *cpus = n as c_uint;
        std::ptr::copy_nonoverlapping(words.as_ptr(), cpus.add(1), n);
        *forbidden = n as c_uint;
        p.cast::<perfctr_cpus_info>().write(perfctr_cpus_info {
            cpus: cpus.cast(),
            cpus_forbidden: forbidden.cast(),
        });
    }
    Ok(p.cast())
}

/// The CPUs the global-mode counters can count (the online ones; none forbidden).
#[no_mangle]
pub extern "C" fn gperfctr_cpus_info(gp: *mut gperfctr) -> *mut perfctr_cpus_info {
    edge::call(
        c"gperfctr_cpus_info",
        gp,
        Tell::Stderr,
        std::ptr::null_mut(),
        |_| cpus_info(),
    )
}

/// The CPUs (as `gperfctr_cpus_info`).
#[no_mangle]
pub extern "C" fn vperfctr_cpus_info(vp: *mut vperfctr) -> *mut perfctr_cpus_info {
    edge::call(
        c"vperfctr_cpus_info",
        vp,
        Tell::Stderr,
        std::ptr::null_mut(),
        |_| cpus_info(),
    )
}

/// The CPUs (as `gperfctr_cpus_info`); `fd` is not used (there is no `/dev/perfctr`).
#[no_mangle]
pub extern "C" fn perfctr_cpus_info(fd: c_int) -> *mut perfctr_cpus_info {
    let _ = fd;
    edge::run(
        Tell::Stderr,
        c"perfctr_cpus_info",
        std::ptr::null_mut(),
        cpus_info,
    )
}

/// As `vperfctr_info`; `fd` is not used (there is no `/dev/perfctr`). 0, or -1 with `errno`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn perfctr_info(fd: c_int, info: *mut perfctr_info) -> c_int {
    let _ = fd;
    edge::run(Tell::Stderr, c"perfctr_info", -1, || {
        // SAFETY: as the contract says.
        unsafe { write_info(info) }
    })
}

/// As `vperfctr_info`, without a handle. 0, or -1 with `errno`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn perfctr_get_info(info: *mut perfctr_info) -> c_int {
    edge::run(Tell::Stderr, c"perfctr_get_info", -1, || {
        // SAFETY: as the contract says.
        unsafe { write_info(info) }
    })
}

/// The words of a `struct perfctr_cpu_mask` (none for NULL).
///
/// # Safety
/// `m` is NULL or points to a mask followed by its `nrwords` words.
unsafe fn mask_words<'a>(m: *const perfctr_cpu_mask) -> &'a [c_uint] {
    // SAFETY: as the caller promises.
    match unsafe { m.as_ref() } {
        // SAFETY: the mask's words follow its count (the contract).
        Some(m) => unsafe { std::slice::from_raw_parts(m.mask.as_ptr(), m.nrwords as usize) },
        None => &[],
    }
}

/// Print `info`'s CPU lists on standard output.
///
/// # Safety
/// `info` is NULL or points to a `struct perfctr_cpus_info` whose masks are NULL or whole.
#[no_mangle]
pub unsafe extern "C" fn perfctr_cpus_info_print(info: *const perfctr_cpus_info) {
    crate::ffi_boundary("perfctr_cpus_info_print", || {
        // SAFETY: as the contract says.
        if let Some(i) = unsafe { info.as_ref() } {
            // SAFETY: as the contract says.
            let (c, f) = unsafe { (mask_words(i.cpus), mask_words(i.cpus_forbidden)) };
            print!("{}", pc::global::cpus_text(c, f));
        }
    })
}

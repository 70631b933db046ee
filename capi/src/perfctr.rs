//! perfctr's user library (`-lperfctr`, issue 47): the `vperfctr_*` calls and the
//! `perfctr_info_*` helpers over [`perfcompat::api::perfctr`]. The structures are those of the
//! hand-written headers `include/libperfctr.h`, `include/linux/perfctr.h` and
//! `include/asm/perfctr.h` (`capi/tests/perfctr.rs` checks their sizes and field offsets
//! against these). A `struct vperfctr *` is a handle on the calling thread's counters: the
//! thread that opened it must make the calls. Errors: -1 (or NULL) with `errno`, and the cause
//! on standard error as `<function>: <message>`.

use std::ffi::{c_char, c_int, c_uint};

use perfcompat::api::perfctr::{self as pc, Control, CpuControl, MAX_CTRS};
use perfcompat::Error;

use crate::edge::{self, registry, Handle, Kind, Tell, Tells};

pub mod global;
pub mod remote;

/// `struct perfctr_sum_ctrs`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct perfctr_sum_ctrs {
    /// The virtual TSC.
    pub tsc: u64,
    /// Each counter's 64-bit sum.
    pub pmc: [u64; MAX_CTRS],
}

/// `struct perfctr_cpu_control`'s Pentium 4 part.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct perfctr_cpu_control_p4 {
    /// Per counter: its ESCR.
    pub escr: [c_uint; MAX_CTRS],
    /// PEBS_ENABLE.
    pub pebs_enable: c_uint,
    /// PEBS_MATRIX_VERT.
    pub pebs_matrix_vert: c_uint,
}

/// `struct perfctr_cpu_control`'s PowerPC part.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct perfctr_cpu_control_ppc {
    /// MMCR0 without PMC1SEL/PMC2SEL.
    pub mmcr0: c_uint,
    /// MMCR2 (THRESHMULT).
    pub mmcr2: c_uint,
}

/// `struct perfctr_cpu_control`: every family's fields (x86's order, then the PowerPC part).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct perfctr_cpu_control {
    /// Sample the TSC.
    pub tsc_on: c_uint,
    /// a-mode counters.
    pub nractrs: c_uint,
    /// i-mode counters.
    pub nrictrs: c_uint,
    /// Hardware counter of each counter.
    pub pmc_map: [c_uint; MAX_CTRS],
    /// Event selection of each counter.
    pub evntsel: [c_uint; MAX_CTRS],
    /// Pentium 4 control.
    pub p4: perfctr_cpu_control_p4,
    /// Restart value of each i-mode counter.
    pub ireset: [c_int; MAX_CTRS],
    /// PowerPC control.
    pub ppc: perfctr_cpu_control_ppc,
    /// Reserved.
    pub _reserved1: c_uint,
    /// Reserved.
    pub _reserved2: c_uint,
    /// Reserved.
    pub _reserved3: c_uint,
    /// Reserved.
    pub _reserved4: c_uint,
}

/// `struct vperfctr_control`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vperfctr_control {
    /// Overflow signal.
    pub si_signo: c_int,
    /// The counters.
    pub cpu_control: perfctr_cpu_control,
    /// Keep the earlier sums.
    pub preserve: c_uint,
    /// `VPERFCTR_CONTROL_CLOEXEC` or 0.
    pub flags: c_uint,
    /// Reserved.
    pub _reserved2: c_uint,
    /// Reserved.
    pub _reserved3: c_uint,
    /// Reserved.
    pub _reserved4: c_uint,
}

/// `struct perfctr_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct perfctr_info {
    /// perfcompat's `PERFCTR_ABI_VERSION`.
    pub abi_version: c_uint,
    /// `perfcompat <version>`.
    pub driver_version: [c_char; 32],
    /// `PERFCTR_*` CPU type.
    pub cpu_type: c_uint,
    /// `PERFCTR_FEATURE_*` bits.
    pub cpu_features: c_uint,
    /// TSC clock in kHz.
    pub cpu_khz: c_uint,
    /// CPU cycles per TSC tick.
    pub tsc_to_cpu_mult: c_uint,
    /// Reserved.
    pub _reserved2: c_uint,
    /// Reserved.
    pub _reserved3: c_uint,
    /// Reserved.
    pub _reserved4: c_uint,
}

/// The opaque `struct vperfctr`.
pub struct vperfctr {
    _private: [u8; 0],
}

/// What a `struct vperfctr *` holds: the thread it belongs to, and its process.
pub struct Vp {
    tid: i32,
    pid: i32,
}

// SAFETY: only `vperfctr_open` registers Kind::Vperfctr pointers, boxes of Vp.
unsafe impl Handle for vperfctr {
    const KIND: Kind = Kind::Vperfctr;
    type Target = Vp;
    const BAD: &'static str = "invalid argument: not a struct vperfctr * from vperfctr_open";
}

impl Tells for Vp {
    fn tell(&self) -> Tell {
        Tell::Stderr
    }
}

impl Vp {
    /// The handle's thread must be the caller (in a `fork` child, the copy of that thread:
    /// the child's first thread).
    fn own(&self) -> perfcompat::Result<()> {
        let tid = perfcompat::base::sys::gettid();
        // SAFETY: a plain system call.
        let pid = unsafe { libc::getpid() };
        if self.tid == tid || (self.pid != pid && tid == pid) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "this vperfctr is thread {}'s: its thread makes the calls",
                self.tid
            )))
        }
    }
}

fn cpu_in(c: &perfctr_cpu_control) -> CpuControl {
    CpuControl {
        tsc_on: c.tsc_on,
        nractrs: c.nractrs,
        nrictrs: c.nrictrs,
        pmc_map: c.pmc_map,
        evntsel: c.evntsel,
        ireset: c.ireset,
        p4_escr: c.p4.escr,
        p4_pebs_enable: c.p4.pebs_enable,
        p4_pebs_matrix_vert: c.p4.pebs_matrix_vert,
        ppc_mmcr0: c.ppc.mmcr0,
        ppc_mmcr2: c.ppc.mmcr2,
    }
}

fn control_in(c: &vperfctr_control) -> Control {
    Control {
        si_signo: c.si_signo,
        cpu: cpu_in(&c.cpu_control),
        preserve: c.preserve,
        flags: c.flags,
    }
}

fn cpu_out(u: &CpuControl) -> perfctr_cpu_control {
    perfctr_cpu_control {
        tsc_on: u.tsc_on,
        nractrs: u.nractrs,
        nrictrs: u.nrictrs,
        pmc_map: u.pmc_map,
        evntsel: u.evntsel,
        p4: perfctr_cpu_control_p4 {
            escr: u.p4_escr,
            pebs_enable: u.p4_pebs_enable,
            pebs_matrix_vert: u.p4_pebs_matrix_vert,
        },
        ireset: u.ireset,
        ppc: perfctr_cpu_control_ppc {
            mmcr0: u.ppc_mmcr0,
            mmcr2: u.ppc_mmcr2,
        },
        ..Default::default()
    }
}

/// `*p = v`, or `EFAULT` naming `what` for a NULL `p`; 0.
///
/// # Safety
/// `p` is NULL or points to a writable `T`.
unsafe fn write_to<T>(p: *mut T, v: T, what: &'static str) -> perfcompat::Result<c_int> {
    // SAFETY: as the caller promises.
    unsafe { p.as_mut() }.map(|o| *o = v).ok_or(null(what))?;
    Ok(0)
}

/// `vperfctr_read_state`'s writes: the sums and the control, each where its pointer is not
/// NULL.
///
/// # Safety
/// `sum` and `control` are NULL or point to writable structures of their types.
unsafe fn write_state(
    sum: *mut perfctr_sum_ctrs,
    s: &pc::Sums,
    control: *mut vperfctr_control,
    c: &Control,
) {
    // SAFETY: as the caller promises.
    if let Some(o) = unsafe { sum.as_mut() } {
        *o = sums_out(s);
    }
    // SAFETY: as the caller promises.
    if let Some(o) = unsafe { control.as_mut() } {
        *o = control_out(c);
    }
}

fn control_out(c: &Control) -> vperfctr_control {
    vperfctr_control {
        si_signo: c.si_signo,
        cpu_control: cpu_out(&c.cpu),
        preserve: c.preserve,
        flags: c.flags,
        ..Default::default()
    }
}

fn sums_out(s: &pc::Sums) -> perfctr_sum_ctrs {
    perfctr_sum_ctrs {
        tsc: s.tsc,
        pmc: s.pmc,
    }
}

/// The CPU's `struct perfctr_info` into `*info` (every `*_info` call's body); 0, or `EFAULT`
/// naming it for a NULL `info`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
unsafe fn write_info(info: *mut perfctr_info) -> perfcompat::Result<c_int> {
    let i = info_out(&pc::info()?);
    // SAFETY: as the caller promises.
    unsafe { write_to(info, i, "info is NULL") }
}

fn info_out(i: &pc::Info) -> perfctr_info {
    let mut out = perfctr_info {
        abi_version: i.abi_version,
        cpu_type: i.cpu_type,
        cpu_features: i.features,
        cpu_khz: i.cpu_khz,
        tsc_to_cpu_mult: i.tsc_to_cpu_mult,
        ..Default::default()
    };
    for (d, s) in out.driver_version.iter_mut().zip(i.driver_version) {
        *d = c_char::from_ne_bytes([s]);
    }
    out
}

fn info_in(i: &perfctr_info) -> pc::Info {
    pc::Info {
        abi_version: i.abi_version,
        // `c_char` is `i8` on x86-64 and `u8` on arm64: the same byte either way.
        driver_version: i.driver_version.map(|c| u8::from_ne_bytes(c.to_ne_bytes())),
        cpu_type: i.cpu_type,
        features: i.cpu_features,
        cpu_khz: i.cpu_khz,
        tsc_to_cpu_mult: i.tsc_to_cpu_mult,
    }
}

/// A `NULL` argument.
fn null(what: &'static str) -> Error {
    Error::Fault(what)
}

/// Open the calling thread's virtual counters (the same state on every open). NULL with
/// `errno` when the backend cannot count.
#[no_mangle]
pub extern "C" fn vperfctr_open() -> *mut vperfctr {
    edge::run(Tell::Stderr, c"vperfctr_open", std::ptr::null_mut(), || {
        pc::open()?;
        let tid = perfcompat::base::sys::gettid();
        // SAFETY: a plain system call.
        let pid = unsafe { libc::getpid() };
        edge::new_handle::<vperfctr>(Vp { tid, pid }, |p| registry::insert(p, Kind::Vperfctr))
    })
}

/// Fill `info` with the CPU type, its features and the TSC's clock. 0, or -1 with `errno`.
///
/// # Safety
/// `info` is NULL or points to a writable `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn vperfctr_info(vp: *mut vperfctr, info: *mut perfctr_info) -> c_int {
    edge::call(c"vperfctr_info", vp, Tell::Stderr, -1, |_| {
        // SAFETY: as the contract says.
        unsafe { write_info(info) }
    })
}

/// Program the calling thread's counters from `control` (see libperfctr(3)). 0, or -1 with
/// `errno` `EINVAL` for control data the CPU cannot take.
///
/// # Safety
/// `control` is NULL or points to a `struct vperfctr_control`.
#[no_mangle]
pub unsafe extern "C" fn vperfctr_control(
    vp: *mut vperfctr,
    control: *mut vperfctr_control,
) -> c_int {
    edge::call(c"vperfctr_control", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        // SAFETY: a non-null `control` points to a struct vperfctr_control (the contract).
        let c = unsafe { control.as_ref() }.ok_or(null("control is NULL"))?;
        pc::control(&control_in(c)).map(|()| 0)
    })
}

/// The TSC's and every counter's sum into `sum`. 0, or -1 with `errno`.
///
/// # Safety
/// `sum` is NULL or points to a writable `struct perfctr_sum_ctrs`.
#[no_mangle]
pub unsafe extern "C" fn vperfctr_read_ctrs(
    vp: *mut vperfctr,
    sum: *mut perfctr_sum_ctrs,
) -> c_int {
    edge::call(c"vperfctr_read_ctrs", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        let s = sums_out(&pc::read()?);
        // SAFETY: as the contract says.
        unsafe { write_to(sum, s, "sum is NULL") }
    })
}

/// The sums (when `sum` is not NULL) and the current control (when `control` is not NULL).
/// 0, or -1 with `errno`.
///
/// # Safety
/// `sum` and `control` are NULL or point to writable structures of their types.
#[no_mangle]
pub unsafe extern "C" fn vperfctr_read_state(
    vp: *mut vperfctr,
    sum: *mut perfctr_sum_ctrs,
    control: *mut vperfctr_control,
) -> c_int {
    edge::call(c"vperfctr_read_state", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        let (s, c) = pc::read_state()?;
        // SAFETY: as the contract says.
        unsafe { write_state(sum, &s, control, &c) };
        Ok(0)
    })
}

/// The virtual TSC's sum (0 on error, with `errno`).
#[no_mangle]
pub extern "C" fn vperfctr_read_tsc(vp: *mut vperfctr) -> u64 {
    edge::call(c"vperfctr_read_tsc", vp, Tell::Stderr, 0, |h| {
        h.own()?;
        Ok(pc::read()?.tsc)
    })
}

/// Counter `i`'s sum (0 on error, with `errno`; `EINVAL` for `i` out of range).
#[no_mangle]
pub extern "C" fn vperfctr_read_pmc(vp: *mut vperfctr, i: c_uint) -> u64 {
    edge::call(c"vperfctr_read_pmc", vp, Tell::Stderr, 0, |h| {
        h.own()?;
        let s = pc::read()?;
        s.pmc
            .get(i as usize)
            .copied()
            .ok_or(Error::IndexOutOfRange {
                index: i64::from(i),
                len: MAX_CTRS,
            })
    })
}

/// After an overflow signal: reload the overflowed i-mode counters from `ireset` and resume.
/// 0, or -1 with `errno` `EPERM` when there is no overflow to resume from. Async-signal-safe.
#[no_mangle]
pub extern "C" fn vperfctr_iresume(vp: *mut vperfctr) -> c_int {
    edge::call(c"vperfctr_iresume", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        pc::iresume().map(|()| 0)
    })
}

/// Stop the counters and the TSC, keeping their sums. 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn vperfctr_stop(vp: *mut vperfctr) -> c_int {
    edge::call(c"vperfctr_stop", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        pc::stop().map(|()| 0)
    })
}

/// 1 while counters or the TSC run, else 0 (-1 for a bad handle).
#[no_mangle]
pub extern "C" fn vperfctr_is_running(vp: *mut vperfctr) -> c_int {
    edge::call(c"vperfctr_is_running", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        Ok(c_int::from(pc::is_running()))
    })
}

/// End the thread's counting and forget its sums and control. 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn vperfctr_unlink(vp: *mut vperfctr) -> c_int {
    edge::call(c"vperfctr_unlink", vp, Tell::Stderr, -1, |h| {
        h.own()?;
        pc::unlink().map(|()| 0)
    })
}

/// Free the handle; the thread's counters go on (`vperfctr_unlink` ends them).
#[no_mangle]
pub extern "C" fn vperfctr_close(vp: *mut vperfctr) {
    crate::ffi_boundary("vperfctr_close", || drop(edge::take(vp)));
}

/// The name of `info`'s CPU type (a static string; "unknown" for NULL).
///
/// # Safety
/// `info` is NULL or points to a `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn perfctr_info_cpu_name(info: *const perfctr_info) -> *const c_char {
    crate::ffi_boundary("perfctr_info_cpu_name", || {
        // SAFETY: a non-null `info` points to a struct perfctr_info.
        let t = unsafe { info.as_ref() }.map_or(u32::MAX, |i| i.cpu_type);
        pc::cpu_name(t).as_ptr()
    })
}

/// The number of counters of `info`'s CPU type (0 for NULL).
///
/// # Safety
/// `info` is NULL or points to a `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn perfctr_info_nrctrs(info: *const perfctr_info) -> c_uint {
    crate::ffi_boundary("perfctr_info_nrctrs", || {
        // SAFETY: a non-null `info` points to a struct perfctr_info.
        unsafe { info.as_ref() }.map_or(0, |i| pc::nrctrs(i.cpu_type))
    })
}

/// Print `info` on standard output, one field a line.
///
/// # Safety
/// `info` is NULL or points to a `struct perfctr_info`.
#[no_mangle]
pub unsafe extern "C" fn perfctr_info_print(info: *const perfctr_info) {
    crate::ffi_boundary("perfctr_info_print", || {
        // SAFETY: a non-null `info` points to a struct perfctr_info.
        if let Some(i) = unsafe { info.as_ref() } {
            print!("{}", pc::info_text(&info_in(i)));
        }
    })
}

//! Tru64 UNIX's `/dev/pfcntr` (pfm(7), `<sys/pfcntr.h>`): the private entry points that
//! `libpfcntr.so.1` calls for the device's descriptors.
//!
//! The C library's functions (`open`, `open64`, `openat`, `ioctl`, `read`, `close` and the
//! `_FORTIFY_SOURCE` forms `__open_2`, `__open64_2`, `__read_chk`) are interposed by a library
//! of their own, `libpfcntr.so.1` (`capi/pfcntr/pfcntr.c`), which a Tru64 program links
//! (`-lpfcntr`) or preloads; this library (libcpc, libperfex) exports none of them, so the
//! programs that only count see their file I/O untouched. libpfcntr needs this library
//! (`DT_NEEDED libperfcompat.so.1`): one engine serves the device and libcpc in one process.
//! libpfcntr only dispatches: every other path and descriptor goes to the C library, and for
//! the device it calls the functions here (version `PERFCOMPAT_PRIVATE_1` in
//! `capi/abi.manifest`), which check, copy and call the engine's pfm device
//! ([`perfcompat::api::pfm`]). Its fast path reads [`perfcompat_pfm_open_count`]'s counter: while no
//! device is open, a `read`, `ioctl` or `close` costs one atomic load more than the C library's.
//!
//! An open of exactly `"/dev/pfcntr"` (`openat` too, whatever the directory descriptor) makes
//! the device's descriptor (an empty sealed memfd, see [`perfcompat::api::pfm::open`]) and
//! registers it; `ioctl` and `read` on that descriptor are served from the device while the
//! number still refers to that file, and `close` forgets it. A `dup` of it is an ordinary empty
//! file.
//!
//! The ioctl arguments are copied in and out with `process_vm_readv`/`process_vm_writev` on the
//! calling process, so an unmapped or read-only argument gives `EFAULT` as a kernel's copyin
//! and copyout would, instead of a crash.

// `c_ulong` and `c_long` are `u64` and `i64` on 64-bit targets only: the casts are for the others.
#![allow(clippy::unnecessary_cast)]

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::mem::{size_of, MaybeUninit};

use perfcompat::api::pfm::req::ArrayArg;
use perfcompat::api::pfm::{self, req, Device, Errno, Ev5Op, NIPL};

use crate::edge::set_errno;
use crate::ffi_boundary;

/// EV4 `PCNTSETMUX` argument (ours: pfm(7) names the fields' meaning, not the layout).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct iccsr {
    /// Counter 0 frequency: non-zero every 2^12 events, 0 every 2^16.
    pub iccsr_pc0: c_uint,
    /// Counter 1 frequency: non-zero every 2^8 events, 0 every 2^12.
    pub iccsr_pc1: c_uint,
    /// Counter 0 event (`PF_ISSUES` ... `PF_EXTPIN0`).
    pub iccsr_mux0: c_uint,
    /// Counter 1 event (`PF_DCACHE` ... `PF_EXTPIN1`).
    pub iccsr_mux1: c_uint,
    /// Bit n disables counter n; 3 is `EINVAL`.
    pub iccsr_disable: c_uint,
    /// Must be zero.
    pub iccsr_mbz: c_uint,
}

/// EV4 `PCNTGETCNT` element.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pfcntrs {
    /// Counter 0 interrupts.
    pub pf_cntr0: c_ulong,
    /// Counter 1 interrupts.
    pub pf_cntr1: c_ulong,
    /// Nanoseconds since the counters were cleared.
    pub pf_pcc: c_ulong,
}

/// EV5 `PCNT5GETCNT`/`PCNT5GETCNT2` element.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pfcntrs_ev5 {
    /// Counter 0.
    pub pf_cntr0: c_ulong,
    /// Counter 1.
    pub pf_cntr1: c_ulong,
    /// Counter 2.
    pub pf_cntr2: c_ulong,
    /// Nanoseconds since the counters were cleared.
    pub pf_pcc: c_ulong,
}

/// `PCNTGETIPLHIS` element.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pfipls {
    /// 0-5 IPL0-5 (0: kernel, 1: soft interrupts, 4: interrupts on Linux), 6 unused, 7 idle,
    /// 8 user.
    pub pf_ipl: [c_ulong; NIPL],
}

/// `PCNTSETUADDR`/`PCNTSETKADDR` argument.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pfaddr {
    /// First address.
    pub pfa_start: c_ulong,
    /// Address after the last.
    pub pfa_end: c_ulong,
}

/// `PCNTSETURANGE`/`PCNTSETKRANGE` argument.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pfrange {
    /// First address.
    pub pfr_start: c_ulong,
    /// Address after the last.
    pub pfr_end: c_ulong,
    /// Instructions per bucket: 0 or a power of two.
    pub pfr_stride: c_ulong,
}

/// `union pmctrs_ev5` (the C union's first member is `unsigned long pmctrs_ev5_long`, which
/// is `pmctrs_ev5_cpu`'s storage).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pmctrs_ev5 {
    /// A CPU or `PMCTRS_ALL_CPUS`.
    pub pmctrs_ev5_cpu: c_long,
    /// `PF5_SEL_COUNTER_*` bits.
    pub pmctrs_ev5_select: c_ulong,
    /// `PCNT5WRITE`: the values; `PCNT5READCNTRS`: the raw counters read.
    pub pmctrs_ev5_ctr: [c_ulong; 3],
}

/// The count of open devices, which libpfcntr's interposers load (atomically) before they call
/// in: zero means no descriptor is a device. Private (`PERFCOMPAT_PRIVATE_1`), for libpfcntr's
/// constructor; the counter lives as long as the process.
#[no_mangle]
pub extern "C" fn perfcompat_pfm_open_count() -> *const usize {
    ffi_boundary("perfcompat_pfm_open_count", || pfm::open_count().as_ptr())
}

fn is_device(path: *const c_char) -> bool {
    // SAFETY: a non-null path is a NUL-terminated string (open's contract).
    !path.is_null() && unsafe { CStr::from_ptr(path) }.to_bytes() == pfm::PATH.as_bytes()
}

/// libpfcntr's `open`, `open64`, `openat`, `__open_2` and `__open64_2`: 0 when `path` is not
/// the device (libpfcntr passes the call on); else 1, with the device opened for `flags` (the
/// `PCNTOPEN*` bits, `O_CLOEXEC`) and `*fd` its descriptor, or -1 with `errno`. Private
/// (`PERFCOMPAT_PRIVATE_1`).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `fd` points to an `int`.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_pfm_open(
    path: *const c_char,
    flags: c_int,
    fd: *mut c_int,
) -> c_int {
    if !is_device(path) {
        return 0;
    }
    let r = ffi_boundary("open", || pfm::open(flags)).unwrap_or_else(|e| {
        set_errno(e);
        -1
    });
    // SAFETY: the caller's int.
    unsafe { *fd = r };
    1
}

/// libpfcntr's `read` and `__read_chk`: 0 when `fd` is not a device (libpfcntr passes the call
/// on); else 1, with the profile read into `buf` ([`Device::read_into`]) and `*n` the bytes
/// read, or -1 with `errno`. Private (`PERFCOMPAT_PRIVATE_1`).
///
/// # Safety
/// `n` points to an `ssize_t`; `buf` is the caller's (checked by the kernel).
#[no_mangle]
pub unsafe extern "C" fn perfcompat_pfm_read(
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    n: *mut isize,
) -> c_int {
    match ffi_boundary("read", || pfm::with_fd(fd, |d| read_device(d, buf, count))) {
        // SAFETY: the caller's ssize_t.
        Some(r) => unsafe {
            *n = r;
            1
        },
        None => 0,
    }
}

/// The profile into `buf`: the device's read position moves only when the copy succeeded, so
/// a read that fails with `EFAULT` consumes nothing.
fn read_device(d: &Device, buf: *mut c_void, count: usize) -> isize {
    match d.read_into(count, |bytes| copy_out_bytes(buf as usize, bytes)) {
        Ok(n) => n as isize,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// libpfcntr's `ioctl`: 0 when `fd` is not a device (libpfcntr passes the call on); else 1,
/// with the pfm(7) request (`<sys/pfcntr.h>`) served and `*r` 0, or -1 with `errno`. Every
/// request takes at most one pointer, `arg`. Private (`PERFCOMPAT_PRIVATE_1`).
///
/// # Safety
/// `r` points to an `int`; `arg` is the caller's (copied with the checked system calls).
#[no_mangle]
pub unsafe extern "C" fn perfcompat_pfm_ioctl(
    fd: c_int,
    request: c_ulong,
    arg: *mut c_void,
    r: *mut c_int,
) -> c_int {
    let done = ffi_boundary("ioctl", || {
        pfm::with_fd(fd, |d| ioctl_device(d, request, arg as usize))
    });
    match done {
        // SAFETY: the caller's int.
        Some(done) => unsafe {
            *r = status(done);
            1
        },
        None => 0,
    }
}

/// A request's result in the C convention: 0, or -1 with `errno`.
fn status(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// libpfcntr's `close`, before it closes `fd` with the C library's: the device registered as
/// `fd` (if any) is disabled and forgotten. 1 when there was one, else 0. Private
/// (`PERFCOMPAT_PRIVATE_1`).
#[no_mangle]
pub extern "C" fn perfcompat_pfm_close(fd: c_int) -> c_int {
    ffi_boundary("close", || pfm::close(fd)) as c_int
}

/// Copy `len` bytes between this process's `local` and `remote` addresses with the checked
/// system call (`EFAULT` for an unmapped or unwritable `remote`).
fn vm_copy(local: usize, remote: usize, len: usize, write: bool) -> Result<(), Errno> {
    if remote == 0 {
        return Err(libc::EFAULT);
    }
    let l = libc::iovec {
        iov_base: local as *mut c_void,
        iov_len: len,
    };
    let r = libc::iovec {
        iov_base: remote as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the local buffer is ours; the kernel checks the remote one.
    let n = unsafe {
        if write {
            libc::process_vm_writev(libc::getpid(), &l, 1, &r, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &l, 1, &r, 1, 0)
        }
    };
    if n == len as isize {
        Ok(())
    } else {
        Err(libc::EFAULT)
    }
}

fn copy_in<T: Copy>(ptr: usize) -> Result<T, Errno> {
    let mut v = MaybeUninit::<T>::uninit();
    vm_copy(v.as_mut_ptr() as usize, ptr, size_of::<T>(), false)?;
    // SAFETY: filled by the copy; every T here is plain data.
    Ok(unsafe { v.assume_init() })
}

fn copy_out<T: Copy>(ptr: usize, v: &T) -> Result<(), Errno> {
    copy_out_slice(ptr, std::slice::from_ref(v))
}

fn copy_out_slice<T: Copy>(ptr: usize, v: &[T]) -> Result<(), Errno> {
    let len = std::mem::size_of_val(v);
    vm_copy(v.as_ptr() as usize, ptr, len, true)?;
    // The destination is writable: write it again as an ordinary store, which memory checkers
    // (valgrind) see, where they do not know that a process_vm_writev to the process itself
    // initialised it.
    // SAFETY: `len` bytes at `ptr` were just written by the kernel, so they are writable; the
    // source is `v`.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), ptr as *mut u8, len) };
    Ok(())
}

fn copy_out_bytes(ptr: usize, v: &[u8]) -> Result<(), Errno> {
    copy_out_slice(ptr, v)
}

// The request numbers carry the C structures' sizes.
const _: () = assert!(size_of::<pfcntrs>() == req::PFCNTRS_SIZE);
const _: () = assert!(size_of::<pfcntrs_ev5>() == req::PFCNTRS_EV5_SIZE);
const _: () = assert!(size_of::<pfipls>() == req::PFIPLS_SIZE);

/// Where the array of an array request goes: `arg` itself, or the pointer stored at `arg`
/// (read first, so that an unreadable one fails with `EFAULT` before anything happens). The
/// request number says which ([`req::array_arg`]); nothing is written through a pointer the
/// form does not name as the destination.
fn array_dest(d: &Device, form: ArrayArg, arg: usize) -> Result<usize, Errno> {
    match form {
        ArrayArg::Here => Ok(arg),
        ArrayArg::Header if d.speaks_original() => Ok(arg),
        ArrayArg::Behind | ArrayArg::Header => copy_in(arg),
    }
}

/// One ioctl on the device: copy in, call the engine, copy out.
fn ioctl_device(d: &Device, request: c_ulong, arg: usize) -> Result<(), Errno> {
    let (request, form) =
        req::array_arg(request as u64).unwrap_or((request as u64, ArrayArg::Here));
    match request {
        req::PCNTDISABLE => d.disable(),
        req::PCNTENABLE => d.enable(),
        req::PCNTRDISABLE => {
            d.heard_original();
            d.disable()
        }
        req::PCNTRENABLE => {
            d.heard_original();
            d.enable()
        }
        req::PCNTSETMUX => {
            let m: iccsr = copy_in(arg)?;
            d.set_mux_ev4(
                m.iccsr_pc0 != 0,
                m.iccsr_pc1 != 0,
                m.iccsr_mux0,
                m.iccsr_mux1,
                m.iccsr_disable,
                m.iccsr_mbz,
            )
        }
        req::PCNTSETITEMS => d.set_items(copy_in::<c_int>(arg)? as u32),
        req::PCNTLOGALL => d.set_log(false),
        req::PCNTLOGSELECT => d.set_log(true),
        req::PCNTLOGUSER => d.unmark(),
        req::PCNTCLEARCNT => d.clear(),
        req::PCNTGETCNT => {
            let to = array_dest(d, form, arg)?;
            let v: Vec<pfcntrs> = d
                .counts()?
                .iter()
                .map(|c| pfcntrs {
                    pf_cntr0: c.ticks[0] as c_ulong,
                    pf_cntr1: c.ticks[1] as c_ulong,
                    pf_pcc: c.pcc as c_ulong,
                })
                .collect();
            copy_out_slice(to, &v)
        }
        req::PCNT5GETCNT | req::PCNT5GETCNT2 => {
            let to = array_dest(d, form, arg)?;
            let shifted = request == req::PCNT5GETCNT2;
            let v: Vec<pfcntrs_ev5> = d
                .counts()?
                .iter()
                .map(|c| {
                    let f = |i: usize| {
                        if shifted {
                            ((c.ticks[i] << c.shift[i]) + c.raw[i]) as c_ulong
                        } else {
                            c.ticks[i] as c_ulong
                        }
                    };
                    pfcntrs_ev5 {
                        pf_cntr0: f(0),
                        pf_cntr1: f(1),
                        pf_cntr2: f(2),
                        pf_pcc: c.pcc as c_ulong,
                    }
                })
                .collect();
            copy_out_slice(to, &v)
        }
        req::PCNTGETIPLHIS => {
            let to = array_dest(d, form, arg)?;
            let v: Vec<pfipls> = d
                .ipl()?
                .iter()
                .map(|h| pfipls {
                    pf_ipl: h.map(|x| x as c_ulong),
                })
                .collect();
            copy_out_slice(to, &v)
        }
        req::PCNTGETRSIZE => copy_out::<c_long>(arg, &(d.rsize() as c_long)),
        req::PCNTSETUADDR => {
            let a: pfaddr = copy_in(arg)?;
            d.set_urange(a.pfa_start as usize, a.pfa_end as usize, None)
        }
        req::PCNTSETURANGE => {
            let a: pfrange = copy_in(arg)?;
            d.set_urange(
                a.pfr_start as usize,
                a.pfr_end as usize,
                Some(a.pfr_stride as u64),
            )
        }
        req::PCNTSETKADDR | req::PCNTSETKRANGE => d.set_krange(),
        // Kernel profiling is never on.
        req::PCNTCALLER => Err(libc::EINVAL),
        req::PCNT5MUX => d.set_mux_ev5(copy_in::<c_ulong>(arg)? as u64),
        req::PCNT5FREQ => d.set_freq_ev5(copy_in::<c_ulong>(arg)? as u64),
        req::PCNT5CTXT => d.set_ctxt_ev5(copy_in::<c_ulong>(arg)? as u64),
        req::PCNT5ENABLE | req::PCNT5RESTART | req::PCNT5DISABLE => {
            let u: pmctrs_ev5 = copy_in(arg)?;
            let op = match request {
                req::PCNT5ENABLE => Ev5Op::Enable,
                req::PCNT5RESTART => Ev5Op::Restart,
                _ => Ev5Op::Disable,
            };
            d.select_ev5(u.pmctrs_ev5_select as u64, u.pmctrs_ev5_cpu as i64, op)
        }
        req::PCNT5WRITE => {
            let u: pmctrs_ev5 = copy_in(arg)?;
            d.write_ev5(
                u.pmctrs_ev5_select as u64,
                u.pmctrs_ev5_cpu as i64,
                u.pmctrs_ev5_ctr.map(|x| x as u64),
            )
        }
        req::PCNT5READCNTRS => {
            let mut u: pmctrs_ev5 = copy_in(arg)?;
            let raw = d.raw_ev5(u.pmctrs_ev5_cpu as i64)?;
            u.pmctrs_ev5_ctr = raw.map(|x| x as c_ulong);
            copy_out(arg, &u)
        }
        _ => Err(libc::EINVAL),
    }
}

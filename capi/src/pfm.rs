//! Tru64 UNIX's `/dev/pfcntr` (pfm(7), `<sys/pfcntr.h>`): `open`, `open64`, `openat`, `ioctl`,
//! `read` and `close`, interposed for that one path and its descriptors only; also the
//! `_FORTIFY_SOURCE` forms `__open_2`, `__open64_2` and `__read_chk`.
//!
//! Every other path and descriptor goes straight to the next definition of the function (the C
//! library's, found with `dlsym(RTLD_NEXT, ...)` in the library's constructor), so programs
//! that never open the device see no difference but one atomic load per `read`/`close`/`ioctl`.
//! This works both when the program is linked with `-lcpc`/`-lperfex` (the library comes before
//! the C library in the search order) and with `LD_PRELOAD`. A call the C library makes
//! internally (`fopen`, `openat64`) does not go through these functions and is not
//! served.
//!
//! An open of exactly `"/dev/pfcntr"` (`openat` too, whatever the directory descriptor) opens
//! `/dev/null` read-only (close-on-exec when asked) as the device's descriptor and registers it
//! with the engine's pfm device ([`perfcompat::pfm`]); `ioctl` and `read` on that descriptor are
//! served from it, `close` unregisters it. A `dup` of it is an ordinary `/dev/null` descriptor.
//!
//! The ioctl arguments are copied in and out with `process_vm_readv`/`process_vm_writev` on the
//! calling process, so an unmapped or read-only argument gives `EFAULT` as a kernel's copyin
//! and copyout would, instead of a crash.

// `c_ulong` and `c_long` are `u64` and `i64` on 64-bit targets only: the casts are for the others.
#![allow(clippy::unnecessary_cast)]

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::mem::{size_of, MaybeUninit};
use std::sync::atomic::{AtomicUsize, Ordering};

use perfcompat::pfm::{self, req, Device, Errno, Ev5Op, NIPL};

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

/// The next definitions of the interposed functions (the C library's).
static REAL: [AtomicUsize; 9] = [const { AtomicUsize::new(0) }; 9];
const OPEN: usize = 0;
const OPEN64: usize = 1;
const OPENAT: usize = 2;
const IOCTL: usize = 3;
const READ: usize = 4;
const CLOSE: usize = 5;
const OPEN_2: usize = 6;
const OPEN64_2: usize = 7;
const READ_CHK: usize = 8;
const NAMES: [&CStr; 9] = [
    c"open",
    c"open64",
    c"openat",
    c"ioctl",
    c"read",
    c"close",
    c"__open_2",
    c"__open64_2",
    c"__read_chk",
];

/// The next definition of function `i`, looked up once (0 when there is none: a static program).
fn real(i: usize) -> usize {
    let f = REAL[i].load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, NAMES[i].as_ptr()) } as usize;
    if f != 0 {
        REAL[i].store(f, Ordering::Relaxed);
    }
    f
}

/// Look every next definition up at load time, so that no later call (in a signal handler,
/// say) runs `dlsym`.
extern "C" fn resolve() {
    for i in 0..REAL.len() {
        real(i);
    }
}

/// The constructor that resolves the next definitions.
#[used]
#[link_section = ".init_array"]
#[export_name = "perfcompat_pfm_ctor"]
static PFM_CTOR: extern "C" fn() = resolve;

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int;
type IoctlFn = unsafe extern "C" fn(c_int, c_ulong, *mut c_void) -> c_int;
type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type ReadChkFn = unsafe extern "C" fn(c_int, *mut c_void, usize, usize) -> isize;

/// The real `open`/`open64` (the system call without a C library definition to call).
unsafe fn real_open(i: usize, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    match real(i) {
        // SAFETY: dlsym found the function of this name and type.
        f if f != 0 => unsafe { std::mem::transmute::<usize, OpenFn>(f)(path, flags, mode) },
        // SAFETY: the system call with the caller's arguments.
        _ => unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, mode) as c_int },
    }
}

fn is_device(path: *const c_char) -> bool {
    // SAFETY: a non-null path is a NUL-terminated string (open's contract).
    !path.is_null() && unsafe { CStr::from_ptr(path) }.to_bytes() == pfm::PATH.as_bytes()
}

/// Open the device (the C convention: a descriptor, or -1 with `errno`).
fn open_device(flags: c_int) -> c_int {
    ffi_boundary("open", || {
        let cloexec = flags & libc::O_CLOEXEC;
        let r = pfm::open(flags, || {
            // SAFETY: a constant path.
            let fd = unsafe { real_open(OPEN, c"/dev/null".as_ptr(), libc::O_RDONLY | cloexec, 0) };
            if fd >= 0 {
                return Ok(fd);
            }
            // No /dev/null (a bare container): an event descriptor serves as well.
            // SAFETY: a plain system call.
            let fd = unsafe { libc::eventfd(0, if cloexec != 0 { libc::EFD_CLOEXEC } else { 0 }) };
            if fd >= 0 {
                Ok(fd)
            } else {
                // SAFETY: errno is thread-local.
                Err(unsafe { *libc::__errno_location() })
            }
        });
        match r {
            Ok(fd) => fd,
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `open(2)`, served for `"/dev/pfcntr"` (the `PCNTOPEN*` bits in `flags`), passed on otherwise.
///
/// # Safety
/// As `open(2)`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    if is_device(path) {
        return open_device(flags);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { real_open(OPEN, path, flags, mode) }
}

/// `open64(2)`: as [`open`].
///
/// # Safety
/// As [`open`].
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    if is_device(path) {
        return open_device(flags);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { real_open(OPEN64, path, flags, mode) }
}

/// `openat(2)`: as [`open`] for the absolute path `"/dev/pfcntr"` (any `dirfd`).
///
/// # Safety
/// As `openat(2)`.
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    if is_device(path) {
        return open_device(flags);
    }
    match real(OPENAT) {
        // SAFETY: dlsym found the function of this name and type; the caller's arguments.
        f if f != 0 => unsafe {
            std::mem::transmute::<usize, OpenatFn>(f)(dirfd, path, flags, mode)
        },
        // SAFETY: the system call with the caller's arguments.
        _ => unsafe { libc::syscall(libc::SYS_openat, dirfd, path, flags, mode) as c_int },
    }
}

/// `read(2)`: on the device, the PC profile ([`Device::read`]); otherwise passed on.
///
/// # Safety
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    if pfm::any_open() {
        if let Some(r) = ffi_boundary("read", || pfm::with_fd(fd, |d| read_device(d, buf, count))) {
            return r;
        }
    }
    match real(READ) {
        // SAFETY: dlsym found the function of this name and type; the caller's arguments.
        f if f != 0 => unsafe { std::mem::transmute::<usize, ReadFn>(f)(fd, buf, count) },
        // SAFETY: the system call with the caller's arguments.
        _ => unsafe { libc::syscall(libc::SYS_read, fd, buf, count) as isize },
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

/// `__open_2`, what `open` without a mode becomes in a program built with `_FORTIFY_SOURCE`
/// when the flags are not a constant: as [`open`].
///
/// # Safety
/// As [`open`].
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { open_2(OPEN_2, path, flags) }
}

/// `__open64_2`: as [`__open_2`].
///
/// # Safety
/// As [`open`].
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { open_2(OPEN64_2, path, flags) }
}

/// The two fortified opens.
unsafe fn open_2(i: usize, path: *const c_char, flags: c_int) -> c_int {
    if is_device(path) {
        return open_device(flags);
    }
    match real(i) {
        // SAFETY: dlsym found the function of this name and type; the caller's arguments.
        f if f != 0 => unsafe { std::mem::transmute::<usize, Open2Fn>(f)(path, flags) },
        // SAFETY: as `open` without a mode.
        _ => unsafe { real_open(OPEN, path, flags, 0) },
    }
}

/// `__read_chk`, what `read` into a buffer of known size becomes in a program built with
/// `_FORTIFY_SOURCE` (the C library's calls `read` internally, past [`read`]): on the device
/// as [`read`] after the same check (`nbytes` more than `buflen` ends the program).
///
/// # Safety
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    nbytes: usize,
    buflen: usize,
) -> isize {
    if pfm::any_open() && nbytes <= buflen {
        if let Some(r) = ffi_boundary("read", || pfm::with_fd(fd, |d| read_device(d, buf, nbytes)))
        {
            return r;
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { real_read_chk(fd, buf, nbytes, buflen) }
}

/// The C library's `__read_chk`, or its check and the system call.
///
/// # Safety
/// As `read(2)`.
unsafe fn real_read_chk(fd: c_int, buf: *mut c_void, nbytes: usize, buflen: usize) -> isize {
    match real(READ_CHK) {
        // SAFETY: dlsym found the function of this name and type; the caller's arguments (it
        // makes the size check and ends the program when it fails).
        f if f != 0 => unsafe {
            std::mem::transmute::<usize, ReadChkFn>(f)(fd, buf, nbytes, buflen)
        },
        _ if nbytes > buflen => std::process::abort(),
        // SAFETY: the system call with the caller's arguments.
        _ => unsafe { libc::syscall(libc::SYS_read, fd, buf, nbytes) as isize },
    }
}

/// `close(2)`: the device is disabled and forgotten, then its descriptor closed.
///
/// # Safety
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if pfm::any_open() {
        ffi_boundary("close", || pfm::close(fd));
    }
    match real(CLOSE) {
        // SAFETY: dlsym found the function of this name and type.
        f if f != 0 => unsafe { std::mem::transmute::<usize, CloseFn>(f)(fd) },
        // SAFETY: the system call.
        _ => unsafe { libc::syscall(libc::SYS_close, fd) as c_int },
    }
}

/// `ioctl(2)`: the pfm(7) requests on the device (`<sys/pfcntr.h>`); otherwise passed on. The
/// C prototype is variadic; every request here takes at most one pointer, which the calling
/// convention passes as the third argument.
///
/// # Safety
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if let Some(r) = pfm_ioctl(fd, request, arg) {
        return r;
    }
    match real(IOCTL) {
        // SAFETY: dlsym found the function of this name and type; the caller's arguments.
        f if f != 0 => unsafe { std::mem::transmute::<usize, IoctlFn>(f)(fd, request, arg) },
        // SAFETY: the system call with the caller's arguments.
        _ => unsafe { libc::syscall(libc::SYS_ioctl, fd, request, arg) as c_int },
    }
}

/// The pfm(7) request on the device `fd`, if `fd` is one: 0, or -1 with `errno`.
fn pfm_ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> Option<c_int> {
    if !pfm::any_open() {
        return None;
    }
    let r = ffi_boundary("ioctl", || {
        pfm::with_fd(fd, |d| ioctl_device(d, request, arg as usize))
    })?;
    Some(r.map_or_else(
        |e| {
            set_errno(e);
            -1
        },
        |()| 0,
    ))
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

/// One ioctl on the device: copy in, call the engine, copy out.
fn ioctl_device(d: &Device, request: c_ulong, arg: usize) -> Result<(), Errno> {
    match request as u64 {
        req::PCNTDISABLE => d.disable(),
        req::PCNTENABLE => d.enable(),
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
            let to: usize = copy_in(arg)?;
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
            let to: usize = copy_in(arg)?;
            let shifted = request as u64 == req::PCNT5GETCNT2;
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
            let to: usize = copy_in(arg)?;
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
            let op = match request as u64 {
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

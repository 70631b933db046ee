//! The seam between the perf backend and the kernel.
//!
//! Every kernel interaction of the perf backend goes through one [`Kernel`]: `perf_event_open`,
//! `read` of a counter or group, the `PERF_EVENT_IOC_*` ioctls, the `fcntl`s that route the
//! overflow signal, `mmap`/`munmap` of the event pages, the `rdpmc` instruction and the
//! `perf_event_paranoid` setting. [`LINUX`] makes the real system calls; [`super::model`] is
//! an in-process model of the interface that the tests run the real backend code over, to
//! execute the paths that need a hardware PMU on hosts without one.
//!
//! The methods are called from the overflow signal handler and the sample path: an
//! implementation must be async-signal-safe there (no allocation, no locks that the
//! interrupted thread could hold). [`LINUX`] is: each method is one system call (or one
//! instruction). The cost of the seam is one indirect call per system call.
//!
//! Errors are `errno` values, as the system calls give them.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd};

use perf_event_open_sys as sys;
use sys::bindings::perf_event_attr;

/// The kernel interface of the perf backend (see the [module documentation](self)).
pub trait Kernel: Send + Sync + 'static {
    /// `perf_event_open(2)`: a new counter described by `attr`, for thread or process `pid`
    /// (0: the caller, -1: any) on `cpu` (-1: any), in the group led by `group_fd` (-1: a new
    /// group), with `flags` (`PERF_FLAG_*`).
    fn perf_event_open(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Result<OwnedFd, i32>;

    /// `read(2)` of a counter into `buf`: the number of bytes written, which are the first
    /// bytes of `buf`. Async-signal-safe.
    fn read(&self, fd: i32, buf: &mut [MaybeUninit<u64>]) -> Result<usize, i32>;

    /// `ioctl(2)` on a counter: `request` is a `PERF_EVENT_IOC_*` number, `arg` its integer
    /// argument or the address of its argument (`PERF_EVENT_IOC_PERIOD` and `_ID` take a
    /// pointer). Async-signal-safe.
    fn ioctl(&self, fd: i32, request: u64, arg: usize) -> Result<i32, i32>;

    /// `fcntl(2)` on a counter (`F_SETFL`, `F_SETSIG`, `F_SETOWN_EX`, ...): `arg` is the integer
    /// argument or the address of the argument.
    fn fcntl(&self, fd: i32, cmd: i32, arg: usize) -> Result<i32, i32>;

    /// `mmap(2)` of `len` bytes of a counter's pages (page 0 is its
    /// `struct perf_event_mmap_page`, a ring buffer may follow).
    fn mmap(&self, fd: i32, len: usize, prot: i32, flags: i32) -> Result<*mut c_void, i32>;

    /// `munmap(2)` of a mapping [`Kernel::mmap`] returned.
    ///
    /// # Safety
    /// `addr` and `len` must be a mapping this kernel made, not used after the call.
    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> Result<(), i32>;

    /// The `rdpmc` instruction: hardware counter `counter` (the mmap page's `index - 1`) as
    /// the CPU holds it, `pmc_width` bits wide. Only called when the page advertises
    /// `cap_user_rdpmc`. Async-signal-safe.
    fn rdpmc(&self, counter: u32) -> u64;

    /// `/proc/sys/kernel/perf_event_paranoid` (2, the usual default, when unreadable).
    fn perf_event_paranoid(&self) -> i32;
}

/// The running kernel: real system calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linux;

/// The running kernel, for [`super::PerfBackend::with_kernel`].
pub static LINUX: Linux = Linux;

fn errno() -> i32 {
    // SAFETY: errno is thread-local; read right after the failed call.
    unsafe { *libc::__errno_location() }
}

impl Kernel for Linux {
    fn perf_event_open(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Result<OwnedFd, i32> {
        // SAFETY: attr is a fully initialised perf_event_attr.
        let fd = unsafe { sys::perf_event_open(attr, pid, cpu, group_fd, flags as libc::c_ulong) };
        if fd < 0 {
            Err(errno())
        } else {
            // SAFETY: a fresh fd we own.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    }

    #[inline]
    fn read(&self, fd: i32, buf: &mut [MaybeUninit<u64>]) -> Result<usize, i32> {
        // SAFETY: reads at most the buffer's size into it.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(buf)) };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r as usize)
        }
    }

    #[inline]
    fn ioctl(&self, fd: i32, request: u64, arg: usize) -> Result<i32, i32> {
        // SAFETY: the caller passes the argument the request takes (an integer or the address
        // of a live object of the right type).
        let r = unsafe { libc::ioctl(fd, request as libc::c_ulong, arg) };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r)
        }
    }

    fn fcntl(&self, fd: i32, cmd: i32, arg: usize) -> Result<i32, i32> {
        // SAFETY: as for ioctl.
        let r = unsafe { libc::fcntl(fd, cmd, arg) };
        if r < 0 {
            Err(errno())
        } else {
            Ok(r)
        }
    }

    fn mmap(&self, fd: i32, len: usize, prot: i32, flags: i32) -> Result<*mut c_void, i32> {
        // SAFETY: a fresh shared mapping of a perf fd; nothing is overwritten.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            Err(errno())
        } else {
            Ok(p)
        }
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> Result<(), i32> {
        // SAFETY: the caller's contract.
        if unsafe { libc::munmap(addr, len) } != 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    #[inline]
    fn rdpmc(&self, counter: u32) -> u64 {
        rdpmc(counter)
    }

    fn perf_event_paranoid(&self) -> i32 {
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(2)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdpmc(counter: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: only reached when the kernel advertised cap_user_rdpmc for this counter.
    unsafe {
        std::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi,
                        options(nostack, nomem, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

#[cfg(not(target_arch = "x86_64"))]
fn rdpmc(_counter: u32) -> u64 {
    0
}

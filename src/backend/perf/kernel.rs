//! The seam between the perf backend and the kernel.
//!
//! Every kernel interaction of the perf backend goes through one [`Kernel`]: `perf_event_open`,
//! `read` of a counter or group, the `PERF_EVENT_IOC_*` ioctls, the `fcntl`s that route the
//! overflow signal, `mmap`/`munmap` of the event pages, the user-mode counter read (x86-64's
//! `rdpmc` instruction, arm64's `mrs` of the counter's register) and the
//! `perf_event_paranoid` setting. [`LINUX`] makes the real system calls; `super::model` (built
//! for the tests only: the `kernel-model` feature) is an in-process model of the interface
//! that the tests run the real backend code over, to execute the paths that need a hardware
//! PMU on hosts without one.
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

use crate::base::sys::{sys_result, syscall6};

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

    /// [`Kernel::perf_event_open`] of a counter its caller closes before it returns: the host
    /// probes, which only ask the kernel whether it opens, and how many fit in a group. For
    /// [`LINUX`] the descriptor stays at the number the kernel gave it: a program cannot close
    /// it from under the library, so it is not moved up out of the program's way as a bound
    /// counter's is (`relocate`: a `getrlimit`, an `fcntl` and a `close` more per counter,
    /// which tripled the system calls of the probes, issue 48). By default, the same call.
    fn perf_event_probe(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Result<OwnedFd, i32> {
        self.perf_event_open(attr, pid, cpu, group_fd, flags)
    }

    /// A counter [`Kernel::perf_event_probe`] opened, now bound to count in the group led by
    /// `group_fd` (-1: it leads): for [`LINUX`] moved up out of the program's way as
    /// [`Kernel::perf_event_open`] moves a new one (`relocate`). By default, left as it is.
    fn bound(&self, fd: OwnedFd, group_fd: i32) -> OwnedFd {
        let _ = group_fd;
        fd
    }

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

    /// The user-mode counter read: hardware counter `counter` (the mmap page's `index - 1`)
    /// as the CPU holds it, of which the low `pmc_width` bits count. Only called when the page
    /// advertises `cap_user_rdpmc`. Async-signal-safe.
    ///
    /// For [`LINUX`]: on x86-64 the `rdpmc` instruction; on arm64 an `mrs` of the register
    /// [`arm64_counter_register`] names (`PMEVCNTR<n>_EL0`, or `PMCCNTR_EL0` for 31); 0 on
    /// other architectures, where `rdpmc::Pages::map` never offers the fast path.
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
        open_event(attr, pid, cpu, group_fd, flags, relocate)
    }

    fn perf_event_probe(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        flags: u64,
    ) -> Result<OwnedFd, i32> {
        open_event(attr, pid, cpu, group_fd, flags, |fd, _| fd)
    }

    fn bound(&self, fd: OwnedFd, group_fd: i32) -> OwnedFd {
        relocate(fd, group_fd)
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

    // ioctl, fcntl, mmap and perf_event_open are made inline (base::sys::syscall6): a first
    // use makes them, and the C library's wrappers would each be looked up then (issue 48).
    #[inline]
    fn ioctl(&self, fd: i32, request: u64, arg: usize) -> Result<i32, i32> {
        // SAFETY: the caller passes the argument the request takes (an integer or the address
        // of a live object of the right type).
        let r = unsafe {
            syscall6(
                libc::SYS_ioctl,
                [fd as usize, request as usize, arg, 0, 0, 0],
            )
        };
        sys_result(r).map(|v| v as i32)
    }

    fn fcntl(&self, fd: i32, cmd: i32, arg: usize) -> Result<i32, i32> {
        // SAFETY: as for ioctl.
        let r = unsafe { syscall6(libc::SYS_fcntl, [fd as usize, cmd as usize, arg, 0, 0, 0]) };
        sys_result(r).map(|v| v as i32)
    }

    fn mmap(&self, fd: i32, len: usize, prot: i32, flags: i32) -> Result<*mut c_void, i32> {
        // SAFETY: a fresh shared mapping of a perf fd; nothing is overwritten.
        let r = unsafe {
            syscall6(
                libc::SYS_mmap,
                [0, len, prot as usize, flags as usize, fd as usize, 0],
            )
        };
        sys_result(r).map(|p| p as *mut c_void)
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

/// [`Linux`]'s `perf_event_open`: the system call (on arm64 with the user-mode read asked for,
/// see [`arm64_user_read_config1`]), the new descriptor passed through `place` with the group's
/// leader (`group_fd`).
fn open_event(
    attr: &mut perf_event_attr,
    pid: i32,
    cpu: i32,
    group_fd: i32,
    flags: u64,
    place: fn(OwnedFd, i32) -> OwnedFd,
) -> Result<OwnedFd, i32> {
    let open = |attr: &mut perf_event_attr| {
        // SAFETY: attr is a fully initialised perf_event_attr.
        let r = unsafe {
            syscall6(
                libc::SYS_perf_event_open,
                [
                    attr as *mut perf_event_attr as usize,
                    pid as usize,
                    cpu as usize,
                    group_fd as usize,
                    flags as usize,
                    0,
                ],
            )
        };
        // SAFETY: a fresh fd we own.
        sys_result(r).map(|fd| place(unsafe { OwnedFd::from_raw_fd(fd as i32) }, group_fd))
    };
    if !cfg!(target_arch = "aarch64") {
        return open(attr);
    }
    // arm64: ask for the user-mode read of the calling thread's hardware counters (see
    // `arm64_user_read_config1`). A PMU driver that does not know the request and refuses
    // it gets the counter without it: the group is then read with read().
    // SAFETY: a plain integer in a union.
    let config1 = unsafe { attr.__bindgen_anon_3.config1 };
    let wanted = arm64_user_read_config1(attr.type_, config1, pid);
    if wanted == config1 {
        return open(attr);
    }
    attr.__bindgen_anon_3.config1 = wanted;
    match open(attr) {
        Err(libc::EINVAL | libc::EOPNOTSUPP) => {
            attr.__bindgen_anon_3.config1 = config1;
            open(attr)
        }
        r => r,
    }
}

/// Where the perf backend moves a counter's descriptor to (issue 44 item 1), for a soft
/// `RLIMIT_NOFILE` of `limit`: the lowest free number from an eighth below the limit (capped at
/// 4096: the kernel sizes a process's descriptor table to its highest number), so 896 under the
/// usual 1024. `None` when the limit leaves no room above the low numbers a program uses.
pub fn relocation_base(limit: u64) -> Option<i32> {
    let lim = limit.min(4096);
    if lim < 64 {
        return None;
    }
    Some((lim - lim / 8) as i32)
}

/// Move a fresh counter descriptor to a high number ([`relocation_base`], close-on-exec kept),
/// or leave it where it is when there is no room there. A member of a group whose leader
/// `group` sits above it (the leader was moved up) goes above the leader: the limit need not be
/// asked again for each member (issue 48, first use: one `getrlimit` per group, not per
/// counter), and `F_DUPFD_CLOEXEC` still refuses a number at or past the limit.
///
/// # Why (issue 44 item 1)
/// A program may close every descriptor from 3 on (`close_range(3, ~0U, 0)`, a loop closing
/// 3..1023) while it counts and then open pipes and files, which take the lowest free numbers:
/// the counter's old number, were it low. The sample's `read` of the counter cannot check
/// first whose descriptor it is (one more system call: about 1.3× the sample), and a `read`
/// of the program's pipe would block on it or take its bytes. Up here, the number the program
/// closed stays closed (the `read` fails with `EBADF`, which the engine reports as a closed
/// descriptor) unless the program holds about as many descriptors as its limit allows, or puts
/// one at that number on purpose (`dup2`). Every other use of the descriptor checks it is still
/// the counter first (`PERF_EVENT_IOC_ID`, see `PerfGroup::lost_descriptor`).
fn relocate(fd: OwnedFd, group: i32) -> OwnedFd {
    use std::os::fd::AsRawFd;
    if group > fd.as_raw_fd() {
        return move_to(fd, group + 1);
    }
    let mut lim = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit64 of this process writes the struct (getrlimit's system call).
    let r = unsafe {
        syscall6(
            libc::SYS_prlimit64,
            [
                0,
                libc::RLIMIT_NOFILE as usize,
                0,
                &mut lim as *mut _ as usize,
                0,
                0,
            ],
        )
    };
    if r != 0 {
        return fd;
    }
    let Some(base) = relocation_base(lim.rlim_cur) else {
        return fd;
    };
    if fd.as_raw_fd() >= base {
        return fd;
    }
    move_to(fd, base)
}

/// `fd` moved to the lowest free number from `base` on (close-on-exec), or left where it is
/// when the kernel refuses (`base` at or past the limit, or no free number below it).
fn move_to(fd: OwnedFd, base: i32) -> OwnedFd {
    use std::os::fd::AsRawFd;
    // SAFETY: duplicates a descriptor we own; the copy is ours too.
    let r = unsafe {
        syscall6(
            libc::SYS_fcntl,
            [
                fd.as_raw_fd() as usize,
                libc::F_DUPFD_CLOEXEC as usize,
                base as usize,
                0,
                0,
                0,
            ],
        )
    };
    let Ok(high) = sys_result(r) else {
        return fd;
    };
    crate::base::sys::close(fd);
    // SAFETY: a fresh descriptor we own.
    unsafe { OwnedFd::from_raw_fd(high as i32) }
}

/// `config1` bit 1 of an arm64 PMU event: "let user space read this counter" (Linux 5.17 and
/// later, with `/proc/sys/kernel/perf_user_access` at 1; the page then shows `cap_user_rdpmc`
/// and a 32-bit `pmc_width`). Bit 0 (a 64-bit counter) is never set by this library: chained
/// counters cannot be read from user space and 64-bit event counters need ARMv8.5's PMU.
pub const ARM64_CONFIG1_USER_READ: u64 = 1 << 1;

/// The `config1` [`LINUX`] opens an event with on arm64, for an event of `type_` whose
/// `config1` the caller set to `config1`, on task `pid`: with [`ARM64_CONFIG1_USER_READ`] for a
/// generic hardware, cache or raw event of the calling thread (`pid` 0: the only counters the
/// fast path reads, and the kernel refuses the request with `EINVAL` for a counter not
/// attached to a task, such as a CPU-wide one). Software events, PMUs with a type of their own
/// (whose `config1` means something else) and an event whose `config1` the caller already set
/// are left as they are. Applies only on arm64; a pure function so every host tests it.
pub fn arm64_user_read_config1(type_: u32, config1: u64, pid: i32) -> u64 {
    let generic_pmu = matches!(
        type_,
        sys::bindings::PERF_TYPE_HARDWARE
            | sys::bindings::PERF_TYPE_HW_CACHE
            | sys::bindings::PERF_TYPE_RAW
    );
    if generic_pmu && config1 == 0 && pid == 0 {
        ARM64_CONFIG1_USER_READ
    } else {
        config1
    }
}

/// Expands the arm64 event counter numbers into [`ARM64_EVENT_COUNTERS`] (their register names)
/// and, on arm64, [`arm64_event_read`] (one `mrs` per counter: the number is part of the
/// instruction's encoding), from the one list so that names and readers cannot disagree.
macro_rules! arm64_event_counters {
    ($($n:literal)*) => {
        /// The arm64 event counter registers, indexed by counter number (the mmap page's
        /// `index - 1` below 31).
        pub const ARM64_EVENT_COUNTERS: [&str; 31] = [$(concat!("PMEVCNTR", $n, "_EL0")),*];

        /// An `mrs` of event counter `counter` (0 for a number no register has). A `match`
        /// inlined into the sample (a jump to the counter's `mrs`), not a table of functions:
        /// the indirect call clobbered the caller-saved registers and made the sample's read
        /// loop spill its state on every member (issue 48).
        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        fn arm64_event_read(counter: u32) -> u64 {
            let v: u64;
            match counter {
                $($n => {
                    // SAFETY: reading a PMU register; only reached when the kernel advertised
                    // cap_user_rdpmc for this counter, which enables EL0 access (otherwise the
                    // read traps, as any program could make it). No memory is touched, but
                    // `nomem` is left off so the read stays between the page's sequence-lock
                    // reads.
                    unsafe {
                        std::arch::asm!(
                            concat!("mrs {v}, PMEVCNTR", $n, "_EL0"),
                            v = out(reg) v,
                            options(nostack, preserves_flags),
                        );
                    }
                })*
                _ => v = 0,
            }
            v
        }
    };
}

arm64_event_counters!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30);

/// The arm64 register holding hardware counter `counter` (the mmap page's `index - 1`):
/// `PMEVCNTR<n>_EL0` for event counter `n` (0 to 30), `PMCCNTR_EL0` (the cycle counter) for 31;
/// `None` for anything else.
pub fn arm64_counter_register(counter: u32) -> Option<&'static str> {
    match counter {
        31 => Some("PMCCNTR_EL0"),
        n => ARM64_EVENT_COUNTERS.get(n as usize).copied(),
    }
}

/// arm64's user-mode counter read: an `mrs` of the register [`arm64_counter_register`] names
/// (0 for a counter number no register has).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub(super) fn rdpmc(counter: u32) -> u64 {
    if counter == 31 {
        let v: u64;
        // SAFETY: as for the event counters above.
        unsafe {
            std::arch::asm!("mrs {v}, PMCCNTR_EL0", v = out(reg) v,
                            options(nostack, preserves_flags));
        }
        return v;
    }
    arm64_event_read(counter)
}

/// x86-64's `rdpmc` instruction.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn rdpmc(counter: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: only reached when the kernel advertised cap_user_rdpmc for this counter.
    unsafe {
        std::arch::asm!("rdpmc", in("ecx") counter, out("eax") lo, out("edx") hi,
                        options(nostack, nomem, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

/// No user-mode counter read on this architecture ([`super::rdpmc::Pages::map`] declines).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn rdpmc(_counter: u32) -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::bindings as b;

    /// The first use's system calls are made inline, not through the C library's wrappers
    /// (issue 48, first use: each wrapper is a lookup of the lazily bound library): seen here
    /// as `errno`, which the wrappers set on a failure and the inline calls leave alone; the
    /// errors are the same.
    #[test]
    fn the_kernels_calls_are_made_inline_and_leave_errno_alone() {
        // SAFETY: the thread's own errno.
        let set = |v| unsafe { *libc::__errno_location() = v };
        // SAFETY: as above.
        let get = || unsafe { *libc::__errno_location() };
        let k = &LINUX;
        set(12345);
        assert_eq!(
            k.ioctl(-1, 0x2400 /* PERF_EVENT_IOC_ENABLE */, 0),
            Err(libc::EBADF)
        );
        assert_eq!(k.fcntl(-1, libc::F_GETFD, 0), Err(libc::EBADF));
        assert_eq!(
            k.mmap(-1, 4096, libc::PROT_READ, libc::MAP_SHARED).err(),
            Some(libc::EBADF)
        );
        let mut attr = perf_event_attr {
            size: 1, // below every size the kernel knows
            ..Default::default()
        };
        assert!(k.perf_event_open(&mut attr, 0, -1, -1, 0).is_err());
        assert_eq!(get(), 12345, "a call went through the C library");
        // The descriptor limit's look-up: a descriptor moved up, errno untouched.
        let fd = k
            .perf_event_open(&mut super::super::host::user_task_clock(), 0, -1, -1, 0)
            .expect("task-clock opens");
        use std::os::fd::AsRawFd;
        assert!(fd.as_raw_fd() >= 64, "{}", fd.as_raw_fd());
        assert_eq!(get(), 12345);
    }

    #[test]
    fn counter_descriptors_go_near_the_top_of_the_limit_and_no_higher_than_4096() {
        assert_eq!(relocation_base(1024), Some(896));
        assert_eq!(relocation_base(4096), Some(3584));
        assert_eq!(relocation_base(1 << 20), Some(3584));
        assert_eq!(relocation_base(u64::MAX), Some(3584));
        assert_eq!(relocation_base(64), Some(56));
        assert_eq!(relocation_base(63), None);
        assert_eq!(relocation_base(0), None);
    }

    #[test]
    fn arm64_counter_numbers_name_their_registers() {
        for n in 0..31 {
            assert_eq!(
                arm64_counter_register(n),
                Some(format!("PMEVCNTR{n}_EL0").as_str()),
                "counter {n}"
            );
        }
        assert_eq!(arm64_counter_register(31), Some("PMCCNTR_EL0"));
        assert_eq!(arm64_counter_register(32), None);
        assert_eq!(arm64_counter_register(u32::MAX), None);
    }

    #[test]
    fn arm64_user_read_is_asked_for_the_calling_threads_hardware_counters_only() {
        let bit = ARM64_CONFIG1_USER_READ;
        assert_eq!(bit, 2, "config1 bit 1 (bit 0 would chain two counters)");
        for t in [
            b::PERF_TYPE_HARDWARE,
            b::PERF_TYPE_HW_CACHE,
            b::PERF_TYPE_RAW,
        ] {
            assert_eq!(arm64_user_read_config1(t, 0, 0), bit, "type {t}");
            // A CPU-wide counter (the kernel refuses the request: EINVAL), another task's.
            assert_eq!(arm64_user_read_config1(t, 0, -1), 0, "type {t}, CPU-wide");
            assert_eq!(
                arm64_user_read_config1(t, 0, 1234),
                0,
                "type {t}, another task"
            );
            // The caller's own config1 (a 64-bit counter, say) is kept as it is.
            assert_eq!(arm64_user_read_config1(t, 1, 0), 1, "type {t}, config1 set");
        }
        for t in [
            b::PERF_TYPE_SOFTWARE,
            b::PERF_TYPE_TRACEPOINT,
            b::PERF_TYPE_BREAKPOINT,
            8,
        ] {
            assert_eq!(arm64_user_read_config1(t, 0, 0), 0, "type {t}");
        }
    }
}

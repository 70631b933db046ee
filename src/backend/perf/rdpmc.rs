//! The self-monitoring read: the counter read from user space through the perf mmap page, no
//! system call.
//!
//! Used only for a set bound to the calling thread on a host with a hardware PMU, when the
//! kernel sets `cap_user_rdpmc` on every member's page: on x86-64 when the `rdpmc` sysfs knob
//! is 1 or 2 (read with the `rdpmc` instruction); on arm64 (Linux 5.17 and later) when
//! `/proc/sys/kernel/perf_user_access` is 1 and the counter was opened with `config1` bit 1,
//! which [`super::kernel::LINUX`] asks for on the calling thread's hardware counters (read
//! with `mrs` of `PMEVCNTR<n>_EL0` or `PMCCNTR_EL0`, 32 bits wide). Other architectures read
//! with `read()` ([`Declined::NoUserReadInstruction`]). Each member has its own page and
//! sequence lock, as the uapi header describes: read `lock`, then `index`, `offset` and the
//! counter (sign-extended from `pmc_width` bits), and retry when `lock` moved. Whenever the
//! fast path cannot give an exact answer (a member not on a counter right now, the group
//! multiplexed), [`Pages::read`] returns `None` and the caller falls back to `read()`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;

use perf_event_open_sys::bindings::perf_event_mmap_page;

use super::kernel::Kernel;
use crate::backend::Times;

/// The mapped pages of one group's members.
pub struct Pages {
    kernel: &'static dyn Kernel,
    pages: Vec<*mut perf_event_mmap_page>,
    /// Which of `pages` this mapped (and unmaps); the others belong to an overflow ring.
    owned: Vec<bool>,
}

// SAFETY: the pages are read-only shared mappings; reading them from any thread is fine (the
// values are only meaningful on the owning thread, which is the only one that uses them).
unsafe impl Send for Pages {}
// SAFETY: as above.
unsafe impl Sync for Pages {}

const PAGE: usize = 4096;

/// Whether this architecture has a user-mode counter read ([`super::kernel::Kernel::rdpmc`]).
const USER_READ: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Why [`Pages::map`] left a group to `read()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// This library reads counters from user space only on x86-64 (`rdpmc`) and arm64 (`mrs`).
    NoUserReadInstruction,
    /// `mmap` of a counter's page failed (`EPERM` past `perf_event_mlock_kb` and
    /// `RLIMIT_MEMLOCK`), after `mapped` pages of the group had been mapped (unmapped again).
    MapRefused {
        /// The `mmap` error.
        errno: i32,
        /// Pages of this group mapped before the refusal.
        mapped: usize,
    },
    /// The kernel maps the page but does not let user space read this counter (software
    /// events; on x86-64 the `rdpmc` sysfs knob at 0; on arm64 `perf_user_access` at 0, a
    /// kernel before 5.17, or a counter opened without `config1` bit 1).
    NoUserRdpmc,
}

impl Pages {
    /// Map one page per member, or say why the fast path is not available: the caller then
    /// reads with `read()`, which is always exact. A refused mapping is not an error for the
    /// user: the user page of a counter is charged to the per-user `perf_event_mlock_kb`
    /// allowance and then to `RLIMIT_MEMLOCK`, and an unprivileged process with many counters
    /// can run out of both (`EPERM`); its counts stay exact, only slower to read.
    ///
    /// `premapped(i)` is member `i`'s page when it is already mapped (the first page of its
    /// overflow ring: the kernel maps a perf fd only once per size).
    pub fn map(
        kernel: &'static dyn Kernel,
        fds: &[OwnedFd],
        n: usize,
        premapped: impl Fn(usize) -> Option<*mut perf_event_mmap_page>,
    ) -> Result<Pages, Declined> {
        if !USER_READ {
            return Err(Declined::NoUserReadInstruction);
        }
        let mut pages = Pages {
            kernel,
            pages: Vec::with_capacity(n),
            owned: Vec::with_capacity(n),
        };
        // Map every member first, then look at the capabilities: a refused mapping is told
        // apart from a kernel that maps but does not offer rdpmc.
        for (i, fd) in fds.iter().take(n).enumerate() {
            if let Some(p) = premapped(i) {
                pages.pages.push(p);
                pages.owned.push(false);
                continue;
            }
            // A read-only shared mapping of the fd's first page.
            let p = kernel
                .mmap(fd.as_raw_fd(), PAGE, libc::PROT_READ, libc::MAP_SHARED)
                .map_err(|errno| Declined::MapRefused {
                    errno,
                    mapped: pages.pages.len(),
                })?;
            pages.pages.push(p as *mut perf_event_mmap_page);
            pages.owned.push(true);
        }
        for &p in &pages.pages {
            // SAFETY: a valid mapping of the kernel's page.
            let caps = unsafe { ptr::read_volatile(&(*p).__bindgen_anon_1.capabilities) };
            // cap_user_rdpmc is bit 2 of the capabilities word.
            if caps & (1 << 2) == 0 {
                return Err(Declined::NoUserRdpmc);
            }
        }
        Ok(pages)
    }

    /// Read every member; `None` when the fast path cannot answer exactly.
    pub fn read(&self, out: &mut [u64]) -> Option<Times> {
        read_with(&self.pages, out, &Through(self.kernel))
    }

    /// The members' pages, for a reader that reads them inline ([`read_host`]): valid while
    /// `self` is.
    pub(super) fn host_pages(&self) -> HostPages {
        HostPages(self.pages.iter().map(|&p| UserPage(p)).collect())
    }
}

/// The mapped pages of a group's members, read by [`read_host`] (the running kernel's counter
/// read, inline): a copy of [`Pages`]' addresses, valid while those pages are mapped.
#[derive(Debug, Clone)]
pub struct HostPages(Box<[UserPage]>);

impl HostPages {
    /// The members' pages, in member order.
    #[inline(always)]
    pub fn members(&self) -> &[UserPage] {
        &self.0
    }
}

/// One member's mapped page, read on the running kernel ([`UserPage::read`]): for a sample
/// that reads each member straight into its own destination (issue 48: `cpc_set_sample`
/// writes each value into the caller's buffer, with no buffer of counts between).
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct UserPage(*mut perf_event_mmap_page);

// SAFETY: as for `Pages`.
unsafe impl Send for UserPage {}
// SAFETY: as above.
unsafe impl Sync for UserPage {}

impl UserPage {
    /// The member's count, time enabled and time running, read under the page's sequence
    /// lock with the counter read inline; `None` when the member is not on a counter now, or
    /// was not on one for its whole time enabled (multiplexed): then only `read()` is exact.
    /// Valid while the group's pages are mapped (its [`super::DirectRead`]'s life).
    /// Async-signal-safe.
    #[inline(always)]
    pub fn read(self) -> Option<(u64, Times)> {
        let (count, en, run) = read_one(&Inline, self.0)?;
        if en != run {
            return None;
        }
        Some((
            count,
            Times {
                enabled: en,
                running: run,
            },
        ))
    }

    /// [`UserPage::read`]'s count alone, for a member of a group after its leader, whose
    /// read tells the group's times: `None` when the member is not on a counter now. Its own
    /// times are not read nor compared (issue 48: four instructions of each member): perf
    /// puts a group on counters and takes it off as one, so a member's time enabled and
    /// running part when its leader's do (the leader's read's test), as long as the members
    /// are enabled and disabled with their leader, as this library's groups are.
    /// Async-signal-safe.
    #[inline(always)]
    pub fn read_count(self) -> Option<u64> {
        read_page::<false>(&Inline, self.0).map(|(count, _, _)| count)
    }
}

// SAFETY: as for `Pages`.
unsafe impl Send for HostPages {}
// SAFETY: as above.
unsafe impl Sync for HostPages {}

/// [`Pages::read`] on the running kernel, with the counter read inline rather than through
/// [`Kernel::rdpmc`]: what the sample path of a set bound to the calling thread uses.
#[inline(always)]
pub(super) fn read_host(pages: &HostPages, out: &mut [u64]) -> Option<Times> {
    // SAFETY: `UserPage` is a transparent wrapper of the page's address.
    let raw = unsafe {
        std::slice::from_raw_parts(
            pages.0.as_ptr().cast::<*mut perf_event_mmap_page>(),
            pages.0.len(),
        )
    };
    read_with(raw, out, &Inline)
}

/// A counter read by number (the mmap page's `index - 1`).
trait CounterRead {
    /// Counter `counter`'s value.
    fn read(&self, counter: u32) -> u64;
}

/// The running kernel's counter read, inline: a trait rather than a function passed as a
/// closure, whose `Fn::call` LLVM left out of line in a large sample (issue 48: a call in
/// every member's read, and the read loop's state spilled around it).
struct Inline;

impl CounterRead for Inline {
    #[inline(always)]
    fn read(&self, counter: u32) -> u64 {
        super::kernel::rdpmc(counter)
    }
}

/// The counter read of a [`Kernel`] (the tests' models).
struct Through(&'static dyn Kernel);

impl CounterRead for Through {
    fn read(&self, counter: u32) -> u64 {
        self.0.rdpmc(counter)
    }
}

/// Read every member of `pages` with the counter read `rdpmc`.
#[inline(always)]
fn read_with(
    pages: &[*mut perf_event_mmap_page],
    out: &mut [u64],
    rdpmc: &impl CounterRead,
) -> Option<Times> {
    let mut times = Times::default();
    for (i, (&p, o)) in pages.iter().zip(out.iter_mut()).enumerate() {
        let (count, en, run) = read_one(rdpmc, p)?;
        if en != run {
            return None;
        }
        *o = count;
        if i == 0 {
            times = Times {
                enabled: en,
                running: run,
            };
        }
    }
    Some(times)
}

#[inline(always)]
fn read_one(rdpmc: &impl CounterRead, p: *mut perf_event_mmap_page) -> Option<(u64, u64, u64)> {
    read_page::<true>(rdpmc, p)
}

/// [`read_one`], the times read only with `TIMES` (else both 0).
#[inline(always)]
fn read_page<const TIMES: bool>(
    rdpmc: &impl CounterRead,
    p: *mut perf_event_mmap_page,
) -> Option<(u64, u64, u64)> {
    loop {
        // SAFETY: `p` is a live mapping; fields are read volatile as the kernel updates them.
        unsafe {
            let seq = ptr::read_volatile(&(*p).lock);
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            let (en, run) = if TIMES {
                (
                    ptr::read_volatile(&(*p).time_enabled),
                    ptr::read_volatile(&(*p).time_running),
                )
            } else {
                (0, 0)
            };
            let idx = ptr::read_volatile(&(*p).index);
            let offset = ptr::read_volatile(&(*p).offset);
            if idx == 0 {
                return None;
            }
            let width = ptr::read_volatile(&(*p).pmc_width) as u32;
            // Sign-extended from `width` bits: the shifts wrap (modulo 64), so a width of 0
            // or 64 (the kernel gives at most 64) shifts by 0 and leaves the value as read,
            // without a test (issue 48: three instructions of each member's read).
            let shift = 64u32.wrapping_sub(width);
            let pmc = (rdpmc.read(idx - 1) as i64)
                .wrapping_shl(shift)
                .wrapping_shr(shift);
            let count = (offset as u64).wrapping_add(pmc as u64);
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            if ptr::read_volatile(&(*p).lock) == seq {
                return Some((count, en, run));
            }
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        for (&p, _) in self.pages.iter().zip(&self.owned).filter(|(_, o)| **o) {
            // SAFETY: unmapping our own mapping, not used after.
            let _ = unsafe { self.kernel.munmap(p.cast(), PAGE) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::perf::host::user_task_clock;
    use crate::backend::perf::kernel::{Kernel, LINUX};
    use crate::backend::perf::open_attr;

    /// A counter read that gives one value, whatever the counter.
    struct Fixed(u64);

    impl CounterRead for Fixed {
        fn read(&self, _: u32) -> u64 {
            self.0
        }
    }

    // Issue 48: the counter's value is sign-extended from the page's `pmc_width` with two
    // shifts by (64 - width) mod 64, without a test of the width: a width of 64 (or 0, a page
    // that gives none) leaves the value as read, as the test of the width did.
    #[test]
    fn the_counter_is_sign_extended_from_its_width() {
        // SAFETY: an all-zero mmap page is a valid value of the plain C struct.
        let mut page: perf_event_mmap_page = unsafe { std::mem::zeroed() };
        page.index = 3;
        page.offset = 1000;
        page.time_enabled = 5;
        page.time_running = 5;
        let p: *mut perf_event_mmap_page = &mut page;
        let cases = [
            (32, 0xffff_fff0, 1000 - 16),
            (32, 0x7fff_fff0, 1000 + 0x7fff_fff0),
            (32, 0x1_0000_0005, 1005),
            (48, 0xffff_ffff_fffe, 998),
            (47, 0x7fff_ffff_ffff, 999),
            (64, u64::MAX, 999),
            (64, 7, 1007),
            (0, 0xffff_fff0, 1000 + 0xffff_fff0),
        ];
        for (width, raw, want) in cases {
            // SAFETY: `p` is the page above, alive and not otherwise borrowed.
            unsafe { (*p).pmc_width = width };
            let (count, en, run) = read_one(&Fixed(raw), p).expect("on a counter");
            assert_eq!(count, want, "width {width}, counter {raw:#x}");
            assert_eq!((en, run), (5, 5));
        }
        // SAFETY: as above.
        unsafe { (*p).index = 0 };
        assert_eq!(read_one(&Fixed(1), p), None, "not on a counter");
    }

    /// `n` disabled user-mode task-clock counters of the calling thread.
    fn software_counters(n: usize) -> std::result::Result<Vec<OwnedFd>, i32> {
        (0..n)
            .map(|_| open_attr(&LINUX, &mut user_task_clock(), 0, -1, -1))
            .collect()
    }

    #[test]
    fn software_counters_map_but_do_not_offer_rdpmc() {
        let fds = software_counters(3).expect("software counters open");
        let want = if USER_READ {
            Declined::NoUserRdpmc
        } else {
            Declined::NoUserReadInstruction
        };
        assert_eq!(Pages::map(&LINUX, &fds, 3, |_| None).err(), Some(want));
    }

    /// Past the per-user `perf_event_mlock_kb` allowance, with `RLIMIT_MEMLOCK` 0, as nobody:
    /// the mapping is refused with `EPERM` and reported as such (the group is then read with
    /// `read()`). Runs in a forked child that drops to nobody (root only, else SKIPPED).
    #[test]
    fn past_the_mlock_limits_mapping_is_refused_with_eperm() {
        if !USER_READ {
            println!("SKIPPED: no user-mode counter read on this architecture: nothing is mapped");
            return;
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIPPED: not root: cannot drop to nobody to meet the mlock limits");
            return;
        }
        let kb: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(516);
        // SAFETY: plain libc call.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        // The allowance is perf_event_mlock_kb per online CPU, in pages; one page a counter.
        let n = kb / 4 * cpus + 8;
        // SAFETY: fork in a test process; the child makes only system calls and allocations
        // (glibc's malloc is fork-safe) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = child(n);
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "child died: status {status:#x}");
        match libc::WEXITSTATUS(status) {
            0 => {}
            2 => println!("SKIPPED: cannot open {n} descriptors as nobody"),
            3 => println!("SKIPPED: perf_event_paranoid is -1: no mlock limit applies"),
            4 => panic!("{n} counter pages mapped as nobody with RLIMIT_MEMLOCK 0"),
            c => panic!("mapping refused, but not with EPERM (child exit {c}: errno - 10)"),
        }
    }

    /// The child of the test above: 0 when the mapping is refused with EPERM.
    fn child(n: usize) -> i32 {
        let nofile = libc::rlimit {
            rlim_cur: n as u64 + 64,
            rlim_max: n as u64 + 64,
        };
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain system calls on our own process.
        unsafe {
            // Root may raise it; if not, opening the counters below says so (2).
            libc::setrlimit(libc::RLIMIT_NOFILE, &nofile);
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &none) != 0
                || libc::setgroups(0, ptr::null()) != 0
                || libc::setresgid(65534, 65534, 65534) != 0
                || libc::setresuid(65534, 65534, 65534) != 0
            {
                return 5;
            }
        }
        if LINUX.perf_event_paranoid() < 0 {
            return 3;
        }
        let Ok(fds) = software_counters(n) else {
            return 2;
        };
        match Pages::map(&LINUX, &fds, n, |_| None) {
            Err(Declined::MapRefused { errno, mapped }) if errno == libc::EPERM && mapped < n => 0,
            Err(Declined::MapRefused { errno, .. }) => 10 + errno,
            _ => 4,
        }
    }
}

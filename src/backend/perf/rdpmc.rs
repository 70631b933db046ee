//! The self-monitoring read: `rdpmc` through the perf mmap page, no system call.
//!
//! Used only for a set bound to the calling thread on a host with a hardware PMU, when the
//! kernel sets `cap_user_rdpmc` on every member's page (x86-64: the `rdpmc` sysfs knob is 1 or
//! 2). Each member has its own page and sequence lock, as the uapi header describes: read
//! `lock`, then `index`, `offset` and the counter, and retry when `lock` moved. Whenever the
//! fast path cannot give an exact answer (a member not on a counter right now, the group
//! multiplexed), [`Pages::read`] returns `None` and the caller falls back to `read()`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;

use perf_event_open_sys::bindings::perf_event_mmap_page;

use crate::backend::Times;

/// The mapped pages of one group's members.
pub struct Pages {
    pages: Vec<*mut perf_event_mmap_page>,
}

// SAFETY: the pages are read-only shared mappings; reading them from any thread is fine (the
// values are only meaningful on the owning thread, which is the only one that uses them).
unsafe impl Send for Pages {}
// SAFETY: as above.
unsafe impl Sync for Pages {}

const PAGE: usize = 4096;

impl Pages {
    /// Map one page per member; `None` if any mapping fails or the kernel does not offer
    /// user-space reads.
    pub fn map(fds: &[OwnedFd], n: usize) -> Option<Pages> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let mut pages = Vec::with_capacity(n);
        let mut ok = true;
        for fd in fds.iter().take(n) {
            // SAFETY: a read-only shared mapping of a perf fd's first page.
            let p = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    PAGE,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                ok = false;
                break;
            }
            let p = p as *mut perf_event_mmap_page;
            pages.push(p);
            // SAFETY: a valid mapping of the kernel's page.
            let caps = unsafe { ptr::read_volatile(&(*p).__bindgen_anon_1.capabilities) };
            // cap_user_rdpmc is bit 2 of the capabilities word.
            if caps & (1 << 2) == 0 {
                ok = false;
                break;
            }
        }
        let pages = Pages { pages };
        if ok {
            Some(pages)
        } else {
            None
        }
    }

    /// Read every member; `None` when the fast path cannot answer exactly.
    pub fn read(&self, out: &mut [u64]) -> Option<Times> {
        let mut times = Times::default();
        for (i, (&p, o)) in self.pages.iter().zip(out.iter_mut()).enumerate() {
            let (count, en, run) = read_one(p)?;
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
}

#[cfg(target_arch = "x86_64")]
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

fn read_one(p: *mut perf_event_mmap_page) -> Option<(u64, u64, u64)> {
    loop {
        // SAFETY: `p` is a live mapping; fields are read volatile as the kernel updates them.
        unsafe {
            let seq = ptr::read_volatile(&(*p).lock);
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            let en = ptr::read_volatile(&(*p).time_enabled);
            let run = ptr::read_volatile(&(*p).time_running);
            let idx = ptr::read_volatile(&(*p).index);
            let offset = ptr::read_volatile(&(*p).offset);
            if idx == 0 {
                return None;
            }
            let width = ptr::read_volatile(&(*p).pmc_width) as u32;
            let mut pmc = rdpmc(idx - 1) as i64;
            if width > 0 && width < 64 {
                let shift = 64 - width;
                pmc = (pmc << shift) >> shift;
            }
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
        for &p in &self.pages {
            // SAFETY: unmapping our own mapping.
            unsafe { libc::munmap(p.cast(), PAGE) };
        }
    }
}

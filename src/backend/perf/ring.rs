//! The overflow record: the group's values as the kernel saw them at the overflow instant.
//!
//! A notifying request is opened with `sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_READ` and
//! the group read format, and gets a small ring buffer (one metadata page and one data page,
//! `mmap`ed read-write so that user space can advance `data_tail`). In its overflow path the
//! kernel writes a `PERF_RECORD_SAMPLE` holding the `CLOCK_MONOTONIC` time and the value of
//! every member of the group *at that instant*, before it sends the overflow signal.
//!
//! The signal arrives later: after the kernel has returned to user space, after the handler's
//! frame was pushed (a fresh stack page there is a page fault, counted by `page-faults` and
//! `minor-faults`), and, for hardware events, after some skid. Whatever the group counted in
//! between is in a `read()` taken by the handler, but not in the record. So the engine freezes
//! the set at the record's values ([`Ring::first_sample`]) and restarts from the counts read
//! after it stopped the group: the events between the overflow and the stop are counted
//! nowhere, as on a PMU that freezes its counters in hardware.
//!
//! Everything here is async-signal-safe: plain loads and stores to a mapping made at bind.

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::{self as b, perf_event_mmap_page};

use super::kernel::Kernel;

/// The ring's `data_head` or `data_tail` word at `p`, as an atomic. The kernel writes the
/// head and reads the tail, and besides the thread that owns the group the overflow watcher
/// reads both (`pending`) while the owner consumes records: atomic accesses with the ordering
/// the kernel documents (acquire after reading the head, release when writing the tail), not
/// plain volatile ones, which ThreadSanitizer rightly reports as a data race.
///
/// # Safety
/// `p` is a field of a live, mapped metadata page (8-byte aligned, as the kernel lays it out).
#[inline(always)]
unsafe fn shared<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: as the caller promises; the page outlives the ring that maps it.
    unsafe { AtomicU64::from_ptr(p) }
}

const PAGE: usize = 4096;
/// One metadata page, one data page: a record is at most 8 + 8 + 24 + 16 x 64 bytes, and the
/// handler consumes every record of each signal.
const DATA_PAGES: usize = 1;
const MAP_LEN: usize = PAGE * (1 + DATA_PAGES);

/// The `sample_type` of a notifying request.
pub const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_READ) as u64;

/// What one overflow record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// `CLOCK_MONOTONIC` nanoseconds of the overflow (the event is opened with
    /// `use_clockid`).
    pub time_ns: u64,
    /// Members in the record.
    pub nr: usize,
    /// The group's time enabled and running at the overflow.
    pub times: crate::backend::Times,
}

/// The ring buffer of one notifying event.
pub struct Ring {
    kernel: &'static dyn Kernel,
    base: *mut u8,
    /// The data area ([`Ring::data_area`]), read once at the map: the kernel sets it when it
    /// maps the buffer and never changes it (reading and checking it again was a tenth of each
    /// overflow record's read, issue 48).
    area: (usize, usize),
}

// SAFETY: the mapping is owned by the ring and freed once, on drop; the handler that reads it
// runs on the binding's thread, and writers of `data_tail` are serialised by the engine's
// sequence counter (every access is inside its write section).
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// Map the ring of `fd`, or `None` when the kernel refuses (the per-user
    /// `perf_event_mlock_kb` allowance and `RLIMIT_MEMLOCK` are spent, or the event is
    /// inherited): the engine then freezes at a `read()` after the signal, which is exact
    /// unless something counts between the overflow and the handler.
    pub fn map(kernel: &'static dyn Kernel, fd: &OwnedFd) -> Option<Ring> {
        // A shared read-write mapping of a perf fd, as perf_event_open(2) describes.
        let p = kernel
            .mmap(
                fd.as_raw_fd(),
                MAP_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
            )
            .ok()?;
        let mut ring = Ring {
            kernel,
            base: p.cast(),
            area: (PAGE, PAGE * DATA_PAGES),
        };
        ring.prefault();
        ring.area = ring.data_area();
        Some(ring)
    }

    /// Touch every page of the mapping now: the kernel maps a perf buffer's pages into the
    /// process on first access, and a first access from the overflow handler would be a
    /// user-mode page fault after the overflow, counted by `page-faults` before the handler
    /// stops the group (and so dropped from the set while an independent counter sees it).
    fn prefault(&self) {
        for page in 0..MAP_LEN / PAGE {
            // SAFETY: every page is inside the mapping.
            unsafe { ptr::read_volatile(self.base.add(page * PAGE)) };
        }
    }

    /// The metadata page (the page `rdpmc` reads too).
    pub fn page(&self) -> *mut perf_event_mmap_page {
        self.base.cast()
    }

    fn data_area(&self) -> (usize, usize) {
        let pg = self.page();
        // SAFETY: fields of the live metadata page. Kernels before 4.1 leave them 0.
        let (off, size) = unsafe {
            (
                ptr::read_volatile(&(*pg).data_offset) as usize,
                ptr::read_volatile(&(*pg).data_size) as usize,
            )
        };
        // An area that is not within the mapping, or not in whole 8-byte words, is not one
        // the kernel made: use the layout it makes (`word` relies on both).
        if size == 0 || off.saturating_add(size) > MAP_LEN || off % 8 != 0 || size % 8 != 0 {
            (PAGE, PAGE * DATA_PAGES)
        } else {
            (off, size)
        }
    }

    /// The 8-byte word at ring position `pos` (a multiple of 8) of the data area `area`
    /// (`data_area()`, kept in `self.area`), which wraps. Records and their fields are 8-byte aligned and the area
    /// is in whole 8-byte words inside the mapping (`data_area` sees to it), so a word never
    /// straddles the wrap. The offset is a mask
    /// when the area is a power of two in size, as the kernel makes it: a division per read
    /// (this was a byte copy with one per byte) cost the overflow handler about 200 ns.
    #[inline]
    fn word(&self, (off, size): (usize, usize), pos: u64) -> u64 {
        let at = if size.is_power_of_two() {
            pos as usize & (size - 1)
        } else {
            pos as usize % size
        };
        // SAFETY: `off + at + 8 <= off + size <= MAP_LEN`, inside the mapping (`at` is a
        // multiple of 8 below `size`, a multiple of 8); `off`, a multiple of 8 on the
        // page-aligned mapping, makes the read aligned.
        unsafe { ptr::read_volatile(self.base.add(off + at).cast::<u64>()) }
    }

    /// Where the oldest record not yet consumed starts (`data_tail`): it moves when records are
    /// consumed or discarded, so a record still waiting at the same mark has not been read.
    pub fn mark(&self) -> u64 {
        let pg = self.page();
        // SAFETY: a field of the live metadata page.
        unsafe { shared(&raw mut (*pg).data_tail) }.load(Ordering::Acquire)
    }

    /// Whether a record is waiting to be read.
    pub fn pending(&self) -> bool {
        let pg = self.page();
        // SAFETY: fields of the live metadata page.
        unsafe {
            shared(&raw mut (*pg).data_head).load(Ordering::Acquire)
                != shared(&raw mut (*pg).data_tail).load(Ordering::Acquire)
        }
    }

    /// Drop every record written so far (at a restart: the group is stopped, so what is in
    /// the ring is from an overflow the engine already handled or discarded).
    pub fn discard(&self) {
        let pg = self.page();
        // SAFETY: fields of the live metadata page; `data_tail` is ours to write.
        unsafe {
            let head = shared(&raw mut (*pg).data_head).load(Ordering::Acquire);
            shared(&raw mut (*pg).data_tail).store(head, Ordering::Release);
        }
    }

    /// The values of the first overflow record not yet consumed, in group order, into
    /// `raw[..n]`, and consume every record. `None` when there is none (no record was written:
    /// the ring was full, or the signal was for an overflow already handled).
    pub fn first_sample(&self, raw: &mut [u64], n: usize) -> Option<Sample> {
        let pg = self.page();
        let area = self.area;
        // SAFETY: fields of the live metadata page.
        let head = unsafe { shared(&raw mut (*pg).data_head) }.load(Ordering::Acquire);
        // SAFETY: as above.
        let mut tail = unsafe { shared(&raw mut (*pg).data_tail) }.load(Ordering::Acquire);
        let mut found = None;
        // A record: header {u32 type, u16 misc, u16 size}, then for SAMPLE with SAMPLE_TYPE
        // and the group read format: time, nr, time_enabled, time_running, {value, id} x nr.
        // The kernel keeps every record's size a multiple of 8; anything else is not a record.
        while head.wrapping_sub(tail) >= 8
            && (head.wrapping_sub(tail) as usize) <= area.1
            && tail % 8 == 0
        {
            let hdr = self.word(area, tail).to_ne_bytes();
            let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if len < 8 || len % 8 != 0 || len > head.wrapping_sub(tail) {
                break;
            }
            // The record's words are read where they are: no buffer to zero.
            let words = ((len - 8) / 8) as usize;
            let at = |k: usize| self.word(area, tail.wrapping_add(8 * (k as u64 + 1)));
            if found.is_none() && kind == b::PERF_RECORD_SAMPLE && words >= 4 {
                let nr = at(1) as usize;
                if nr >= n && words >= 4 + 2 * n {
                    for (i, r) in raw.iter_mut().enumerate().take(n) {
                        *r = at(4 + 2 * i);
                    }
                    found = Some(Sample {
                        time_ns: at(0),
                        nr,
                        times: crate::backend::Times {
                            enabled: at(2),
                            running: at(3),
                        },
                    });
                }
            }
            tail = tail.wrapping_add(len);
        }
        // SAFETY: `data_tail` is ours to write; everything up to `head` has been read.
        unsafe { shared(&raw mut (*pg).data_tail) }.store(head, Ordering::Release);
        found
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping, not used after.
        let _ = unsafe { self.kernel.munmap(self.base.cast(), MAP_LEN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over an anonymous mapping whose metadata page says `off` and `size`.
    fn ring_saying(off: u64, size: u64) -> Ring {
        // SAFETY: a fresh private anonymous mapping of MAP_LEN bytes, unmapped by the ring.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                MAP_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let ring = Ring {
            kernel: &super::super::kernel::LINUX,
            base: p.cast(),
            area: (PAGE, PAGE * DATA_PAGES),
        };
        // SAFETY: the metadata page is the mapping's first page.
        unsafe {
            (*ring.page()).data_offset = off;
            (*ring.page()).data_size = size;
        }
        ring
    }

    #[test]
    fn the_data_area_is_used_only_inside_the_mapping_in_whole_words() {
        let fallback = (PAGE, PAGE * DATA_PAGES);
        // What the kernel makes, and kernels before 4.1 (zeros).
        assert_eq!(
            ring_saying(PAGE as u64, PAGE as u64).data_area(),
            (PAGE, PAGE)
        );
        assert_eq!(ring_saying(0, 0).data_area(), fallback);
        // Past the mapping, overflowing, or not in whole 8-byte words: the kernel's layout.
        assert_eq!(
            ring_saying(PAGE as u64, 2 * PAGE as u64).data_area(),
            fallback
        );
        assert_eq!(ring_saying(u64::MAX - 7, 16).data_area(), fallback);
        assert_eq!(ring_saying(PAGE as u64 + 4, 64).data_area(), fallback);
        assert_eq!(ring_saying(PAGE as u64, 60).data_area(), fallback);
    }
}

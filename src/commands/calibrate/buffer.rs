//! The memory the chases run over: page-aligned anonymous buffers, on transparent huge pages
//! when the kernel gives them (checked in `/proc/self/smaps`).

use super::caches::{fmt_bytes, MIB};

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn huge_page_size() -> usize {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|s| s.is_power_of_two())
        .unwrap_or(2 * MIB)
}

/// An anonymous private mapping, unmapped on drop.
pub(super) struct Buffer {
    pub(super) map: *mut u8,
    map_len: usize,
    /// The usable start, aligned to a huge page when huge pages were asked for.
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

impl Buffer {
    /// `len` bytes, touched (so the pages exist), with transparent huge pages asked for
    /// (`huge`) or refused (`MADV_NOHUGEPAGE`).
    pub(super) fn new(len: usize, huge: bool) -> std::result::Result<Buffer, String> {
        let align = if huge { huge_page_size() } else { page_size() };
        let len = len.div_ceil(align) * align;
        let map_len = len + if huge { align } else { 0 };
        // SAFETY: a fresh private anonymous mapping.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(format!(
                "could not map {}: {}",
                fmt_bytes(len),
                crate::base::error::io_text(&std::io::Error::last_os_error())
            ));
        }
        let map = map.cast::<u8>();
        let skew = (align - map as usize % align) % align;
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advice on our own mapping; failure (no THP in the kernel) is harmless.
        unsafe { libc::madvise(map.cast(), map_len, advice) };
        let b = Buffer {
            map,
            map_len,
            // SAFETY: skew < align, and map_len = len + align when skew can be non-zero.
            ptr: unsafe { map.add(skew) },
            len,
        };
        let page = page_size();
        for off in (0..len).step_by(page) {
            // SAFETY: in bounds of the mapping.
            unsafe { b.ptr.add(off).write_volatile(0) };
        }
        Ok(b)
    }

    /// The share of the buffer backed by transparent huge pages, from `/proc/self/smaps`
    /// (0 when unknown).
    pub(super) fn huge_fraction(&self) -> f64 {
        std::fs::read_to_string("/proc/self/smaps")
            .ok()
            .and_then(|s| anon_huge_bytes(&s, self.ptr as usize))
            .map_or(0.0, |b| (b as f64 / self.len as f64).min(1.0))
    }

    /// Link the nodes into a chase: node `i`, at byte offset `offset(i)`, holds the address of
    /// node `next[i]`. Returns the address of node 0.
    pub(super) fn link(&self, next: &[u32], offset: impl Fn(usize) -> usize) -> *const usize {
        for (i, &n) in next.iter().enumerate() {
            let (from, to) = (offset(i), offset(n as usize));
            assert!(from + 8 <= self.len && to + 8 <= self.len);
            // SAFETY: both offsets are in bounds (checked) and 8-byte aligned (line multiples
            // plus line multiples).
            unsafe {
                let target = self.ptr.add(to) as usize;
                self.ptr.add(from).cast::<usize>().write(target);
            }
        }
        assert!(offset(0) + 8 <= self.len);
        // SAFETY: in bounds (checked).
        unsafe { self.ptr.add(offset(0)).cast_const().cast() }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// The `AnonHugePages` of the mapping containing `addr` in a `/proc/<pid>/smaps` text, bytes.
fn anon_huge_bytes(smaps: &str, addr: usize) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split_whitespace().next().and_then(|w| {
            let (a, b) = w.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        });
        if let Some((lo, hi)) = range {
            inside = lo <= addr && addr < hi;
        } else if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                let kb = rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()?;
                return Some(kb * 1024);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_gives_the_huge_pages_of_the_mapping() {
        let smaps = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
AnonHugePages:         0 kB
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      2048 kB
VmFlags: rd wr mr mw me ac sd hg
";
        assert_eq!(anon_huge_bytes(smaps, 0x7f00_0020_0000), Some(2 << 20));
        assert_eq!(anon_huge_bytes(smaps, 0x55d0_c0a0_0010), Some(0));
        assert_eq!(anon_huge_bytes(smaps, 0x1000), None);
    }
}

//! The cache geometry of this machine (from sysfs, with fallbacks) and the buffer sizes the
//! latency chases use, chosen from it.

use std::path::{Path, PathBuf};

pub(super) const SYSFS_CACHE: &str = "/sys/devices/system/cpu/cpu0/cache";
const KIB: usize = 1024;
pub(super) const MIB: usize = 1024 * 1024;
const DEFAULT_L1D: u64 = 32 * 1024;
const DEFAULT_L2: u64 = 256 * 1024;
const DEFAULT_LLC: u64 = 8 * 1024 * 1024;
const DEFAULT_LINE: u32 = 64;

/// The data cache geometry of CPU 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Caches {
    pub(super) l1d: u64,
    pub(super) l2: u64,
    /// The highest level above 2, if any.
    pub(super) llc: Option<u64>,
    pub(super) line: u32,
}

/// A sysfs cache size: bytes, or a number with a `K`, `M` or `G` suffix ("32K", "8M").
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (s, 1),
        Some((i, _)) => {
            let m = match s[i..].to_ascii_uppercase().as_str() {
                "K" | "KB" | "KIB" => 1 << 10,
                "M" | "MB" | "MIB" => 1 << 20,
                "G" | "GB" | "GIB" => 1 << 30,
                _ => return None,
            };
            (&s[..i], m)
        }
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// The data and unified caches described under `dir` (the sysfs `cache` directory), with
/// fallbacks (and notes) for what is missing.
pub(super) fn read_caches(dir: &Path, notes: &mut Vec<String>) -> Caches {
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    // (level, size, line) of each data or unified cache.
    let mut found: Vec<(u32, u64, Option<u32>)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("index") {
                continue;
            }
            let p = e.path();
            let kind = read(p.join("type")).unwrap_or_default();
            if kind.trim().eq_ignore_ascii_case("instruction") {
                continue;
            }
            let level = read(p.join("level")).and_then(|s| s.trim().parse::<u32>().ok());
            let size = read(p.join("size")).and_then(|s| parse_size(&s));
            let line = read(p.join("coherency_line_size")).and_then(|s| s.trim().parse().ok());
            if let (Some(level), Some(size)) = (level, size.filter(|&s| s > 0)) {
                found.push((level, size, line));
            }
        }
    }
    if found.is_empty() {
        notes.push(format!(
            "no cache sizes under {}: assuming a {} L1d, a {} L2, a {} LLC and {DEFAULT_LINE}-byte \
             lines",
            dir.display(),
            fmt_bytes(DEFAULT_L1D as usize),
            fmt_bytes(DEFAULT_L2 as usize),
            fmt_bytes(DEFAULT_LLC as usize)
        ));
        return Caches {
            l1d: DEFAULT_L1D,
            l2: DEFAULT_L2,
            llc: Some(DEFAULT_LLC),
            line: DEFAULT_LINE,
        };
    }
    let size_of = |level: u32| found.iter().filter(|c| c.0 == level).map(|c| c.1).max();
    let l1d = size_of(1).unwrap_or_else(|| {
        notes.push(format!(
            "no level-1 data cache in sysfs: assuming {}",
            fmt_bytes(DEFAULT_L1D as usize)
        ));
        DEFAULT_L1D
    });
    let l2 = size_of(2).filter(|&s| s > l1d).unwrap_or_else(|| {
        let s = DEFAULT_L2.max(8 * l1d);
        notes.push(format!(
            "no level-2 cache larger than the L1d in sysfs: assuming {}",
            fmt_bytes(s as usize)
        ));
        s
    });
    let top = found.iter().map(|c| c.0).max().unwrap_or(0);
    let llc = if top > 2 {
        size_of(top).filter(|&s| s > l2).or_else(|| {
            notes.push(format!(
                "the level-{top} cache in sysfs is not larger than the L2: treated as absent"
            ));
            None
        })
    } else {
        None
    };
    let line = found
        .iter()
        .filter_map(|c| c.2)
        .min()
        .filter(|l| l.is_power_of_two() && (16..=1024).contains(l))
        .unwrap_or_else(|| {
            notes.push(format!(
                "no plausible coherency_line_size in sysfs: assuming {DEFAULT_LINE} bytes"
            ));
            DEFAULT_LINE
        });
    Caches { l1d, l2, llc, line }
}

/// Buffer sizes of the three latency chases, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) l2_buf: usize,
    pub(super) llc_buf: Option<usize>,
    pub(super) mem_buf: usize,
}

/// A size well inside the cache of `outer` bytes and above the one of `inner` bytes:
/// `outer / share`, at least twice the inner one, at most three quarters of the outer one (the
/// middle when those bounds cross), a multiple of 4 KiB.
pub(super) fn between(inner: u64, outer: u64, share: u64) -> usize {
    let (lo, hi) = (2 * inner, outer / 4 * 3);
    let s = if lo <= hi {
        (outer / share).clamp(lo, hi)
    } else {
        (inner + outer) / 2
    };
    ((s as usize) / (4 * KIB)).max(1) * 4 * KIB
}

pub(super) fn choose_sizes(c: &Caches, quick: bool, mem_available: Option<u64>) -> Sizes {
    let top = c.llc.unwrap_or(c.l2) as usize;
    let want = if quick {
        (64 * MIB).max(4 * top)
    } else {
        (32 * top).clamp(128 * MIB, 512 * MIB)
    };
    let cap = mem_available
        .map_or(usize::MAX, |a| (a / 4) as usize)
        .min(1024 * MIB);
    let mem = want.min(cap).max(16 * MIB);
    Sizes {
        l2_buf: between(c.l1d, c.l2, 2),
        // A quarter: the LLC is shared with the other cores (and, in a VM, other guests).
        llc_buf: c.llc.map(|llc| between(c.l2, llc, 4)),
        mem_buf: mem / (2 * MIB) * (2 * MIB),
    }
}

pub(super) fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub(super) fn fmt_bytes(n: usize) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n % KIB == 0 {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("32K"), Some(32 * 1024));
        assert_eq!(parse_size("1024K\n"), Some(1024 * 1024));
        assert_eq!(parse_size("8M"), Some(8 * 1024 * 1024));
        assert_eq!(parse_size(" 2G "), Some(2 << 30));
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("48KiB"), Some(48 * 1024));
        for bad in ["", "K", "abc", "12Q", "1.5M", "-4K"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    fn fake_sysfs(tag: &str, caches: &[(&str, &str, &str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("perfcompat-calib-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (i, (level, kind, size, line)) in caches.iter().enumerate() {
            let d = dir.join(format!("index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in [("level", level), ("type", kind), ("size", size)] {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
            if !line.is_empty() {
                std::fs::write(d.join("coherency_line_size"), format!("{line}\n")).unwrap();
            }
        }
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn caches_come_from_sysfs_with_fallbacks() {
        let dir = fake_sysfs(
            "zen",
            &[
                ("1", "Data", "32K", "64"),
                ("1", "Instruction", "64K", "64"),
                ("2", "Unified", "512K", "64"),
                ("3", "Unified", "8192K", "64"),
            ],
        );
        let mut notes = Vec::new();
        let c = read_caches(&dir, &mut notes);
        assert_eq!(
            c,
            Caches {
                l1d: 32 << 10,
                l2: 512 << 10,
                llc: Some(8 << 20),
                line: 64
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        std::fs::remove_dir_all(&dir).unwrap();

        // Two levels only, 128-byte lines, one size unreadable.
        let dir = fake_sysfs(
            "two",
            &[
                ("1", "Data", "64K", "128"),
                ("2", "Unified", "4M", "128"),
                ("3", "Unified", "junk", ""),
            ],
        );
        let c = read_caches(&dir, &mut notes);
        assert_eq!((c.l2, c.llc, c.line), (4 << 20, None, 128));
        std::fs::remove_dir_all(&dir).unwrap();

        // Nothing at all: documented fallbacks, and a note.
        let c = read_caches(Path::new("/nonexistent/perfcompat/cache"), &mut notes);
        assert_eq!(
            c,
            Caches {
                l1d: DEFAULT_L1D,
                l2: DEFAULT_L2,
                llc: Some(DEFAULT_LLC),
                line: DEFAULT_LINE
            }
        );
        assert!(
            notes.last().unwrap().contains("no cache sizes"),
            "{notes:?}"
        );
    }

    #[test]
    fn buffer_sizes_sit_between_the_cache_levels() {
        let zen = Caches {
            l1d: 32 << 10,
            l2: 512 << 10,
            llc: Some(8 << 20),
            line: 64,
        };
        let s = choose_sizes(&zen, true, None);
        assert_eq!(
            s,
            Sizes {
                l2_buf: 256 << 10,
                llc_buf: Some(2 << 20),
                mem_buf: 64 << 20
            }
        );
        assert_eq!(choose_sizes(&zen, false, None).mem_buf, 256 << 20);
        // Little memory available: at most a quarter of it.
        assert_eq!(choose_sizes(&zen, false, Some(256 << 20)).mem_buf, 64 << 20);
        for c in [
            Caches {
                l1d: 48 << 10,
                l2: 2 << 20,
                llc: Some(105 << 20),
                line: 64,
            },
            Caches {
                l1d: 64 << 10,
                l2: 128 << 10,
                llc: Some(256 << 10),
                line: 64,
            },
            Caches {
                l1d: 32 << 10,
                l2: 1 << 20,
                llc: None,
                line: 64,
            },
        ] {
            for quick in [true, false] {
                let s = choose_sizes(&c, quick, None);
                let (l1, l2) = (c.l1d as usize, c.l2 as usize);
                assert!(l1 < s.l2_buf && s.l2_buf < l2, "{c:?} {s:?}");
                let top = match (c.llc, s.llc_buf) {
                    (Some(llc), Some(b)) => {
                        assert!(l2 < b && b < llc as usize, "{c:?} {s:?}");
                        llc as usize
                    }
                    (None, None) => l2,
                    _ => panic!("{c:?} {s:?}"),
                };
                assert!(s.mem_buf >= 4 * top, "{c:?} {s:?}");
            }
        }
    }
}

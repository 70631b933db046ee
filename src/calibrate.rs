//! Host cost calibration: the microbenchmarks behind `perfex --calibrate`.
//!
//! The host cost table ([`CostTable::for_host`]) is built from a few latencies of this
//! machine ([`HostFigures`]). [`calibrate`] measures them; [`calibrate_and_cache`] also writes
//! the resulting table to the host cache ([`costs::write_host_cache`]), which then becomes the
//! default host table of every later process ([`costs::default_table`]).
//!
//! # What is measured
//! - **Cache sizes and line size** come from
//!   `/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size,coherency_line_size}`
//!   (instruction caches are skipped). Without them we assume a 32 KiB L1d, a 256 KiB L2, an
//!   8 MiB LLC and 64-byte lines, and say so in a note. The line size is the cost table's
//!   line size and the stride of every pointer chase.
//! - **Clock**: a loop of 64 dependent one-cycle integer additions per iteration (x86-64 inline
//!   assembly; the loop counter runs beside the chain, so an iteration takes 64 cycles). Cycles
//!   over time, best (fastest) of several runs after a warm-up. Other architectures use the
//!   nominal clock ([`crate::backend::nominal_mhz`]) and say so in a note.
//! - **L2, LLC and memory latency**: pointer chasing, one node per cache line, the nodes linked
//!   in a random single cycle (so every load depends on the previous one and the prefetchers
//!   cannot guess the next line), at three buffer sizes chosen from the cache sizes: half the
//!   L2 (at least twice the L1d); a quarter of the LLC (at least twice the L2), because the LLC
//!   is shared with the other cores and, in a VM, other guests (on our 2-vCPU CI VM a chase
//!   over half its 8 MiB LLC already ran at near-memory latency); and far above the LLC
//!   (quick: at least 64 MiB and 4 times the LLC; full: 32 times the LLC, between 128 and
//!   512 MiB; never more than a quarter of the available memory). The LLC buffer also hits the
//!   L2 for part of its lines (at most half of them), so the LLC figure is a little low; it is
//!   only the maximum cost of an L1 miss in the host table. The figure is nanoseconds
//!   per dependent load, the minimum over repetitions (the run least disturbed by interrupts
//!   and other processes). The chase is x86-64 assembly, so it runs at the same speed in
//!   unoptimised builds; other architectures use a Rust loop (slightly slower in debug builds).
//! - **Huge pages for the latency buffers**: the latency buffers ask for transparent huge pages
//!   (`MADV_HUGEPAGE`, 2 MiB-aligned), so the chases measure the caches and memory, not TLB
//!   misses. When the kernel does not give them (checked in `/proc/self/smaps`), the chase
//!   visits the base pages in random order and the lines of each page in random order before
//!   leaving it: at most one TLB miss per page's worth of loads, at the price of some DRAM row
//!   hits (the memory figure may then be a little optimistic); a note says so.
//! - **TLB miss**: a chase over one line per base page (4 KiB on x86-64) across 8192 pages in
//!   random order (32 MiB of address space: twice the reach of the largest second-level data
//!   TLBs we know of, 4096 entries; `MADV_NOHUGEPAGE` keeps the pages small), minus a chase
//!   over the same number of lines packed densely in a huge-page buffer. The line used in each
//!   page varies with the page, so the touched lines spread over all cache sets and stay
//!   cache-resident in both chases (512 KiB of data for 64-byte lines). The difference, clamped
//!   at 0, is the extra cost of a load that misses every TLB level and walks the page tables,
//!   the walk mostly hitting the caches. (More pages measure walks that miss the caches too: on
//!   our CI VM, with nested paging, 16384 pages cost four times as much per miss as 8192.)
//! - **Branch mispredict**: a loop that draws a random number (xorshift64, in registers) and
//!   branches on one of its bits, against the same loop branching on a bit masked to zero
//!   (always the same way). Both directions of the branch execute one add and one taken jump,
//!   so the loops differ only in predictability. Written in assembly, so the branch is a real
//!   conditional jump (a compiler could turn it into a conditional move). Penalty = (time per
//!   iteration, random - predictable) / mispredict rate, the rate being the share of the rarer
//!   direction among the random draws (about 0.5). Other architectures use the fallback figure.
//!
//! # Sanity checks and fallbacks
//! - Every figure must be finite and inside a wide plausible range (clock 50-10000 MHz, L2
//!   0.3-60 ns, LLC 0.5-250 ns, memory 5-2000 ns, TLB miss 0.1-1000 ns, mispredict
//!   0.2-100 ns); otherwise, or when a measurement could not run (no memory, unsupported
//!   architecture), the figure of [`HostFigures::fallback`] is used and a note says which and
//!   why. A TLB difference clamped to 0 therefore falls back too: the chase saw no TLB misses.
//! - The latencies are made monotonic, `l2_ns <= llc_ns <= mem_ns`, by raising the larger
//!   level to the smaller one's figure, with a note (a VM or a noisy neighbour can invert
//!   them). Without a cache level above the L2 the LLC hit is the L2 hit (noted).
//! - A note warns when the load average shows that other work was running.
//!
//! Nothing here panics on a machine without sysfs cache information, huge pages or
//! `/proc/self/smaps`; [`calibrate`] returns an error only if it cannot run at all.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::costs::{self, CostTable, HostFigures};
use crate::error::Result;

/// What [`calibrate`] should do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CalibrateOptions {
    /// Few repetitions and a memory buffer of about 64 MiB: well under a second, for tests. The
    /// figures are noisier than a full calibration's (a few seconds).
    pub quick: bool,
}

/// The result of a calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// The figures for the host cost table, after the sanity checks.
    pub figures: HostFigures,
    /// Every raw measurement, in the order taken: a label with its unit, and the value.
    pub measurements: Vec<(String, f64)>,
    /// What was assumed, clamped or replaced by a fallback figure, and why.
    pub notes: Vec<String>,
    /// Whether this was a quick calibration.
    pub quick: bool,
    /// How long the calibration took.
    pub elapsed: Duration,
}

impl Calibration {
    /// A human-readable report: each measurement, the figures (with the latencies also in
    /// cycles at the calibrated clock) and the notes.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Host calibration ({}), {:.2} s",
            if self.quick { "quick" } else { "full" },
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(s, "Measurements:");
        for (label, v) in &self.measurements {
            let _ = writeln!(s, "  {:.<64} {:>12}", format!("{label} "), fmt_value(*v));
        }
        let f = &self.figures;
        let clks = |ns: f64| ns * f.clock_mhz / 1000.0;
        let _ = writeln!(s, "Figures (for the host cost table):");
        let _ = writeln!(s, "  {:.<28} {:>9.2} MHz", "clock ", f.clock_mhz);
        for (name, ns) in [
            ("L2 hit ", f.l2_ns),
            ("LLC hit ", f.llc_ns),
            ("memory access ", f.mem_ns),
            ("TLB miss (extra) ", f.tlb_miss_ns),
            ("branch mispredict ", f.branch_miss_ns),
        ] {
            let _ = writeln!(s, "  {name:.<28} {ns:>9.2} ns ({:.1} clks)", clks(ns));
        }
        let _ = writeln!(s, "  {:.<28} {:>9} bytes", "cache line ", f.line_bytes);
        if !self.notes.is_empty() {
            let _ = writeln!(s, "Notes:");
            for n in &self.notes {
                let _ = writeln!(s, "  - {n}");
            }
        }
        s
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

/// Measure this machine's [`HostFigures`] (see the module documentation for the methods).
///
/// Takes a few seconds (`quick`: well under one). Measurements that fail their sanity check
/// fall back to [`HostFigures::fallback`]'s figure with a note, so the figures are always
/// finite and positive.
pub fn calibrate(opts: &CalibrateOptions) -> Result<Calibration> {
    let start = Instant::now();
    let plan = Plan::new(opts.quick);
    let mut notes = Vec::new();
    let mut m: Vec<(String, f64)> = Vec::new();
    if let Some(n) = load_note() {
        notes.push(n);
    }

    let caches = read_caches(Path::new(SYSFS_CACHE), &mut notes);
    m.push(("L1d cache size (bytes)".into(), caches.l1d as f64));
    m.push(("L2 cache size (bytes)".into(), caches.l2 as f64));
    if let Some(llc) = caches.llc {
        m.push(("last-level cache size (bytes)".into(), llc as f64));
    }
    m.push(("cache line (bytes)".into(), f64::from(caches.line)));
    let sizes = choose_sizes(&caches, opts.quick, mem_available());
    let line = caches.line as usize;

    let clock_mhz = measure_clock(&plan);
    if let Ok(v) = clock_mhz {
        m.push(("clock: 64 dependent adds per iteration (MHz)".into(), v));
    }

    let branch_miss_ns = measure_branch(&plan).map(|b| {
        m.push((
            "branch loop, random direction (ns/iteration)".into(),
            b.random_ns,
        ));
        m.push((
            "branch loop, predictable direction (ns/iteration)".into(),
            b.predictable_ns,
        ));
        m.push(("branch mispredict rate, random loop".into(), b.rate));
        let penalty = (b.random_ns - b.predictable_ns) / b.rate;
        m.push(("branch mispredict penalty (ns)".into(), penalty));
        penalty
    });

    let mut small_pages = Vec::new();
    let mut latency = |bytes: usize, loads: usize, what: &str, m: &mut Vec<(String, f64)>| {
        let r = chase_latency(bytes, line, loads, plan.reps).map(|(ns, huge)| {
            if !huge {
                small_pages.push(format!("{what} ({})", fmt_bytes(bytes)));
            }
            ns
        });
        if let Ok(ns) = r {
            m.push((
                format!("{what} latency: chase over {} (ns/load)", fmt_bytes(bytes)),
                ns,
            ));
        }
        r
    };
    let l2_ns = latency(sizes.l2_buf, plan.cache_loads, "L2", &mut m);
    let llc_ns = sizes
        .llc_buf
        .map(|b| latency(b, plan.cache_loads, "LLC", &mut m));
    let mem_ns = latency(sizes.mem_buf, plan.mem_loads, "memory", &mut m);
    if !small_pages.is_empty() {
        notes.push(format!(
            "no transparent huge pages for the {} buffer(s): chased page by page (lines in random \
             order within each page), so TLB misses stay rare but the memory figure may be a \
             little optimistic (DRAM row hits)",
            small_pages.join(", ")
        ));
    }

    let tlb_miss_ns = measure_tlb(line, &plan).map(|t| {
        m.push((
            format!(
                "TLB: chase over one line per page, {} pages (ns/load)",
                t.pages
            ),
            t.sparse_ns,
        ));
        m.push((
            format!(
                "TLB: the same number of lines packed in {} (ns/load)",
                fmt_bytes(t.pages * line)
            ),
            t.dense_ns,
        ));
        let extra = (t.sparse_ns - t.dense_ns).max(0.0);
        m.push(("TLB miss extra, clamped at 0 (ns)".into(), extra));
        extra
    });

    let raw = Raw {
        clock_mhz,
        l2_ns,
        llc_ns,
        mem_ns,
        tlb_miss_ns,
        branch_miss_ns,
        line_bytes: caches.line,
    };
    let figures = assemble(&raw, &HostFigures::fallback(), &mut notes);
    let elapsed = start.elapsed();
    m.push(("calibration time (s)".into(), elapsed.as_secs_f64()));
    Ok(Calibration {
        figures,
        measurements: m,
        notes,
        quick: opts.quick,
        elapsed,
    })
}

/// [`calibrate`], then build the host table from the figures ([`CostTable::for_host`]) and
/// write it to the host cost cache ([`costs::write_host_cache`], at
/// [`costs::host_cache_path`]). Returns the calibration and the cache's path.
pub fn calibrate_and_cache(opts: &CalibrateOptions) -> Result<(Calibration, PathBuf)> {
    let cal = calibrate(opts)?;
    let mut table = CostTable::for_host(&cal.figures);
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    table.sources = vec![format!(
        "host table calibrated on {} on {}{}",
        crate::costfile::hostname(),
        utc_date(secs),
        if cal.quick { ", quick" } else { "" }
    )];
    let path = costs::write_host_cache(&table)?;
    Ok((cal, path))
}

// ---------------------------------------------------------------------------------------------
// Plan, sanity checks.

/// Repetition counts and loop lengths.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Repetitions of each latency and branch measurement (the minimum is kept).
    reps: usize,
    /// Repetitions of the clock loop.
    clock_reps: usize,
    /// Iterations of the clock loop (64 cycles each).
    clock_iters: u64,
    /// Loads per repetition of the L2 and LLC chases.
    cache_loads: usize,
    /// Loads per repetition of the memory chase.
    mem_loads: usize,
    /// Passes over the TLB chases per repetition.
    tlb_passes: usize,
    /// Iterations of the branch loops.
    branch_iters: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                reps: 3,
                clock_reps: 5,
                clock_iters: 100_000,
                cache_loads: 400_000,
                mem_loads: 100_000,
                tlb_passes: 2,
                branch_iters: 1_000_000,
            }
        } else {
            Plan {
                reps: 11,
                clock_reps: 25,
                clock_iters: 300_000,
                cache_loads: 2_000_000,
                mem_loads: 400_000,
                tlb_passes: 8,
                branch_iters: 5_000_000,
            }
        }
    }
}

/// A measurement, or why it could not be taken.
type Measured = std::result::Result<f64, String>;

/// What the microbenchmarks gave, before the sanity checks.
#[derive(Debug, Clone)]
struct Raw {
    clock_mhz: Measured,
    l2_ns: Measured,
    /// `None`: no cache level above the L2.
    llc_ns: Option<Measured>,
    mem_ns: Measured,
    tlb_miss_ns: Measured,
    branch_miss_ns: Measured,
    line_bytes: u32,
}

const CLOCK_MHZ: (f64, f64) = (50.0, 10_000.0);
const L2_NS: (f64, f64) = (0.3, 60.0);
const LLC_NS: (f64, f64) = (0.5, 250.0);
const MEM_NS: (f64, f64) = (5.0, 2000.0);
const TLB_NS: (f64, f64) = (0.1, 1000.0);
const BRANCH_NS: (f64, f64) = (0.2, 100.0);

/// `m` if it is finite and within `range`, else `fallback` with a note saying why.
fn accept(
    name: &str,
    m: &Measured,
    range: (f64, f64),
    fallback: f64,
    notes: &mut Vec<String>,
) -> f64 {
    let why = match m {
        Ok(v) if v.is_finite() && *v >= range.0 && *v <= range.1 => return *v,
        Ok(v) => format!(
            "measured {v:.3}, outside the plausible range {}-{}",
            range.0, range.1
        ),
        Err(e) => e.clone(),
    };
    notes.push(format!(
        "{name}: {why}; using the fallback figure {fallback}"
    ));
    fallback
}

/// The figures from the raw measurements: sanity checks, fallbacks, monotonic latencies.
fn assemble(raw: &Raw, fb: &HostFigures, notes: &mut Vec<String>) -> HostFigures {
    let fb_clock = if fb.clock_mhz.is_finite() && fb.clock_mhz > 0.0 {
        fb.clock_mhz
    } else {
        1000.0
    };
    let clock_mhz = accept("clock (MHz)", &raw.clock_mhz, CLOCK_MHZ, fb_clock, notes);
    let l2_ns = accept("L2 hit (ns)", &raw.l2_ns, L2_NS, fb.l2_ns, notes);
    let mut llc_ns = match &raw.llc_ns {
        Some(m) => accept("LLC hit (ns)", m, LLC_NS, fb.llc_ns, notes),
        None => {
            notes.push("no cache level above the L2: the LLC hit is the L2 hit".into());
            l2_ns
        }
    };
    let mut mem_ns = accept("memory access (ns)", &raw.mem_ns, MEM_NS, fb.mem_ns, notes);
    let tlb_miss_ns = accept(
        "TLB miss (ns)",
        &raw.tlb_miss_ns,
        TLB_NS,
        fb.tlb_miss_ns,
        notes,
    );
    let branch_miss_ns = accept(
        "branch mispredict (ns)",
        &raw.branch_miss_ns,
        BRANCH_NS,
        fb.branch_miss_ns,
        notes,
    );
    if llc_ns < l2_ns {
        notes.push(format!(
            "the LLC hit ({llc_ns:.2} ns) came out faster than the L2 hit: raised to {l2_ns:.2} ns"
        ));
        llc_ns = l2_ns;
    }
    if mem_ns < llc_ns {
        notes.push(format!(
            "the memory access ({mem_ns:.2} ns) came out faster than the LLC hit: raised to \
             {llc_ns:.2} ns"
        ));
        mem_ns = llc_ns;
    }
    HostFigures {
        clock_mhz,
        l2_ns,
        llc_ns,
        mem_ns,
        tlb_miss_ns,
        branch_miss_ns,
        line_bytes: raw.line_bytes,
    }
}

/// A note when the machine was busy (1-minute load average above half the CPUs).
fn load_note() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (load > 0.5 * cpus as f64).then(|| {
        format!(
            "the machine was busy (load average {load:.2} on {cpus} CPU(s)): the figures may be \
             pessimistic; calibrate again on an idle machine"
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Cache geometry.

const SYSFS_CACHE: &str = "/sys/devices/system/cpu/cpu0/cache";
const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const DEFAULT_L1D: u64 = 32 * 1024;
const DEFAULT_L2: u64 = 256 * 1024;
const DEFAULT_LLC: u64 = 8 * 1024 * 1024;
const DEFAULT_LINE: u32 = 64;

/// The data cache geometry of CPU 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Caches {
    l1d: u64,
    l2: u64,
    /// The highest level above 2, if any.
    llc: Option<u64>,
    line: u32,
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
fn read_caches(dir: &Path, notes: &mut Vec<String>) -> Caches {
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
struct Sizes {
    l2_buf: usize,
    llc_buf: Option<usize>,
    mem_buf: usize,
}

/// A size well inside the cache of `outer` bytes and above the one of `inner` bytes:
/// `outer / share`, at least twice the inner one, at most three quarters of the outer one (the
/// middle when those bounds cross), a multiple of 4 KiB.
fn between(inner: u64, outer: u64, share: u64) -> usize {
    let (lo, hi) = (2 * inner, outer / 4 * 3);
    let s = if lo <= hi {
        (outer / share).clamp(lo, hi)
    } else {
        (inner + outer) / 2
    };
    ((s as usize) / (4 * KIB)).max(1) * 4 * KIB
}

fn choose_sizes(c: &Caches, quick: bool, mem_available: Option<u64>) -> Sizes {
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

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn fmt_bytes(n: usize) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n % KIB == 0 {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

// ---------------------------------------------------------------------------------------------
// Memory.

fn page_size() -> usize {
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
struct Buffer {
    map: *mut u8,
    map_len: usize,
    /// The usable start, aligned to a huge page when huge pages were asked for.
    ptr: *mut u8,
    len: usize,
}

impl Buffer {
    /// `len` bytes, touched (so the pages exist), with transparent huge pages asked for
    /// (`huge`) or refused (`MADV_NOHUGEPAGE`).
    fn new(len: usize, huge: bool) -> std::result::Result<Buffer, String> {
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
                std::io::Error::last_os_error()
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
    fn huge_fraction(&self) -> f64 {
        std::fs::read_to_string("/proc/self/smaps")
            .ok()
            .and_then(|s| anon_huge_bytes(&s, self.ptr as usize))
            .map_or(0.0, |b| (b as f64 / self.len as f64).min(1.0))
    }

    /// Link the nodes into a chase: node `i`, at byte offset `offset(i)`, holds the address of
    /// node `next[i]`. Returns the address of node 0.
    fn link(&self, next: &[u32], offset: impl Fn(usize) -> usize) -> *const usize {
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

// ---------------------------------------------------------------------------------------------
// Random cycles.

/// A small, fast generator (splitmix64): enough to defeat prefetchers, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn shuffle(&mut self, v: &mut [u32]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// A random cyclic permutation of `0..n` as successors: following `next` from any node visits
/// every node once before coming back (Sattolo's algorithm).
fn random_cycle(n: usize, rng: &mut Rng) -> Vec<u32> {
    let mut next: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        next.swap(i, rng.below(i));
    }
    next
}

/// A random single cycle over `0..n` that visits the nodes group by group (groups of `group`
/// consecutive nodes, in random order), each group's nodes in random order.
fn grouped_cycle(n: usize, group: usize, rng: &mut Rng) -> Vec<u32> {
    let group = group.max(1);
    let mut groups: Vec<u32> = (0..n.div_ceil(group) as u32).collect();
    rng.shuffle(&mut groups);
    let mut order = Vec::with_capacity(n);
    for g in groups {
        let lo = g as usize * group;
        let start = order.len();
        order.extend(lo as u32..(lo + group).min(n) as u32);
        rng.shuffle(&mut order[start..]);
    }
    let mut next = vec![0u32; n];
    for k in 0..n {
        next[order[k] as usize] = order[(k + 1) % n];
    }
    next
}

// ---------------------------------------------------------------------------------------------
// The timed loops.

/// Loads [`chase`] really does for a request of `loads`.
fn rounded_loads(loads: usize) -> usize {
    loads.div_ceil(8).max(1) * 8
}

/// Follow [`rounded_loads`]`(loads)` links from `p`; returns where the chase stopped. In
/// assembly on x86-64, so it runs at full speed in unoptimised builds too.
///
/// # Safety
/// `p` and every address reachable from it must be a readable node holding the address of
/// another such node.
#[inline(never)]
unsafe fn chase(mut p: *const usize, loads: usize) -> *const usize {
    let n = loads.div_ceil(8).max(1);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; the loop only reads through the chain.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 8",
            "mov {p}, qword ptr [{p}]",
            ".endr",
            "dec {n}",
            "jnz 2b",
            p = inout(reg) p,
            n = inout(reg) n => _,
            options(nostack, readonly),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // Plain dereferences, unrolled: few instructions besides the loads even unoptimised.
        let mut n = n;
        while n > 0 {
            // SAFETY: the caller's contract.
            unsafe {
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
                p = *p as *const usize;
            }
            n -= 1;
        }
    }
    p
}

/// The fastest of `reps` timed runs of `f`, in ns per `ops`.
fn best_ns(reps: usize, ops: f64, mut f: impl FnMut()) -> f64 {
    (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e9 / ops
        })
        .fold(f64::INFINITY, f64::min)
}

/// Best time of a chase starting at `start` (after one warm-up pass over `nodes`), ns/load.
///
/// # Safety
/// As for [`chase`].
unsafe fn time_chase(start: *const usize, nodes: usize, loads: usize, reps: usize) -> f64 {
    // SAFETY: the caller's contract, for every call below.
    let mut p = unsafe { chase(start, nodes.min(loads)) };
    let n = rounded_loads(loads);
    let ns = best_ns(reps, n as f64, || p = unsafe { chase(p, n) });
    std::hint::black_box(p);
    ns
}

/// ns per dependent load over a `bytes` buffer (one node per line), and whether it was backed
/// by huge pages.
fn chase_latency(
    bytes: usize,
    line: usize,
    loads: usize,
    reps: usize,
) -> std::result::Result<(f64, bool), String> {
    let buf = Buffer::new(bytes, true)?;
    let nodes = bytes / line;
    let mut rng = Rng(0x5eed ^ bytes as u64);
    let huge = buf.huge_fraction() >= 0.9;
    let next = if huge {
        random_cycle(nodes, &mut rng)
    } else {
        grouped_cycle(nodes, (page_size() / line).max(1), &mut rng)
    };
    let start = buf.link(&next, |i| i * line);
    drop(next);
    // SAFETY: every node of the buffer links to another node of it.
    let ns = unsafe { time_chase(start, nodes, loads, reps) };
    Ok((ns, huge))
}

/// The two chases of the TLB measurement.
struct TlbRun {
    pages: usize,
    sparse_ns: f64,
    dense_ns: f64,
}

/// Pages of the TLB chase: twice the reach of the largest second-level data TLBs we know
/// (4096 entries) at 4 KiB pages.
const TLB_PAGES: usize = 8192;

fn measure_tlb(line: usize, plan: &Plan) -> std::result::Result<TlbRun, String> {
    tlb_chases(line, TLB_PAGES, plan.tlb_passes * TLB_PAGES, plan.reps)
}

fn tlb_chases(
    line: usize,
    pages: usize,
    loads: usize,
    reps: usize,
) -> std::result::Result<TlbRun, String> {
    let page = page_size();
    let per_page = (page / line).max(1);
    let mut rng = Rng(0x71b);
    let next = random_cycle(pages, &mut rng);

    let sparse = Buffer::new(pages * page, false)?;
    if sparse.huge_fraction() > 0.0 {
        return Err("the kernel backed the MADV_NOHUGEPAGE buffer with huge pages".into());
    }
    // Page i holds its node in line i mod (lines per page): the nodes spread over all sets.
    let start = sparse.link(&next, |i| i * page + (i % per_page) * line);
    // SAFETY: every node links to another node of the buffer.
    let sparse_ns = unsafe { time_chase(start, pages, loads, reps) };
    drop(sparse);

    let dense = Buffer::new(pages * line, true)?;
    let next = if dense.huge_fraction() >= 0.9 {
        next
    } else {
        grouped_cycle(pages, per_page, &mut rng)
    };
    let start = dense.link(&next, |i| i * line);
    // SAFETY: as above.
    let dense_ns = unsafe { time_chase(start, pages, loads, reps) };
    Ok(TlbRun {
        pages,
        sparse_ns,
        dense_ns,
    })
}

/// `iters` iterations of 64 dependent one-cycle additions; `None` where there is no such loop
/// (not x86-64).
#[inline(never)]
fn add_chain(iters: u64) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut x = 0u64;
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(
                "2:",
                ".rept 64",
                "add {x}, 1",
                ".endr",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) x,
                n = inout(reg) iters.max(1) => _,
                options(nostack, nomem),
            );
        }
        Some(x)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = iters;
        None
    }
}

fn measure_clock(plan: &Plan) -> Measured {
    // The first run is a warm-up: it lets the clock ramp up.
    if std::hint::black_box(add_chain(plan.clock_iters)).is_none() {
        return Err(format!(
            "no cycle-timed loop on {} (the nominal clock is used)",
            std::env::consts::ARCH
        ));
    }
    let cycles = plan.clock_iters.max(1) as f64 * 64.0;
    let ns = best_ns(plan.clock_reps, cycles, || {
        std::hint::black_box(add_chain(plan.clock_iters));
    });
    Ok(1000.0 / ns)
}

/// The branch loops' times.
struct BranchRun {
    random_ns: f64,
    predictable_ns: f64,
    /// Share of the rarer direction in the random loop: its mispredict rate.
    rate: f64,
}

/// `iters` iterations of: draw a xorshift64 number, branch on `x & mask` (one add and one taken
/// jump either way). Returns how often each way was taken; `None` where there is no such loop
/// (not x86-64).
#[inline(never)]
fn branch_loop(iters: u64, mask: u64) -> Option<(u64, u64)> {
    #[cfg(target_arch = "x86_64")]
    {
        let (mut a, mut b) = (0u64, 0u64);
        // SAFETY: register arithmetic and local jumps only.
        unsafe {
            std::arch::asm!(
                "2:",
                "mov {t}, {x}",
                "shl {t}, 13",
                "xor {x}, {t}",
                "mov {t}, {x}",
                "shr {t}, 7",
                "xor {x}, {t}",
                "mov {t}, {x}",
                "shl {t}, 17",
                "xor {x}, {t}",
                "test {x}, {mask}",
                "jz 3f",
                "add {a}, 1",
                "jmp 4f",
                "3:",
                "add {b}, 1",
                "4:",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) 0x2545_f491_4f6c_dd1du64 => _,
                n = inout(reg) iters.max(1) => _,
                a = inout(reg) a,
                b = inout(reg) b,
                t = out(reg) _,
                mask = in(reg) mask,
                options(nostack, nomem),
            );
        }
        Some((a, b))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (iters, mask);
        None
    }
}

fn measure_branch(plan: &Plan) -> std::result::Result<BranchRun, String> {
    let iters = plan.branch_iters;
    let Some((a, b)) = branch_loop(iters, 1 << 31) else {
        return Err(format!(
            "no branch loop with a guaranteed conditional jump on {}",
            std::env::consts::ARCH
        ));
    };
    let rate = a.min(b) as f64 / (a + b) as f64;
    if rate < 0.1 {
        return Err(format!(
            "the random branch went one way {:.0}% of the time",
            100.0 * (1.0 - rate)
        ));
    }
    let (mut random_ns, mut predictable_ns) = (f64::INFINITY, f64::INFINITY);
    // Interleaved, so a change of clock or load affects both alike.
    for _ in 0..plan.reps {
        predictable_ns = predictable_ns.min(best_ns(1, iters as f64, || {
            std::hint::black_box(branch_loop(iters, 0));
        }));
        random_ns = random_ns.min(best_ns(1, iters as f64, || {
            std::hint::black_box(branch_loop(iters, 1 << 31));
        }));
    }
    Ok(BranchRun {
        random_ns,
        predictable_ns,
        rate,
    })
}

// ---------------------------------------------------------------------------------------------
// Dates.

/// `YYYY-MM-DD` (UTC) of `secs` seconds after the Unix epoch.
fn utc_date(secs: u64) -> String {
    let mut days = secs / 86_400;
    let leap = |y: u64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut year = 1970;
    loop {
        let len = if leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let feb = if leap(year) { 29 } else { 28 };
    let mut month = 1;
    for len in [31, feb, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    format!("{year:04}-{month:02}-{:02}", days + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The length of the cycle through node 0, if `next` is a permutation.
    fn cycle_len(next: &[u32]) -> usize {
        let mut seen = vec![false; next.len()];
        let (mut i, mut len) = (0usize, 0);
        while !seen[i] {
            seen[i] = true;
            i = next[i] as usize;
            len += 1;
        }
        assert_eq!(i, 0, "the walk from 0 must come back to 0");
        len
    }

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

    #[test]
    fn random_cycles_are_single_cycles_over_every_node() {
        let mut rng = Rng(1);
        for n in [1, 2, 3, 7, 64, 1000, 4097] {
            let next = random_cycle(n, &mut rng);
            assert_eq!(cycle_len(&next), n, "n = {n}");
            // Sattolo never maps a node to itself (for n > 1).
            assert!(n == 1 || next.iter().enumerate().all(|(i, &j)| i != j as usize));
        }
        // Not the identity shift: it is shuffled.
        let next = random_cycle(1000, &mut rng);
        assert!(
            next.iter()
                .enumerate()
                .filter(|(i, &j)| j as usize == i + 1)
                .count()
                < 50
        );
    }

    #[test]
    fn grouped_cycles_visit_each_group_in_one_stretch() {
        let mut rng = Rng(2);
        for (n, group) in [(1, 64), (64, 64), (1000, 64), (4096, 64), (10, 3)] {
            let next = grouped_cycle(n, group, &mut rng);
            assert_eq!(cycle_len(&next), n, "n = {n}");
            let changes = (0..n)
                .filter(|&i| i / group != next[i] as usize / group)
                .count();
            let groups = n.div_ceil(group);
            assert_eq!(changes, if groups == 1 { 0 } else { groups }, "n = {n}");
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

    fn measured(v: [f64; 6]) -> Raw {
        Raw {
            clock_mhz: Ok(v[0]),
            l2_ns: Ok(v[1]),
            llc_ns: Some(Ok(v[2])),
            mem_ns: Ok(v[3]),
            tlb_miss_ns: Ok(v[4]),
            branch_miss_ns: Ok(v[5]),
            line_bytes: 64,
        }
    }

    /// The figures and notes for `raw`.
    fn assembled(raw: &Raw) -> (HostFigures, Vec<String>) {
        let mut notes = Vec::new();
        (assemble(raw, &HostFigures::fallback(), &mut notes), notes)
    }

    #[test]
    fn sane_measurements_are_kept() {
        let (f, notes) = assembled(&measured([2500.0, 4.0, 15.0, 95.0, 20.0, 7.0]));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            (f.clock_mhz, f.l2_ns, f.llc_ns, f.mem_ns),
            (2500.0, 4.0, 15.0, 95.0)
        );
        assert_eq!((f.tlb_miss_ns, f.branch_miss_ns), (20.0, 7.0));
    }

    #[test]
    fn bad_measurements_fall_back_with_a_note() {
        let fb = HostFigures::fallback();
        let mut raw = measured([f64::NAN, 0.0, f64::INFINITY, 95.0, 0.0, -3.0]);
        raw.mem_ns = Err("could not map 64 MiB".into());
        let (f, notes) = assembled(&raw);
        assert_eq!(f.l2_ns, fb.l2_ns);
        assert_eq!(f.llc_ns, fb.llc_ns);
        assert_eq!(f.mem_ns, fb.mem_ns);
        assert_eq!(f.tlb_miss_ns, fb.tlb_miss_ns);
        assert_eq!(f.branch_miss_ns, fb.branch_miss_ns);
        assert!(f.clock_mhz.is_finite() && f.clock_mhz > 0.0);
        assert_eq!(notes.len(), 6, "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("could not map 64 MiB")));
        assert!(notes.iter().all(|n| n.contains("fallback")), "{notes:?}");
    }

    #[test]
    fn latencies_are_made_monotonic() {
        let (f, notes) = assembled(&measured([2000.0, 6.0, 5.0, 5.5, 10.0, 8.0]));
        assert_eq!((f.l2_ns, f.llc_ns, f.mem_ns), (6.0, 6.0, 6.0));
        assert_eq!(notes.len(), 2, "{notes:?}");
        let mut raw = measured([2000.0, 6.0, 0.0, 100.0, 10.0, 8.0]);
        raw.llc_ns = None;
        let (f, notes) = assembled(&raw);
        assert_eq!((f.l2_ns, f.llc_ns, f.mem_ns), (6.0, 6.0, 100.0));
        assert!(
            notes[0].contains("no cache level above the L2"),
            "{notes:?}"
        );
    }

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

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14");
        assert_eq!(utc_date(4_107_542_399), "2100-02-28");
    }

    #[test]
    fn chase_visits_the_linked_nodes() {
        let buf = Buffer::new(64 * 1024, true).unwrap();
        let next = random_cycle(1024, &mut Rng(3));
        let start = buf.link(&next, |i| i * 64);
        // SAFETY: the buffer is linked.
        let end = unsafe { chase(start, 8) };
        let mut i = 0;
        for _ in 0..8 {
            i = next[i] as usize;
        }
        assert_eq!(end as usize, buf.ptr as usize + i * 64);
    }
}

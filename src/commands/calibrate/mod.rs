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
//! - **Clock**: a loop of 64 dependent one-cycle integer additions per iteration (x86-64 and
//!   arm64 inline assembly; the loop counter runs beside the chain, so an iteration takes 64
//!   cycles). Cycles over time, best (fastest) of several runs after a warm-up. Other
//!   architectures use the nominal clock ([`crate::backend::nominal_mhz`]) and say so in a note.
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
//!   and other processes). The chase is x86-64 and arm64 assembly, so it runs at the same speed
//!   in unoptimised builds; other architectures use a Rust loop (slightly slower in debug
//!   builds).
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
//!   conditional jump (a compiler could turn it into a conditional move or select). Penalty =
//!   (time per iteration, random - predictable) / mispredict rate, the rate being the share of
//!   the rarer direction among the random draws (about 0.5). x86-64 and arm64; other
//!   architectures use the fallback figure, with a note.
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

use crate::api::costs::{self, CostTable, HostFigures};
use crate::base::error::Result;

mod buffer;
mod caches;
mod cycles;
mod loops;

use caches::{choose_sizes, fmt_bytes, mem_available, read_caches, SYSFS_CACHE};
use loops::{chase_latency, measure_branch, measure_clock, measure_tlb};

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
        crate::base::costfile::hostname(),
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
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14");
        assert_eq!(utc_date(4_107_542_399), "2100-02-28");
    }
}

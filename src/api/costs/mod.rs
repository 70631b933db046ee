//! perfex cost tables: what one occurrence of each R10000 event costs, and the time estimates
//! and derived statistics `print_costs` and `perfex -y` print.
//!
//! Contract: libperfex(3C) "TIME ESTIMATES AND COST TABLES" and perfex(1) as summarised in the
//! project's perfex reference, section 4. Each of the 32 events has a typical, a minimum and a
//! maximum cost, in `clks` (machine cycles at the table's clock) or `nsec` (nanoseconds). The
//! time estimate of an event is its count times its cost.
//!
//! # Which table is in force
//! 1. The built-in table of the processor being counted: [`Flavor::R10000`] on `sim:r10000`,
//!    [`Flavor::R12000`] on `sim:r12000`, [`Flavor::Host`] on every other backend. The host table
//!    is computed from this machine's latencies: those `perfex --calibrate` measured and cached
//!    (see [`host_cache_path`]), or documented fallbacks until it has run.
//! 2. `/etc/perfex.costs` (or the file named by `PERFCOMPAT_SYSTEM_COSTS`) when present,
//!    over the built-in table. A bad system file is reported once on stderr and ignored.
//! 3. The last table loaded by [`load`] (`load_costs`, `perfex -c`), over both.
//!
//! Files may be partial: events they do not list keep the cost of the level below.
//!
//! # File format
//! Exactly what [`CostTable::dump`] (`perfex -t`) prints: see [`crate::base::costfile`], which
//! parses it. A file that does not parse leaves the table in force unchanged.
//!
//! # Decisions
//! - "Summary" and redundant events (cycles, issued counts when the graduated ones carry the
//!   cost, occupancy counts) cost `0 0 1 clks`, so they sort to the bottom, as perfex(1)
//!   describes. Events whose cost we could not ground in a public figure are treated the same
//!   way and say so in the source.
//! - The report sorts events by typical time, most costly first (ties by event number).
//! - Derived statistics need the total time: cycles / clock when cycles were counted, otherwise
//!   the elapsed time when the caller knows it (the `perfex` command does), otherwise the
//!   statistics that need a time are left out.
//!
//! # Files
//! Here the tables and which one is in force; `report.rs` the report and its statistics.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::backend::sim::mips;
use crate::backend::BackendKind;
pub use crate::base::costfile::{host_cache_path, Cost, CostOverlay, Unit, EVENTS, HOST_CACHE_ENV};
use crate::base::error::{Error, Result};
use crate::base::eventmap::r10k_event;

mod report;

pub use report::{format_costs, format_costs_shown, format_exact_costs, statistics, EventCount};

const fn clks(typical: f64, minimum: f64, maximum: f64) -> Cost {
    Cost {
        typical,
        minimum,
        maximum,
        unit: Unit::Clks,
    }
}

const fn nsec(typical: f64, minimum: f64, maximum: f64) -> Cost {
    Cost {
        typical,
        minimum,
        maximum,
        unit: Unit::Nsec,
    }
}

/// The cost of a summary or redundant event (and of events we do not cost): it sorts last.
const SUMMARY: Cost = clks(0.0, 0.0, 1.0);

/// Which processor a table describes: it decides the event names and the derived statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// The emulated MIPS R10000 (`sim:r10000`).
    R10000,
    /// The emulated MIPS R12000 (`sim:r12000`).
    R12000,
    /// The Linux host (every other backend): R10000 numbering over the host's events.
    Host,
}

impl Flavor {
    /// The flavour for a backend.
    pub fn for_backend(kind: BackendKind) -> Flavor {
        if kind == BackendKind::Sim(&mips::R10000) {
            Flavor::R10000
        } else if kind == BackendKind::Sim(&mips::R12000) {
            Flavor::R12000
        } else {
            Flavor::Host
        }
    }

    /// The flavour of the process-wide backend (`PERFCOMPAT_BACKEND`).
    pub fn current() -> Flavor {
        crate::backend::global().map_or(Flavor::Host, |b| {
            Flavor::for_backend(b.shape_unmeasured().kind)
        })
    }

    /// What event `n` (0-31) counts on this processor.
    pub fn event_name(self, n: usize) -> &'static str {
        let ev = r10k_event(n as u32).expect("0..31 are in the table");
        match self {
            Flavor::R12000 => ev.r12000.as_str(),
            _ => ev.r10000.as_str(),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Flavor::R10000 => "R10000",
            Flavor::R12000 => "R12000",
            Flavor::Host => "Linux host",
        }
    }
}

/// Latencies of the host's memory hierarchy and pipeline, from which the host table is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostFigures {
    /// Core clock, MHz.
    pub clock_mhz: f64,
    /// Load-to-use latency of an L2 hit, ns.
    pub l2_ns: f64,
    /// Latency of a last-level-cache hit, ns.
    pub llc_ns: f64,
    /// Latency of a miss to memory, ns.
    pub mem_ns: f64,
    /// Extra cost of a data TLB miss, ns.
    pub tlb_miss_ns: f64,
    /// Branch mispredict penalty, ns.
    pub branch_miss_ns: f64,
    /// Cache line size, bytes.
    pub line_bytes: u32,
}

impl HostFigures {
    /// The documented fallbacks used until `perfex --calibrate` has run: figures typical of
    /// x86-64 server cores of the last decade (L2 hit about 14 cycles, LLC hit about 50 cycles
    /// at 3 GHz, a DRAM access about 90 ns, a page walk hitting the caches about 25 cycles, a
    /// mispredict about 16 cycles), at this machine's nominal clock.
    pub fn fallback() -> HostFigures {
        HostFigures {
            clock_mhz: crate::backend::nominal_mhz(),
            l2_ns: 4.5,
            llc_ns: 16.0,
            mem_ns: 90.0,
            tlb_miss_ns: 8.0,
            branch_miss_ns: 5.5,
            line_bytes: 64,
        }
    }
}

/// A complete cost table.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTable {
    /// The processor the table is for.
    pub flavor: Flavor,
    /// Clock used to turn cycles into time, MHz.
    pub clock_mhz: f64,
    /// Cost of each event, indexed by event number.
    pub costs: [Cost; EVENTS],
    /// Primary data cache line size, bytes (for the bandwidth statistics).
    pub l1_line_bytes: u32,
    /// Secondary (host: last-level) cache line size, bytes.
    pub l2_line_bytes: u32,
    /// Where the table came from, lowest level first ("built-in R10000 table", files...).
    pub sources: Vec<String>,
}

/// The built-in R10000 table (195 MHz, the Origin 2000 / Octane part).
///
/// Public figures it rests on (all costs are our estimates derived from them):
/// - [UM] MIPS R10000 Microprocessor User's Manual, version 2.0 (MIPS Technologies, 1996):
///   secondary-cache refill latency (§1.9, about 8-10 cycles at a 2:3 cache clock plus the
///   refill of a 32-byte data line / 64-byte instruction line), one load/store unit, four-way
///   issue, floating-point latencies (double-precision reciprocal square root is the slowest,
///   about 52 cycles), up to four outstanding cache misses.
/// - [YE] K. C. Yeager, "The MIPS R10000 Superscalar Microprocessor", IEEE Micro 16(2), 1996:
///   branch resolution and the few cycles lost on a mispredict.
/// - [LL] J. Laudon and D. Lenoski, "The SGI Origin: A ccNUMA Highly Scalable Server",
///   ISCA 1997: local memory latency about 313 ns, the furthest remote node about 1 µs on a
///   128-processor system, 128-byte secondary-cache lines.
///
/// Memory-bound events are in `nsec` (they do not scale with the core clock); minimums divide
/// a latency by the four misses the R10000 can overlap [UM].
const R10000_COSTS: [Cost; EVENTS] = [
    SUMMARY,                    // 0 cycles: summary
    SUMMARY,                    // 1 issued instructions: redundant with 17
    SUMMARY,                    // 2 issued loads: redundant with 18
    SUMMARY,                    // 3 issued stores: redundant with 19
    SUMMARY,                    // 4 issued store conditionals: redundant with 20
    clks(10.0, 5.0, 25.0),      // 5 failed store conditional: the LL/SC retry from the cache [UM]
    clks(1.0, 1.0, 1.0),        // 6 decoded branches: one per cycle in the branch unit [UM]
    clks(4.0, 2.0, 8.0),        // 7 quadword written back from L2: 16 bytes on the memory bus [LL]
    SUMMARY,                    // 8 ECC errors: not costed (corrected in the pipeline)
    clks(13.0, 10.0, 25.0),     // 9 L1 I miss: L2 refill of a 64-byte line [UM]
    nsec(313.0, 313.0, 1000.0), // 10 L2 I miss: memory, not overlapped [LL]
    clks(4.0, 2.0, 6.0),        // 11 L2 way misprediction (I): re-access of the other way [UM]
    SUMMARY,                    // 12 external interventions: not costed (coherence traffic)
    SUMMARY,                    // 13 external invalidations: not costed (coherence traffic)
    SUMMARY,                    // 14 virtual coherency conditions: not costed (rare)
    SUMMARY,                    // 15 graduated instructions (counter 0): redundant with 17
    SUMMARY,                    // 16 cycles: summary
    clks(1.0, 0.25, 1.0),       // 17 graduated instruction: four-way superscalar [UM]
    clks(1.0, 1.0, 1.0),        // 18 graduated load: one load/store unit [UM]
    clks(1.0, 1.0, 1.0),        // 19 graduated store: one load/store unit [UM]
    clks(1.0, 1.0, 1.0),        // 20 graduated store conditional [UM]
    clks(1.0, 0.5, 52.0),       // 21 graduated FP: two FP units; max = rsqrt.d [UM]
    clks(1.0, 1.0, 2.0),        // 22 quadword written back from L1: L1 to L2 transfer [UM]
    clks(40.0, 25.0, 100.0),    // 23 TLB miss: software refill; max when the PTE misses [UM][LL]
    clks(4.0, 2.0, 7.0),        // 24 mispredicted branch: squashed work [YE]
    clks(10.0, 2.5, 25.0),      // 25 L1 D miss: L2 refill of a 32-byte line [UM]
    nsec(313.0, 78.25, 1000.0), // 26 L2 D miss: memory [LL], min = 4 overlapped [UM]
    clks(4.0, 2.0, 6.0),        // 27 L2 way misprediction (D) [UM]
    SUMMARY,                    // 28 intervention hits: not costed (coherence traffic)
    SUMMARY,                    // 29 invalidation hits: not costed (coherence traffic)
    SUMMARY,                    // 30 store to a clean exclusive block: no bus transaction
    nsec(313.0, 78.25, 1000.0), // 31 store to a shared block: an upgrade at the directory [LL]
];

/// The built-in R12000 table (300 MHz, the Origin 2000 / Origin 3000 part). Same sources as
/// [`R10000_COSTS`]; the R12000's changed events (r10k_evcntrs(5) NOTES) are costed for what
/// they count there, and the secondary cache, clocked at 2:3, takes more core cycles.
const R12000_COSTS: [Cost; EVENTS] = [
    SUMMARY,                    // 0 cycles: summary
    SUMMARY,                    // 1 decoded instructions: redundant with 15
    SUMMARY,                    // 2 decoded loads: redundant with 18
    SUMMARY,                    // 3 decoded stores: redundant with 19
    SUMMARY,                    // 4 miss handling table occupancy: occupancy count
    clks(10.0, 5.0, 25.0),      // 5 failed store conditional [UM]
    clks(1.0, 1.0, 1.0),        // 6 resolved conditional branches [UM]
    clks(6.0, 3.0, 12.0),       // 7 quadword written back from L2 [LL]
    SUMMARY,                    // 8 ECC errors: not costed
    clks(15.0, 12.0, 30.0),     // 9 L1 I miss: L2 refill [UM]
    nsec(313.0, 313.0, 1000.0), // 10 L2 I miss: memory [LL]
    clks(5.0, 3.0, 8.0),        // 11 L2 way misprediction (I) [UM]
    SUMMARY,                    // 12 external interventions: not costed
    SUMMARY,                    // 13 external invalidations: not costed
    SUMMARY,                    // 14 ALU/FPU progress cycles: occupancy count
    clks(1.0, 0.25, 1.0),       // 15 graduated instruction (counter 0 only on R12000) [UM]
    clks(1.0, 1.0, 1.0),        // 16 executed prefetch instruction [UM]
    clks(1.0, 0.0, 15.0),       // 17 prefetch L1 miss: mostly overlapped, at worst an L2 refill
    clks(1.0, 1.0, 1.0),        // 18 graduated load [UM]
    clks(1.0, 1.0, 1.0),        // 19 graduated store [UM]
    clks(1.0, 1.0, 1.0),        // 20 graduated store conditional [UM]
    clks(1.0, 0.5, 52.0),       // 21 graduated FP; max = rsqrt.d [UM]
    clks(1.0, 1.0, 2.0),        // 22 quadword written back from L1 [UM]
    clks(40.0, 25.0, 130.0),    // 23 TLB miss: software refill [UM][LL]
    clks(5.0, 2.0, 8.0),        // 24 mispredicted branch: one stage longer than the R10000 [YE]
    clks(12.0, 3.0, 30.0),      // 25 L1 D miss: L2 refill [UM]
    nsec(313.0, 78.25, 1000.0), // 26 L2 D miss: memory [LL]
    clks(5.0, 3.0, 8.0),        // 27 L2 way misprediction (D) [UM]
    SUMMARY,                    // 28 state of intervention hits: not costed
    SUMMARY,                    // 29 state of invalidation hits: not costed
    SUMMARY,                    // 30 MHT entries accessing memory: occupancy count
    nsec(313.0, 78.25, 1000.0), // 31 store to a shared block: an upgrade [LL]
];

impl CostTable {
    /// The built-in table for `flavor` (the host table from [`HostFigures::fallback`]).
    pub fn builtin(flavor: Flavor) -> CostTable {
        match flavor {
            Flavor::R10000 => CostTable {
                flavor,
                clock_mhz: 195.0,
                costs: R10000_COSTS,
                l1_line_bytes: 32,
                l2_line_bytes: 128,
                sources: vec!["built-in R10000 table".into()],
            },
            Flavor::R12000 => CostTable {
                flavor,
                clock_mhz: 300.0,
                costs: R12000_COSTS,
                l1_line_bytes: 32,
                l2_line_bytes: 128,
                sources: vec!["built-in R12000 table".into()],
            },
            Flavor::Host => {
                let mut t = CostTable::for_host(&HostFigures::fallback());
                t.sources = vec!["built-in host table (fallback figures)".into()];
                t
            }
        }
    }

    /// The host table for the measured (or fallback) figures `f`.
    ///
    /// Events are costed for the host event they map to (see the event map): L1 misses cost an
    /// L2 hit (min a quarter of it, overlapped; max an LLC hit), last-level misses cost a
    /// memory access (min an eighth, overlapped or prefetched; max twice, a remote node or a
    /// page walk on top), TLB misses the measured walk, mispredicts the measured penalty (half
    /// to one and a half of it). Instructions, loads, stores and branches cost what a modern
    /// core sustains (0.5 cycle typical). Events without a host equivalent are not costed.
    pub fn for_host(f: &HostFigures) -> CostTable {
        let mut costs = [SUMMARY; EVENTS];
        costs[6] = clks(0.5, 0.5, 1.0);
        costs[9] = nsec(f.l2_ns, f.l2_ns, f.llc_ns);
        costs[17] = clks(0.5, 0.25, 1.0);
        costs[18] = clks(0.5, 0.33, 1.0);
        costs[19] = clks(1.0, 0.5, 1.0);
        costs[21] = clks(1.0, 0.25, 20.0);
        costs[23] = nsec(f.tlb_miss_ns, f.tlb_miss_ns * 0.5, f.tlb_miss_ns + f.mem_ns);
        costs[24] = nsec(
            f.branch_miss_ns,
            f.branch_miss_ns * 0.5,
            f.branch_miss_ns * 1.5,
        );
        costs[25] = nsec(f.l2_ns, f.l2_ns * 0.25, f.llc_ns);
        costs[26] = nsec(f.mem_ns, f.mem_ns * 0.125, f.mem_ns * 2.0);
        for c in &mut costs {
            c.typical = round2(c.typical);
            c.minimum = round2(c.minimum);
            c.maximum = round2(c.maximum);
        }
        CostTable {
            flavor: Flavor::Host,
            clock_mhz: round2(f.clock_mhz),
            costs,
            l1_line_bytes: f.line_bytes,
            l2_line_bytes: f.line_bytes,
            sources: vec!["host table".into()],
        }
    }

    /// The table in the file format (what `perfex -t` prints).
    pub fn dump(&self) -> String {
        let mut s = format!(
            "# perfex cost table: {} ({})\n",
            self.flavor.label(),
            self.sources.join(", then ")
        );
        s.push_str(
            "# One event per line: number, name (ignored when loading), typical, minimum and\n\
             # maximum cost, unit (clks = machine cycles, nsec = nanoseconds). To override,\n\
             # keep only the lines to change and load the file (load_costs, perfex -c).\n",
        );
        let _ = writeln!(s, "clock {} MHz", fmt_num(self.clock_mhz));
        let width = (0..EVENTS)
            .map(|n| self.flavor.event_name(n).len() + 6)
            .max()
            .unwrap_or(0);
        for (n, c) in self.costs.iter().enumerate() {
            let label = format!("{n:>2} {} ", self.flavor.event_name(n));
            let _ = writeln!(
                s,
                "{label:.<width$} {:>9} {:>9} {:>9} {}",
                fmt_cost(c.typical),
                fmt_cost(c.minimum),
                fmt_cost(c.maximum),
                c.unit.name()
            );
        }
        s
    }

    /// This table with the entries of `o` over it.
    pub fn overlaid(&self, o: &CostOverlay) -> CostTable {
        let mut t = self.clone();
        if let Some(mhz) = o.clock_mhz {
            t.clock_mhz = mhz;
        }
        for (c, oc) in t.costs.iter_mut().zip(&o.costs) {
            if let Some(oc) = oc {
                *c = *oc;
            }
        }
        t.sources.push(o.file.clone());
        t
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn fmt_num(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn fmt_cost(x: f64) -> String {
    format!("{x:.2}")
}

// ---------------------------------------------------------------------------------------------
// The table in force.

/// The environment variable naming the system cost file (default `/etc/perfex.costs`).
pub const SYSTEM_COSTS_ENV: &str = "PERFCOMPAT_SYSTEM_COSTS";

/// The system cost file: `$PERFCOMPAT_SYSTEM_COSTS`, else `/etc/perfex.costs`.
pub fn system_costs_path() -> PathBuf {
    crate::base::sys::env_os(SYSTEM_COSTS_ENV)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/etc/perfex.costs"), PathBuf::from)
}

/// Write `table` (a host table) to the calibration cache at [`host_cache_path`], atomically
/// (a temporary file renamed over the old one), creating the directory; returns the path.
pub fn write_host_cache(table: &CostTable) -> Result<PathBuf> {
    let path = host_cache_path().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "no place for the host cost cache: set {HOST_CACHE_ENV}, XDG_CACHE_HOME or HOME"
        ))
    })?;
    let os = |op: &'static str| {
        move |e: std::io::Error| Error::Os {
            op,
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(os("creating the cost cache directory"))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, table.dump()).map_err(os("writing the host cost cache"))?;
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        os("renaming the host cost cache")(e)
    })?;
    Ok(path)
}

/// The default table for `flavor` with the level-2 files applied: the built-in table (for the
/// host, the calibrated one when its cache exists), then the system cost file when present.
/// Problems with those files are returned as warnings, not errors: they are then ignored.
pub fn default_table(flavor: Flavor) -> (CostTable, Vec<String>) {
    let mut warnings = Vec::new();
    let mut t = CostTable::builtin(flavor);
    if flavor == Flavor::Host {
        if let Some(p) = host_cache_path().filter(|p| p.exists()) {
            match CostOverlay::load(&p) {
                Ok(o) => {
                    t = t.overlaid(&o);
                    t.sources = vec![format!("host table calibrated in {}", p.display())];
                }
                Err(e) => warnings.push(format!("{e}; the calibration cache is ignored")),
            }
        }
    }
    let sys = system_costs_path();
    if sys.exists() {
        match CostOverlay::load(&sys) {
            Ok(o) => t = t.overlaid(&o),
            Err(e) => warnings.push(format!("{e}; the system cost file is ignored")),
        }
    }
    (t, warnings)
}

fn base() -> &'static CostTable {
    static BASE: OnceLock<CostTable> = OnceLock::new();
    BASE.get_or_init(|| {
        let (t, warnings) = default_table(Flavor::current());
        for w in warnings {
            crate::stderr_line!("perfex: {w}");
        }
        t
    })
}

static LOADED: Mutex<Option<CostOverlay>> = Mutex::new(None);

/// The table in force in this process: the default table with the last [`load`]ed file over
/// it.
pub fn current() -> CostTable {
    let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    match &*loaded {
        Some(o) => base().overlaid(o),
        None => base().clone(),
    }
}

/// Load the cost file at `path` over the default table (replacing any table loaded before).
/// All or nothing: on error the table in force is unchanged and the error names the file, the
/// line and the reason.
pub fn load(path: &Path) -> Result<()> {
    let o = CostOverlay::load(path)?;
    *LOADED.lock().unwrap_or_else(|e| e.into_inner()) = Some(o);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reports.

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_parses_back_to_the_same_table() {
        for flavor in [Flavor::R10000, Flavor::R12000, Flavor::Host] {
            let t = CostTable::builtin(flavor);
            let o = CostOverlay::parse(&t.dump(), "dump").unwrap();
            assert_eq!(
                o.clock_mhz,
                Some(round2(t.clock_mhz)).map(|c| (c * 1000.0).round() / 1000.0)
            );
            for n in 0..EVENTS {
                assert_eq!(o.costs[n], Some(t.costs[n]), "{flavor:?} event {n}");
            }
        }
    }

    #[test]
    fn builtin_costs_are_ordered() {
        for flavor in [Flavor::R10000, Flavor::R12000, Flavor::Host] {
            for (n, c) in CostTable::builtin(flavor).costs.iter().enumerate() {
                assert!(
                    c.minimum <= c.typical && c.typical <= c.maximum,
                    "{flavor:?} event {n}: {c:?}"
                );
            }
        }
    }

    #[test]
    fn partial_file_overrides_only_its_lines() {
        let base = CostTable::builtin(Flavor::R10000);
        let o = CostOverlay::parse("26 100 50 200 nsec # mine\n", "f").unwrap();
        let t = base.overlaid(&o);
        assert_eq!(t.costs[26], nsec(100.0, 50.0, 200.0));
        assert_eq!(t.costs[25], base.costs[25]);
        assert_eq!(t.clock_mhz, 195.0);
        assert_eq!(t.sources.last().unwrap(), "f");
    }

    #[test]
    fn bad_lines_name_line_and_reason() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "no cost entry"),
            ("# only a comment\n", 0, "no cost entry"),
            ("26 1 2\n", 1, "expected typical"),
            ("\n32 1 1 1 clks\n", 2, "not an event number"),
            ("x 1 1 1 clks\n", 1, "not an event number"),
            ("5 1 1 1 cycles\n", 1, "neither clks nor nsec"),
            ("5 a 1 1 clks\n", 1, "typical cost 'a'"),
            ("5 1 -1 1 clks\n", 1, "minimum cost '-1'"),
            ("5 1 1 inf clks\n", 1, "maximum cost 'inf'"),
            ("5 1 2 3 clks\n", 1, "minimum <= typical"),
            ("5 1 1 1 clks\n5 2 2 2 clks\n", 2, "given twice"),
            ("clock 0 MHz\n", 1, "not a number of MHz"),
            ("clock 100 GHz\n", 1, "not MHz"),
            ("clock 100\n", 1, "expected 'clock"),
            ("clock 1 MHz\nclock 2 MHz\n", 2, "clock is given twice"),
        ];
        for (text, line, reason) in cases {
            match CostOverlay::parse(text, "c.costs") {
                Err(Error::BadFile {
                    file,
                    line: l,
                    reason: r,
                }) => {
                    assert_eq!(file, "c.costs");
                    assert_eq!(l, *line, "{text:?}: {r}");
                    assert!(r.contains(reason), "{text:?}: {r}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn names_and_case_are_accepted() {
        let o = CostOverlay::parse(
            "CLOCK 250 mhz\n 9 Primary instruction cache misses ...... 1.5 1 2 CLKS\n",
            "f",
        )
        .unwrap();
        assert_eq!(o.clock_mhz, Some(250.0));
        assert_eq!(o.costs[9], Some(clks(1.5, 1.0, 2.0)));
    }

    #[test]
    fn host_cache_round_trips_and_becomes_the_default() {
        // The only test here touching PERFCOMPAT_HOST_COSTS / PERFCOMPAT_SYSTEM_COSTS.
        let dir = std::env::temp_dir().join(format!("perfcompat-costs-{}", std::process::id()));
        let cache = dir.join("sub/host.costs");
        std::env::set_var(HOST_CACHE_ENV, &cache);
        std::env::set_var(SYSTEM_COSTS_ENV, dir.join("system.costs"));
        let figures = HostFigures {
            clock_mhz: 3000.0,
            l2_ns: 3.0,
            llc_ns: 12.0,
            mem_ns: 80.0,
            tlb_miss_ns: 7.0,
            branch_miss_ns: 5.0,
            line_bytes: 64,
        };
        let t = CostTable::for_host(&figures);
        assert_eq!(write_host_cache(&t).unwrap(), cache);
        let (d, warnings) = default_table(Flavor::Host);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((d.clock_mhz, d.costs), (3000.0, t.costs));
        assert!(d.sources[0].contains("calibrated"), "{:?}", d.sources);
        // A system file goes over it; a bad one is ignored with a warning.
        std::fs::write(dir.join("system.costs"), "clock 2000 MHz\n").unwrap();
        assert_eq!(default_table(Flavor::Host).0.clock_mhz, 2000.0);
        std::fs::write(dir.join("system.costs"), "clock 2000 GHz\n").unwrap();
        let (d, warnings) = default_table(Flavor::Host);
        assert_eq!(d.clock_mhz, 3000.0);
        assert!(
            warnings[0].contains("system.costs:1: clock unit"),
            "{warnings:?}"
        );
        // The emulated processors never use the host cache.
        assert_eq!(default_table(Flavor::R10000).0.clock_mhz, 195.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_flavour_follows_the_backend_kind() {
        use crate::backend::sim::sparc;
        assert_eq!(
            Flavor::for_backend(BackendKind::Sim(&mips::R10000)),
            Flavor::R10000
        );
        assert_eq!(
            Flavor::for_backend(BackendKind::Sim(&mips::R12000)),
            Flavor::R12000
        );
        for kind in [
            BackendKind::Perf,
            BackendKind::Sim(&sparc::ULTRASPARC),
            BackendKind::Other("time-shared"),
        ] {
            assert_eq!(Flavor::for_backend(kind), Flavor::Host, "{kind}");
        }
    }

    #[test]
    fn seconds_in_both_units() {
        let c = clks(2.0, 1.0, 4.0);
        assert_eq!(c.seconds(100.0, 200.0), (1e-6, 0.5e-6, 2e-6));
        let n = nsec(10.0, 5.0, 20.0);
        let (a, b, d) = n.seconds(1e9, 1.0);
        assert!((a - 10.0).abs() < 1e-9 && (b - 5.0).abs() < 1e-9 && (d - 20.0).abs() < 1e-9);
    }

    #[test]
    fn report_sorts_by_typical_time_and_derives_statistics() {
        let t = CostTable::builtin(Flavor::R10000);
        let counts = [
            EventCount {
                event: 0,
                count: 195e6,
            },
            EventCount {
                event: 26,
                count: 1e6,
            },
            EventCount {
                event: 25,
                count: 4e6,
            },
        ];
        let r = format_costs(&t, &counts, None);
        let p26 = r.find(" 26 Secondary").unwrap();
        let p25 = r.find(" 25 Primary").unwrap();
        let p0 = r.find("  0 Cycles").unwrap();
        assert!(p26 < p25 && p25 < p0, "{r}");
        // 1e6 L2 misses x 313 ns = 0.313 s typical.
        assert!(r.contains("    0.313000     0.078250     1.000000"), "{r}");
        let stats = statistics(&t, &counts, None);
        assert!(stats.contains(&("L2 cache line reuse", 3.0)), "{stats:?}");
        // One second of cycles; 0.313 + 4e6 * 10 / 195e6 s accessing memory.
        let mem = stats
            .iter()
            .find(|s| s.0.starts_with("Time accessing"))
            .unwrap()
            .1;
        assert!((mem - (0.313 + 40.0 / 195.0)).abs() < 1e-9, "{mem}");
        assert!(!stats.iter().any(|s| s.0.starts_with("MFLOPS")));
    }
}

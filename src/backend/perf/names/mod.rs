//! Event names of the Linux perf backend.
//!
//! This module turns an event name, as a user would write it for `perf stat -e`, into the
//! `(type, config, config1, config2)` quadruple that `perf_event_open(2)` takes. It knows:
//!
//! * the generic hardware and software events the kernel defines (`cycles`, `instructions`,
//!   `task-clock`, `page-faults`, ...), with perf's aliases ([`builtins`]);
//! * the generic hardware-cache events, spelled the way perf spells them
//!   (`L1-dcache-loads`, `LLC-load-misses`, ...) ([`cache_events`]);
//! * raw events, `r<hex>`, which go to `PERF_TYPE_RAW`;
//! * events of any PMU the kernel lists under `/sys/bus/event_source/devices` ([`SYSFS`]),
//!   written `<pmu>/<event>/` or `<pmu>/<term>=<value>,.../`, and bare event names that one of
//!   those PMUs (the CPU PMU first) defines ([`sysfs_events`]; the layout and the syntax:
//!   [`sysfs`]).
//!
//! [`parse`] tries these in that order. Names of built-in, cache and sysfs events match
//! case-insensitively; the returned [`PerfEvent`] carries the canonical spelling.
//!
//! # Errors
//!
//! * an unknown name gives [`Error::UnknownEvent`];
//! * a PMU event that this host cannot describe (no such PMU, an event or term the PMU does not
//!   define, a term the user has to supply) gives [`Error::EventUnavailable`] with the reason;
//! * a malformed name or value (a value too wide for its field, `r0x..`, a missing `/`) gives
//!   [`Error::InvalidArgument`];
//! * a sysfs file that does not follow the ABI gives [`Error::BadFile`].

use std::path::Path;

use perf_event_open_sys::bindings as sys;

use crate::backend::BackendKind;
use crate::base::error::{Error, Result};
use crate::base::text::{Inline, Text};

pub mod sysfs;

pub use sysfs::sysfs_events;
use sysfs::{bare_alias, resolve_pmu_event};

/// Where the kernel lists its PMUs (event sources).
pub const SYSFS: &str = "/sys/bus/event_source/devices";

/// The fields of `perf_event_attr` that select an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PerfCode {
    /// `perf_event_attr.type`: `PERF_TYPE_*` or the number in a PMU's sysfs `type` file.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1` (a.k.a. `bp_addr`, `kprobe_func`, `uprobe_path`).
    pub config1: u64,
    /// `perf_event_attr.config2` (a.k.a. `bp_len`, `kprobe_addr`, `probe_offset`).
    pub config2: u64,
}

impl PerfCode {
    /// A code with the given type and config, and `config1 = config2 = 0`.
    pub const fn new(type_: u32, config: u64) -> PerfCode {
        PerfCode {
            type_,
            config,
            config1: 0,
            config2: 0,
        }
    }
}

/// Where an event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A generic hardware event (`PERF_TYPE_HARDWARE`).
    Hardware,
    /// A software event counted by the kernel (`PERF_TYPE_SOFTWARE`).
    Software,
    /// A generic hardware-cache event (`PERF_TYPE_HW_CACHE`).
    Cache,
    /// A raw CPU event code (`PERF_TYPE_RAW`).
    Raw,
    /// An event of a PMU listed in sysfs; the type comes from the PMU's `type` file.
    Pmu,
}

/// A resolved event name.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfEvent {
    /// The canonical spelling: `cycles` for `CPU-Cycles`, `msr/tsc/` for `tsc`.
    pub name: String,
    /// What to put in `perf_event_attr`.
    pub code: PerfCode,
    /// Where the event comes from.
    pub class: Class,
    /// Multiply the count by this to get a quantity in [`PerfEvent::unit`] (sysfs `.scale`).
    pub scale: Option<f64>,
    /// The unit of the scaled count, such as `Joules` or `MiB` (sysfs `.unit`).
    pub unit: Option<String>,
}

// `scale` is never NaN (a `.scale` file that does not hold a finite number is rejected), so
// `==` on a `PerfEvent` is an equivalence relation.
impl Eq for PerfEvent {}

/// A generic hardware or software event the kernel defines by number.
///
/// Its strings are held in place ([`Text`], [`Inline`]: they read as `&str` and `&[..]`, and
/// compare with string slices), not as pointers: a pointer in a static table is a relocation
/// the dynamic loader writes in every process that loads the library (issue 48, loading), and
/// this table is read-only data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// perf's name for the event.
    pub name: Text<24>,
    /// Other names perf accepts for it.
    pub aliases: Inline<Text<24>, 1>,
    /// The event's type and config.
    pub code: PerfCode,
    /// [`Class::Hardware`] or [`Class::Software`].
    pub class: Class,
    /// What the event counts.
    pub description: Text<72>,
}

const fn builtin(
    name: &'static str,
    aliases: &'static [&'static str],
    code: PerfCode,
    class: Class,
    description: &'static str,
) -> Builtin {
    let none = Text::new("");
    Builtin {
        name: Text::new(name),
        aliases: match aliases {
            [] => Inline::new(&[], none),
            [a] => Inline::new(&[Text::new(a)], none),
            _ => panic!("Builtin: at most one alias"),
        },
        code,
        class,
        description: Text::new(description),
    }
}

const fn hw(
    name: &'static str,
    aliases: &'static [&'static str],
    id: sys::perf_hw_id,
    description: &'static str,
) -> Builtin {
    builtin(
        name,
        aliases,
        PerfCode::new(sys::PERF_TYPE_HARDWARE, id as u64),
        Class::Hardware,
        description,
    )
}

const fn sw(
    name: &'static str,
    aliases: &'static [&'static str],
    id: sys::perf_sw_ids,
    description: &'static str,
) -> Builtin {
    builtin(
        name,
        aliases,
        PerfCode::new(sys::PERF_TYPE_SOFTWARE, id as u64),
        Class::Software,
        description,
    )
}

/// In one read-only section with `base::eventmap::R10K_EVENTS` (which says why).
#[link_section = ".rodata.perfcompat_event_tables"]
static BUILTINS: [Builtin; 21] = [
    hw(
        "cycles",
        &["cpu-cycles"],
        sys::PERF_COUNT_HW_CPU_CYCLES,
        "CPU cycles (affected by frequency scaling)",
    ),
    hw(
        "instructions",
        &[],
        sys::PERF_COUNT_HW_INSTRUCTIONS,
        "instructions retired",
    ),
    hw(
        "cache-references",
        &[],
        sys::PERF_COUNT_HW_CACHE_REFERENCES,
        "cache accesses, usually last-level cache",
    ),
    hw(
        "cache-misses",
        &[],
        sys::PERF_COUNT_HW_CACHE_MISSES,
        "cache misses, usually last-level cache",
    ),
    hw(
        "branch-instructions",
        &["branches"],
        sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
        "branch instructions retired",
    ),
    hw(
        "branch-misses",
        &[],
        sys::PERF_COUNT_HW_BRANCH_MISSES,
        "mispredicted branch instructions",
    ),
    hw(
        "bus-cycles",
        &[],
        sys::PERF_COUNT_HW_BUS_CYCLES,
        "bus cycles, which can differ from total cycles",
    ),
    hw(
        "stalled-cycles-frontend",
        &["idle-cycles-frontend"],
        sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
        "stalled cycles during issue",
    ),
    hw(
        "stalled-cycles-backend",
        &["idle-cycles-backend"],
        sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
        "stalled cycles during retirement",
    ),
    hw(
        "ref-cycles",
        &[],
        sys::PERF_COUNT_HW_REF_CPU_CYCLES,
        "reference cycles, not affected by frequency scaling",
    ),
    sw(
        "cpu-clock",
        &[],
        sys::PERF_COUNT_SW_CPU_CLOCK,
        "high-resolution per-CPU timer, in nanoseconds",
    ),
    sw(
        "task-clock",
        &[],
        sys::PERF_COUNT_SW_TASK_CLOCK,
        "clock count specific to the task that is running, in nanoseconds",
    ),
    sw(
        "page-faults",
        &["faults"],
        sys::PERF_COUNT_SW_PAGE_FAULTS,
        "page faults",
    ),
    sw(
        "context-switches",
        &["cs"],
        sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
        "context switches",
    ),
    sw(
        "cpu-migrations",
        &["migrations"],
        sys::PERF_COUNT_SW_CPU_MIGRATIONS,
        "times the process migrated to a new CPU",
    ),
    sw(
        "minor-faults",
        &[],
        sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
        "minor page faults (no disk I/O needed)",
    ),
    sw(
        "major-faults",
        &[],
        sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
        "major page faults (disk I/O needed)",
    ),
    sw(
        "alignment-faults",
        &[],
        sys::PERF_COUNT_SW_ALIGNMENT_FAULTS,
        "alignment faults (unaligned accesses fixed up by the kernel)",
    ),
    sw(
        "emulation-faults",
        &[],
        sys::PERF_COUNT_SW_EMULATION_FAULTS,
        "instructions the kernel emulated",
    ),
    sw(
        "dummy",
        &[],
        sys::PERF_COUNT_SW_DUMMY,
        "counts nothing; a placeholder for collecting side-band records",
    ),
    sw(
        "cgroup-switches",
        &[],
        sys::PERF_COUNT_SW_CGROUP_SWITCHES,
        "context switches to a task in a different cgroup",
    ),
];

/// perf's generic hardware events and the kernel's software events, with their aliases.
pub fn builtins() -> &'static [Builtin] {
    &BUILTINS
}

/// The Solaris generic event names (generic_events(3CPC), from PAPI) that have a perf
/// equivalent: `(generic name, perf event, description)`. The perf events are the closest
/// generic ones, not always the exact PAPI definition: `PAPI_l1_dcm` counts L1 data-cache
/// *load* misses, and `PAPI_l3_*` are perf's last-level-cache events (`cache-references`,
/// `cache-misses`), whatever level that cache is on this host.
pub static GENERICS: [(Text<12>, Text<24>, Text<48>); 13] = [
    generic_entry("PAPI_tot_cyc", "cycles", "Total cycles"),
    generic_entry("PAPI_tot_ins", "instructions", "Instructions completed"),
    generic_entry("PAPI_br_ins", "branch-instructions", "Branch instructions"),
    generic_entry(
        "PAPI_br_msp",
        "branch-misses",
        "Conditional branch instructions mispredicted",
    ),
    generic_entry("PAPI_l1_dcr", "L1-dcache-loads", "Level 1 data cache reads"),
    generic_entry(
        "PAPI_l1_dcm",
        "L1-dcache-load-misses",
        "Level 1 data cache misses (loads)",
    ),
    generic_entry(
        "PAPI_l1_icm",
        "L1-icache-load-misses",
        "Level 1 instruction cache misses",
    ),
    generic_entry(
        "PAPI_l3_tca",
        "cache-references",
        "Last level cache accesses",
    ),
    generic_entry("PAPI_l3_tcm", "cache-misses", "Last level cache misses"),
    generic_entry(
        "PAPI_tlb_dm",
        "dTLB-load-misses",
        "Data translation lookaside buffer misses (loads)",
    ),
    generic_entry(
        "PAPI_tlb_im",
        "iTLB-load-misses",
        "Instruction translation lookaside buffer misses",
    ),
    generic_entry(
        "PAPI_stl_icy",
        "stalled-cycles-frontend",
        "Cycles with no instruction issue",
    ),
    generic_entry(
        "PAPI_res_stl",
        "stalled-cycles-backend",
        "Cycles stalled on any resource",
    ),
];

/// What every name of [`GENERICS`] starts with (a build fails on one that does not).
const GENERIC_PREFIX: &str = "PAPI_";

/// One entry of [`GENERICS`], its strings held in place (no relocation at load, issue 48).
const fn generic_entry(
    name: &str,
    perf: &str,
    description: &str,
) -> (Text<12>, Text<24>, Text<48>) {
    let (n, p) = (name.as_bytes(), GENERIC_PREFIX.as_bytes());
    let mut i = 0;
    while i < p.len() {
        assert!(
            i < n.len() && n[i] == p[i],
            "GENERICS: a name without the PAPI_ prefix"
        );
        i += 1;
    }
    (Text::new(name), Text::new(perf), Text::new(description))
}

/// The perf event behind generic name `name` (case-insensitive), if it has one.
///
/// Every generic name starts with `PAPI_`: any other name is answered without reading the
/// table. Resolving an event tries this first, and the table lies in read-only data (its
/// strings held in place, issue 48): a libperfex first use without an event map (`cycles`)
/// read it for nothing, a page fault of a 64 KiB window of that data nothing else of it
/// touched (about 13k instructions in the arm64 guest).
pub fn generic(name: &str) -> Option<&'static str> {
    if !name
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case(GENERIC_PREFIX))
    {
        return None;
    }
    GENERICS
        .iter()
        .find(|(g, _, _)| g.eq_ignore_ascii_case(name))
        .map(|(_, e, _)| e.as_str())
}

/// The caches of `PERF_TYPE_HW_CACHE`, as perf names them, with their ids.
const CACHES: [(Text<12>, sys::perf_hw_cache_id); 7] = [
    (Text::new("L1-dcache"), sys::PERF_COUNT_HW_CACHE_L1D),
    (Text::new("L1-icache"), sys::PERF_COUNT_HW_CACHE_L1I),
    (Text::new("LLC"), sys::PERF_COUNT_HW_CACHE_LL),
    (Text::new("dTLB"), sys::PERF_COUNT_HW_CACHE_DTLB),
    (Text::new("iTLB"), sys::PERF_COUNT_HW_CACHE_ITLB),
    (Text::new("branch"), sys::PERF_COUNT_HW_CACHE_BPU),
    (Text::new("node"), sys::PERF_COUNT_HW_CACHE_NODE),
];

/// The operations: (name in a miss event, name in an access event, id).
const CACHE_OPS: [(Text<8>, Text<12>, sys::perf_hw_cache_op_id); 3] = [
    (
        Text::new("load"),
        Text::new("loads"),
        sys::PERF_COUNT_HW_CACHE_OP_READ,
    ),
    (
        Text::new("store"),
        Text::new("stores"),
        sys::PERF_COUNT_HW_CACHE_OP_WRITE,
    ),
    (
        Text::new("prefetch"),
        Text::new("prefetches"),
        sys::PERF_COUNT_HW_CACHE_OP_PREFETCH,
    ),
];

/// Every hardware-cache event name (all 7 caches × 3 operations × access/miss), with its code.
///
/// `<cache>-<ops>` counts accesses (`L1-dcache-loads`), `<cache>-<op>-misses` counts misses
/// (`L1-dcache-load-misses`). The config is `cache | op << 8 | result << 16`. perf lists only
/// the combinations the CPU supports; this lists all of them and leaves the kernel to refuse the
/// others when the event is opened.
pub fn cache_events() -> Vec<(String, PerfCode)> {
    let mut out = Vec::with_capacity(CACHES.len() * CACHE_OPS.len() * 2);
    for (cache, cache_id) in CACHES {
        for (op, ops, op_id) in CACHE_OPS {
            for (name, result) in [
                (
                    format!("{cache}-{ops}"),
                    sys::PERF_COUNT_HW_CACHE_RESULT_ACCESS,
                ),
                (
                    format!("{cache}-{op}-misses"),
                    sys::PERF_COUNT_HW_CACHE_RESULT_MISS,
                ),
            ] {
                let config = cache_id as u64 | (op_id as u64) << 8 | (result as u64) << 16;
                out.push((name, PerfCode::new(sys::PERF_TYPE_HW_CACHE, config)));
            }
        }
    }
    out
}

/// Resolve an event name.
///
/// `spec` is tried, in order, as a built-in event or alias, a hardware-cache event, a raw event
/// `r<hex>` (1 to 16 hex digits), a PMU event `<pmu>/<body>/` with `<pmu>` a directory under
/// `sysfs`, and a bare event alias of a PMU under `sysfs`: the CPU PMU (`cpu`, `cpu_core`,
/// `cpu_atom`) first, then the others in name order. See [`sysfs`] for the body syntax and the
/// [module documentation](self) for the errors.
pub fn parse(spec: &str, sysfs: &Path) -> Result<PerfEvent> {
    let s = spec.trim();
    if s.is_empty() {
        return Err(Error::InvalidArgument("empty event name".into()));
    }
    if let Some(b) = BUILTINS.iter().find(|b| {
        b.name.eq_ignore_ascii_case(s) || b.aliases.iter().any(|a| a.eq_ignore_ascii_case(s))
    }) {
        return Ok(PerfEvent {
            name: b.name.to_string(),
            code: b.code,
            class: b.class,
            scale: None,
            unit: None,
        });
    }
    if let Some((name, code)) = cache_events()
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
    {
        return Ok(PerfEvent {
            name,
            code,
            class: Class::Cache,
            scale: None,
            unit: None,
        });
    }
    if let Some(ev) = parse_raw(s)? {
        return Ok(ev);
    }
    if let Some((pmu, rest)) = s.split_once('/') {
        let body = match rest.strip_suffix('/') {
            Some(b) if !b.contains('/') => b,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "event '{s}' must have the form <pmu>/<event or terms>/ (nothing may follow \
                     the closing '/'; modifiers are request flags here)"
                )))
            }
        };
        return resolve_pmu_event(sysfs, pmu, body, s);
    }
    if let Some(ev) = bare_alias(sysfs, s)? {
        return Ok(ev);
    }
    Err(Error::UnknownEvent {
        event: spec.to_string(),
        backend: BackendKind::Perf.to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// Raw events.

/// `r<hex>` → `Some(raw event)`; something else → `None`; `r0x..` or too many digits → error.
fn parse_raw(s: &str) -> Result<Option<PerfEvent>> {
    let Some(hex) = s.strip_prefix('r').or_else(|| s.strip_prefix('R')) else {
        return Ok(None);
    };
    if let Some(digits) = hex.strip_prefix("0x").or_else(|| hex.strip_prefix("0X")) {
        if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::InvalidArgument(format!(
                "raw event '{s}': write the code in hex without '0x', as r{}",
                digits.to_ascii_lowercase()
            )));
        }
    }
    if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Ok(None);
    }
    if hex.len() > 16 {
        return Err(Error::InvalidArgument(format!(
            "raw event '{s}' has {} hex digits; config holds at most 16",
            hex.len()
        )));
    }
    let config = u64::from_str_radix(hex, 16).expect("checked hex digits");
    Ok(Some(PerfEvent {
        name: format!("r{}", hex.to_ascii_lowercase()),
        code: PerfCode::new(sys::PERF_TYPE_RAW, config),
        class: Class::Raw,
        scale: None,
        unit: None,
    }))
}

#[cfg(test)]
mod tests {

    #[test]
    fn generic_names_are_found_by_their_prefix_in_any_case() {
        assert_eq!(generic("PAPI_tot_cyc"), Some("cycles"));
        assert_eq!(generic("papi_TOT_INS"), Some("instructions"));
        for name in [
            "cycles",
            "",
            "PAPI",
            "PAPI_",
            "PAPI_nope",
            "papi_tot_cy",
            "é",
        ] {
            assert_eq!(generic(name), None, "{name:?}");
        }
        for (name, perf, _) in &GENERICS {
            assert_eq!(generic(name), Some(perf.as_str()));
        }
    }

    /// `generic_entry` keeps its three strings in place, and refuses a name without the
    /// prefix `generic` looks for first (at build time in `GENERICS`; here at run time).
    #[test]
    fn a_generic_entry_holds_its_strings_and_needs_the_prefix() {
        let (name, perf, description) = generic_entry("PAPI_X", "cycles", "what it counts");
        assert_eq!(
            (name.as_str(), perf.as_str(), description.as_str()),
            ("PAPI_X", "cycles", "what it counts")
        );
        for bad in ["PAPX_TOT_CYC", "PAP", "cycles", ""] {
            let r = std::panic::catch_unwind(|| generic_entry(bad, "cycles", ""));
            assert!(r.is_err(), "{bad:?} was taken");
        }
    }
    use super::*;
    use std::path::PathBuf;

    pub(super) fn nosys() -> PathBuf {
        PathBuf::from("/nonexistent/perfcompat/sysfs")
    }

    fn code(spec: &str) -> PerfCode {
        parse(spec, &nosys()).unwrap().code
    }

    pub(super) fn msg(r: Result<PerfEvent>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn builtins_resolve() {
        let hw = |c: u32| PerfCode::new(sys::PERF_TYPE_HARDWARE, c as u64);
        let sw = |c: u32| PerfCode::new(sys::PERF_TYPE_SOFTWARE, c as u64);
        let cases = [
            ("cycles", hw(sys::PERF_COUNT_HW_CPU_CYCLES)),
            ("cpu-cycles", hw(sys::PERF_COUNT_HW_CPU_CYCLES)),
            ("instructions", hw(sys::PERF_COUNT_HW_INSTRUCTIONS)),
            ("cache-references", hw(sys::PERF_COUNT_HW_CACHE_REFERENCES)),
            ("cache-misses", hw(sys::PERF_COUNT_HW_CACHE_MISSES)),
            (
                "branch-instructions",
                hw(sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
            ),
            ("branches", hw(sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS)),
            ("branch-misses", hw(sys::PERF_COUNT_HW_BRANCH_MISSES)),
            ("bus-cycles", hw(sys::PERF_COUNT_HW_BUS_CYCLES)),
            (
                "stalled-cycles-frontend",
                hw(sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND),
            ),
            (
                "idle-cycles-frontend",
                hw(sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND),
            ),
            (
                "stalled-cycles-backend",
                hw(sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND),
            ),
            (
                "idle-cycles-backend",
                hw(sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND),
            ),
            ("ref-cycles", hw(sys::PERF_COUNT_HW_REF_CPU_CYCLES)),
            ("cpu-clock", sw(sys::PERF_COUNT_SW_CPU_CLOCK)),
            ("task-clock", sw(sys::PERF_COUNT_SW_TASK_CLOCK)),
            ("page-faults", sw(sys::PERF_COUNT_SW_PAGE_FAULTS)),
            ("faults", sw(sys::PERF_COUNT_SW_PAGE_FAULTS)),
            ("context-switches", sw(sys::PERF_COUNT_SW_CONTEXT_SWITCHES)),
            ("cs", sw(sys::PERF_COUNT_SW_CONTEXT_SWITCHES)),
            ("cpu-migrations", sw(sys::PERF_COUNT_SW_CPU_MIGRATIONS)),
            ("migrations", sw(sys::PERF_COUNT_SW_CPU_MIGRATIONS)),
            ("minor-faults", sw(sys::PERF_COUNT_SW_PAGE_FAULTS_MIN)),
            ("major-faults", sw(sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ)),
            ("alignment-faults", sw(sys::PERF_COUNT_SW_ALIGNMENT_FAULTS)),
            ("emulation-faults", sw(sys::PERF_COUNT_SW_EMULATION_FAULTS)),
            ("dummy", sw(sys::PERF_COUNT_SW_DUMMY)),
            ("cgroup-switches", sw(sys::PERF_COUNT_SW_CGROUP_SWITCHES)),
        ];
        for (name, want) in cases {
            assert_eq!(code(name), want, "{name}");
        }
        assert_eq!(builtins().len(), 21);
        for b in builtins() {
            let want = if b.code.type_ == sys::PERF_TYPE_HARDWARE {
                Class::Hardware
            } else {
                Class::Software
            };
            assert_eq!(b.class, want, "{}", b.name);
            assert!(!b.description.is_empty());
        }
        let e = parse("cpu-cycles", &nosys()).unwrap();
        assert_eq!((e.name.as_str(), e.class), ("cycles", Class::Hardware));
        assert_eq!(parse("cs", &nosys()).unwrap().name, "context-switches");
    }

    #[test]
    fn case_insensitive() {
        let e = parse("CPU-Cycles", &nosys()).unwrap();
        assert_eq!(e.name, "cycles");
        assert_eq!(code("TASK-CLOCK"), code("task-clock"));
        let e = parse("llc-LOAD-misses", &nosys()).unwrap();
        assert_eq!(e.name, "LLC-load-misses");
        assert_eq!(e.class, Class::Cache);
        assert_eq!(code("R1A8"), PerfCode::new(sys::PERF_TYPE_RAW, 0x1a8));
    }

    #[test]
    fn cache_names() {
        let all = cache_events();
        assert_eq!(all.len(), 42);
        let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 42);
        let c = |n: &str| {
            let e = parse(n, &nosys()).unwrap();
            assert_eq!(e.class, Class::Cache);
            assert_eq!(e.code.type_, sys::PERF_TYPE_HW_CACHE);
            e.code.config
        };
        assert_eq!(c("L1-dcache-loads"), 0);
        assert_eq!(c("L1-dcache-load-misses"), 1 << 16);
        assert_eq!(c("L1-dcache-stores"), 1 << 8);
        assert_eq!(c("L1-dcache-store-misses"), 1 << 8 | 1 << 16);
        assert_eq!(c("L1-dcache-prefetches"), 2 << 8);
        assert_eq!(c("L1-dcache-prefetch-misses"), 2 << 8 | 1 << 16);
        assert_eq!(c("L1-icache-load-misses"), 1 | 1 << 16);
        assert_eq!(c("LLC-load-misses"), 2 | 1 << 16);
        assert_eq!(c("LLC-stores"), 2 | 1 << 8);
        assert_eq!(c("dTLB-load-misses"), 3 | 1 << 16);
        assert_eq!(c("iTLB-loads"), 4);
        assert_eq!(c("branch-loads"), 5);
        assert_eq!(c("branch-load-misses"), 5 | 1 << 16);
        assert_eq!(c("node-prefetch-misses"), 6 | 2 << 8 | 1 << 16);
        assert_eq!(
            c("node-stores"),
            sys::PERF_COUNT_HW_CACHE_NODE as u64 | (sys::PERF_COUNT_HW_CACHE_OP_WRITE as u64) << 8
        );
        for (n, pc) in &all {
            assert_eq!(code(n), *pc, "{n}");
        }
        assert!(matches!(
            parse("L1-dcache-load-miss", &nosys()),
            Err(Error::UnknownEvent { .. })
        ));
    }

    #[test]
    fn raw_events() {
        let e = parse("r1a8", &nosys()).unwrap();
        assert_eq!(e.code, PerfCode::new(sys::PERF_TYPE_RAW, 0x1a8));
        assert_eq!((e.name.as_str(), e.class), ("r1a8", Class::Raw));
        assert_eq!(code("r0").config, 0);
        assert_eq!(code("rffffffffffffffff").config, u64::MAX);
        let m = msg(parse("r0x1a8", &nosys()));
        assert!(m.contains("without '0x'") && m.contains("r1a8"), "{m}");
        let m = msg(parse("r10000000000000000", &nosys()));
        assert!(m.contains("17 hex digits"), "{m}");
        // `r` followed by non-hex is just an unknown name.
        assert!(matches!(
            parse("rxyz", &nosys()),
            Err(Error::UnknownEvent { .. })
        ));
        assert!(matches!(
            parse("r", &nosys()),
            Err(Error::UnknownEvent { .. })
        ));
    }

    #[test]
    fn unknown_names() {
        match parse(" bogus-event ", &nosys()) {
            Err(Error::UnknownEvent { event, backend }) => {
                assert_eq!(event, " bogus-event ");
                assert_eq!(backend, "perf");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse("", &nosys()),
            Err(Error::InvalidArgument(_))
        ));
    }
}

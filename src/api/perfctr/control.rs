//! perfctr's control data (`struct perfctr_cpu_control`) checked and turned into requests,
//! per CPU family: the emulated Pentium III (P6), Pentium 4 (`super::p4`), PowerPC 750 and
//! 7450 (ppc32), and the perf backend, whose layout follows the host: the P6 layout with
//! software events and `PERF_TYPE_RAW` events on x86 ([`raw_event`]), the Pentium 4's
//! CCCR/ESCR pairs in perf's P4 raw form on a NetBurst host (`super::p4`), the ARMv8 event
//! number on arm64 ([`arm64_event`]). Errors are `EINVAL`, as perfctr's low-level drivers
//! refused control data they could not program (`perfctr_cpu_update_control`).

use crate::backend::sim::model::Model;
use crate::backend::BackendKind;
use crate::base::error::{Error, Result};
use crate::base::set::{Request, RequestFlags};
use crate::base::text::Text;

/// Room in the per-counter arrays (perfctr's x86 size, the largest of its families).
pub const MAX_CTRS: usize = 18;

/// `struct perfctr_cpu_control`, every family's fields in one (see `docs/perfctr.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuControl {
    /// Sample the time-stamp counter.
    pub tsc_on: u32,
    /// Accumulation-mode counters: elements `0..nractrs`.
    pub nractrs: u32,
    /// Interrupt-mode counters: elements `nractrs..nractrs + nrictrs`.
    pub nrictrs: u32,
    /// Per counter: the hardware counter it uses (no two the same).
    pub pmc_map: [u32; MAX_CTRS],
    /// Per counter: the event-select (P6: EVNTSEL; P4: CCCR; PowerPC: PMCnSEL) value.
    pub evntsel: [u32; MAX_CTRS],
    /// Per i-mode counter: the value it is (re)loaded with.
    pub ireset: [i32; MAX_CTRS],
    /// Pentium 4: per counter, its ESCR value.
    pub p4_escr: [u32; MAX_CTRS],
    /// Pentium 4: PEBS_ENABLE (replay tagging).
    pub p4_pebs_enable: u32,
    /// Pentium 4: PEBS_MATRIX_VERT (replay tagging).
    pub p4_pebs_matrix_vert: u32,
    /// PowerPC: MMCR0 without the PMC1/PMC2 selects.
    pub ppc_mmcr0: u32,
    /// PowerPC: MMCR2 (THRESHMULT only).
    pub ppc_mmcr2: u32,
}

impl CpuControl {
    /// Counters to program: `nractrs + nrictrs` (saturating: a huge value is refused, not
    /// wrapped).
    pub fn nrctrs(&self) -> u32 {
        self.nractrs.saturating_add(self.nrictrs)
    }
}

/// Which control layout and event table a backend takes.
#[derive(Debug, Clone, Copy)]
pub enum Family {
    /// The emulated Pentium III: P6 EVNTSEL values, two counters.
    P6(&'static Model),
    /// The emulated Pentium 4: CCCR values in `evntsel`, ESCR values in `p4_escr`.
    P4(&'static Model),
    /// The emulated PowerPC 750 or 7450: PMCnSEL codes, MMCR0/MMCR2.
    Ppc(&'static Model),
    /// The perf backend on an x86 host other than a Pentium 4: the P6 layout, software
    /// events (see [`SOFTWARE`]), the four generic events and the CPU's raw events
    /// ([`raw_event`]).
    Perf,
    /// The perf backend on a Pentium 4 (NetBurst) host: CCCR values in `evntsel`, ESCR values
    /// in `p4_escr`, as on the emulated Pentium 4, counted as the kernel's P4 raw events.
    PerfP4,
    /// The perf backend on arm64: `evntsel` bits 0-15 are the ARMv8 PMU event number
    /// ([`arm64_event`]); software events as on x86.
    PerfArm64,
    /// A backend whose control data is not translated (the other emulated PMUs): the TSC
    /// only.
    TscOnly,
}

impl Family {
    /// The family of the backend `kind`.
    pub fn of(kind: BackendKind) -> Family {
        match kind {
            BackendKind::Perf => perf_family(),
            BackendKind::Sim(m) if m.name == "pentium3" => Family::P6(m),
            BackendKind::Sim(m) if m.name == "pentium4" => Family::P4(m),
            BackendKind::Sim(m) if m.name.starts_with("ppc") => Family::Ppc(m),
            _ => Family::TscOnly,
        }
    }

    /// How many counters control data may program.
    pub fn nrctrs(self) -> u32 {
        match self {
            Family::P6(m) | Family::P4(m) | Family::Ppc(m) => m.ncounters,
            Family::Perf | Family::PerfArm64 => MAX_CTRS as u32,
            Family::PerfP4 => 18,
            Family::TscOnly => 0,
        }
    }
}

/// The perf backend's family on this host: by the architecture the library was built for,
/// and on x86 by the CPU (`/proc/cpuinfo`: Intel family 15 is the NetBurst Pentium 4 and
/// Xeon, whose PMU Linux drives with its P4 driver). Cached.
fn perf_family() -> Family {
    if cfg!(target_arch = "aarch64") {
        return Family::PerfArm64;
    }
    static NETBURST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let p4 = *NETBURST
        .get_or_init(|| std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| is_netburst(&s)));
    if p4 {
        Family::PerfP4
    } else {
        Family::Perf
    }
}

/// Whether `/proc/cpuinfo`'s text (`cpuinfo`) describes a NetBurst CPU: its first processor's
/// `vendor_id` is `GenuineIntel` and its `cpu family` 15.
pub fn is_netburst(cpuinfo: &str) -> bool {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    field("vendor_id").as_deref() == Some("GenuineIntel")
        && field("cpu family").as_deref() == Some("15")
}

/// Bit 31 of a Pentium 4 `pmc_map` entry: read with fast RDPMC.
pub const P4_FAST_RDPMC: u32 = 0x8000_0000;

/// P6 EVNTSEL fields.
pub mod p6 {
    /// Event select.
    pub const EVENT: u32 = 0xff;
    /// Unit mask.
    pub const UMASK: u32 = 0xff00;
    /// Count in user mode (CPL 3).
    pub const USR: u32 = 1 << 16;
    /// Count in kernel mode (CPL 0).
    pub const OS: u32 = 1 << 17;
    /// Edge detect.
    pub const EDGE: u32 = 1 << 18;
    /// Pin control: reserved for perfctr.
    pub const PC: u32 = 1 << 19;
    /// Interrupt on overflow: set exactly on the i-mode counters.
    pub const INT: u32 = 1 << 20;
    /// Reserved on the P6 (perfcompat's software-event marker on the perf backend).
    pub const RESERVED21: u32 = 1 << 21;
    /// Enable: set in EVNTSEL0, reserved in EVNTSEL1.
    pub const EN: u32 = 1 << 22;
    /// Invert the count-mask comparison.
    pub const INV: u32 = 1 << 23;
    /// Count mask.
    pub const CMASK: u32 = 0xff00_0000;
}

/// perfcompat's extension on the perf backend: an evntsel with bit 21 (reserved on the P6)
/// set names the Linux software event whose `PERF_COUNT_SW_*` number is its low 8 bits; the
/// other fields keep their P6 meaning (USR, OS, INT). The header's
/// `PERFCTR_EVNTSEL_SOFTWARE(n)`.
pub const SOFTWARE: u32 = p6::RESERVED21;

/// The Linux software events by `PERF_COUNT_SW_*` number, as the perf backend names them.
/// (Held in place, not as `&str`: a pointer in a table is a relocation at load, issue 48.)
static SW_EVENTS: [Text<16>; 9] = [
    Text::new("cpu-clock"),
    Text::new("task-clock"),
    Text::new("page-faults"),
    Text::new("context-switches"),
    Text::new("cpu-migrations"),
    Text::new("minor-faults"),
    Text::new("major-faults"),
    Text::new("alignment-faults"),
    Text::new("emulation-faults"),
];

/// The P6 architectural events the perf backend takes by name (the kernel's generic hardware
/// events; on a host without a PMU `cycles` is estimated and the others fail with `ENOENT`).
static P6_GENERIC: [(u32, Text<16>); 4] = [
    (0x79, Text::new("cycles")),
    (0xC0, Text::new("instructions")),
    (0xC4, Text::new("branches")),
    (0xC5, Text::new("branch-misses")),
];

/// `EINVAL` with its cause.
fn bad(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// Check `c` for `family` and the requests it programs, in counter order (request `i` is
/// perfctr's counter `i`). `EINVAL` (with the cause) for too many counters, a `pmc_map` out of
/// range or used twice, an `ireset` outside the family's range, an `evntsel` the family does
/// not know, reserved or inconsistent bits.
pub fn requests(family: Family, c: &CpuControl) -> Result<Vec<Request>> {
    let n = c.nrctrs();
    if n > family.nrctrs() {
        return Err(bad(format!(
            "{n} counters (nractrs {} + nrictrs {}): this CPU has {}",
            c.nractrs,
            c.nrictrs,
            family.nrctrs()
        )));
    }
    let mut used = 0u64;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let imode = i >= c.nractrs as usize;
        // The Pentium 4's pmc_map is the RDPMC operand: bit 31 asks for fast reads.
        let pmc = match family {
            Family::P4(_) | Family::PerfP4 => c.pmc_map[i] & !P4_FAST_RDPMC,
            _ => c.pmc_map[i],
        };
        if pmc >= family.nrctrs() {
            return Err(bad(format!(
                "pmc_map[{i}] = {pmc}: no such counter (0..{})",
                family.nrctrs()
            )));
        }
        if used & (1 << pmc) != 0 {
            return Err(bad(format!(
                "pmc_map[{i}] = {pmc}: counter {pmc} is mapped twice"
            )));
        }
        used |= 1 << pmc;
        let p4 = super::p4::Counter {
            cccr: c.evntsel[i],
            escr: c.p4_escr[i],
            ireset: c.ireset[i],
            pmc,
            imode,
        };
        let r = match family {
            Family::P6(m) => p6_request(m, i, c.evntsel[i], pmc, imode)?,
            Family::P4(m) => super::p4::request(m, i, &p4)?,
            Family::Ppc(m) => ppc_request(m, i, c, pmc)?,
            Family::Perf | Family::PerfArm64 => perf_request(family, i, c.evntsel[i], imode)?,
            Family::PerfP4 => super::p4::perf_raw(i, &p4, c.p4_pebs_enable, c.p4_pebs_matrix_vert)?,
            Family::TscOnly => unreachable!("no counters"),
        };
        out.push(if imode {
            r.preset(preset(family, i, c.ireset[i])?).notify()
        } else {
            r
        });
    }
    match family {
        Family::Ppc(m) => ppc_globals(m, c)?,
        Family::P4(_) | Family::PerfP4 => {
            super::p4::pebs(c.p4_pebs_enable, c.p4_pebs_matrix_vert)?;
        }
        _ => {}
    }
    Ok(out)
}

/// The engine's preset for an i-mode counter reloaded with `ireset`: the 64-bit value that
/// wraps after as many events as the hardware counter takes to overflow. x86 (and perf):
/// `ireset < 0`, overflow after `-ireset` events (a negative 32-bit value sign-extended into
/// the 40-bit register, which wraps). PowerPC: `0 <= ireset <= 0x7fffffff`, overflow when
/// bit 31 becomes set, after `2^31 - ireset` events.
pub fn preset(family: Family, i: usize, ireset: i32) -> Result<u64> {
    match family {
        Family::Ppc(_) if ireset >= 0 => Ok((ireset as u64).wrapping_sub(1 << 31)),
        Family::Ppc(_) => Err(bad(format!(
            "ireset[{i}] = {ireset}: PowerPC i-mode counters restart from 0..0x7fffffff"
        ))),
        _ if ireset < 0 => Ok(i64::from(ireset) as u64),
        _ => Err(bad(format!(
            "ireset[{i}] = {ireset}: x86 i-mode counters restart from a negative value"
        ))),
    }
}

/// The modes of a P6-layout evntsel.
fn p6_flags(evntsel: u32) -> RequestFlags {
    RequestFlags {
        user: evntsel & p6::USR != 0,
        system: evntsel & p6::OS != 0,
        ..RequestFlags::default()
    }
}

/// The INT bit must say whether the counter is an i-mode one.
fn check_int(i: usize, evntsel: u32, imode: bool) -> Result<()> {
    if (evntsel & p6::INT != 0) != imode {
        return Err(bad(format!(
            "evntsel[{i}] = {evntsel:#x}: the INT bit (0x100000) must be set exactly on i-mode counters"
        )));
    }
    Ok(())
}

/// The event of `m` that counter `pmc` counts with select `code`.
fn event_on(m: &Model, pmc: u32, code: u32) -> Option<&'static str> {
    m.events
        .iter()
        .find(|e| {
            e.routes
                .iter()
                .any(|r| r.code == code && r.counters & (1 << pmc) != 0)
        })
        .map(|e| e.name.as_str())
}

fn p6_request(m: &Model, i: usize, evntsel: u32, pmc: u32, imode: bool) -> Result<Request> {
    if evntsel & (p6::PC | p6::RESERVED21) != 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {evntsel:#x}: bits 19 and 21 are reserved"
        )));
    }
    check_int(i, evntsel, imode)?;
    if (evntsel & p6::EN != 0) != (pmc == 0) {
        return Err(bad(format!(
            "evntsel[{i}] = {evntsel:#x}: the enable bit (0x400000) is set in EVNTSEL0 only (counter {pmc})"
        )));
    }
    let code = evntsel & p6::EVENT;
    let name = event_on(m, pmc, code).ok_or_else(|| {
        bad(format!(
            "evntsel[{i}] = {evntsel:#x}: event {code:#x} is not a {} event of counter {pmc}",
            m.cciname
        ))
    })?;
    Ok(Request::new(name).on_counter(pmc).flags(p6_flags(evntsel)))
}

/// MMCR0 bits: freeze all counters, in supervisor state, in problem (user) state.
const MMCR0_FC: u32 = 0x8000_0000;
const MMCR0_FCS: u32 = 0x4000_0000;
const MMCR0_FCP: u32 = 0x2000_0000;
/// MMCR0's PMC1SEL and PMC2SEL fields: reserved in control data (they come from evntsel).
const MMCR0_PMCSEL: u32 = 0x0000_1fff;
/// MMCR2's THRESHMULT, the only bit control data may set (745x only).
const MMCR2_THRESHMULT: u32 = 0x8000_0000;

fn ppc_request(m: &Model, i: usize, c: &CpuControl, pmc: u32) -> Result<Request> {
    let code = c.evntsel[i];
    let name = event_on(m, pmc, code).ok_or_else(|| {
        bad(format!(
            "evntsel[{i}] = {code:#x}: not a {} event of PMC{}",
            m.cciname,
            pmc + 1
        ))
    })?;
    let frozen = c.ppc_mmcr0 & MMCR0_FC != 0;
    Ok(Request::new(name).on_counter(pmc).flags(RequestFlags {
        user: !frozen && c.ppc_mmcr0 & MMCR0_FCP == 0,
        system: !frozen && c.ppc_mmcr0 & MMCR0_FCS == 0,
        ..RequestFlags::default()
    }))
}

fn ppc_globals(m: &Model, c: &CpuControl) -> Result<()> {
    if c.ppc_mmcr0 & MMCR0_PMCSEL != 0 {
        return Err(bad(format!(
            "ppc.mmcr0 = {:#x}: PMC1SEL and PMC2SEL (0x1fff) are reserved: the events are in evntsel",
            c.ppc_mmcr0
        )));
    }
    let allowed = if m.ncounters > 4 { MMCR2_THRESHMULT } else { 0 };
    if c.ppc_mmcr2 & !allowed != 0 {
        return Err(bad(format!(
            "ppc.mmcr2 = {:#x}: only THRESHMULT (0x80000000), on 74xx processors",
            c.ppc_mmcr2
        )));
    }
    Ok(())
}

/// A perf-backend counter on x86 (`Family::Perf`) or arm64 (`Family::PerfArm64`).
fn perf_request(family: Family, i: usize, evntsel: u32, imode: bool) -> Result<Request> {
    check_int(i, evntsel, imode)?;
    let code = evntsel & p6::EVENT;
    if evntsel & SOFTWARE != 0 {
        let name = SW_EVENTS.get(code as usize).ok_or_else(|| {
            bad(format!(
                "evntsel[{i}] = {evntsel:#x}: no such software event on the perf backend \
                 (PERFCTR_EVNTSEL_SOFTWARE(0..8))"
            ))
        })?;
        return Ok(Request::new(name.as_str()).flags(p6_flags(evntsel)));
    }
    if let Family::PerfArm64 = family {
        let raw = arm64_event(evntsel).map_err(|e| bad(format!("evntsel[{i}]: {e}")))?;
        return Ok(Request::new(format!("r{:x}", raw.config)).flags(p6_flags(evntsel)));
    }
    // The four architectural events by the kernel's generic names when nothing else is set
    // (portable, and `cycles` is estimated where there is no PMU); any other evntsel is the
    // CPU's own raw event.
    if evntsel & !(p6::USR | p6::OS | p6::INT | p6::EN | p6::EVENT) == 0 {
        if let Some((_, name)) = P6_GENERIC.iter().find(|(c, _)| *c == code) {
            return Ok(Request::new(name.as_str()).flags(p6_flags(evntsel)));
        }
    }
    let raw = raw_event(evntsel).map_err(|e| bad(format!("evntsel[{i}]: {e}")))?;
    Ok(Request::new(format!("r{:x}", raw.config)).flags(p6_flags(evntsel)))
}

/// A `PERF_TYPE_RAW` event: the kernel's x86 raw `config` and the modes to exclude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    /// `perf_event_attr.config`: event select, unit mask, edge, invert, count mask.
    pub config: u64,
    /// `exclude_user`: USR clear.
    pub exclude_user: bool,
    /// `exclude_kernel`: OS clear.
    pub exclude_kernel: bool,
}

/// A P6/K7/K8/Core-family evntsel as a `PERF_TYPE_RAW` event (issue 47's real-x86 mapping:
/// the perf backend's `r<hex>` event for an evntsel that is not a software event or one of the
/// four generic ones): the event select (bits 0-7), unit mask (8-15), edge (18),
/// invert (23) and count mask (24-31) keep their places in `config`, which is the layout of
/// the kernel's x86 raw events; USR and OS become the exclude bits; INT and EN are the
/// kernel's to set and are dropped. `EINVAL` for the reserved bits 19 and 21, and for a value
/// that counts in neither mode.
pub fn raw_event(evntsel: u32) -> Result<RawEvent> {
    if evntsel & (p6::PC | p6::RESERVED21) != 0 {
        return Err(bad(format!(
            "evntsel {evntsel:#x}: bits 19 and 21 are reserved"
        )));
    }
    if evntsel & (p6::USR | p6::OS) == 0 {
        return Err(bad(format!(
            "evntsel {evntsel:#x}: counts in no mode (neither USR nor OS)"
        )));
    }
    let keep = p6::EVENT | p6::UMASK | p6::EDGE | p6::INV | p6::CMASK;
    Ok(RawEvent {
        config: u64::from(evntsel & keep),
        exclude_user: evntsel & p6::USR == 0,
        exclude_kernel: evntsel & p6::OS == 0,
    })
}

/// The ARMv8 PMU's event number field: `evntsel` bits 0-15 (`PMEVTYPER<n>_EL0.evtCount`,
/// 16 bits from PMUv3 for ARMv8.1; the kernel's `armv8_pmuv3` driver takes a
/// `PERF_TYPE_RAW` event's `config` bits 0-15 as it).
pub const ARM64_EVENT: u32 = 0xffff;

/// An arm64 evntsel as a `PERF_TYPE_RAW` event of the kernel's `armv8_pmuv3` driver (the
/// perf backend on an arm64 host): bits 0-15 are the ARMv8 event number and become `config`
/// unchanged (0x08 `INST_RETIRED`, 0x11 `CPU_CYCLES`, ...); the x86 layout's mode bits keep
/// their places and meaning, USR (bit 16) and OS (bit 17) becoming the exclude bits, INT
/// (bit 20) marking the i-mode counters and EN (bit 22) accepted and ignored, so that a
/// program's x86 control code needs only other event numbers. The x86 fields with no ARMv8
/// counterpart, edge (bit 18), invert (bit 23) and count mask (bits 24-31), and the reserved
/// bit 19 must be clear (`EINVAL`), as must a value that counts in neither mode. Software
/// events (`PERFCTR_EVNTSEL_SOFTWARE`, bit 21) are taken before this.
pub fn arm64_event(evntsel: u32) -> Result<RawEvent> {
    let x86_only = p6::EDGE | p6::PC | p6::INV | p6::CMASK;
    if evntsel & x86_only != 0 {
        return Err(bad(format!(
            "evntsel {evntsel:#x}: bits {:#x} (the x86 edge, pin control, invert and count \
             mask) have no meaning on arm64 and must be clear",
            evntsel & x86_only
        )));
    }
    if evntsel & (p6::USR | p6::OS) == 0 {
        return Err(bad(format!(
            "evntsel {evntsel:#x}: counts in no mode (neither USR nor OS)"
        )));
    }
    Ok(RawEvent {
        config: u64::from(evntsel & ARM64_EVENT),
        exclude_user: evntsel & p6::USR == 0,
        exclude_kernel: evntsel & p6::OS == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_event_keeps_the_event_fields_and_maps_the_modes() {
        // INST_RETIRED, unit mask 0x12, USR, edge, INT, EN, invert, count mask 3.
        let e = raw_event(0x03d5_12c0 | p6::USR).unwrap();
        assert_eq!(e.config, 0x0384_12c0, "{:#x}", e.config);
        assert!(!e.exclude_user);
        assert!(e.exclude_kernel);
        let e = raw_event(0x0002_0079).unwrap();
        assert_eq!(e.config, 0x79);
        assert!(e.exclude_user && !e.exclude_kernel);
        assert!(raw_event(0x0001_0079 | p6::PC).is_err());
        assert!(raw_event(0x0001_0079 | p6::RESERVED21).is_err());
        assert!(raw_event(0x79).is_err());
    }

    #[test]
    fn presets_overflow_after_the_hardware_distance() {
        let x86 = Family::Perf;
        assert_eq!(preset(x86, 0, -1000).unwrap().wrapping_add(1000), 0);
        assert!(preset(x86, 0, 0).is_err());
        let ppc = Family::Ppc(&crate::backend::sim::ppc::PPC750);
        let p = preset(ppc, 0, 0x7fff_ff00).unwrap();
        assert_eq!(p.wrapping_add(0x100), 0);
        assert_eq!(preset(ppc, 0, 0).unwrap().wrapping_add(1 << 31), 0);
        assert!(preset(ppc, 0, -1).is_err());
    }
}

//! The Pentium 4's control data (issue 47): each counter's CCCR in `evntsel` and its ESCR in
//! `p4.escr`, checked with the rules of perfctr's x86 document for a processor without
//! HyperThreading; on the emulated Pentium 4 the event is found in the model by the ESCR the
//! CCCR selects and the ESCR's event select ([`request`]), on a real one the pair becomes the
//! raw event of Linux's P4 driver ([`perf_raw`]).
//!
//! Cascaded counters (the CCCR's CASCADE and EXTENDED_CASCADE bits) are refused with `EINVAL`
//! on both: the emulated Pentium 4 does not model them and Linux's P4 driver has no cascading
//! (its raw events reserve the bit).

use crate::backend::sim::model::Model;
use crate::base::error::{Error, Result};
use crate::base::set::{Request, RequestFlags};
use crate::base::text::Text;

/// CCCR bits that control data must leave clear: OVF, OVF_PMI_T1 and the reserved ones.
const CCCR_RESERVED: u32 = 0xB800_07FF;
/// CCCR EXTENDED_CASCADE (bit 11) and CASCADE (bit 30): counter cascading, refused.
const CCCR_CASCADE: u32 = 1 << 11 | 1 << 30;
/// CCCR COMPARE (18), COMPLEMENT (19), THRESHOLD (20-23) and EDGE (24): the threshold logic.
const CCCR_THRESHOLD_LOGIC: u32 = 0x01fc_0000;
/// CCCR ENABLE.
const CCCR_ENABLE: u32 = 1 << 12;
/// CCCR ACTIVE_THREAD (bits 16-17): both set on a processor without HyperThreading.
const CCCR_ACTIVE_THREAD: u32 = 3 << 16;
/// CCCR FORCE_OVF.
const CCCR_FORCE_OVF: u32 = 1 << 25;
/// CCCR OVF_PMI_T0: interrupt on overflow, set exactly on i-mode counters.
const CCCR_OVF_PMI_T0: u32 = 1 << 26;

/// ESCR fields: T0_USR, T0_OS, the thread-1 CPL bits (zero without HyperThreading), the event
/// mask and the event select, and the reserved bit 31.
const ESCR_T0_USR: u32 = 1 << 2;
const ESCR_T0_OS: u32 = 1 << 3;
const ESCR_T1_CPL: u32 = 3;
const ESCR_RESERVED: u32 = 1 << 31;
/// ESCR TAG_ENABLE (4), TAG_VALUE (5-8) and EVENT_MASK (9-24).
const ESCR_TAG_AND_MASK: u32 = 0x01ff_fff0;

/// The CCCR's ESCR select value of each ESCR, by the name before `_ESCR` (and the CRU ESCR's
/// number): Intel's table of the Pentium 4's ESCRs.
fn escr_select(name: &str) -> Option<u32> {
    let (unit, n) = name.split_once("_ESCR")?;
    Some(match unit {
        "BPU" | "MS" | "FLAME" | "IQ" => 0,
        "IS" | "TC" | "FIRM" | "ALF" => 1,
        "MOB" | "TBPU" | "SAAT" | "RAT" => 2,
        "ITLB" | "U2L" | "SSU" => 3,
        "PMH" => 4,
        "IX" | "DAC" => 5,
        "FSB" => 6,
        "BSU" => 7,
        "CRU" => match n {
            "0" | "1" => 4,
            "2" | "3" => 5,
            _ => 6,
        },
        _ => return None,
    })
}

/// `EINVAL` with its cause.
fn bad(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// Counter `i`'s control: its CCCR, its ESCR, its `ireset`, its counter (`pmc`, without the
/// fast-RDPMC bit), whether it is an i-mode counter.
pub struct Counter {
    /// `evntsel[i]`.
    pub cccr: u32,
    /// `p4.escr[i]`.
    pub escr: u32,
    /// `ireset[i]`.
    pub ireset: i32,
    /// The hardware counter.
    pub pmc: u32,
    /// An i-mode counter.
    pub imode: bool,
}

/// The checks both Pentium 4 paths make on counter `i`'s CCCR and ESCR.
fn check(i: usize, k: &Counter) -> Result<()> {
    let (cccr, escr) = (k.cccr, k.escr);
    if cccr & CCCR_CASCADE != 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: CASCADE (0x40000000) and EXTENDED_CASCADE (0x800): \
             cascaded counters are not supported"
        )));
    }
    if cccr & CCCR_RESERVED != 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: CCCR bits 0xb80007ff are reserved"
        )));
    }
    if cccr & CCCR_ENABLE == 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: the CCCR's ENABLE must be set"
        )));
    }
    if cccr & CCCR_ACTIVE_THREAD != CCCR_ACTIVE_THREAD {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: ACTIVE_THREAD (0x30000) must be set without HyperThreading"
        )));
    }
    if (cccr & CCCR_OVF_PMI_T0 != 0) != k.imode {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: OVF_PMI_T0 (0x4000000) must be set exactly on i-mode counters"
        )));
    }
    if cccr & CCCR_FORCE_OVF != 0 && k.ireset != -1 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: with FORCE_OVF, ireset[{i}] must be -1"
        )));
    }
    if escr & (ESCR_RESERVED | ESCR_T1_CPL) != 0 {
        return Err(bad(format!(
            "p4.escr[{i}] = {escr:#x}: bit 31 and the thread-1 CPL bits are reserved without HyperThreading"
        )));
    }
    Ok(())
}

/// Counter `i`'s request on the emulated Pentium 4.
pub(super) fn request(m: &Model, i: usize, k: &Counter) -> Result<Request> {
    check(i, k)?;
    let (cccr, escr, pmc) = (k.cccr, k.escr, k.pmc);
    let select = (cccr >> 13) & 7;
    let code = (escr >> 25) & 0x3f;
    let emask = (escr >> 9) & 0xffff;
    let resource = m
        .resources
        .iter()
        .position(|r| r.counters & (1 << pmc) != 0 && escr_select(&r.name) == Some(select));
    let Some(resource) = resource else {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: ESCR select {select} names no ESCR of counter {pmc}"
        )));
    };
    let event = m.events.iter().find(|e| {
        e.routes
            .iter()
            .any(|r| r.resource == Some(resource as u8) && r.code == code)
    });
    let Some(event) = event else {
        return Err(bad(format!(
            "p4.escr[{i}] = {escr:#x}: event select {code:#x} is no event of {}",
            m.resources[resource].name
        )));
    };
    let mut r = Request::new(event.name.as_str())
        .on_counter(pmc)
        .flags(RequestFlags {
            user: escr & ESCR_T0_USR != 0,
            system: escr & ESCR_T0_OS != 0,
            ..RequestFlags::default()
        });
    if emask != 0 {
        r = r.attr("emask", u64::from(emask));
    }
    Ok(r)
}

/// The counters of the four groups an ESCR serves (Intel's ESCR-to-counter table): 0-3, 4-7,
/// 8-11 and 12-17, and two ESCRs that serve half a group.
const G0: u32 = 0x0000f;
const G1: u32 = 0x000f0;
const G2: u32 = 0x00f00;
const G3: u32 = 0x3f000;

/// The events of Linux's P4 driver, by the number its raw events carry in the ESCR's event
/// field (the kernel's `enum P4_EVENTS`, in order): each one's ESCR select, hardware event
/// select and the counters its ESCRs serve. The driver writes the ESCR select and the event
/// select itself from this number, so the pair perfctr's control data names is looked up here.
/// Facts from `arch/x86/include/asm/perf_event_p4.h` (the events' order, opcodes and ESCRs).
pub static KERNEL_EVENTS: [(Text<28>, u32, u32, u32); 46] = [
    (Text::new("tc_deliver_mode"), 1, 0x01, G1),
    (Text::new("bpu_fetch_request"), 0, 0x03, G0),
    (Text::new("itlb_reference"), 3, 0x18, G0),
    (Text::new("memory_cancel"), 5, 0x02, G2),
    (Text::new("memory_complete"), 2, 0x08, G2),
    (Text::new("load_port_replay"), 2, 0x04, G2),
    (Text::new("store_port_replay"), 2, 0x05, G2),
    (Text::new("mob_load_replay"), 2, 0x03, G0),
    (Text::new("page_walk_type"), 4, 0x01, G0),
    (Text::new("bsq_cache_reference"), 7, 0x0c, G0),
    (Text::new("ioq_allocation"), 6, 0x03, G0),
    (Text::new("ioq_active_entries"), 6, 0x1a, 0xc), // FSB_ESCR1 only
    (Text::new("fsb_data_activity"), 6, 0x17, G0),
    (Text::new("bsq_allocation"), 7, 0x05, 0x3), // BSU_ESCR0 only
    (Text::new("bsq_active_entries"), 7, 0x06, 0xc), // BSU_ESCR1 only
    (Text::new("sse_input_assist"), 1, 0x34, G2),
    (Text::new("packed_sp_uop"), 1, 0x08, G2),
    (Text::new("packed_dp_uop"), 1, 0x0c, G2),
    (Text::new("scalar_sp_uop"), 1, 0x0a, G2),
    (Text::new("scalar_dp_uop"), 1, 0x0e, G2),
    (Text::new("64bit_mmx_uop"), 1, 0x02, G2),
    (Text::new("128bit_mmx_uop"), 1, 0x1a, G2),
    (Text::new("x87_fp_uop"), 1, 0x04, G2),
    (Text::new("tc_misc"), 1, 0x06, G1),
    (Text::new("global_power_events"), 6, 0x13, G0),
    (Text::new("tc_ms_xfer"), 0, 0x05, G1),
    (Text::new("uop_queue_writes"), 0, 0x09, G1),
    (Text::new("retired_mispred_branch_type"), 2, 0x05, G1),
    (Text::new("retired_branch_type"), 2, 0x04, G1),
    (Text::new("resource_stall"), 1, 0x01, G3),
    (Text::new("wc_buffer"), 5, 0x05, G2),
    (Text::new("b2b_cycles"), 3, 0x16, G0),
    (Text::new("bnr"), 3, 0x08, G0),
    (Text::new("snoop"), 3, 0x06, G0),
    (Text::new("response"), 3, 0x04, G0),
    (Text::new("front_end_event"), 5, 0x08, G3),
    (Text::new("execution_event"), 5, 0x0c, G3),
    (Text::new("replay_event"), 5, 0x09, G3),
    (Text::new("instr_retired"), 4, 0x02, G3),
    (Text::new("uops_retired"), 4, 0x01, G3),
    (Text::new("uop_type"), 2, 0x02, G3),
    (Text::new("branch_retired"), 5, 0x06, G3),
    (Text::new("mispred_branch_retired"), 4, 0x03, G3),
    (Text::new("x87_assist"), 5, 0x03, G3),
    (Text::new("machine_clear"), 5, 0x02, G3),
    (Text::new("instr_completed"), 4, 0x07, G3),
];

/// perfctr's replay tagging (PEBS_ENABLE's bits 0x607 and PEBS_MATRIX_VERT) as the metric
/// number Linux's P4 raw events carry in bits 0-6 (the kernel's `enum P4_PEBS_METRIC`): the
/// pairs the kernel writes for each metric. 0: no tagging.
const PEBS_METRICS: [(u32, u32); 9] = [
    (0x001, 1), // 1: 1st-level cache load miss retired
    (0x002, 1), // 2: 2nd-level cache load miss retired
    (0x004, 1), // 3: DTLB load miss retired
    (0x004, 2), // 4: DTLB store miss retired
    (0x004, 3), // 5: DTLB all miss retired
    (!0, !0),   // 6: tagged mispredicted branch (PEBS_ENABLE bits perfctr does not allow)
    (0x200, 1), // 7: MOB load replay retired
    (0x400, 1), // 8: split load retired
    (0x400, 2), // 9: split store retired
];

/// Counter `i`'s CCCR/ESCR pair as a raw event of Linux's P4 driver (the perf backend on a
/// Pentium 4: the request `r<config>`, a `PERF_TYPE_RAW` event), after the checks the emulated
/// Pentium 4 makes. The layout of that driver's `config`: the ESCR in bits 32-63 and the CCCR
/// in bits 0-31, where
/// - ESCR bits 25-30 hold the driver's event number ([`KERNEL_EVENTS`]), found from the
///   CCCR's ESCR select, the ESCR's event select and the counter (`pmc_map`: two ESCRs with the
///   same select serve different counters); TAG_ENABLE, TAG_VALUE and EVENT_MASK (bits 4-24)
///   are kept; T0_OS and T0_USR become `exclude_kernel` and `exclude_user` (the driver sets
///   them), the thread-1 bits are refused;
/// - CCCR ACTIVE_THREAD, COMPARE, COMPLEMENT, THRESHOLD and EDGE (bits 16-24) are kept; ENABLE,
///   the ESCR select and OVF_PMI_T0 are the driver's to set and are dropped, as is FORCE_OVF
///   (with `ireset` -1 it is an overflow at every event, which the period of 1 gives); bits
///   0-6 carry the replay-tagging metric of `pebs_enable`/`pebs_matrix_vert` (0 without).
///
/// The driver picks the counter itself. `EINVAL` for what the emulated Pentium 4 refuses, a
/// pair that is none of the driver's events, and replay tagging it has no metric for.
pub fn perf_raw(i: usize, k: &Counter, pebs_enable: u32, pebs_matrix_vert: u32) -> Result<Request> {
    check(i, k)?;
    let (cccr, escr, pmc) = (k.cccr, k.escr, k.pmc);
    let select = (cccr >> 13) & 7;
    let code = (escr >> 25) & 0x3f;
    let Some(n) = KERNEL_EVENTS
        .iter()
        .position(|&(_, s, c, counters)| s == select && c == code && counters & (1 << pmc) != 0)
    else {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}, p4.escr[{i}] = {escr:#x}: ESCR select {select} with event \
             select {code:#x} on counter {pmc} is no event of Linux's P4 driver"
        )));
    };
    let metric = if pebs_enable == 0 {
        0
    } else {
        let pair = (pebs_enable & 0x607, pebs_matrix_vert);
        match PEBS_METRICS.iter().position(|&p| p == pair) {
            Some(m) => m as u32 + 1,
            None => {
                return Err(bad(format!(
                    "p4.pebs_enable = {pebs_enable:#x}, p4.pebs_matrix_vert = \
                     {pebs_matrix_vert:#x}: no replay-tagging metric of Linux's P4 driver"
                )))
            }
        }
    };
    let escr_part = (escr & ESCR_TAG_AND_MASK) | (n as u32) << 25;
    let cccr_part = (cccr & (CCCR_ACTIVE_THREAD | CCCR_THRESHOLD_LOGIC)) | metric;
    let config = u64::from(escr_part) << 32 | u64::from(cccr_part);
    Ok(Request::new(format!("r{config:x}")).flags(RequestFlags {
        user: escr & ESCR_T0_USR != 0,
        system: escr & ESCR_T0_OS != 0,
        ..RequestFlags::default()
    }))
}

/// PEBS_ENABLE (`en`) and PEBS_MATRIX_VERT (`mv`): replay tagging only, as perfctr allowed it.
pub(super) fn pebs(en: u32, mv: u32) -> Result<()> {
    let ok = if en == 0 {
        mv == 0
    } else {
        en & !0x0100_0607 == 0
            && en & (1 << 24) != 0
            && en & 0x607 != 0
            && mv & !3 == 0
            && mv & 3 != 0
    };
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "p4.pebs_enable = {en:#x}, p4.pebs_matrix_vert = {mv:#x}: only replay tagging \
             (UOP_TAG 0x1000000 with bits 0x607; matrix bits 0-1)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::p4::PENTIUM4;

    #[test]
    fn the_kernel_table_agrees_with_the_emulated_escrs() {
        // Every kernel event's ESCR select names, on each counter it lists, an ESCR of the
        // emulated Pentium 4 (Intel's table); no two kernel events share a select, an event
        // select and a counter.
        for (n, &(name, select, code, counters)) in KERNEL_EVENTS.iter().enumerate() {
            for pmc in (0..18).filter(|c| counters & (1 << c) != 0) {
                let res = PENTIUM4
                    .resources
                    .iter()
                    .position(|r| {
                        r.counters & (1 << pmc) != 0 && escr_select(&r.name) == Some(select)
                    })
                    .unwrap_or_else(|| panic!("{name}: select {select} on counter {pmc}"));
                // The events the emulated model has (by the same name) agree on the code.
                if let Some(e) = PENTIUM4.events.iter().find(|e| e.name == name.as_str()) {
                    assert!(
                        e.routes
                            .iter()
                            .any(|r| r.resource == Some(res as u8) && r.code == code),
                        "{name}: event {code:#x} on {}",
                        PENTIUM4.resources[res].name
                    );
                }
            }
            for (m, &(other, s2, c2, k2)) in KERNEL_EVENTS.iter().enumerate() {
                assert!(
                    m == n || s2 != select || c2 != code || k2 & counters == 0,
                    "{name} and {other}"
                );
            }
        }
    }

    #[test]
    fn every_escr_has_a_select_value() {
        for r in PENTIUM4.resources {
            assert!(escr_select(&r.name).is_some(), "{}", r.name);
        }
        // No two ESCRs of one counter share a select value.
        for c in 0..18 {
            let mut seen = std::collections::HashSet::new();
            for r in PENTIUM4
                .resources
                .iter()
                .filter(|r| r.counters & (1 << c) != 0)
            {
                assert!(seen.insert(escr_select(&r.name)), "counter {c}: {}", r.name);
            }
        }
    }
}

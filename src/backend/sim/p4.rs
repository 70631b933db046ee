//! Pentium 4 (NetBurst) model.
//!
//! The Pentium 4 has 18 counters of 40 bits, each with its own CCCR, and 45 event-selection
//! control registers (ESCRs). An event is programmed into an ESCR, and the ESCR feeds one of the
//! few counters wired to it. So a request needs both a counter and an ESCR that can drive that
//! counter and select that event. Two requests whose only possible ways share an ESCR conflict
//! even when they would use different counters. Here every ESCR is a [`Resource`], and every
//! (event, ESCR) pair is a [`Route`] whose counter mask is the ESCR's counters intersected with
//! the counters the event table allows.
//!
//! Counter numbering: 0-3 BPU, 4-7 MS, 8-11 FLAME, 12-15 IQ, 16-17 IQ (the fifth and sixth IQ
//! counters).

use super::model::{span, AttrSpec, Generic, IrqRule, Model, Resource, Route, SimEvent};
use super::papi;
use crate::base::text::Text;

// Indices of the ESCRs in `ESCRS`.
const BSU0: u8 = 0;
const FSB0: u8 = 1;
const MOB0: u8 = 2;
const PMH0: u8 = 3;
const BPU0: u8 = 4;
const ITLB0: u8 = 6;
const BSU1: u8 = 8;
const FSB1: u8 = 9;
const MOB1: u8 = 10;
const PMH1: u8 = 11;
const BPU1: u8 = 12;
const ITLB1: u8 = 14;
const MS0: u8 = 16;
const TC0: u8 = 17;
const TBPU0: u8 = 18;
const MS1: u8 = 19;
const TC1: u8 = 20;
const TBPU1: u8 = 21;
const FIRM0: u8 = 23;
const SAAT0: u8 = 24;
const DAC0: u8 = 26;
const FIRM1: u8 = 28;
const SAAT1: u8 = 29;
const DAC1: u8 = 31;
const RAT0: u8 = 34;
const CRU0: u8 = 36;
const CRU2: u8 = 37;
const RAT1: u8 = 41;
const CRU1: u8 = 42;
const CRU3: u8 = 43;

/// Shorthand for an ESCR entry.
const fn escr(name: &'static str, counters: u64) -> Resource {
    Resource {
        name: Text::new(name),
        counters,
    }
}

/// Counters 0 and 1.
const C01: u64 = span(0, 1);
/// Counters 2 and 3.
const C23: u64 = span(2, 3);
/// Counters 4 and 5.
const C45: u64 = span(4, 5);
/// Counters 6 and 7.
const C67: u64 = span(6, 7);
/// Counters 8 and 9.
const C89: u64 = span(8, 9);
/// Counters 10 and 11.
const C1011: u64 = span(10, 11);
/// Counters 12, 13 and 16.
const C121316: u64 = span(12, 13) | 1 << 16;
/// Counters 14, 15 and 17.
const C141517: u64 = span(14, 15) | 1 << 17;

/// All 45 ESCRs, grouped by the counters they can drive.
const ESCRS: [Resource; 45] = [
    // Counters 0 and 1.
    escr("BSU_ESCR0", C01),
    escr("FSB_ESCR0", C01),
    escr("MOB_ESCR0", C01),
    escr("PMH_ESCR0", C01),
    escr("BPU_ESCR0", C01),
    escr("IS_ESCR0", C01),
    escr("ITLB_ESCR0", C01),
    escr("IX_ESCR0", C01),
    // Counters 2 and 3.
    escr("BSU_ESCR1", C23),
    escr("FSB_ESCR1", C23),
    escr("MOB_ESCR1", C23),
    escr("PMH_ESCR1", C23),
    escr("BPU_ESCR1", C23),
    escr("IS_ESCR1", C23),
    escr("ITLB_ESCR1", C23),
    escr("IX_ESCR1", C23),
    // Counters 4 and 5.
    escr("MS_ESCR0", C45),
    escr("TC_ESCR0", C45),
    escr("TBPU_ESCR0", C45),
    // Counters 6 and 7.
    escr("MS_ESCR1", C67),
    escr("TC_ESCR1", C67),
    escr("TBPU_ESCR1", C67),
    // Counters 8 and 9.
    escr("FLAME_ESCR0", C89),
    escr("FIRM_ESCR0", C89),
    escr("SAAT_ESCR0", C89),
    escr("U2L_ESCR0", C89),
    escr("DAC_ESCR0", C89),
    // Counters 10 and 11.
    escr("FLAME_ESCR1", C1011),
    escr("FIRM_ESCR1", C1011),
    escr("SAAT_ESCR1", C1011),
    escr("U2L_ESCR1", C1011),
    escr("DAC_ESCR1", C1011),
    // Counters 12, 13 and 16.
    escr("IQ_ESCR0", C121316),
    escr("ALF_ESCR0", C121316),
    escr("RAT_ESCR0", C121316),
    escr("SSU_ESCR0", C121316),
    escr("CRU_ESCR0", C121316),
    escr("CRU_ESCR2", C121316),
    escr("CRU_ESCR4", C121316),
    // Counters 14, 15 and 17. CRU_ESCR5 is a real, usable ESCR.
    escr("IQ_ESCR1", C141517),
    escr("ALF_ESCR1", C141517),
    escr("RAT_ESCR1", C141517),
    escr("CRU_ESCR1", C141517),
    escr("CRU_ESCR3", C141517),
    escr("CRU_ESCR5", C141517),
];

/// The way of counting an event with select code `code` through ESCR `escr`, limited to the
/// counters `allowed` that the event table permits.
const fn via(escr: u8, code: u32, allowed: u64) -> Route {
    Route {
        counters: ESCRS[escr as usize].counters & allowed,
        code,
        resource: Some(escr),
    }
}

/// A Pentium 4 event with its permitted event-mask bits.
const fn ev(
    name: &'static str,
    description: &'static str,
    emask: u32,
    routes: &'static [Route],
) -> SimEvent {
    SimEvent::new(name, description, routes, emask)
}

/// A generic name with the event mask it implies.
const fn g(name: &'static str, event: &'static str, emask: u32) -> Generic {
    Generic::new(name, event, emask)
}

/// Counters 0-1 (event-table range).
const R01: u64 = span(0, 1);
/// Counters 0-3.
const R03: u64 = span(0, 3);
/// Counters 2-3.
const R23: u64 = span(2, 3);
/// Counters 4-7.
const R47: u64 = span(4, 7);
/// Counters 8-11.
const R811: u64 = span(8, 11);
/// Counters 12-16 (counter 17 excluded).
const R1216: u64 = span(12, 16);
/// Counters 12-17.
const R1217: u64 = span(12, 17);

/// Intel Pentium 4 (NetBurst), without HyperThreading.
pub static PENTIUM4: Model = Model {
    name: "pentium4",
    cciname: "Pentium 4",
    cpuref: "See Appendix A.1 of the \"IA-32 Intel Architecture Software Developer's Manual \
             Volume 3: System Programming Guide,\" Order # 245472-012, 2003",
    ncounters: 18,
    width: 40,
    widths: &[],
    irq: IrqRule::Wrap,
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: false,
    numbered: false,
    events: &[
        ev(
            "branch_retired",
            "Retired branches, selected by prediction and outcome",
            0xF,
            &[via(CRU2, 0x6, R1216), via(CRU3, 0x6, R1216)],
        ),
        ev(
            "mispred_branch_retired",
            "Retired mispredicted branches",
            0x1,
            &[via(CRU0, 0x3, R1216), via(CRU1, 0x3, R1216)],
        ),
        ev(
            "TC_deliver_mode",
            "Cycles the trace cache spends in each delivery mode",
            0xFF,
            &[via(TC0, 0x1, R47), via(TC1, 0x1, R47)],
        ),
        ev(
            "BPU_fetch_request",
            "Instruction fetch requests from the branch prediction unit",
            0x1,
            &[via(BPU0, 0x3, R03), via(BPU1, 0x3, R03)],
        ),
        ev(
            "ITLB_reference",
            "Instruction TLB translations (hits, misses, uncacheable hits)",
            0x7,
            &[via(ITLB0, 0x18, R03), via(ITLB1, 0x18, R03)],
        ),
        ev(
            "memory_cancel",
            "Cancelled requests in the data cache address control unit",
            0x6,
            &[via(DAC0, 0x2, R811), via(DAC1, 0x2, R811)],
        ),
        ev(
            "memory_complete",
            "Completed split loads and stores",
            0x3,
            &[via(SAAT0, 0x8, R811), via(SAAT1, 0x8, R811)],
        ),
        ev(
            "load_port_replay",
            "Load port replays caused by split loads",
            0x1,
            &[via(SAAT0, 0x4, R811), via(SAAT1, 0x4, R811)],
        ),
        ev(
            "store_port_replay",
            "Store port replays caused by split stores",
            0x1,
            &[via(SAAT0, 0x5, R811), via(SAAT1, 0x5, R811)],
        ),
        ev(
            "MOB_load_replay",
            "Loads replayed by the memory ordering buffer",
            0x35,
            &[via(MOB0, 0x3, R03), via(MOB1, 0x3, R03)],
        ),
        ev(
            "page_walk_type",
            "Page walks performed by the page miss handler (data or instruction)",
            0x3,
            &[via(PMH0, 0x1, R03), via(PMH1, 0x1, R03)],
        ),
        ev(
            "BSQ_cache_reference",
            "Second- and third-level cache references seen by the bus sequence queue",
            0x73F,
            &[via(BSU0, 0xC, R03), via(BSU1, 0xC, R03)],
        ),
        ev(
            "IOQ_allocation",
            "Bus transactions allocated in the in-order queue",
            0xEFFF,
            &[via(FSB0, 0x3, R01)],
        ),
        ev(
            "IOQ_active_entries",
            "Cycles weighted by the number of valid in-order queue entries",
            0xEFFF,
            &[via(FSB1, 0x1A, R23)],
        ),
        ev(
            "FSB_data_activity",
            "Front-side bus data ready and data busy events",
            0x3F,
            &[via(FSB0, 0x17, R03), via(FSB1, 0x17, R03)],
        ),
        ev(
            "BSQ_allocation",
            "Bus sequence queue entry allocations",
            0x3FEF,
            &[via(BSU0, 0x5, R01)],
        ),
        ev(
            "bsq_active_entries",
            "Cycles weighted by the number of bus sequence queue entries in use",
            0x3FEF,
            &[via(BSU1, 0x6, R23)],
        ),
        ev(
            "x87_assist",
            "Retired x87 instructions that needed microcode assistance",
            0x1F,
            &[via(CRU2, 0x3, R1217), via(CRU3, 0x3, R1217)],
        ),
        ev(
            "SSE_input_assist",
            "SSE and SSE2 operations that needed an input assist",
            0x8000,
            &[via(FIRM0, 0x34, R811), via(FIRM1, 0x34, R811)],
        ),
        ev(
            "packed_SP_uop",
            "Packed single-precision floating-point uops",
            0x8000,
            &[via(FIRM0, 0x8, R811), via(FIRM1, 0x8, R811)],
        ),
        ev(
            "packed_DP_uop",
            "Packed double-precision floating-point uops",
            0x8000,
            &[via(FIRM0, 0xC, R811), via(FIRM1, 0xC, R811)],
        ),
        ev(
            "scalar_SP_uop",
            "Scalar single-precision floating-point uops",
            0x8000,
            &[via(FIRM0, 0xA, R811), via(FIRM1, 0xA, R811)],
        ),
        ev(
            "scalar_DP_uop",
            "Scalar double-precision floating-point uops",
            0x8000,
            &[via(FIRM0, 0xE, R811), via(FIRM1, 0xE, R811)],
        ),
        ev(
            "64bit_MMX_uop",
            "64-bit SIMD integer (MMX) uops",
            0x8000,
            &[via(FIRM0, 0x2, R811), via(FIRM1, 0x2, R811)],
        ),
        ev(
            "128bit_MMX_uop",
            "128-bit SIMD integer uops",
            0x8000,
            &[via(FIRM0, 0x1A, R811), via(FIRM1, 0x1A, R811)],
        ),
        ev(
            "x87_FP_uop",
            "x87 floating-point uops",
            0x8000,
            &[via(FIRM0, 0x4, R811), via(FIRM1, 0x4, R811)],
        ),
        ev(
            "x87_SIMD_moves_uop",
            "x87, MMX and SSE register load, store and move uops",
            0x18,
            &[via(FIRM0, 0x2E, R811), via(FIRM1, 0x2E, R811)],
        ),
        ev(
            "machine_clear",
            "Cycles or events in which the pipeline was flushed",
            0xD,
            &[via(CRU2, 0x2, R1217), via(CRU3, 0x2, R1217)],
        ),
        // The reference table gives 0x13 with a note that the 2005 manual revision differs
        // ("0x5 in 2005 rev"). We program 0x13, the value chosen for this model (and the
        // value the processor manuals give for this event), for both FSB ESCRs.
        ev(
            "global_power_events",
            "Cycles in which the processor is not stopped (clock running)",
            0x1,
            &[via(FSB0, 0x13, R03), via(FSB1, 0x13, R03)],
        ),
        ev(
            "tc_ms_xfer",
            "Transfers of uop delivery from the trace cache to the microcode ROM",
            0x1,
            &[via(MS0, 0x5, R47), via(MS1, 0x5, R47)],
        ),
        ev(
            "uop_queue_writes",
            "Uops written to the uop queue, by source",
            0x7,
            &[via(MS0, 0x9, R47), via(MS1, 0x9, R47)],
        ),
        ev(
            "front_end_event",
            "Retired uops tagged by the front-end tagging mechanism",
            0x3,
            &[via(CRU2, 0x8, R1217), via(CRU3, 0x8, R1217)],
        ),
        ev(
            "execution_event",
            "Retired uops tagged by the execution tagging mechanism",
            0xFF,
            &[via(CRU2, 0xC, R1217), via(CRU3, 0xC, R1217)],
        ),
        ev(
            "replay_event",
            "Retired uops tagged by the replay tagging mechanism",
            0x3,
            &[via(CRU2, 0x9, R1217), via(CRU3, 0x9, R1217)],
        ),
        ev(
            "instr_retired",
            "Retired instructions, by bogus/non-bogus and tagged state",
            0xF,
            &[via(CRU0, 0x2, R1217), via(CRU1, 0x2, R1217)],
        ),
        ev(
            "uops_retired",
            "Retired uops",
            0x3,
            &[via(CRU0, 0x1, R1217), via(CRU1, 0x1, R1217)],
        ),
        ev(
            "uop_type",
            "Uops tagged as loads or stores by the register alias table",
            0x3,
            &[via(RAT0, 0x2, R1217), via(RAT1, 0x2, R1217)],
        ),
        ev(
            "retired_mispred_branch_type",
            "Retired mispredicted branches, by branch type",
            0x1F,
            &[via(TBPU0, 0x5, R47), via(TBPU1, 0x5, R47)],
        ),
        ev(
            "retired_branch_type",
            "Retired branches, by branch type",
            0x1F,
            &[via(TBPU0, 0x4, R47), via(TBPU1, 0x4, R47)],
        ),
    ],
    generics: &[
        g(papi::BR_MSP, "branch_retired", 0xa),
        g(papi::BR_INS, "branch_retired", 0xf),
        g(papi::BR_TKN, "branch_retired", 0xc),
        g(papi::BR_NTK, "branch_retired", 0x3),
        g(papi::BR_PRC, "branch_retired", 0x5),
        g(papi::TOT_INS, "instr_retired", 0x3),
        g(papi::TOT_CYC, "global_power_events", 0x1),
        g(papi::TLB_DM, "page_walk_type", 0x1),
        g(papi::TLB_IM, "page_walk_type", 0x2),
        g(papi::TLB_TM, "page_walk_type", 0x3),
        g(papi::L2_LDM, "BSQ_cache_reference", 0x100),
        g(papi::L2_STM, "BSQ_cache_reference", 0x400),
        g(papi::L2_TCM, "BSQ_cache_reference", 0x500),
        g(papi::L1_ICM, "BPU_fetch_request", 0x1),
    ],
    resources: &ESCRS,
    attributes: &[
        AttrSpec {
            name: Text::new("emask"),
            max: 0xFFFF,
        },
        AttrSpec {
            name: Text::new("tag"),
            max: 15,
        },
        AttrSpec {
            name: Text::new("compare"),
            max: 1,
        },
        AttrSpec {
            name: Text::new("complement"),
            max: 1,
        },
        AttrSpec {
            name: Text::new("threshold"),
            max: 15,
        },
        AttrSpec {
            name: Text::new("edge"),
            max: 1,
        },
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn find(name: &str) -> SimEvent {
        PENTIUM4
            .events
            .iter()
            .copied()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no event {name}"))
    }

    fn escr_index(name: &str) -> u8 {
        PENTIUM4
            .resources
            .iter()
            .position(|r| r.name == name)
            .unwrap_or_else(|| panic!("no ESCR {name}")) as u8
    }

    fn mask(counters: &[u32]) -> u64 {
        counters.iter().fold(0, |m, &c| m | 1 << c)
    }

    #[test]
    fn event_names_are_unique() {
        let mut names = HashSet::new();
        for e in PENTIUM4.events {
            assert!(names.insert(e.name), "duplicate event {}", e.name);
        }
        assert_eq!(PENTIUM4.events.len(), 39);
    }

    #[test]
    fn routes_are_within_counters_and_escrs() {
        let all = span(0, PENTIUM4.ncounters - 1);
        for e in PENTIUM4.events {
            assert!(!e.routes.is_empty(), "{} has no route", e.name);
            assert_ne!(e.emask, 0, "{} has no emask bits", e.name);
            let mut used = HashSet::new();
            for r in e.routes {
                assert_ne!(r.counters, 0, "{}: empty route", e.name);
                assert_eq!(r.counters & !all, 0, "{}: counter out of range", e.name);
                let i = r.resource.expect("every P4 route needs an ESCR");
                let res = PENTIUM4
                    .resources
                    .get(i as usize)
                    .unwrap_or_else(|| panic!("{}: bad ESCR index {i}", e.name));
                assert_eq!(
                    r.counters & !res.counters,
                    0,
                    "{}: not driven by {}",
                    e.name,
                    res.name
                );
                assert!(used.insert(i), "{}: {} listed twice", e.name, res.name);
                assert!(r.code <= 0x3f, "{}: evsel is 6 bits", e.name);
            }
        }
    }

    #[test]
    fn no_two_events_share_an_escr_code() {
        let mut seen = HashSet::new();
        for e in PENTIUM4.events {
            for r in e.routes {
                assert!(seen.insert((r.resource, r.code)), "{} clashes", e.name);
            }
        }
    }

    #[test]
    fn escrs_match_the_hardware() {
        let res = PENTIUM4.resources;
        assert_eq!(res.len(), 45);
        let mut names = HashSet::new();
        for r in res {
            assert!(names.insert(r.name), "duplicate ESCR {}", r.name);
            assert!(r.name.contains("_ESCR"));
        }
        let expect: &[(&str, &[u32])] = &[
            ("BSU_ESCR0", &[0, 1]),
            ("FSB_ESCR0", &[0, 1]),
            ("MOB_ESCR0", &[0, 1]),
            ("PMH_ESCR0", &[0, 1]),
            ("BPU_ESCR0", &[0, 1]),
            ("IS_ESCR0", &[0, 1]),
            ("ITLB_ESCR0", &[0, 1]),
            ("IX_ESCR0", &[0, 1]),
            ("BSU_ESCR1", &[2, 3]),
            ("FSB_ESCR1", &[2, 3]),
            ("MOB_ESCR1", &[2, 3]),
            ("PMH_ESCR1", &[2, 3]),
            ("BPU_ESCR1", &[2, 3]),
            ("IS_ESCR1", &[2, 3]),
            ("ITLB_ESCR1", &[2, 3]),
            ("IX_ESCR1", &[2, 3]),
            ("MS_ESCR0", &[4, 5]),
            ("TC_ESCR0", &[4, 5]),
            ("TBPU_ESCR0", &[4, 5]),
            ("MS_ESCR1", &[6, 7]),
            ("TC_ESCR1", &[6, 7]),
            ("TBPU_ESCR1", &[6, 7]),
            ("FLAME_ESCR0", &[8, 9]),
            ("FIRM_ESCR0", &[8, 9]),
            ("SAAT_ESCR0", &[8, 9]),
            ("U2L_ESCR0", &[8, 9]),
            ("DAC_ESCR0", &[8, 9]),
            ("FLAME_ESCR1", &[10, 11]),
            ("FIRM_ESCR1", &[10, 11]),
            ("SAAT_ESCR1", &[10, 11]),
            ("U2L_ESCR1", &[10, 11]),
            ("DAC_ESCR1", &[10, 11]),
            ("IQ_ESCR0", &[12, 13, 16]),
            ("ALF_ESCR0", &[12, 13, 16]),
            ("RAT_ESCR0", &[12, 13, 16]),
            ("SSU_ESCR0", &[12, 13, 16]),
            ("CRU_ESCR0", &[12, 13, 16]),
            ("CRU_ESCR2", &[12, 13, 16]),
            ("CRU_ESCR4", &[12, 13, 16]),
            ("IQ_ESCR1", &[14, 15, 17]),
            ("ALF_ESCR1", &[14, 15, 17]),
            ("RAT_ESCR1", &[14, 15, 17]),
            ("CRU_ESCR1", &[14, 15, 17]),
            ("CRU_ESCR3", &[14, 15, 17]),
            ("CRU_ESCR5", &[14, 15, 17]),
        ];
        assert_eq!(expect.len(), 45);
        for (name, counters) in expect {
            let i = escr_index(name) as usize;
            assert_eq!(res[i].counters, mask(counters), "{name}");
        }
    }

    #[test]
    fn index_constants_name_the_right_escrs() {
        let consts = [
            (BSU0, "BSU_ESCR0"),
            (FSB0, "FSB_ESCR0"),
            (MOB0, "MOB_ESCR0"),
            (PMH0, "PMH_ESCR0"),
            (BPU0, "BPU_ESCR0"),
            (ITLB0, "ITLB_ESCR0"),
            (BSU1, "BSU_ESCR1"),
            (FSB1, "FSB_ESCR1"),
            (MOB1, "MOB_ESCR1"),
            (PMH1, "PMH_ESCR1"),
            (BPU1, "BPU_ESCR1"),
            (ITLB1, "ITLB_ESCR1"),
            (MS0, "MS_ESCR0"),
            (TC0, "TC_ESCR0"),
            (TBPU0, "TBPU_ESCR0"),
            (MS1, "MS_ESCR1"),
            (TC1, "TC_ESCR1"),
            (TBPU1, "TBPU_ESCR1"),
            (FIRM0, "FIRM_ESCR0"),
            (SAAT0, "SAAT_ESCR0"),
            (DAC0, "DAC_ESCR0"),
            (FIRM1, "FIRM_ESCR1"),
            (SAAT1, "SAAT_ESCR1"),
            (DAC1, "DAC_ESCR1"),
            (RAT0, "RAT_ESCR0"),
            (CRU0, "CRU_ESCR0"),
            (CRU2, "CRU_ESCR2"),
            (RAT1, "RAT_ESCR1"),
            (CRU1, "CRU_ESCR1"),
            (CRU3, "CRU_ESCR3"),
        ];
        for (i, name) in consts {
            assert_eq!(PENTIUM4.resources[i as usize].name, name);
        }
    }

    #[test]
    fn generics_refer_to_events_with_compatible_emask() {
        let mut names = HashSet::new();
        for g in PENTIUM4.generics {
            assert!(names.insert(g.name), "duplicate generic {}", g.name);
            let e = find(&g.event);
            assert_ne!(g.emask, 0, "{}", g.name);
            assert_eq!(g.emask & !e.emask, 0, "{}: emask not permitted", g.name);
        }
        assert_eq!(PENTIUM4.generics.len(), 14);
    }

    #[test]
    fn branch_retired_uses_cru2_and_cru3_without_counter_17() {
        let e = find("branch_retired");
        assert_eq!(
            e.routes,
            &[
                Route {
                    counters: mask(&[12, 13, 16]),
                    code: 0x6,
                    resource: Some(escr_index("CRU_ESCR2")),
                },
                Route {
                    counters: mask(&[14, 15]),
                    code: 0x6,
                    resource: Some(escr_index("CRU_ESCR3")),
                },
            ]
        );
        assert_eq!(e.emask, 0xF);
    }

    #[test]
    fn cru_escr3_events_reach_counter_17() {
        let e = find("instr_retired");
        assert_eq!(e.routes[1].counters, mask(&[14, 15, 17]));
        assert_eq!(e.routes[1].resource, Some(escr_index("CRU_ESCR1")));
        let e = find("machine_clear");
        assert_eq!(e.routes[1].counters, mask(&[14, 15, 17]));
    }

    #[test]
    fn global_power_events_code() {
        let e = find("global_power_events");
        assert!(e.routes.iter().all(|r| r.code == 0x13));
    }

    #[test]
    fn attributes() {
        let a: Vec<(&str, u64)> = PENTIUM4
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), a.max))
            .collect();
        assert_eq!(
            a,
            [
                ("emask", 0xFFFF),
                ("tag", 15),
                ("compare", 1),
                ("complement", 1),
                ("threshold", 15),
                ("edge", 1)
            ]
        );
    }
}

//! UltraSPARC models: the UltraSPARC III+/IV family and the older UltraSPARC I/II.
//!
//! Both families have two 32-bit performance instrumentation counters (PIC0 and PIC1) that share
//! a single performance control register (%pcr). The %pcr carries one event-select field per PIC
//! but only one pair of user/system bits, so every request of a set must use the same flags.
//! Events are named as in the processor manuals; an event that both PICs can count is a single
//! [`SimEvent`] with one [`Route`] per PIC. Neither family has event masks, shared resources or
//! request attributes.
//!
//! The events every model counts alike are stated once (`COMMON_HEAD`: both PICs' and PIC0's;
//! `COMMON_PIC1`), and each model's list joins them with its family's own, in the manuals'
//! order.

use super::model::{
    join, plain_event as ev, plain_generic as g, route, IrqRule, Model, Route, SimEvent,
};
use super::papi;

/// Route through PIC0 with the given %pcr select code.
const fn p0(code: u32) -> Route {
    route(1 << 0, code)
}

/// Route through PIC1 with the given %pcr select code.
const fn p1(code: u32) -> Route {
    route(1 << 1, code)
}

/// The events every UltraSPARC model counts alike: both PICs' events, then PIC0's.
pub(super) const COMMON_HEAD: [SimEvent; 8] = [
    // Both PICs.
    ev("Cycle_cnt", "Processor clock cycles", &[p0(0x0), p1(0x0)]),
    ev("Instr_cnt", "Instructions completed", &[p0(0x1), p1(0x1)]),
    // PIC0.
    ev(
        "Dispatch0_IC_miss",
        "Cycles dispatch stalled by an I-cache miss",
        &[p0(0x2)],
    ),
    ev("IC_ref", "I-cache references", &[p0(0x8)]),
    ev("DC_rd", "D-cache read references", &[p0(0x9)]),
    ev("DC_wr", "D-cache write references", &[p0(0xa)]),
    ev("EC_ref", "E-cache references", &[p0(0xc)]),
    ev(
        "EC_snoop_inv",
        "E-cache lines invalidated by snoops",
        &[p0(0xe)],
    ),
];

/// PIC1's events common to every UltraSPARC model.
pub(super) const COMMON_PIC1: [SimEvent; 3] = [
    ev(
        "Dispatch0_mispred",
        "Cycles dispatch stalled by a branch misprediction",
        &[p1(0x2)],
    ),
    ev("EC_wb", "E-cache writebacks", &[p1(0xd)]),
    ev(
        "EC_snoop_cb",
        "E-cache copybacks caused by snoops",
        &[p1(0xe)],
    ),
];

/// PIC0's events of the UltraSPARC III family (and of III+ and IV, marked).
const III_PIC0: [SimEvent; 24] = [
    ev(
        "Dispatch0_br_target",
        "Cycles dispatch stalled by a branch target fetch",
        &[p0(0x3)],
    ),
    ev(
        "Dispatch0_2nd_br",
        "Cycles dispatch stalled by a second branch in a fetch group",
        &[p0(0x4)],
    ),
    ev(
        "Rstall_storeQ",
        "Cycles stalled because the store queue is full",
        &[p0(0x5)],
    ),
    ev(
        "Rstall_IU_use",
        "Cycles stalled waiting for an integer result",
        &[p0(0x6)],
    ),
    ev(
        "EC_write_hit_RTO",
        "E-cache write hits needing a read-to-own",
        &[p0(0xd)],
    ),
    ev(
        "EC_rd_miss",
        "E-cache read misses from data loads",
        &[p0(0xf)],
    ),
    ev("PC_port0_rd", "Prefetch cache port 0 reads", &[p0(0x10)]),
    ev(
        "SI_snoop",
        "Snoops issued on the system interface",
        &[p0(0x11)],
    ),
    ev(
        "SI_ciq_flow",
        "System interface coherence queue flow-control cycles",
        &[p0(0x12)],
    ),
    ev(
        "SI_owned",
        "Owned responses on the system interface",
        &[p0(0x13)],
    ),
    ev(
        "SW_count_0",
        "Software count instructions counted on PIC0",
        &[p0(0x14)],
    ),
    ev(
        "IU_Stat_Br_miss_taken",
        "Mispredicted taken branches",
        &[p0(0x15)],
    ),
    ev(
        "IU_Stat_Br_count_taken",
        "Retired taken branches",
        &[p0(0x16)],
    ),
    ev(
        "Dispatch_rs_mispred",
        "Return stack mispredictions",
        &[p0(0x17)],
    ),
    ev(
        "FA_pipe_completion",
        "Instructions completed in the floating-point add pipe",
        &[p0(0x18)],
    ),
    ev(
        "MC_reads_0",
        "Memory controller reads on bank 0",
        &[p0(0x20)],
    ),
    ev(
        "MC_reads_1",
        "Memory controller reads on bank 1",
        &[p0(0x21)],
    ),
    ev(
        "MC_reads_2",
        "Memory controller reads on bank 2",
        &[p0(0x22)],
    ),
    ev(
        "MC_reads_3",
        "Memory controller reads on bank 3",
        &[p0(0x23)],
    ),
    ev(
        "MC_stalls_0",
        "Memory controller stall cycles on bank 0",
        &[p0(0x24)],
    ),
    ev(
        "MC_stalls_2",
        "Memory controller stall cycles on bank 2",
        &[p0(0x25)],
    ),
    // PIC0, UltraSPARC III+ and IV.
    ev(
        "EC_wb_remote",
        "E-cache writebacks to a remote node",
        &[p0(0x19)],
    ),
    ev(
        "EC_miss_local",
        "E-cache misses satisfied from local memory",
        &[p0(0x1a)],
    ),
    // PIC0 and PIC1 (III+ and IV); the two PICs use different select codes.
    ev(
        "EC_miss_mtag_remote",
        "E-cache misses satisfied by a remote node after an mtag check",
        &[p0(0x1b), p1(0x28)],
    ),
];

/// PIC1's events of the UltraSPARC III family (and of III+, marked).
const III_PIC1: [SimEvent; 35] = [
    ev(
        "IC_miss_cancelled",
        "I-cache misses cancelled by a mispredicted branch",
        &[p1(0x3)],
    ),
    ev(
        "Re_DC_missovhd",
        "Recirculation overhead cycles of D-cache misses",
        &[p1(0x4)],
    ),
    ev(
        "Re_FPU_bypass",
        "Recirculation stalls on a floating-point bypass",
        &[p1(0x5)],
    ),
    ev(
        "Re_DC_miss",
        "Recirculation stalls on D-cache misses",
        &[p1(0x6)],
    ),
    ev(
        "Re_EC_miss",
        "Recirculation stalls on E-cache misses",
        &[p1(0x7)],
    ),
    ev("IC_miss", "I-cache misses", &[p1(0x8)]),
    ev("DC_rd_miss", "D-cache read misses", &[p1(0x9)]),
    ev("DC_wr_miss", "D-cache write misses", &[p1(0xa)]),
    ev(
        "Rstall_FP_use",
        "Cycles stalled waiting for a floating-point result",
        &[p1(0xb)],
    ),
    ev("EC_misses", "E-cache misses", &[p1(0xc)]),
    ev(
        "EC_ic_miss",
        "E-cache misses on instruction fetches",
        &[p1(0xf)],
    ),
    ev(
        "Re_PC_miss",
        "Recirculation stalls on prefetch cache misses",
        &[p1(0x10)],
    ),
    ev("ITLB_miss", "Instruction TLB misses", &[p1(0x11)]),
    ev("DTLB_miss", "Data TLB misses", &[p1(0x12)]),
    ev("WC_miss", "Write cache misses", &[p1(0x13)]),
    ev(
        "WC_snoop_cb",
        "Write cache copybacks caused by snoops",
        &[p1(0x14)],
    ),
    ev("WC_scrubbed", "Write cache lines scrubbed", &[p1(0x15)]),
    ev(
        "WC_wb_wo_read",
        "Write cache writebacks without a read",
        &[p1(0x16)],
    ),
    ev(
        "PC_soft_hit",
        "Prefetch cache hits on software prefetches",
        &[p1(0x18)],
    ),
    ev(
        "PC_snoop_inv",
        "Prefetch cache lines invalidated by snoops",
        &[p1(0x19)],
    ),
    ev(
        "PC_hard_hit",
        "Prefetch cache hits on hardware prefetches",
        &[p1(0x1a)],
    ),
    ev("PC_port1_rd", "Prefetch cache port 1 reads", &[p1(0x1b)]),
    ev(
        "SW_count_1",
        "Software count instructions counted on PIC1",
        &[p1(0x1c)],
    ),
    ev(
        "IU_Stat_Br_miss_untaken",
        "Mispredicted untaken branches",
        &[p1(0x1d)],
    ),
    ev(
        "IU_Stat_Br_count_untaken",
        "Retired untaken branches",
        &[p1(0x1e)],
    ),
    ev(
        "PC_MS_misses",
        "Prefetch cache misses of software prefetches",
        &[p1(0x1f)],
    ),
    ev(
        "MC_writes_0",
        "Memory controller writes on bank 0",
        &[p1(0x20)],
    ),
    ev(
        "MC_writes_1",
        "Memory controller writes on bank 1",
        &[p1(0x21)],
    ),
    ev(
        "MC_writes_2",
        "Memory controller writes on bank 2",
        &[p1(0x22)],
    ),
    ev(
        "MC_writes_3",
        "Memory controller writes on bank 3",
        &[p1(0x23)],
    ),
    ev(
        "MC_stalls_1",
        "Memory controller stall cycles on bank 1",
        &[p1(0x24)],
    ),
    ev(
        "MC_stalls_3",
        "Memory controller stall cycles on bank 3",
        &[p1(0x25)],
    ),
    ev(
        "Re_RAW_miss",
        "Recirculation stalls on read-after-write hazards",
        &[p1(0x26)],
    ),
    ev(
        "FM_pipe_completion",
        "Instructions completed in the floating-point multiply pipe",
        &[p1(0x27)],
    ),
    // PIC1, UltraSPARC III+ (EC_miss_mtag_remote is above, with its PIC0 route).
    ev(
        "EC_miss_remote",
        "E-cache misses satisfied by a remote node",
        &[p1(0x29)],
    ),
];

/// Every event of the UltraSPARC III+ and IV, in the order they are listed.
static III_EVENTS: [SimEvent; 70] = join(&[&COMMON_HEAD, &III_PIC0, &COMMON_PIC1, &III_PIC1]);

/// PIC0's events of the UltraSPARC I and II.
const II_PIC0: [SimEvent; 4] = [
    ev(
        "Dispatch0_storeBuf",
        "Cycles dispatch stalled because the store buffer is full",
        &[p0(0x3)],
    ),
    ev(
        "Load_use",
        "Cycles stalled waiting for a load result",
        &[p0(0xb)],
    ),
    ev(
        "EC_write_hit_RDO",
        "E-cache write hits needing a read-to-own",
        &[p0(0xd)],
    ),
    ev("EC_rd_hit", "E-cache read hits from data loads", &[p0(0xf)]),
];

/// PIC1's events of the UltraSPARC I and II.
const II_PIC1: [SimEvent; 7] = [
    ev(
        "Dispatch0_FP_use",
        "Cycles dispatch stalled waiting for a floating-point result",
        &[p1(0x3)],
    ),
    ev("IC_hit", "I-cache hits", &[p1(0x8)]),
    ev("DC_rd_hit", "D-cache read hits", &[p1(0x9)]),
    ev("DC_wr_hit", "D-cache write hits", &[p1(0xa)]),
    ev(
        "Load_use_RAW",
        "Load-use stalls caused by read-after-write hazards",
        &[p1(0xb)],
    ),
    ev("EC_hit", "E-cache hits", &[p1(0xc)]),
    ev(
        "EC_ic_hit",
        "E-cache hits on instruction fetches",
        &[p1(0xf)],
    ),
];

/// Every event of the UltraSPARC I and II, in the order they are listed.
static II_EVENTS: [SimEvent; 22] = join(&[&COMMON_HEAD, &II_PIC0, &COMMON_PIC1, &II_PIC1]);

/// UltraSPARC III+ and UltraSPARC IV (the UltraSPARC III family tables with the III+/IV
/// additions).
pub static ULTRASPARC: Model = Model {
    name: "ultrasparc",
    cciname: "UltraSPARC III+ & IV",
    cpuref: "See the \"Performance Instrumentation\" chapter of the UltraSPARC III Cu User's \
             Manual (Sun Microsystems) and the UltraSPARC IV Processor User's Manual Supplement",
    ncounters: 2,
    width: 32,
    widths: &[],
    irq: IrqRule::Wrap,
    overflow_interrupt: true,
    overflow_precise: false,
    same_flags: true,
    numbered: false,
    events: &III_EVENTS,
    generics: &[
        g(papi::TOT_CYC, "Cycle_cnt"),
        g(papi::TOT_INS, "Instr_cnt"),
        g(papi::TOT_IIS, "Instr_cnt"),
        g(papi::FMA_INS, "FA_pipe_completion"),
        g(papi::FML_INS, "FM_pipe_completion"),
        g(papi::L1_DCR, "DC_rd"),
        g(papi::L1_DCW, "DC_wr"),
        g(papi::L1_ICA, "IC_ref"),
        g(papi::L1_ICM, "IC_miss"),
        g(papi::L2_TCA, "EC_ref"),
        g(papi::L2_LDM, "EC_rd_miss"),
        g(papi::L2_TCM, "EC_misses"),
        g(papi::L2_ICM, "EC_ic_miss"),
        g(papi::TLB_DM, "DTLB_miss"),
        g(papi::TLB_IM, "ITLB_miss"),
        g(papi::BR_NTK, "IU_Stat_Br_count_untaken"),
        g(papi::BR_MSP, "Dispatch0_mispred"),
        g(papi::BR_TKN, "IU_Stat_Br_count_taken"),
        g(papi::CA_INV, "EC_snoop_inv"),
        g(papi::CA_SNP, "EC_snoop_cb"),
    ],
    resources: &[],
    attributes: &[],
};

/// UltraSPARC I and II: the same two PICs and shared %pcr, but no overflow interrupt.
pub static ULTRASPARC2: Model = Model {
    name: "ultrasparc2",
    cciname: "UltraSPARC I&II",
    cpuref: "See the \"Performance Instrumentation\" chapter of the UltraSPARC I & II User's \
             Manual (Sun Microsystems)",
    ncounters: 2,
    width: 32,
    widths: &[],
    irq: IrqRule::Wrap,
    overflow_interrupt: false,
    overflow_precise: false,
    same_flags: true,
    numbered: false,
    events: &II_EVENTS,
    generics: &[
        g(papi::TOT_CYC, "Cycle_cnt"),
        g(papi::TOT_INS, "Instr_cnt"),
        g(papi::TOT_IIS, "Instr_cnt"),
        g(papi::L1_DCR, "DC_rd"),
        g(papi::L1_DCW, "DC_wr"),
        g(papi::L1_ICA, "IC_ref"),
        g(papi::L1_ICH, "IC_hit"),
        g(papi::L2_TCA, "EC_ref"),
        g(papi::L2_DCH, "EC_rd_hit"),
        g(papi::L2_TCH, "EC_hit"),
        g(papi::L2_ICH, "EC_ic_hit"),
        g(papi::CA_INV, "EC_snoop_inv"),
        g(papi::BR_MSP, "Dispatch0_mispred"),
        g(papi::CA_SNP, "EC_snoop_cb"),
    ],
    resources: &[],
    attributes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::model::SimEvent;
    use std::collections::HashSet;

    fn find(m: &Model, name: &str) -> Option<SimEvent> {
        m.events.iter().copied().find(|e| e.name == name)
    }

    fn check_model(m: &Model) {
        let mut names = HashSet::new();
        let all = (1u64 << m.ncounters) - 1;
        for e in m.events {
            assert!(
                names.insert(e.name),
                "{}: duplicate event {}",
                m.name,
                e.name
            );
            assert!(!e.routes.is_empty(), "{}: {} has no route", m.name, e.name);
            assert_eq!(e.emask, 0, "{}: {} has an emask", m.name, e.name);
            let mut seen = 0u64;
            for r in e.routes {
                assert_ne!(r.counters, 0, "{}: {} has an empty route", m.name, e.name);
                assert_eq!(r.counters & !all, 0, "{}: {} out of range", m.name, e.name);
                assert!(
                    r.resource.is_none(),
                    "{}: {} uses a resource",
                    m.name,
                    e.name
                );
                assert!(r.code <= 0x3f, "{}: {} code too wide", m.name, e.name);
                assert_eq!(
                    seen & r.counters,
                    0,
                    "{}: {} has two routes per PIC",
                    m.name,
                    e.name
                );
                seen |= r.counters;
            }
        }
        // No two events share a select code on the same PIC.
        let mut codes = HashSet::new();
        for e in m.events {
            for r in e.routes {
                assert!(
                    codes.insert((r.counters, r.code)),
                    "{}: code clash at {}",
                    m.name,
                    e.name
                );
            }
        }
        let mut gnames = HashSet::new();
        for g in m.generics {
            assert!(
                gnames.insert(g.name),
                "{}: duplicate generic {}",
                m.name,
                g.name
            );
            assert!(g.name.starts_with("PAPI_"));
            let e = find(m, &g.event)
                .unwrap_or_else(|| panic!("{}: {} -> missing {}", m.name, g.name, g.event));
            assert_eq!(g.emask & !e.emask, 0);
        }
        assert!(m.resources.is_empty());
        assert!(m.attributes.is_empty());
        assert_eq!(m.ncounters, 2);
        assert_eq!(m.width, 32);
        assert_eq!(m.irq, IrqRule::Wrap);
        assert!(m.same_flags);
        assert!(!m.numbered);
        assert!(!m.overflow_precise);
    }

    #[test]
    fn ultrasparc_tables_are_consistent() {
        check_model(&ULTRASPARC);
        assert!(ULTRASPARC.overflow_interrupt);
        assert_eq!(ULTRASPARC.events.len(), 70);
        assert_eq!(ULTRASPARC.generics.len(), 20);
    }

    #[test]
    fn ultrasparc2_tables_are_consistent() {
        check_model(&ULTRASPARC2);
        assert!(!ULTRASPARC2.overflow_interrupt);
        assert_eq!(ULTRASPARC2.events.len(), 22);
        assert_eq!(ULTRASPARC2.generics.len(), 14);
    }

    #[test]
    fn cycle_and_instr_count_on_both_pics() {
        for m in [&ULTRASPARC, &ULTRASPARC2] {
            let c = find(m, "Cycle_cnt").unwrap();
            assert_eq!(c.routes, &[p0(0), p1(0)]);
            let i = find(m, "Instr_cnt").unwrap();
            assert_eq!(i.routes, &[p0(1), p1(1)]);
        }
    }

    #[test]
    fn ec_hit_only_on_ultrasparc2() {
        let e = find(&ULTRASPARC2, "EC_hit").unwrap();
        assert_eq!(e.routes, &[p1(0xc)]);
        assert!(find(&ULTRASPARC, "EC_hit").is_none());
        // On the III family PIC1 code 0xc is EC_misses instead.
        assert_eq!(find(&ULTRASPARC, "EC_misses").unwrap().routes, &[p1(0xc)]);
    }

    #[test]
    fn ultrasparc_specific_codes() {
        let m = &ULTRASPARC;
        assert_eq!(
            find(m, "EC_miss_mtag_remote").unwrap().routes,
            &[p0(0x1b), p1(0x28)]
        );
        assert_eq!(find(m, "Re_DC_missovhd").unwrap().routes, &[p1(0x4)]);
        assert!(find(m, "Re_endian_miss").is_none());
        assert_eq!(find(m, "MC_reads_0").unwrap().routes, &[p0(0x20)]);
        assert_eq!(find(m, "MC_stalls_3").unwrap().routes, &[p1(0x25)]);
        assert!(find(m, "MC_read_dispatched").is_none());
        assert_eq!(find(m, "EC_miss_remote").unwrap().routes, &[p1(0x29)]);
    }
}

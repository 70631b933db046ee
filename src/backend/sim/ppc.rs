//! The emulated PowerPC 750 and 7450 PMUs: the ppc32 counters of the perfctr low-level API.
//!
//! **Counters.** perfctr's ppc32 document gives 4 counters (PMC1-PMC4) to the 750 and 6
//! (PMC1-PMC6) to the 745x; counter `n` here is PMC`n+1`. Each PMC is a 32-bit register that
//! overflows on the non-negative-to-negative transition, when its sign bit (bit 31) becomes set
//! ([`IrqRule::BitSet`]`(31)`), so an i-mode counter is (re)loaded with a value in
//! `0..=0x7fffffff` (perfctr's `ireset` range) and interrupts after `2^31 - ireset` events. The
//! user/system freeze bits are in MMCR0, one register for all PMCs, so every request of a set
//! uses the same flags. The interrupt handler can tell which PMCs went negative, so overflow is
//! precise.
//!
//! **Events** (only those whose select code the cited public documents state; the event-select
//! code of a route is the PMCn select encoding):
//! - Both: the reference events the 750 manual lists as common to PMC1-PMC4 and that Apple's
//!   7450 list puts on the 7450's first four counters: instructions completed (2), time-base
//!   (TBL) bit transitions (3), instructions dispatched (4). Processor cycles (1) are on
//!   PMC1-PMC4 of the 750 and on all six counters of the 7450. The 7450's numbers for these four
//!   are the family's (MPC7400 user's manual, PMC1-PMC4 tables), which Apple's list describes as
//!   counted on the 7450's first four counters (cycles: on any counter).
//! - `ppc750`: the PMC2 and PMC3 events of the IBM PowerPC 750GX and 750GL RISC Microprocessor
//!   User's Manual (section 11.4, Tables 11-3 and 11-4).
//! - `ppc7450`: events of Apple's "PPC 7450 (G4+) Performance Counter Event List" (Shark User
//!   Guide appendix) with their counters and numbers; threshold events are left out.
//!
//! Names are the documents' event descriptions, lower-cased with `_` for spaces.

use super::model::{
    join, plain_event as ev, plain_generic as g, route as on, span, Generic, IrqRule, Model,
    SimEvent,
};
use super::papi;

/// PMC1-PMC4.
const PMC1_4: u64 = span(0, 3);

/// The reference events both models count on PMC1-PMC4 (cycles differ: see the models).
pub(super) const REFERENCE: [SimEvent; 3] = [
    ev(
        "instructions_completed",
        "Instructions completed (folded branches excluded)",
        &[on(PMC1_4, 2)],
    ),
    ev(
        "tbl_bit_transitions",
        "0-to-1 transitions of the time-base (TBL) bit MMCR0 selects",
        &[on(PMC1_4, 3)],
    ),
    ev(
        "instructions_dispatched",
        "Instructions dispatched",
        &[on(PMC1_4, 4)],
    ),
];

/// Generic names both models have.
const REFERENCE_GENERICS: [Generic; 2] = [
    g(papi::TOT_CYC, "cycles"),
    g(papi::TOT_INS, "instructions_completed"),
];

/// The 750's own events: cycles on its four counters, then PMC2 and PMC3.
const PPC750_OWN: [SimEvent; 21] = [
    ev("cycles", "Processor cycles", &[on(PMC1_4, 1)]),
    // PMC2 (IBM 750GX/GL manual, Table 11-3).
    ev(
        "l1_instruction_cache_misses",
        "L1 instruction cache misses",
        &[on(1 << 1, 5)],
    ),
    ev("itlb_misses", "Instruction TLB misses", &[on(1 << 1, 6)]),
    ev(
        "l2_instruction_misses",
        "L2 misses on instruction fetches",
        &[on(1 << 1, 7)],
    ),
    ev(
        "branches_not_taken",
        "Branches predicted or resolved not taken",
        &[on(1 << 1, 8)],
    ),
    ev(
        "reserved_loads_completed",
        "Reserved (load-and-reserve) loads completed",
        &[on(1 << 1, 10)],
    ),
    ev(
        "loads_and_stores_completed",
        "Load and store instructions completed",
        &[on(1 << 1, 11)],
    ),
    ev(
        "l1_l2_snoops",
        "Snoops to the L1 and the L2",
        &[on(1 << 1, 12)],
    ),
    ev(
        "l1_castouts_to_l2",
        "L1 castouts to the L2",
        &[on(1 << 1, 13)],
    ),
    ev(
        "system_unit_instructions_completed",
        "System unit instructions completed",
        &[on(1 << 1, 14)],
    ),
    ev(
        "l1_instruction_fetch_misses",
        "Instruction fetch misses in the L1",
        &[on(1 << 1, 15)],
    ),
    ev(
        "out_of_order_branches_resolved_correctly",
        "Branches allowing out-of-order execution that resolved correctly",
        &[on(1 << 1, 16)],
    ),
    // PMC3 (Table 11-4).
    ev(
        "l1_data_cache_misses",
        "L1 data cache misses (cache operations excluded)",
        &[on(1 << 2, 5)],
    ),
    ev("dtlb_misses", "Data TLB misses", &[on(1 << 2, 6)]),
    ev("l2_data_misses", "L2 data misses", &[on(1 << 2, 7)]),
    ev(
        "branches_taken",
        "Predicted branches that were taken",
        &[on(1 << 2, 8)],
    ),
    ev(
        "store_conditionals_completed",
        "Store conditional instructions completed",
        &[on(1 << 2, 10)],
    ),
    ev(
        "fpu_instructions_completed",
        "Instructions completed by the floating-point unit",
        &[on(1 << 2, 11)],
    ),
    ev(
        "l2_castouts_by_snoops",
        "L2 castouts caused by snoops to modified lines",
        &[on(1 << 2, 12)],
    ),
    ev(
        "l2_cache_operation_hits",
        "Cache operations that hit in the L2",
        &[on(1 << 2, 13)],
    ),
    ev(
        "l1_load_miss_cycles",
        "Cycles generated by L1 load misses",
        &[on(1 << 2, 15)],
    ),
];

/// All events of the 750.
static PPC750_EVENTS: [SimEvent; 24] = join(&[&REFERENCE, &PPC750_OWN]);

/// Generic names of the 750.
static PPC750_GENERICS: [Generic; 12] = join(&[
    &REFERENCE_GENERICS,
    &[
        g(papi::L1_ICM, "l1_instruction_cache_misses"),
        g(papi::L1_DCM, "l1_data_cache_misses"),
        g(papi::L2_ICM, "l2_instruction_misses"),
        g(papi::L2_DCM, "l2_data_misses"),
        g(papi::TLB_IM, "itlb_misses"),
        g(papi::TLB_DM, "dtlb_misses"),
        g(papi::BR_TKN, "branches_taken"),
        g(papi::BR_NTK, "branches_not_taken"),
        g(papi::FP_INS, "fpu_instructions_completed"),
        g(papi::CSR_TOT, "store_conditionals_completed"),
    ],
]);

/// The 7450's own events: cycles on all six counters, then Apple's list.
const PPC7450_OWN: [SimEvent; 11] = [
    ev("cycles", "Processor cycles", &[on(span(0, 5), 1)]),
    ev(
        "first_spec_buffer_active_cycles",
        "Cycles the first speculative branch buffer is active",
        &[on(1 << 0, 24)],
    ),
    ev(
        "second_spec_branch_buffer_active",
        "Cycles the second speculative branch buffer is active",
        &[on(1 << 1, 56)],
    ),
    ev(
        "second_spec_branch_buffer_correct",
        "Branches of the second speculative branch buffer resolved correctly",
        &[on(1 << 2, 27)],
    ),
    ev(
        "third_spec_branch_buffer_active",
        "Cycles the third speculative branch buffer is active",
        &[on(1 << 2, 28)],
    ),
    ev(
        "third_spec_branch_buffer_correct",
        "Branches of the third speculative branch buffer resolved correctly",
        &[on(1 << 3, 27)],
    ),
    ev(
        "aligned_fp_store_instr",
        "Aligned floating-point store instructions",
        &[on(1 << 0, 65)],
    ),
    ev(
        "altivec_cfx_instr",
        "AltiVec complex integer (CFX) instructions",
        &[on(1 << 0 | 1 << 1 | 1 << 3, 11)],
    ),
    ev(
        "altivec_cfx_stall_cycles",
        "Cycles AltiVec complex integer instructions stall",
        &[on(span(0, 1), 17)],
    ),
    ev(
        "altivec_float_instr",
        "AltiVec floating-point instructions",
        &[on(1 << 0 | 1 << 1 | 1 << 3, 9)],
    ),
    ev(
        "altivec_float_stall_cycles",
        "Cycles AltiVec floating-point instructions stall",
        &[on(span(0, 1), 15)],
    ),
];

/// All events of the 7450.
static PPC7450_EVENTS: [SimEvent; 14] = join(&[&REFERENCE, &PPC7450_OWN]);

/// The PowerPC 750 (and 740, 750CX/FX/GX): four 32-bit PMCs.
pub static PPC750: Model = Model {
    name: "ppc750",
    cciname: "PowerPC 750",
    cpuref: "See the \"Performance Monitor\" chapter of the IBM PowerPC 750GX and 750GL RISC \
             Microprocessor User's Manual (section 11.4, Tables 11-3 and 11-4)",
    ncounters: 4,
    width: 32,
    widths: &[],
    irq: IrqRule::BitSet(31),
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: true,
    numbered: false,
    events: &PPC750_EVENTS,
    generics: &PPC750_GENERICS,
    resources: &[],
    attributes: &[],
};

/// The PowerPC 7450 (and 7451/7441, 7457/7447): six 32-bit PMCs.
pub static PPC7450: Model = Model {
    name: "ppc7450",
    cciname: "PowerPC 7450",
    cpuref: "See Apple's \"PPC 7450 (G4+) Performance Counter Event List\" (Shark User Guide) \
             and the MPC7450 RISC Microprocessor Family Reference Manual, chapter 11",
    ncounters: 6,
    width: 32,
    widths: &[],
    irq: IrqRule::BitSet(31),
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: true,
    numbered: false,
    events: &PPC7450_EVENTS,
    generics: &REFERENCE_GENERICS,
    resources: &[],
    attributes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::model::tests::{check_tables, routes};

    #[test]
    fn ppc_tables_are_consistent() {
        check_tables(&PPC750);
        check_tables(&PPC7450);
    }

    #[test]
    fn reference_events_are_shared_and_cycles_differ() {
        for n in [
            "instructions_completed",
            "tbl_bit_transitions",
            "instructions_dispatched",
        ] {
            assert_eq!(routes(&PPC750, n), routes(&PPC7450, n));
            assert_eq!(routes(&PPC750, n)[0].counters, 0b1111);
        }
        assert_eq!(routes(&PPC750, "cycles"), [on(0b1111, 1)]);
        assert_eq!(routes(&PPC7450, "cycles"), [on(0b11_1111, 1)]);
        assert_eq!(routes(&PPC750, "itlb_misses"), [on(0b10, 6)]);
        assert_eq!(routes(&PPC750, "dtlb_misses"), [on(0b100, 6)]);
        assert_eq!(
            routes(&PPC7450, "third_spec_branch_buffer_correct"),
            [on(0b1000, 27)]
        );
    }
}

//! The emulated Pentium III: the P6-family PMU of perfctr's x86 document (issue 47).
//!
//! **Counters.** Two 40-bit counters (PerfCtr0, PerfCtr1), each with its own event-select
//! register (EvntSel0, EvntSel1). A write to a counter sets only its low 32 bits and
//! sign-extends bit 31 into the upper ones, so an i-mode counter is loaded with a negative
//! 32-bit value (perfctr's `ireset` range) and interrupts when the 40-bit register wraps, after
//! `-ireset` events ([`IrqRule::Wrap`]). Each counter has its own user/system bits, and the
//! interrupt says which counter overflowed.
//!
//! **Events.** The event-select codes of the P6 family's event table (Intel's IA-32 software
//! developer's manual, volume 3, the appendix on performance-monitoring events, "P6 family
//! processors"), with the counters the table restricts some of them to: the floating-point
//! operations and the divider's busy cycles on counter 0, the floating-point assists,
//! multiplies and divides on counter 1. The unit mask, edge, invert and count-mask fields are
//! taken but not modelled: an advance counts the event whatever they hold. Names are the
//! table's mnemonics, lower-cased.

use super::model::{plain_event as ev, plain_generic as g, route as on, IrqRule, Model, SimEvent};
use super::papi;

/// Both counters.
const BOTH: u64 = 0b11;
/// Counter 0 only.
const C0: u64 = 0b01;
/// Counter 1 only.
const C1: u64 = 0b10;

/// The events (code, counters).
static P6_EVENTS: [SimEvent; 22] = [
    ev(
        "cpu_clk_unhalted",
        "Cycles the processor is not halted",
        &[on(BOTH, 0x79)],
    ),
    ev("inst_retired", "Instructions retired", &[on(BOTH, 0xC0)]),
    ev(
        "uops_retired",
        "Micro-operations retired",
        &[on(BOTH, 0xC2)],
    ),
    ev("inst_decoded", "Instructions decoded", &[on(BOTH, 0xD0)]),
    ev(
        "br_inst_retired",
        "Branch instructions retired",
        &[on(BOTH, 0xC4)],
    ),
    ev(
        "br_miss_pred_retired",
        "Mispredicted branches retired",
        &[on(BOTH, 0xC5)],
    ),
    ev(
        "br_taken_retired",
        "Taken branches retired",
        &[on(BOTH, 0xC9)],
    ),
    ev(
        "data_mem_refs",
        "Loads and stores to any memory type",
        &[on(BOTH, 0x43)],
    ),
    ev(
        "dcu_lines_in",
        "Lines allocated in the data cache unit",
        &[on(BOTH, 0x45)],
    ),
    ev(
        "dcu_m_lines_in",
        "Modified lines allocated in the data cache unit",
        &[on(BOTH, 0x47)],
    ),
    ev(
        "ifu_ifetch",
        "Instruction fetches, cacheable and uncacheable",
        &[on(BOTH, 0x80)],
    ),
    ev(
        "ifu_ifetch_miss",
        "Instruction fetch misses",
        &[on(BOTH, 0x81)],
    ),
    ev("itlb_miss", "Instruction TLB misses", &[on(BOTH, 0x85)]),
    ev(
        "l2_lines_in",
        "Lines allocated in the L2",
        &[on(BOTH, 0x24)],
    ),
    ev("l2_rqsts", "Requests to the L2", &[on(BOTH, 0x2E)]),
    ev(
        "hw_int_rx",
        "Hardware interrupts received",
        &[on(BOTH, 0xC8)],
    ),
    ev(
        "flops",
        "Floating-point operations retired",
        &[on(C0, 0xC1)],
    ),
    ev(
        "fp_comp_ops_exe",
        "Floating-point computational operations executed",
        &[on(C0, 0x10)],
    ),
    ev(
        "cycles_div_busy",
        "Cycles the divider is busy",
        &[on(C0, 0x14)],
    ),
    ev(
        "fp_assist",
        "Floating-point exceptions handled by microcode",
        &[on(C1, 0x11)],
    ),
    ev("mul", "Multiplies", &[on(C1, 0x12)]),
    ev("div", "Divides", &[on(C1, 0x13)]),
];

/// Generic names.
static P6_GENERICS: [Generic; 7] = [
    g(papi::TOT_CYC, "cpu_clk_unhalted"),
    g(papi::TOT_INS, "inst_retired"),
    g(papi::BR_INS, "br_inst_retired"),
    g(papi::BR_MSP, "br_miss_pred_retired"),
    g(papi::BR_TKN, "br_taken_retired"),
    g(papi::TLB_IM, "itlb_miss"),
    g(papi::FP_INS, "flops"),
];

use super::model::Generic;

/// The Intel Pentium III (P6 family): two 40-bit counters.
pub static PENTIUM3: Model = Model {
    name: "pentium3",
    cciname: "Pentium III",
    cpuref: "See the P6 family's event table in the appendix on performance-monitoring events \
             of the \"IA-32 Intel Architecture Software Developer's Manual, Volume 3\"",
    ncounters: 2,
    width: 40,
    widths: &[],
    irq: IrqRule::Wrap,
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: false,
    numbered: false,
    events: &P6_EVENTS,
    generics: &P6_GENERICS,
    resources: &[],
    attributes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::model::tests::{check_tables, routes};

    #[test]
    fn p6_tables_are_consistent() {
        check_tables(&PENTIUM3);
    }

    #[test]
    fn restricted_events_are_on_their_counter() {
        assert_eq!(routes(&PENTIUM3, "flops"), [on(0b01, 0xC1)]);
        assert_eq!(routes(&PENTIUM3, "mul"), [on(0b10, 0x12)]);
        assert_eq!(routes(&PENTIUM3, "inst_retired"), [on(0b11, 0xC0)]);
    }
}

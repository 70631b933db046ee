//! The emulated Alpha EV4 (21064) and EV5 (21164) PMUs, as the Tru64 UNIX pfm(7) page describes
//! them.
//!
//! **Counters.** EV4 has two counters, EV5 three; each counter has its own event menu (pfm(7)
//! lists the events of each counter separately), and an event that two counters can count (EV5
//! cycles, EV5 secondary-cache writes) is one [`SimEvent`](super::model::SimEvent) with a [`Route`] per counter. The
//! event-select code of a route is the event's position in its counter's menu as pfm(7) lists
//! it (pfm(7) does not give the `<sys/pfcntr.h>` values).
//!
//! **Register model (a decision: pfm(7) is silent about what software sees).** An Alpha counter
//! does not give software a running count: it raises an interrupt every 2^n events, and the pfm
//! driver counts the interrupts. The emulation makes each counter an n-bit register that
//! interrupts when it wraps ([`IrqRule::Wrap`]), where 2^n is the interrupt period the counter
//! is set to:
//!
//! | model | counter | periods (default first) |
//! |---|---|---|
//! | `ev4` | 0 | 2^16, 2^12 |
//! | `ev4` | 1 | 2^12, 2^8 |
//! | `ev5` | 0, 1 | 2^16, 2^8 |
//! | `ev5` | 2 | 2^14, 2^8 |
//!
//! The request attribute `int_every` picks the period (`int_every=4096` on EV4 counter 0, the
//! "set" state of its PCNTSETMUX frequency bit; `int_every=256` on any EV5 counter, the
//! PF5_Cn_INT_EVERY_256 setting). At each interrupt the emulated kernel folds the register into
//! the 64-bit virtual counter, and a read adds the register's current value: the count is exact
//! to the event, as EV5's PCNT5GETCNT2 (the interrupt tally shifted left by the counter width,
//! plus the raw counter) is. A real EV4 driver could only report whole periods; the emulation
//! does not reproduce that loss. An overflow notification loads the register so that it wraps at
//! the exact event (EV5's PCNT5WRITE writes the counters; EV4 counters cannot be written, the
//! emulation does it anyway). The EV5 requirement that the 256-event period be chosen by the
//! superuser is not emulated.
//!
//! **Flags.** pfm(7) selects what to count (all activity, or marked processes; EV5's PF5_CTXT_*
//! contexts) for the whole chip, not per counter, so all requests of a set must use the same
//! user/system flags.
//!
//! **Names.** EV4 events are named as pfm(7) names them (`PF_ISSUES` ... `PF_EXTPIN1`). For EV5
//! pfm(7) gives only the prefixes `PF5_MUX0_`, `PF5_MUX1_`, `PF5_MUX2_` (one per counter): the
//! suffixes here are ours, made from the page's description of each event in the style of the
//! EV4 names, and the two events that two counters count drop the counter number (`PF5_CYCLES`,
//! `PF5_SCACHEWRITE`). The `ev5` model is the 21164 (EV5, EV56): the 21164PC (PCA56) events are
//! not included.

use super::model::{plain_event as ev, plain_generic as g, route, AttrSpec, IrqRule, Model, Route};
use super::papi;
use crate::base::text::Text;

/// The route for code `code` on counter `counter`.
const fn on(counter: u32, code: u32) -> Route {
    route(1 << counter, code)
}

/// The interrupt-period attribute: the number of events between two interrupts, a power of two
/// the counter supports (see the module documentation).
const INT_EVERY: AttrSpec = AttrSpec {
    name: Text::new("int_every"),
    max: 1 << 16,
};

/// The Alpha EV4 (21064, 21064A, 21066, 21068): two counters with their own menus.
pub static EV4: Model = Model {
    name: "ev4",
    cciname: "Alpha EV4 (21064)",
    cpuref: "See pfm(7) (Tru64 UNIX), \"EV4 Interface Description\" and \"EV4 Detailed Stat \
             Descriptions\", and the 21064 chip specification",
    ncounters: 2,
    width: 16,
    widths: &[&[16, 12], &[12, 8]],
    irq: IrqRule::Wrap,
    overflow_interrupt: true,
    // Each counter interrupts on its own.
    overflow_precise: true,
    same_flags: true,
    numbered: false,
    events: &[
        // Counter 0, in pfm(7)'s order.
        ev(
            "PF_ISSUES",
            "Issue cycles: 1 per dual-issue cycle, 1/2 per single-issue cycle",
            &[on(0, 0)],
        ),
        ev(
            "PF_PIPEDRY",
            "Cycles with nothing issued for lack of valid instruction-stream data",
            &[on(0, 1)],
        ),
        ev(
            "PF_LOADI",
            "Load instructions (a replayed load after a D-cache miss counts again)",
            &[on(0, 2)],
        ),
        ev(
            "PF_PIPEFROZEN",
            "Cycles with nothing issued because of a resource conflict in the pipeline",
            &[on(0, 3)],
        ),
        ev("PF_BRANCHI", "Branch instructions", &[on(0, 4)]),
        ev("PF_CYCLES", "Cycles", &[on(0, 5)]),
        ev("PF_PALMODE", "Cycles spent in PALmode", &[on(0, 6)]),
        ev(
            "PF_NONISSUES",
            "Non-issue cycles: 1 per cycle with no issue, 1/2 per single-issue cycle",
            &[on(0, 7)],
        ),
        ev(
            "PF_EXTPIN0",
            "Events on external input pin 0 (platform dependent)",
            &[on(0, 8)],
        ),
        // Counter 1.
        ev(
            "PF_DCACHE",
            "Primary data cache misses (probes that take more than a cycle)",
            &[on(1, 0)],
        ),
        ev("PF_ICACHE", "Primary instruction cache misses", &[on(1, 1)]),
        ev(
            "PF_DUAL",
            "Cycles in which two instructions issue",
            &[on(1, 2)],
        ),
        ev("PF_BRANCHMISS", "Mispredicted branches", &[on(1, 3)]),
        ev(
            "PF_FPINST",
            "Floating-point operate instructions (not loads, stores or branches)",
            &[on(1, 4)],
        ),
        ev(
            "PF_INTOPS",
            "Integer operate instructions, including LDA and LDAH",
            &[on(1, 5)],
        ),
        ev("PF_STOREI", "Store instructions", &[on(1, 6)]),
        ev(
            "PF_EXTPIN1",
            "Events on external input pin 1 (platform dependent)",
            &[on(1, 7)],
        ),
    ],
    generics: &[
        g(papi::TOT_CYC, "PF_CYCLES"),
        g(papi::BR_INS, "PF_BRANCHI"),
        g(papi::BR_MSP, "PF_BRANCHMISS"),
        g(papi::LD_INS, "PF_LOADI"),
        g(papi::SR_INS, "PF_STOREI"),
        g(papi::FP_INS, "PF_FPINST"),
        g(papi::INT_INS, "PF_INTOPS"),
        g(papi::L1_DCM, "PF_DCACHE"),
        g(papi::L1_ICM, "PF_ICACHE"),
    ],
    resources: &[],
    attributes: &[INT_EVERY],
};

/// The Alpha EV5 (21164, 21164A): three counters with their own menus.
pub static EV5: Model = Model {
    name: "ev5",
    cciname: "Alpha EV5 (21164)",
    cpuref: "See pfm(7) (Tru64 UNIX), \"EV5 Interface Description\" and \"EV5 Detailed Stat \
             Descriptions\", and the 21164 chip specification",
    ncounters: 3,
    width: 16,
    widths: &[&[16, 8], &[16, 8], &[14, 8]],
    irq: IrqRule::Wrap,
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: true,
    numbered: false,
    events: &[
        // Counter 0 (all EV5 implementations).
        ev("PF5_CYCLES", "Cycles", &[on(0, 0), on(2, 11)]),
        ev("PF5_MUX0_ISSUES", "Instructions", &[on(0, 1)]),
        // Counter 1 (all EV5 implementations).
        ev(
            "PF5_MUX1_PIPEFROZEN",
            "Cycles with instructions ready but none issued (stall or busy resources)",
            &[on(1, 0)],
        ),
        ev(
            "PF5_MUX1_SPLITISS",
            "Cycles in which some but not all of four instructions issue",
            &[on(1, 1)],
        ),
        ev(
            "PF5_MUX1_PIPEDRY",
            "Cycles with no instruction ready to issue",
            &[on(1, 2)],
        ),
        ev(
            "PF5_MUX1_REPLAYTRAP",
            "Replays: an instruction executed again because a resource was unavailable",
            &[on(1, 3)],
        ),
        ev(
            "PF5_MUX1_SINGLEISS",
            "Cycles in which one instruction issues",
            &[on(1, 4)],
        ),
        ev(
            "PF5_MUX1_DUALISS",
            "Cycles in which two instructions issue",
            &[on(1, 5)],
        ),
        ev(
            "PF5_MUX1_TRIPLEISS",
            "Cycles in which three instructions issue",
            &[on(1, 6)],
        ),
        ev(
            "PF5_MUX1_QUADISS",
            "Cycles in which four instructions issue",
            &[on(1, 7)],
        ),
        ev(
            "PF5_MUX1_FLOWCHANGE",
            "Branch, jump and return instructions",
            &[on(1, 8)],
        ),
        ev("PF5_MUX1_INTOPS", "Integer operations", &[on(1, 9)]),
        ev("PF5_MUX1_FPINST", "Floating-point operations", &[on(1, 10)]),
        ev("PF5_MUX1_LOADI", "Load operations", &[on(1, 11)]),
        ev("PF5_MUX1_STOREI", "Store operations", &[on(1, 12)]),
        ev(
            "PF5_MUX1_ICACHE",
            "Instruction cache accesses",
            &[on(1, 13)],
        ),
        ev("PF5_MUX1_DCACHE", "Data cache accesses", &[on(1, 14)]),
        // Counter 1 (EV5 and EV56 only).
        ev(
            "PF5_MUX1_SCACHE",
            "Secondary cache accesses (instructions or data)",
            &[on(1, 15)],
        ),
        ev("PF5_MUX1_SCACHEREAD", "Secondary cache reads", &[on(1, 16)]),
        ev(
            "PF5_SCACHEWRITE",
            "Secondary cache writes",
            &[on(1, 17), on(2, 18)],
        ),
        ev(
            "PF5_MUX1_SCACHEVICTIM",
            "Secondary cache blocks written back to memory before reuse",
            &[on(1, 18)],
        ),
        ev(
            "PF5_MUX1_BCACHE",
            "Board-level backup cache accesses",
            &[on(1, 19)],
        ),
        ev(
            "PF5_MUX1_BCACHEVICTIM",
            "Backup cache blocks written back to memory before reuse",
            &[on(1, 20)],
        ),
        ev("PF5_MUX1_SYSREQ", "System requests", &[on(1, 21)]),
        // Counter 2 (all EV5 implementations).
        ev(
            "PF5_MUX2_LONGSTALLS",
            "Long pipeline stalls (over 15 cycles)",
            &[on(2, 0)],
        ),
        ev("PF5_MUX2_PCMISPR", "PC mispredictions", &[on(2, 1)]),
        ev("PF5_MUX2_BRANCHMISS", "Branch mispredictions", &[on(2, 2)]),
        ev(
            "PF5_MUX2_ICACHEMISS",
            "Instructions found in neither the instruction cache nor its refill buffer",
            &[on(2, 3)],
        ),
        ev(
            "PF5_MUX2_ITBMISS",
            "Instruction cache misses whose page is not in the instruction TB",
            &[on(2, 4)],
        ),
        ev(
            "PF5_MUX2_DCACHEMISS",
            "Loads of values not in the data cache",
            &[on(2, 5)],
        ),
        ev(
            "PF5_MUX2_DTBMISS",
            "Data cache misses whose page is not in the data TB",
            &[on(2, 6)],
        ),
        ev(
            "PF5_MUX2_LOADSMERGED",
            "Data cache load misses merged with a pending miss to the same address",
            &[on(2, 7)],
        ),
        ev(
            "PF5_MUX2_LDUSEREPLAY",
            "Load misses that replay a later instruction using the loaded value",
            &[on(2, 8)],
        ),
        ev(
            "PF5_MUX2_WBMAFREPLAY",
            "Stores replayed on a full write buffer, loads on a full missed address file",
            &[on(2, 9)],
        ),
        ev(
            "PF5_MUX2_EXTPIN",
            "Cycles in which the perf_mon_h external input pin is true",
            &[on(2, 10)],
        ),
        // Code 11 on counter 2 is PF5_CYCLES.
        ev(
            "PF5_MUX2_MBSTALL",
            "Stall cycles caused by memory barriers",
            &[on(2, 12)],
        ),
        ev("PF5_MUX2_LDXL", "Locked load instructions", &[on(2, 13)]),
        // Counter 2 (EV5 and EV56 only).
        ev(
            "PF5_MUX2_SCACHEMISS",
            "Secondary cache misses",
            &[on(2, 14)],
        ),
        ev(
            "PF5_MUX2_SCACHEREADMISS",
            "Secondary cache read misses",
            &[on(2, 15)],
        ),
        ev(
            "PF5_MUX2_SCACHEWRITEMISS",
            "Secondary cache write misses",
            &[on(2, 16)],
        ),
        ev(
            "PF5_MUX2_SCACHESHWRITE",
            "Secondary cache shared writes",
            &[on(2, 17)],
        ),
        // Code 18 on counter 2 is PF5_SCACHEWRITE.
        ev("PF5_MUX2_BCACHEMISS", "Backup cache misses", &[on(2, 19)]),
        ev("PF5_MUX2_SYSINV", "System invalidates", &[on(2, 20)]),
        ev("PF5_MUX2_SYSREAD", "System read requests", &[on(2, 21)]),
    ],
    generics: &[
        g(papi::TOT_CYC, "PF5_CYCLES"),
        g(papi::TOT_INS, "PF5_MUX0_ISSUES"),
        g(papi::BR_INS, "PF5_MUX1_FLOWCHANGE"),
        g(papi::BR_MSP, "PF5_MUX2_BRANCHMISS"),
        g(papi::INT_INS, "PF5_MUX1_INTOPS"),
        g(papi::FP_INS, "PF5_MUX1_FPINST"),
        g(papi::LD_INS, "PF5_MUX1_LOADI"),
        g(papi::SR_INS, "PF5_MUX1_STOREI"),
        g(papi::L1_ICA, "PF5_MUX1_ICACHE"),
        g(papi::L1_DCA, "PF5_MUX1_DCACHE"),
        g(papi::L1_ICM, "PF5_MUX2_ICACHEMISS"),
        g(papi::L1_DCM, "PF5_MUX2_DCACHEMISS"),
        g(papi::TLB_IM, "PF5_MUX2_ITBMISS"),
        g(papi::TLB_DM, "PF5_MUX2_DTBMISS"),
        g(papi::L2_TCA, "PF5_MUX1_SCACHE"),
        g(papi::L2_TCM, "PF5_MUX2_SCACHEMISS"),
        g(papi::L3_TCM, "PF5_MUX2_BCACHEMISS"),
    ],
    resources: &[],
    attributes: &[INT_EVERY],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::model::tests::{check_tables, routes};

    #[test]
    fn ev4_menus_are_pfm7s() {
        check_tables(&EV4);
        let on0: Vec<&str> = EV4
            .events
            .iter()
            .filter(|e| e.routes == [on(0, e.routes[0].code)])
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            on0,
            [
                "PF_ISSUES",
                "PF_PIPEDRY",
                "PF_LOADI",
                "PF_PIPEFROZEN",
                "PF_BRANCHI",
                "PF_CYCLES",
                "PF_PALMODE",
                "PF_NONISSUES",
                "PF_EXTPIN0"
            ]
        );
        let on1 = EV4.events.iter().filter(|e| e.routes[0].counters == 2);
        assert_eq!(on1.count(), 8);
        assert_eq!(EV4.default_width(0), 16);
        assert_eq!(EV4.default_width(1), 12);
        assert!(EV4.has_width(0, 12) && EV4.has_width(1, 8) && !EV4.has_width(1, 16));
    }

    #[test]
    fn ev5_counters_and_shared_events() {
        check_tables(&EV5);
        assert_eq!(routes(&EV5, "PF5_CYCLES"), [on(0, 0), on(2, 11)]);
        assert_eq!(routes(&EV5, "PF5_SCACHEWRITE"), [on(1, 17), on(2, 18)]);
        let per = |c: u32| {
            EV5.events
                .iter()
                .filter(|e| e.routes.iter().any(|r| r.counters == 1 << c))
                .count()
        };
        // pfm(7): counter 0 has 2 events, counter 1 15 + 7, counter 2 14 + 8.
        assert_eq!((per(0), per(1), per(2)), (2, 22, 22));
        assert_eq!(
            (
                EV5.default_width(0),
                EV5.default_width(1),
                EV5.default_width(2)
            ),
            (16, 16, 14)
        );
        assert!((0..3).all(|c| EV5.has_width(c, 8)));
    }
}

//! The emulated MIPS R10000 and R12000 PMUs, as r10k_evcntrs(5) documents them.
//!
//! Both chips have two 32-bit counters; each raises its overflow interrupt when bit 31 becomes
//! set, and each has its own control register (so the user/system mode can differ per counter).
//! Events are numbered 0-31: number `n` is event-select code `n % 16` on counter `n / 16`.
//!
//! Each distinct event is one [`SimEvent`] whose routes are the event numbers that count it: on
//! the R10000, `cycles` is both event 0 (counter 0, code 0) and event 16 (counter 1, code 0),
//! and `graduated_instructions` both 15 and 17. On the R12000 every number is a different event;
//! cycles and graduated instructions exist only on counter 0.
//!
//! Naming rule: the event's title in r10k_evcntrs(5), lower-cased, with "floating-point"
//! shortened to `fp`, parenthesised qualifiers such as "(L1)" dropped, the man page's typos
//! fixed ("braches", "mishandling table", "store conditions"), and every run of spaces, `/` and
//! `-` turned into `_`. Where the R10000 title depends on the chip revision (events 6 and 14) the
//! name follows the revision 2.x title and the description gives both. The man page spells events
//! 30 and 31 "store/fetch" in the R10000 list and "store/prefetch" in the R12000 list; the names
//! use "store/prefetch" (the wording of the R10000 user's manual and of perfex(1)).
//!
//! The 14 events the two chips count alike (same number, name and description) are each stated
//! once and listed in both tables.

use super::model::{
    join, plain_event as event, plain_generic as generic, Generic, IrqRule, Model, Route, SimEvent,
};
use super::papi;

/// The route for R10000/R12000 event number `n`: code `n % 16` on counter `n / 16`.
const fn num(n: u32) -> Route {
    Route {
        counters: 1 << (n / 16),
        code: n % 16,
        resource: None,
    }
}

// Events the R10000 and R12000 count alike: the same number, name and description on both.
// Each is stated once here and listed in both models' tables, in event-number order.

/// Events 7-13: secondary cache write-backs and errors, instruction cache misses, external
/// requests.
const ALIKE_7_13: [SimEvent; 7] = [
    event(
        "quadwords_written_back_from_secondary_cache",
        "Quadwords written back from secondary cache to the system interface",
        &[num(7)],
    ),
    event(
        "correctable_secondary_cache_data_array_ecc_errors",
        "Correctable secondary cache data array ECC errors (single-bit)",
        &[num(8)],
    ),
    event(
        "primary_instruction_cache_misses",
        "Primary instruction cache misses",
        &[num(9)],
    ),
    event(
        "secondary_instruction_cache_misses",
        "Secondary instruction cache misses",
        &[num(10)],
    ),
    event(
        "instruction_misprediction_from_secondary_cache_way_prediction_table",
        "Instruction misprediction from secondary cache way prediction table",
        &[num(11)],
    ),
    event(
        "external_interventions",
        "External interventions entered into the Miss Handling Table",
        &[num(12)],
    ),
    event(
        "external_invalidations",
        "External invalidations entered into the Miss Handling Table",
        &[num(13)],
    ),
];

/// Events 20-22: graduated store conditionals and floating-point instructions, primary data
/// cache write-backs.
const ALIKE_20_22: [SimEvent; 3] = [
    event(
        "graduated_store_conditionals",
        "Graduated store conditionals",
        &[num(20)],
    ),
    event(
        "graduated_fp_instructions",
        "Graduated floating-point instructions",
        &[num(21)],
    ),
    event(
        "quadwords_written_back_from_primary_data_cache",
        "Quadwords written back from primary data cache to secondary cache",
        &[num(22)],
    ),
];

const FAILED_STORE_CONDITIONALS: SimEvent = event(
    "failed_store_conditionals",
    "Failed store conditionals",
    &[num(5)],
);
const MISPREDICTED_BRANCHES: SimEvent =
    event("mispredicted_branches", "Mispredicted branches", &[num(24)]);
const DATA_MISPREDICTION_FROM_SECONDARY_CACHE_WAY_PREDICTION_TABLE: SimEvent = event(
    "data_misprediction_from_secondary_cache_way_prediction_table",
    "Data misprediction from secondary cache way prediction table",
    &[num(27)],
);
const STORE_PREFETCH_EXCLUSIVE_TO_SHARED_BLOCK_IN_SECONDARY_CACHE: SimEvent = event(
    "store_prefetch_exclusive_to_shared_block_in_secondary_cache",
    "Store/prefetch exclusive to shared block in secondary cache (L2)",
    &[num(31)],
);

/// Every event both models share (for the parent module's test that no event is copied).
#[cfg(test)]
pub(super) const COMMON: [SimEvent; 14] = join(&[
    &ALIKE_7_13,
    &ALIKE_20_22,
    &[
        FAILED_STORE_CONDITIONALS,
        MISPREDICTED_BRANCHES,
        DATA_MISPREDICTION_FROM_SECONDARY_CACHE_WAY_PREDICTION_TABLE,
        STORE_PREFETCH_EXCLUSIVE_TO_SHARED_BLOCK_IN_SECONDARY_CACHE,
    ],
]);

/// Every event of the R10000, by event number.
static R10000_EVENTS: [SimEvent; 30] = join(&[
    &[
        event("cycles", "Cycles", &[num(0), num(16)]),
        event(
            "issued_instructions",
            "Issued instructions (to the ALU, FPU or load/store units)",
            &[num(1)],
        ),
        event(
            "issued_loads",
            "Issued loads (loads, prefetches and synchronization instructions)",
            &[num(2)],
        ),
        event("issued_stores", "Issued stores", &[num(3)]),
        event(
            "issued_store_conditionals",
            "Issued store conditionals",
            &[num(4)],
        ),
        FAILED_STORE_CONDITIONALS,
        event(
            "decoded_branches",
            "Decoded branches (resolved branches on revision 3.x)",
            &[num(6)],
        ),
    ],
    &ALIKE_7_13,
    &[
        event(
            "virtual_coherency_conditions",
            "Virtual coherency conditions (ALU/FPU completion cycles on revision 3.x)",
            &[num(14)],
        ),
        event(
            "graduated_instructions",
            "Graduated instructions",
            &[num(15), num(17)],
        ),
        event(
            "graduated_loads",
            "Graduated loads (loads, prefetches and synchronization instructions)",
            &[num(18)],
        ),
        event("graduated_stores", "Graduated stores", &[num(19)]),
    ],
    &ALIKE_20_22,
    &[
        event(
            "tlb_misses",
            "TLB misses (TLB refill exceptions)",
            &[num(23)],
        ),
        MISPREDICTED_BRANCHES,
        event(
            "primary_data_cache_misses",
            "Primary data cache misses (L1)",
            &[num(25)],
        ),
        event(
            "secondary_data_cache_misses",
            "Secondary data cache misses (L2)",
            &[num(26)],
        ),
        DATA_MISPREDICTION_FROM_SECONDARY_CACHE_WAY_PREDICTION_TABLE,
        event(
            "external_intervention_hits_in_secondary_cache",
            "External intervention hits in secondary cache (L2)",
            &[num(28)],
        ),
        event(
            "external_invalidation_hits_in_secondary_cache",
            "External invalidation hits in secondary cache (L2)",
            &[num(29)],
        ),
        event(
            "store_prefetch_exclusive_to_clean_block_in_secondary_cache",
            "Store/prefetch exclusive to clean block in secondary cache (L2)",
            &[num(30)],
        ),
        STORE_PREFETCH_EXCLUSIVE_TO_SHARED_BLOCK_IN_SECONDARY_CACHE,
    ],
]);

/// The generic names the R10000 and R12000 give the same graduated-instruction events.
const GRADUATED_GENERICS: [Generic; 6] = [
    generic(papi::TOT_INS, "graduated_instructions"),
    generic(papi::LD_INS, "graduated_loads"),
    generic(papi::SR_INS, "graduated_stores"),
    generic(papi::CSR_TOT, "graduated_store_conditionals"),
    generic(papi::CSR_FAL, "failed_store_conditionals"),
    generic(papi::FP_INS, "graduated_fp_instructions"),
];

/// The generic names the R10000 and R12000 give the same miss events.
const MISS_GENERICS: [Generic; 5] = [
    generic(papi::BR_MSP, "mispredicted_branches"),
    generic(papi::L1_ICM, "primary_instruction_cache_misses"),
    generic(papi::L2_ICM, "secondary_instruction_cache_misses"),
    generic(papi::L1_DCM, "primary_data_cache_misses"),
    generic(papi::L2_DCM, "secondary_data_cache_misses"),
];

/// The generic names the R10000 and R12000 give the same external coherence events.
const COHERENCE_GENERICS: [Generic; 2] = [
    generic(papi::CA_ITV, "external_interventions"),
    generic(papi::CA_INV, "external_invalidations"),
];

/// The R10000's generic names.
static R10000_GENERICS: [Generic; 18] = join(&[
    &[
        generic(papi::TOT_CYC, "cycles"),
        generic(papi::TOT_IIS, "issued_instructions"),
    ],
    &GRADUATED_GENERICS,
    &MISS_GENERICS,
    &[generic(papi::TLB_TL, "tlb_misses")],
    &COHERENCE_GENERICS,
    &[
        generic(
            papi::CA_CLN,
            "store_prefetch_exclusive_to_clean_block_in_secondary_cache",
        ),
        generic(
            papi::CA_SHR,
            "store_prefetch_exclusive_to_shared_block_in_secondary_cache",
        ),
    ],
]);

/// The MIPS R10000: 30 distinct events, cycles and graduated instructions on both counters.
pub static R10000: Model = Model {
    name: "r10000",
    cciname: "MIPS R10000",
    cpuref: "See r10k_evcntrs(5) and the MIPS R10000 Microprocessor User's Manual, Version 2.0, \
             Appendix E",
    ncounters: 2,
    width: 32,
    widths: &[],
    irq: IrqRule::BitSet(31),
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: false,
    numbered: true,
    events: &R10000_EVENTS,
    generics: &R10000_GENERICS,
    resources: &[],
    attributes: &[],
};

/// Every event of the R12000, by event number.
static R12000_EVENTS: [SimEvent; 32] = join(&[
    &[
        event("cycles", "Cycles", &[num(0)]),
        event(
            "decoded_instructions",
            "Decoded instructions (including ones later killed)",
            &[num(1)],
        ),
        event(
            "decoded_loads",
            "Decoded loads (not prefetches, cache operations or synchronization)",
            &[num(2)],
        ),
        event(
            "decoded_stores",
            "Decoded stores (including store conditionals)",
            &[num(3)],
        ),
        event(
            "miss_handling_table_occupancy",
            "Miss Handling Table occupancy (valid entries per cycle)",
            &[num(4)],
        ),
        FAILED_STORE_CONDITIONALS,
        event(
            "resolved_conditional_branches",
            "Resolved conditional branches",
            &[num(6)],
        ),
    ],
    &ALIKE_7_13,
    &[
        event(
            "alu_fpu_progress_cycles",
            "ALU/FPU progress cycles",
            &[num(14)],
        ),
        event(
            "graduated_instructions",
            "Graduated instructions",
            &[num(15)],
        ),
        event(
            "executed_prefetch_instructions",
            "Executed prefetch instructions",
            &[num(16)],
        ),
        event(
            "prefetch_primary_data_cache_misses",
            "Prefetch primary data cache misses",
            &[num(17)],
        ),
        event(
            "graduated_loads",
            "Graduated loads (including prefetches)",
            &[num(18)],
        ),
        event(
            "graduated_stores",
            "Graduated stores (including store conditionals)",
            &[num(19)],
        ),
    ],
    &ALIKE_20_22,
    &[
        event("tlb_misses", "TLB misses", &[num(23)]),
        MISPREDICTED_BRANCHES,
        event(
            "primary_data_cache_misses",
            "Primary data cache misses",
            &[num(25)],
        ),
        event(
            "secondary_data_cache_misses",
            "Secondary data cache misses",
            &[num(26)],
        ),
        DATA_MISPREDICTION_FROM_SECONDARY_CACHE_WAY_PREDICTION_TABLE,
        event(
            "state_of_external_intervention_hits_in_secondary_cache",
            "State of external intervention hits in secondary cache",
            &[num(28)],
        ),
        event(
            "state_of_invalidation_hits_in_secondary_cache",
            "State of invalidation hits in secondary cache (L2)",
            &[num(29)],
        ),
        event(
            "miss_handling_table_entries_accessing_memory",
            "Miss Handling Table entries accessing memory",
            &[num(30)],
        ),
        STORE_PREFETCH_EXCLUSIVE_TO_SHARED_BLOCK_IN_SECONDARY_CACHE,
    ],
]);

/// The R12000's generic names.
static R12000_GENERICS: [Generic; 19] = join(&[
    &[
        generic(papi::TOT_CYC, "cycles"),
        generic(papi::TOT_IIS, "decoded_instructions"),
    ],
    &GRADUATED_GENERICS,
    &[generic(papi::BR_CN, "resolved_conditional_branches")],
    &MISS_GENERICS,
    &[
        generic(papi::PRF_DM, "prefetch_primary_data_cache_misses"),
        generic(papi::TLB_TL, "tlb_misses"),
    ],
    &COHERENCE_GENERICS,
    &[generic(
        papi::CA_SHR,
        "store_prefetch_exclusive_to_shared_block_in_secondary_cache",
    )],
]);

/// The MIPS R12000: 32 distinct events, one per number; cycles and graduated instructions only
/// on counter 0.
pub static R12000: Model = Model {
    name: "r12000",
    cciname: "MIPS R12000",
    cpuref: "See r10k_evcntrs(5) (R12000 event list) and the MIPS R10000 Microprocessor User's \
             Manual, Version 2.0, Appendix E",
    ncounters: 2,
    width: 32,
    widths: &[],
    irq: IrqRule::BitSet(31),
    overflow_interrupt: true,
    overflow_precise: true,
    same_flags: false,
    numbered: true,
    events: &R12000_EVENTS,
    generics: &R12000_GENERICS,
    resources: &[],
    attributes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The (event, route) pairs that event number `n` names.
    fn owners(m: &Model, n: u32) -> Vec<(&'static str, Route)> {
        m.events
            .iter()
            .flat_map(|e| e.routes.iter().map(move |r| (e.name.as_str(), *r)))
            .filter(|(_, r)| r.counters == 1 << (n / 16) && r.code == n % 16)
            .collect()
    }

    fn check(m: &Model) {
        assert_eq!(m.ncounters, 2);
        assert_eq!(m.width, 32);
        assert_eq!(m.irq, IrqRule::BitSet(31));
        assert!(m.overflow_interrupt && m.overflow_precise && !m.same_flags && m.numbered);
        assert!(m.resources.is_empty() && m.attributes.is_empty());
        for n in 0..32 {
            assert_eq!(owners(m, n).len(), 1, "{}: event number {n}", m.name);
        }
        let mut routes = 0;
        let mut names = BTreeSet::new();
        for e in m.events {
            assert!(
                names.insert(e.name.as_str()),
                "{}: duplicate name {}",
                m.name,
                e.name
            );
            assert!(!e.routes.is_empty(), "{}", e.name);
            assert_eq!(e.emask, 0);
            assert!(!e.description.is_empty());
            for r in e.routes {
                assert!(r.counters == 1 || r.counters == 2, "{}", e.name);
                assert!(r.code < 16 && r.resource.is_none(), "{}", e.name);
                routes += 1;
            }
        }
        assert_eq!(routes, 32, "{}: every route is one event number", m.name);
        let mut gnames = BTreeSet::new();
        for g in m.generics {
            assert!(
                gnames.insert(g.name.as_str()),
                "{}: duplicate {}",
                m.name,
                g.name
            );
            assert!(g.name.starts_with("PAPI_"));
            assert_eq!(g.emask, 0);
            assert!(
                names.contains(g.event.as_str()),
                "{}: {} -> {}",
                m.name,
                g.name,
                g.event
            );
        }
        for s in names.iter().chain(gnames.iter()).chain([&m.name]) {
            assert!(
                s.bytes().all(|b| b.is_ascii_graphic()),
                "{}: bad name {s:?}",
                m.name
            );
        }
        for s in &names {
            assert!(
                s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{s} is not snake_case"
            );
        }
    }

    #[test]
    fn r10000_is_consistent() {
        check(&R10000);
        assert_eq!(R10000.events.len(), 30);
        assert_eq!(R10000.cciname, "MIPS R10000");
    }

    #[test]
    fn r12000_is_consistent() {
        check(&R12000);
        assert_eq!(R12000.events.len(), 32);
        assert_eq!(R12000.cciname, "MIPS R12000");
    }

    #[test]
    fn r10000_numbers() {
        let name = |n| owners(&R10000, n)[0].0;
        assert_eq!(name(0), "cycles");
        assert_eq!(name(16), "cycles");
        assert_eq!(name(15), "graduated_instructions");
        assert_eq!(name(17), "graduated_instructions");
        assert_eq!(name(21), "graduated_fp_instructions");
        assert_eq!(name(26), "secondary_data_cache_misses");
        let cycles = R10000.events.iter().find(|e| e.name == "cycles").unwrap();
        assert_eq!(
            cycles.routes,
            &[
                Route {
                    counters: 1,
                    code: 0,
                    resource: None
                },
                Route {
                    counters: 2,
                    code: 0,
                    resource: None
                }
            ]
        );
        let gi = R10000
            .events
            .iter()
            .find(|e| e.name == "graduated_instructions")
            .unwrap();
        assert_eq!(
            gi.routes,
            &[
                Route {
                    counters: 1,
                    code: 15,
                    resource: None
                },
                Route {
                    counters: 2,
                    code: 1,
                    resource: None
                }
            ]
        );
    }

    #[test]
    fn r12000_numbers() {
        let name = |n| owners(&R12000, n)[0].0;
        assert_eq!(name(0), "cycles");
        assert_eq!(name(1), "decoded_instructions");
        assert_eq!(name(4), "miss_handling_table_occupancy");
        assert_eq!(name(6), "resolved_conditional_branches");
        assert_eq!(name(14), "alu_fpu_progress_cycles");
        assert_eq!(name(15), "graduated_instructions");
        assert_eq!(name(16), "executed_prefetch_instructions");
        assert_eq!(name(17), "prefetch_primary_data_cache_misses");
        assert_eq!(name(30), "miss_handling_table_entries_accessing_memory");
    }

    #[test]
    fn descriptions_agree_with_the_event_table() {
        // Both tables follow r10k_evcntrs(5): each model's description starts like the
        // corresponding entry of the shared event table (modulo spelling of "floating point").
        let norm = |s: &str| s.to_ascii_lowercase().replace('-', " ");
        for n in 0..32u32 {
            let ev = crate::base::eventmap::r10k_event(n).unwrap();
            for (m, want) in [(&R10000, ev.r10000.as_str()), (&R12000, ev.r12000.as_str())] {
                let desc = m
                    .events
                    .iter()
                    .find(|e| e.name == owners(m, n)[0].0)
                    .unwrap()
                    .description
                    .as_str();
                let want = want.split(" (").next().unwrap();
                assert!(
                    norm(desc).starts_with(&norm(want)),
                    "{} event {n}: {desc:?} vs {want:?}",
                    m.name
                );
            }
        }
    }
}

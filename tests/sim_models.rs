//! Golden tests of the emulated PMUs of the seeds' other two counter systems: the Alpha EV4 and
//! EV5 of pfm(7) and the PowerPC 750 and 7450 of perfctr's ppc32 API. Events and their
//! counters, conflicts, overflow at each counter's documented width, and exact 64-bit counts
//! over many wraps. Deterministic: counts come only from `advance`.

use std::sync::atomic::{AtomicU64, Ordering};

use perfcompat::backend::sim::{SimBackend, SimGroup, MODEL_NAMES};
use perfcompat::backend::Backend;
use perfcompat::base::error::ConflictReason;
use perfcompat::engine::{self, OverflowEvent};
use perfcompat::{bind_with, Binding, CounterSet, Error, Request, RequestFlags, Target};

mod common;
use common::sample;

fn sim(model: &str) -> &'static SimBackend {
    Box::leak(Box::new(SimBackend::new(model).unwrap()))
}

fn set(reqs: &[Request]) -> CounterSet {
    let mut s = CounterSet::new();
    for r in reqs {
        s.add(r.clone()).unwrap();
    }
    s
}

fn group(b: &Binding) -> &SimGroup {
    b.group().as_any().downcast_ref::<SimGroup>().unwrap()
}

fn conflict(r: Result<Binding, Error>) -> perfcompat::base::error::Conflict {
    match r {
        Err(Error::Conflict(c)) => c,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

static FIRED: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

fn hook(ev: &OverflowEvent) {
    FIRED[ev.user_data % 16].fetch_add(1, Ordering::SeqCst);
}

#[test]
fn the_new_models_are_listed_and_described() {
    for (name, npic, widths, cci) in [
        ("ev4", 2, &[16u32, 12][..], "21064"),
        ("ev5", 3, &[16, 16, 14][..], "21164"),
        ("ppc750", 4, &[32; 4][..], "PowerPC 750"),
        ("ppc7450", 6, &[32; 6][..], "PowerPC 7450"),
        ("pentium3", 2, &[40; 2][..], "Pentium III"),
    ] {
        assert!(MODEL_NAMES.contains(&name), "{name}");
        let b = perfcompat::backend::from_name(&format!("sim:{name}")).unwrap();
        let info = b.info();
        assert_eq!(info.counters.len(), npic, "{name}");
        let w: Vec<u32> = info.counters.iter().map(|c| c.width).collect();
        assert_eq!(w, widths, "{name}");
        assert!(
            info.description.contains(cci),
            "{name}: {}",
            info.description
        );
        assert!(info.overflow_interrupt && info.overflow_precise);
    }
    let Err(e) = perfcompat::backend::from_name("sim:ev6") else {
        panic!("sim:ev6 accepted");
    };
    assert!(e.to_string().contains("ev4, ev5, ppc750, ppc7450"), "{e}");
}

#[test]
fn ev4_menus_placement_and_conflicts() {
    let be = sim("ev4");
    // Each event lives on the counter whose menu pfm(7) lists it in.
    let b = bind_with(
        be,
        &set(&[Request::new("PF_DCACHE"), Request::new("PF_CYCLES")]),
        Target::CurrentThread,
    )
    .unwrap();
    assert_eq!(group(&b).placement(), vec![1, 0]);
    be.advance("PF_CYCLES", 10).unwrap();
    be.advance("PAPI_l1_dcm", 3).unwrap();
    assert_eq!(sample(&b), vec![3, 10]);
    drop(b);
    // Two events of counter 0's menu.
    let c = conflict(bind_with(
        be,
        &set(&[Request::new("PF_ISSUES"), Request::new("PF_CYCLES")]),
        Target::CurrentThread,
    ));
    assert_eq!(c.reason, ConflictReason::SameCounter { counters: vec![0] });
    // A counter-1 event pinned to counter 0.
    let e = bind_with(
        be,
        &set(&[Request::new("PF_STOREI").on_counter(0)]),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::PicNotCapable { picnum: 0, .. }), "{e}");
    // Three requests, two counters.
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("PF_CYCLES"),
            Request::new("PF_DUAL"),
            Request::new("PF_FPINST"),
        ]),
        Target::CurrentThread,
    ));
    assert!(matches!(c.reason, ConflictReason::TooManyRequests { .. }));
    // One mode for the whole chip.
    let sys = RequestFlags {
        system: true,
        ..RequestFlags::USER
    };
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("PF_CYCLES"),
            Request::new("PF_DCACHE").flags(sys),
        ]),
        Target::CurrentThread,
    ));
    assert_eq!(c.reason, ConflictReason::DifferentFlags);
}

#[test]
fn ev5_shared_events_find_a_free_counter() {
    let be = sim("ev5");
    // Cycles are on counters 0 and 2: with counter 0 taken by instructions they go to 2.
    let b = bind_with(
        be,
        &set(&[Request::new("PF5_CYCLES"), Request::new("PF5_MUX0_ISSUES")]),
        Target::CurrentThread,
    )
    .unwrap();
    assert_eq!(group(&b).placement(), vec![2, 0]);
    drop(b);
    // With counter 2 also needed, there is no room left.
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("PF5_CYCLES"),
            Request::new("PF5_MUX0_ISSUES"),
            Request::new("PF5_MUX2_LDXL"),
        ]),
        Target::CurrentThread,
    ));
    assert_eq!(
        c.requests.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // Secondary-cache writes are on counters 1 and 2.
    let b = bind_with(
        be,
        &set(&[
            Request::new("PF5_MUX1_SCACHE"),
            Request::new("PF5_SCACHEWRITE"),
            Request::new("PAPI_tot_cyc"),
        ]),
        Target::CurrentThread,
    )
    .unwrap();
    assert_eq!(group(&b).placement(), vec![1, 2, 0]);
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("PF5_MUX1_SCACHE"),
            Request::new("PF5_MUX1_SYSREQ"),
        ]),
        Target::CurrentThread,
    ));
    assert_eq!(c.reason, ConflictReason::SameCounter { counters: vec![1] });
}

#[test]
fn ppc_counters_events_and_conflicts() {
    let be = sim("ppc750");
    // PMC2-only events.
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("l1_instruction_cache_misses"),
            Request::new("itlb_misses"),
        ]),
        Target::CurrentThread,
    ));
    assert_eq!(c.reason, ConflictReason::SameCounter { counters: vec![1] });
    // Four counters for the reference events, not five.
    let b = bind_with(
        be,
        &set(&[
            Request::new("itlb_misses"),
            Request::new("dtlb_misses"),
            Request::new("cycles"),
            Request::new("PAPI_tot_ins"),
        ]),
        Target::CurrentThread,
    )
    .unwrap();
    let p = group(&b).placement();
    assert_eq!(&p[..2], &[1, 2]);
    assert!([0, 3].contains(&p[2]) && [0, 3].contains(&p[3]) && p[2] != p[3]);
    drop(b);
    let five = [
        Request::new("cycles"),
        Request::new("instructions_completed"),
        Request::new("instructions_dispatched"),
        Request::new("tbl_bit_transitions"),
        Request::new("cycles"),
    ];
    let c = conflict(bind_with(be, &set(&five), Target::CurrentThread));
    assert!(matches!(
        c.reason,
        ConflictReason::TooManyRequests {
            requested: 5,
            available: 4
        }
    ));
    // ...which the 7450 counts: cycles on PMC5 and PMC6 too.
    let be = sim("ppc7450");
    let b = bind_with(be, &set(&five), Target::CurrentThread).unwrap();
    let p = group(&b).placement();
    assert!(p[0] >= 4 || p[4] >= 4, "{p:?}");
    drop(b);
    let e = bind_with(
        be,
        &set(&[Request::new("instructions_completed").on_counter(4)]),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::PicNotCapable { picnum: 4, .. }), "{e}");
    assert!(bind_with(
        be,
        &set(&[Request::new("cycles").on_counter(5)]),
        Target::CurrentThread
    )
    .is_ok());
    // Three events that only PMC1 and PMC2 count.
    let c = conflict(bind_with(
        be,
        &set(&[
            Request::new("altivec_cfx_stall_cycles"),
            Request::new("altivec_float_stall_cycles"),
            Request::new("aligned_fp_store_instr"),
        ]),
        Target::CurrentThread,
    ));
    assert_eq!(c.requests.len(), 3, "{c:?}");
    assert!(!sim("ppc750")
        .events()
        .iter()
        .any(|e| e.name == "altivec_cfx_instr"));
}

/// The Alpha interrupt periods: the register is as wide as the period, chosen per request.
#[test]
fn alpha_interrupt_periods_set_the_register_width() {
    for (model, event, int_every, width) in [
        ("ev4", "PF_CYCLES", None, 16u32),
        ("ev4", "PF_CYCLES", Some(4096), 12),
        ("ev4", "PF_DCACHE", None, 12),
        ("ev4", "PF_DCACHE", Some(256), 8),
        ("ev5", "PF5_MUX0_ISSUES", None, 16),
        ("ev5", "PF5_MUX1_LOADI", Some(256), 8),
        ("ev5", "PF5_MUX2_LDXL", None, 14),
        ("ev5", "PF5_MUX2_LDXL", Some(256), 8),
    ] {
        let be = sim(model);
        let mut r = Request::new(event);
        if let Some(p) = int_every {
            r = r.attr("int_every", p);
        }
        let b = bind_with(be, &set(&[r]), Target::CurrentThread).unwrap();
        let n = (1u64 << width) * 5 + 17;
        be.advance(event, n).unwrap();
        assert_eq!(sample(&b)[0], n, "{model} {event} {int_every:?}");
        assert_eq!(
            group(&b).register(0).unwrap(),
            17,
            "{model} {event}: a {width}-bit register"
        );
        be.advance(event, (1 << width) - 18).unwrap();
        assert_eq!(group(&b).register(0).unwrap(), (1 << width) - 1);
        be.advance(event, 1).unwrap();
        assert_eq!(
            group(&b).register(0).unwrap(),
            0,
            "{model}: wraps at 2^{width}"
        );
        assert_eq!(sample(&b)[0], (1 << width) * 6);
    }
    // Periods a counter does not have are refused, naming the counter's periods.
    for (model, event, p) in [
        ("ev4", "PF_CYCLES", 256u64),
        ("ev4", "PF_DCACHE", 65536),
        ("ev5", "PF5_MUX2_LDXL", 65536),
        ("ev5", "PF5_MUX0_ISSUES", 1000),
    ] {
        let e = bind_with(
            sim(model),
            &set(&[Request::new(event).attr("int_every", p)]),
            Target::CurrentThread,
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("int_every") && e.to_string().contains(event));
    }
    let e = bind_with(
        sim("ev5"),
        &set(&[Request::new("PF5_CYCLES").attr("int_every", 1 << 17)]),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::AttributeOutOfRange { .. }), "{e}");
    // A shared event goes to the counter that has the period: 2^16 on EV5 is counter 0's.
    let b = bind_with(
        sim("ev5"),
        &set(&[Request::new("PF5_CYCLES").attr("int_every", 65536)]),
        Target::CurrentThread,
    )
    .unwrap();
    assert_eq!(group(&b).placement(), vec![0]);
    // The PowerPC PMCs have no choice of period.
    let e = bind_with(
        sim("ppc750"),
        &set(&[Request::new("cycles").attr("int_every", 256)]),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidAttribute { .. }), "{e}");
}

/// A notification armed k+1 events away fires at exactly the (k+1)th event, after the silent
/// interrupts of the narrow register, and the register is loaded as the hardware would be: on
/// the PowerPC with a non-negative value (perfctr's `ireset`, 0..0x7fffffff).
#[test]
fn overflow_at_the_exact_event_at_each_documented_width() {
    engine::set_overflow_hook(Some(hook));
    let mut slot = 0;
    for (model, event, int_every, irq_at) in [
        ("ev4", "PF_CYCLES", None, 1u64 << 16),
        ("ev4", "PF_STOREI", Some(256u64), 1 << 8),
        ("ev5", "PF5_MUX2_MBSTALL", None, 1 << 14),
        ("ev5", "PF5_MUX1_DCACHE", Some(256), 1 << 8),
        ("ppc750", "l2_data_misses", None, 1 << 31),
        ("ppc7450", "altivec_float_instr", None, 1 << 31),
    ] {
        let be = sim(model);
        for k in [0u64, 1, irq_at - 2, irq_at - 1, irq_at, 3 * irq_at + 5] {
            // Tags 1..=14: 0 is every untagged binding's, 15 the other test's (the tests of
            // this file run at once and share the hook).
            slot = slot % 14 + 1;
            let mut r = Request::new(event).preset(u64::MAX - k).notify();
            if let Some(p) = int_every {
                r = r.attr("int_every", p);
            }
            let b = engine::bind_tagged(be, &set(&[r]), Target::CurrentThread, slot).unwrap();
            let reg = group(&b).register(0).unwrap();
            let distance = k + 1;
            // A distance longer than the register loads 0 (silent interrupts first).
            let want = irq_at.saturating_sub(distance);
            assert_eq!(reg, want, "{model} k={k}: register load");
            if model.starts_with("ppc") {
                assert!(reg <= 0x7fff_ffff, "{model}: ireset {reg:#x} is negative");
            }
            let fired = FIRED[slot].load(Ordering::SeqCst);
            if k > 0 {
                be.advance(event, k).unwrap();
            }
            assert_eq!(FIRED[slot].load(Ordering::SeqCst), fired, "{model} k={k}");
            assert_eq!(sample(&b)[0], u64::MAX, "{model} k={k}");
            be.advance(event, 1).unwrap();
            assert_eq!(
                FIRED[slot].load(Ordering::SeqCst),
                fired + 1,
                "{model} k={k}: not at k+1"
            );
            assert!(b.is_frozen());
            assert_eq!(sample(&b)[0], 0);
        }
    }
}

/// 64-bit virtual counters over many wraps of every new register width, and one advance of
/// nearly 2^64 events with a notification armed 2^64 - 1 events away.
#[test]
fn exact_64_bit_counts_over_many_wraps() {
    engine::set_overflow_hook(Some(hook));
    for (model, a, b_ev, attr) in [
        ("ev4", "PF_CYCLES", "PF_INTOPS", None),
        ("ev4", "PF_PALMODE", "PF_EXTPIN1", Some(4096u64)),
        ("ev5", "PF5_CYCLES", "PF5_MUX2_SYSREAD", None),
        ("ev5", "PF5_MUX0_ISSUES", "PF5_MUX1_QUADISS", Some(256)),
        ("ppc750", "cycles", "l1_load_miss_cycles", None),
        ("ppc7450", "cycles", "third_spec_branch_buffer_active", None),
    ] {
        let be = sim(model);
        let mut ra = Request::new(a);
        if let Some(p) = attr {
            ra = ra.attr("int_every", p);
        }
        let b = bind_with(be, &set(&[ra, Request::new(b_ev)]), Target::CurrentThread).unwrap();
        let chunks = [
            1u64,
            255,
            256,
            4095,
            16_383,
            65_537,
            0x7fff_ffff,
            0x8000_0001,
            3 << 32,
            12_345,
        ];
        let (mut ta, mut tb) = (0u64, 0u64);
        for c in chunks {
            be.advance(a, c).unwrap();
            be.advance(b_ev, c / 3).unwrap();
            ta += c;
            tb += c / 3;
            assert_eq!(sample(&b), vec![ta, tb], "{model}");
        }
        be.advance(a, u64::MAX - ta - 4).unwrap();
        assert_eq!(sample(&b)[0], u64::MAX - 4, "{model}");
        be.advance(a, 6).unwrap();
        assert_eq!(sample(&b)[0], 1, "{model}: wraps modulo 2^64");
        drop(b);

        let slot = 15;
        let mut r = Request::new(a).preset(1).notify();
        if let Some(p) = attr {
            r = r.attr("int_every", p);
        }
        let b = engine::bind_tagged(be, &set(&[r]), Target::CurrentThread, slot).unwrap();
        let fired = FIRED[slot].load(Ordering::SeqCst);
        be.advance(a, u64::MAX - 1).unwrap();
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), fired, "{model}: early");
        assert_eq!(sample(&b)[0], u64::MAX);
        be.advance(a, 1).unwrap();
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), fired + 1, "{model}");
        assert_eq!(sample(&b)[0], 0);
    }
}

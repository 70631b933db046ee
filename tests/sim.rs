//! The engine on the emulated PMUs: exact counts, presets, overflow, conflicts, generations,
//! inheritance. Everything here is deterministic: counts come only from `advance`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use perfcompat::backend::sim::{SimBackend, SimGroup};
use perfcompat::backend::Backend as _;
use perfcompat::base::error::ConflictReason;
use perfcompat::engine::{self, OverflowEvent};
use perfcompat::{bind_with, CounterSet, Error, Request, RequestFlags, Target};

mod common;
use common::sample;

fn sim(model: &str) -> &'static SimBackend {
    Box::leak(Box::new(SimBackend::new(model).unwrap()))
}

/// Overflow notifications per `user_data` slot; the hook restarts the set when asked to.
static FIRED: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];
static RESTART: [AtomicUsize; 32] = [const { AtomicUsize::new(0) }; 32];
static LAST_MASK: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];

fn hook(ev: &OverflowEvent) {
    let slot = ev.user_data % 32;
    FIRED[slot].fetch_add(1, Ordering::SeqCst);
    LAST_MASK[slot].store(ev.overflowed, Ordering::SeqCst);
    if RESTART[slot].load(Ordering::SeqCst) != 0 {
        engine::with_current(|b| b.restart().unwrap()).expect("a current binding");
    }
}

#[test]
fn exact_64_bit_counts_across_32_bit_wraps() {
    let be = sim("r10000");
    let set = CounterSet::new()
        .with(Request::new("cycles"))
        .unwrap()
        .with(Request::new("25"))
        .unwrap();
    let b = bind_with(be, &set, Target::CurrentThread).unwrap();
    let g = b.group().as_any().downcast_ref::<SimGroup>().unwrap();
    // Event 25 lives on counter 1, so cycles must go to counter 0.
    assert_eq!(g.placement(), vec![0, 1]);
    let chunks = [1u64, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 3 << 32, 12_345];
    let mut total = 0u64;
    for c in chunks {
        be.advance("cycles", c).unwrap();
        be.advance("primary_data_cache_misses", c / 2).unwrap();
        total += c;
        let v = sample(&b);
        assert_eq!(v[0], total);
        // The register obeys the R10000 rule: the interrupt (and fold) comes when bit 31 is set.
        assert!(g.register(0).unwrap() < 1 << 31);
    }
    assert_eq!(sample(&b)[1], chunks.iter().map(|c| c / 2).sum::<u64>());
    assert!(total > 5 << 32);
}

/// Counts near 2^64 in one `advance`, with and without a notification armed 2^64 - 1 events
/// away: exact, and the notification at the exact event. (Stepping from one 32-bit interrupt
/// to the next took 2^33 iterations with signals blocked: found by fuzz/state_machine.)
#[test]
fn one_advance_of_nearly_2_to_the_64_events() {
    engine::set_overflow_hook(Some(hook));
    for model in ["r10000", "ultrasparc", "pentium4"] {
        let be = sim(model);
        let ev = if model == "r10000" {
            "cycles"
        } else {
            "PAPI_tot_cyc"
        };
        let set = CounterSet::new().with(Request::new(ev)).unwrap();
        let b = bind_with(be, &set, Target::CurrentThread).unwrap();
        be.advance(ev, u64::MAX - 5).unwrap();
        assert_eq!(sample(&b)[0], u64::MAX - 5, "{model}");
        be.advance(ev, 7).unwrap();
        assert_eq!(sample(&b)[0], 1, "{model}: wraps modulo 2^64");

        // Preset 1: the notification comes after 2^64 - 1 events, not one before.
        let slot = 27;
        let set = CounterSet::new()
            .with(Request::new(ev).preset(1).notify())
            .unwrap();
        let b = engine::bind_tagged(be, &set, Target::CurrentThread, slot).unwrap();
        let fired = FIRED[slot].load(Ordering::SeqCst);
        be.advance(ev, u64::MAX - 1).unwrap();
        assert_eq!(sample(&b)[0], u64::MAX, "{model}");
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), fired, "{model}: early");
        be.advance(ev, u64::MAX).unwrap();
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), fired + 1, "{model}");
        assert!(b.is_frozen());
        assert_eq!(sample(&b)[0], 0, "{model}: frozen at the wrap");
    }
}

#[test]
fn ultrasparc_and_pentium4_wrap_their_own_widths() {
    for (model, event, width) in [
        ("ultrasparc", "Cycle_cnt", 32u32),
        ("pentium4", "global_power_events", 40),
    ] {
        let be = sim(model);
        let mut req = Request::new(event);
        if model == "pentium4" {
            req = req.attr("emask", 1);
        }
        let b = bind_with(
            be,
            &CounterSet::new().with(req).unwrap(),
            Target::CurrentThread,
        )
        .unwrap();
        let n = (1u64 << width) * 3 + 17;
        be.advance(event, n).unwrap();
        assert_eq!(sample(&b)[0], n, "{model}");
        let g = b.group().as_any().downcast_ref::<SimGroup>().unwrap();
        assert_eq!(
            g.register(0).unwrap(),
            17,
            "{model}: register keeps the low bits"
        );
    }
}

#[test]
fn presets_near_max_overflow_after_exactly_k_plus_one_events() {
    engine::set_overflow_hook(Some(hook));
    let be = sim("r10000");
    for (slot, k) in [
        0u64,
        1,
        999,
        (1 << 31) - 1,
        1 << 31,
        (1 << 32) + 5,
        i32::MAX as u64,
    ]
    .into_iter()
    .enumerate()
    {
        let slot = slot + 1;
        let preset = u64::MAX - k;
        let set = CounterSet::new()
            .with(Request::new("cycles").preset(preset).notify())
            .unwrap()
            .with(Request::new("graduated_loads"))
            .unwrap();
        let b = bind_with(be, &set, Target::CurrentThread).unwrap();
        b.set_user_data(slot);
        assert_eq!(sample(&b)[0], preset);
        if k > 0 {
            be.advance("cycles", k).unwrap();
        }
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), 0, "k={k}: too early");
        assert_eq!(sample(&b)[0], u64::MAX, "k={k}");
        be.advance("cycles", 1).unwrap();
        assert_eq!(FIRED[slot].load(Ordering::SeqCst), 1, "k={k}: not at k+1");
        assert_eq!(LAST_MASK[slot].load(Ordering::SeqCst), 0b01);
        let mut v = [0u64; 2];
        let info = b.sample(&mut v).unwrap();
        assert!(info.frozen);
        assert_eq!(info.overflowed, 0b01);
        assert_eq!(v[0], 0, "the value wrapped to exactly 0");
        // Frozen: further events are not counted, by any request of the set.
        be.advance("cycles", 50).unwrap();
        be.advance("graduated_loads", 50).unwrap();
        assert_eq!(sample(&b), vec![0, 0]);
        // Restart counts again from the presets.
        b.restart().unwrap();
        assert_eq!(sample(&b), vec![preset, 0]);
        assert!(!b.is_frozen());
        drop(b);
    }
}

#[test]
fn restart_in_the_handler_counts_every_overflow_and_loses_nothing() {
    engine::set_overflow_hook(Some(hook));
    let be = sim("pentium4");
    let slot = 20;
    RESTART[slot].store(1, Ordering::SeqCst);
    let set = CounterSet::new()
        .with(Request::new("PAPI_tot_ins").preset(u64::MAX - 999).notify())
        .unwrap();
    let b = bind_with(be, &set, Target::CurrentThread).unwrap();
    b.set_user_data(slot);
    // 100,000 overflows in one call: each fires at the exact event, the hook restarts, the rest
    // of the events are counted after the restart.
    be.advance("PAPI_tot_ins", 100_000 * 1000 + 7).unwrap();
    assert_eq!(FIRED[slot].load(Ordering::SeqCst), 100_000);
    assert_eq!(sample(&b)[0], u64::MAX - 999 + 7);
    // A new preset takes effect at the next restart only.
    b.set_preset(0, u64::MAX - 9).unwrap();
    be.advance("PAPI_tot_ins", 993).unwrap();
    assert_eq!(FIRED[slot].load(Ordering::SeqCst), 100_001);
    be.advance("PAPI_tot_ins", 10).unwrap();
    assert_eq!(FIRED[slot].load(Ordering::SeqCst), 100_002);
    RESTART[slot].store(0, Ordering::SeqCst);
}

fn conflict(r: Result<perfcompat::Binding, Error>) -> perfcompat::base::error::Conflict {
    match r {
        Err(Error::Conflict(c)) => c,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn conflicts_say_which_requests_and_why() {
    let r10k = sim("r10000");
    let set = CounterSet::new()
        .with(Request::new("9"))
        .unwrap()
        .with(Request::new("10"))
        .unwrap();
    let c = conflict(bind_with(r10k, &set, Target::CurrentThread));
    assert_eq!(
        c.requests.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(c.reason, ConflictReason::SameCounter { counters: vec![0] });
    let msg = Error::Conflict(c).to_string();
    assert!(
        msg.contains("#0 (9)") && msg.contains("#1 (10)") && msg.contains("counter 0"),
        "{msg}"
    );

    // Two requests pinned to one counter conflict before their events are even looked at.
    let set = CounterSet::new()
        .with(Request::new("no_such_a").on_counter(1))
        .unwrap()
        .with(Request::new("no_such_b").on_counter(1))
        .unwrap();
    let c = conflict(bind_with(r10k, &set, Target::CurrentThread));
    assert_eq!(c.reason, ConflictReason::SameCounter { counters: vec![1] });

    // Three requests, two counters.
    let set = CounterSet::new()
        .with(Request::new("0"))
        .unwrap()
        .with(Request::new("16"))
        .unwrap()
        .with(Request::new("25"))
        .unwrap();
    let c = conflict(bind_with(r10k, &set, Target::CurrentThread));
    assert!(matches!(
        c.reason,
        ConflictReason::TooManyRequests {
            requested: 3,
            available: 2
        }
    ));

    // Pentium 4: branch_retired pinned to counters 12 and 13 needs CRU_ESCR2 twice.
    let p4 = sim("pentium4");
    let br = |pic| {
        Request::new("branch_retired")
            .attr("emask", 0xc)
            .on_counter(pic)
    };
    let set = CounterSet::new()
        .with(br(12))
        .unwrap()
        .with(br(13))
        .unwrap();
    let c = conflict(bind_with(p4, &set, Target::CurrentThread));
    assert_eq!(
        c.reason,
        ConflictReason::SharedResource {
            resource: "CRU_ESCR2".into()
        }
    );
    assert!(Error::Conflict(c).to_string().contains("CRU_ESCR2"));
    // Pinned to a counter behind CRU_ESCR3 instead: accepted.
    let set = CounterSet::new()
        .with(br(12))
        .unwrap()
        .with(br(14))
        .unwrap();
    let b = bind_with(p4, &set, Target::CurrentThread).unwrap();
    let g = b.group().as_any().downcast_ref::<SimGroup>().unwrap();
    assert_eq!(g.placement(), vec![12, 14]);
    drop(b);
    // Unpinned, the scheduler finds such a placement by itself.
    let set = CounterSet::new()
        .with(Request::new("branch_retired").attr("emask", 0xc))
        .unwrap()
        .with(Request::new("branch_retired").attr("emask", 0x3))
        .unwrap();
    let b = bind_with(p4, &set, Target::CurrentThread).unwrap();
    let g = b.group().as_any().downcast_ref::<SimGroup>().unwrap();
    let p = g.placement();
    assert!(
        [12, 13, 16].contains(&p[0]) != [12, 13, 16].contains(&p[1]),
        "{p:?}"
    );
}

#[test]
fn request_errors_name_their_cause() {
    let us2 = sim("ultrasparc2");
    let one = |r: Request| CounterSet::new().with(r).unwrap();
    let e = bind_with(
        us2,
        &one(Request::new("No_such_event")),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnknownEvent { .. }), "{e}");
    assert!(e.to_string().contains("No_such_event"));
    let e = bind_with(
        us2,
        &one(Request::new("EC_hit").on_counter(0)),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::PicNotCapable { picnum: 0, .. }), "{e}");
    let e = bind_with(
        us2,
        &one(Request::new("EC_hit").on_counter(2)),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::InvalidPicnum { picnum: 2, npic: 2 }),
        "{e}"
    );
    let e = bind_with(
        us2,
        &one(Request::new("Cycle_cnt").notify()),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::OverflowUnsupported { .. }), "{e}");
    assert_eq!(e.errno(), libc::ENOTSUP);
    let e = bind_with(
        us2,
        &one(Request::new("Cycle_cnt").attr("umask", 1)),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidAttribute { .. }), "{e}");
    // UltraSPARC counts both PICs in one mode.
    let sys = RequestFlags {
        system: true,
        ..RequestFlags::USER
    };
    let set = CounterSet::new()
        .with(Request::new("Cycle_cnt"))
        .unwrap()
        .with(Request::new("Instr_cnt").flags(sys))
        .unwrap();
    let c = conflict(bind_with(us2, &set, Target::CurrentThread));
    assert_eq!(c.reason, ConflictReason::DifferentFlags);
    // Pentium 4 attribute ranges.
    let p4 = sim("pentium4");
    let e = bind_with(
        p4,
        &one(Request::new("branch_retired").attr("emask", 0x10)),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::AttributeOutOfRange { .. }), "{e}");
    let e = bind_with(
        p4,
        &one(Request::new("branch_retired").attr("tag", 16)),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::AttributeOutOfRange { max: 15, .. }),
        "{e}"
    );
    let e = bind_with(sim("r10000"), &CounterSet::new(), Target::CurrentThread).unwrap_err();
    assert_eq!(e, Error::EmptySet);
}

#[test]
fn generation_changes_exactly_when_counting_restarts_or_stops() {
    let be = sim("r12000");
    let set = CounterSet::new().with(Request::new("cycles")).unwrap();
    let b = bind_with(be, &set, Target::CurrentThread).unwrap();
    let g0 = b.generation();
    assert!(g0 > 0 && g0 <= i32::MAX as u32);
    be.advance("cycles", 10).unwrap();
    let mut v = [0u64];
    let s = b.sample(&mut v).unwrap();
    assert_eq!((s.generation, s.complete, v[0]), (g0, true, 10));
    b.restart().unwrap();
    let g1 = b.generation();
    assert_ne!(g1, g0);
    b.stop().unwrap();
    let g2 = b.generation();
    assert_ne!(g2, g1);
    assert!(b.stop().is_err(), "stopping a stopped set is an error");
    be.advance("cycles", 5).unwrap();
    assert_eq!(b.sample(&mut v).unwrap().generation, g2);
    assert_eq!(v[0], 0);
    b.resume().unwrap();
    assert_ne!(b.generation(), g2);
    assert!(b.resume().is_err(), "resuming a running set is an error");
    be.advance("cycles", 5).unwrap();
    b.sample(&mut v).unwrap();
    assert_eq!(v[0], 5);
}

#[test]
fn inheriting_binding_sums_threads_created_after_the_bind() {
    let be = sim("ultrasparc");
    // A thread that exists before the bind is not covered.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let early = std::thread::spawn(move || {
        rx.recv().unwrap();
        be.advance("Instr_cnt", 1_000_000).unwrap();
        done_tx.send(()).unwrap();
    });
    let set = CounterSet::new().with(Request::new("Instr_cnt")).unwrap();
    let inh = bind_with(be, &set, Target::CurrentThreadInherit).unwrap();
    let own = bind_with(be, &set, Target::CurrentThread).unwrap();
    tx.send(()).unwrap();
    done_rx.recv().unwrap();
    early.join().unwrap();
    let workers: Vec<_> = (0..8)
        .map(|i| std::thread::spawn(move || be.advance("Instr_cnt", 1000 * (i + 1)).unwrap()))
        .collect();
    for w in workers {
        assert_eq!(
            w.join().unwrap(),
            1,
            "each worker reaches only the inheriting binding"
        );
    }
    be.advance("Instr_cnt", 5).unwrap();
    assert_eq!(sample(&inh)[0], 36_000 + 5);
    assert_eq!(sample(&own)[0], 5);
}

#[test]
fn r12000_numbers_and_names() {
    let be = sim("r12000");
    // On the R12000, 17 is "prefetch primary data cache misses", not graduated instructions.
    let set = CounterSet::new()
        .with(Request::new("17"))
        .unwrap()
        .with(Request::new("0"))
        .unwrap();
    let b = bind_with(be, &set, Target::CurrentThread).unwrap();
    be.advance("17", 3).unwrap();
    be.advance("cycles", 4).unwrap();
    assert_eq!(sample(&b), vec![3, 4]);
    // Cycles exist only on counter 0 on the R12000.
    let e = bind_with(
        be,
        &CounterSet::new()
            .with(Request::new("cycles").on_counter(1))
            .unwrap(),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::PicNotCapable { .. }), "{e}");
}

/// A report names what a spec counted (issue 30 item 9; here, not in the library's unit tests:
/// it reads the process's event map once): nothing to add for the event's own name or, on the
/// R10000, its number; the model's event for a number or code that stands for one.
#[test]
fn counted_names_are_the_models_events() {
    let r10k = SimBackend::new("r10000").unwrap();
    assert_eq!(r10k.counted_name("0"), None);
    assert_eq!(r10k.counted_name("25"), None);
    let us = SimBackend::new("ultrasparc").unwrap();
    assert_eq!(us.counted_name("Cycle_cnt"), None);
    assert_eq!(us.counted_name("0x0").as_deref(), Some("Cycle_cnt"));
    assert_eq!(us.counted_name("No_such_event"), None);
}

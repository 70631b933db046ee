//! perfctr's counter model on the engine (issue 20, part 3): a-mode counters that accumulate,
//! i-mode counters that overflow and come back to their restart value (`ireset`, the
//! request's preset) with [`BoundSet::iresume`], per-counter totals (perfctr's `sum`) kept
//! across every reload, and the mask of the overflowed counters that the overflow hook (and
//! libcpc's SIGEMT, see `capi/tests/ovf_mask.rs`) carries, like perfctr's `si_pmc_ovf_mask`.
//! Exact on an emulated PowerPC 750 (perfctr's ppc32 model); exact against the kernel's own
//! count on perf with page faults.

use std::sync::atomic::{AtomicU64, Ordering};

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::sim::SimBackend;
use perfcompat::engine::bind_tagged;
use perfcompat::engine::{self, OverflowEvent};
use perfcompat::{bind_with, Binding, CounterSet, Error, Request, Target};

mod common;
use common::Pages;

/// Per test (the tag is the binding's user data): overflow signals, the OR and the last of
/// their masks, and failed `iresume` calls.
struct Seen {
    signals: AtomicU64,
    masks_or: AtomicU64,
    last_mask: AtomicU64,
    bits: [AtomicU64; 4],
    failed: AtomicU64,
}

static SEEN: [Seen; 4] = [const {
    Seen {
        signals: AtomicU64::new(0),
        masks_or: AtomicU64::new(0),
        last_mask: AtomicU64::new(0),
        bits: [const { AtomicU64::new(0) }; 4],
        failed: AtomicU64::new(0),
    }
}; 4];

/// The tag of the test that resumes by hand: the hook leaves its set frozen.
const MANUAL: usize = 2;

/// The overflow hook of every test here: counts, records the mask and reloads the i-mode
/// counters, as a perfctr overflow handler followed by `iresume` would.
fn hook(ev: &OverflowEvent) {
    if ev.user_data == MANUAL {
        return;
    }
    let s = &SEEN[ev.user_data % 4];
    s.signals.fetch_add(1, Ordering::SeqCst);
    s.masks_or.fetch_or(ev.overflowed, Ordering::SeqCst);
    s.last_mask.store(ev.overflowed, Ordering::SeqCst);
    for (i, b) in s.bits.iter().enumerate() {
        if ev.overflowed & (1 << i) != 0 {
            b.fetch_add(1, Ordering::SeqCst);
        }
    }
    let ok = engine::with_thread_binding(ev.binding, |b| b.iresume().is_ok());
    if ok != Some(true) {
        s.failed.fetch_add(1, Ordering::SeqCst);
    }
}

fn set(reqs: &[Request]) -> CounterSet {
    let mut s = CounterSet::new();
    for r in reqs {
        s.add(r.clone()).unwrap();
    }
    s
}

fn values_and_totals(b: &Binding) -> (Vec<u64>, Vec<u64>) {
    let mut v = vec![0; b.len()];
    let mut t = vec![0; b.len()];
    b.sample_totals(&mut v, &mut t).unwrap();
    (v, t)
}

#[test]
fn i_mode_counters_reload_while_a_mode_counters_accumulate_exactly() {
    engine::set_overflow_hook(Some(hook));
    let be: &'static SimBackend = Box::leak(Box::new(SimBackend::new("ppc750").unwrap()));
    // a-mode: cycles. i-mode: instructions every 1000, dispatches every 300.
    let reqs = [
        Request::new("cycles"),
        Request::new("instructions_completed")
            .preset(u64::MAX - 999)
            .notify(),
        Request::new("instructions_dispatched")
            .preset(u64::MAX - 299)
            .notify(),
    ];
    let b = bind_tagged(be, &set(&reqs), Target::CurrentThread, 1).unwrap();
    let s = &SEEN[1];
    let mut cycles = 0u64;
    let mut insns = 0u64;
    let mut disp = 0u64;
    for round in 1..=50u64 {
        let (c, i, d) = (round * 7919, round * 331 + 5, round * 97 + 3);
        be.advance("cycles", c).unwrap();
        be.advance("instructions_completed", i).unwrap();
        be.advance("instructions_dispatched", d).unwrap();
        cycles += c;
        insns += i;
        disp += d;
        let (v, t) = values_and_totals(&b);
        assert_eq!(t, [cycles, insns, disp], "totals after round {round}");
        assert_eq!(
            v[0], cycles,
            "the a-mode counter accumulates across reloads"
        );
        assert_eq!(
            v[1],
            (u64::MAX - 999).wrapping_add(insns % 1000),
            "round {round}"
        );
        assert_eq!(
            v[2],
            (u64::MAX - 299).wrapping_add(disp % 300),
            "round {round}"
        );
        assert_eq!(s.bits[1].load(Ordering::SeqCst), insns / 1000);
        assert_eq!(s.bits[2].load(Ordering::SeqCst), disp / 300);
    }
    assert_eq!(
        s.bits[0].load(Ordering::SeqCst),
        0,
        "a-mode never overflows"
    );
    assert_eq!(s.masks_or.load(Ordering::SeqCst), 0b110);
    assert_eq!(
        s.signals.load(Ordering::SeqCst),
        insns / 1000 + disp / 300,
        "one interrupt per overflow, each with the mask of its own counter"
    );
    assert_eq!(s.failed.load(Ordering::SeqCst), 0);
}

#[test]
fn iresume_reloads_only_i_mode_and_resume_reloads_nothing() {
    let be: &'static SimBackend = Box::leak(Box::new(SimBackend::new("ppc750").unwrap()));
    // The hook leaves this tag alone: the set stays frozen at the overflow until resumed.
    let reqs = [
        Request::new("cycles").preset(40),
        Request::new("instructions_completed")
            .preset(u64::MAX - 9)
            .notify(),
    ];
    let b = bind_tagged(be, &set(&reqs), Target::CurrentThread, MANUAL).unwrap();
    assert!(
        matches!(b.iresume(), Err(Error::WrongState(_))),
        "running sets are not resumed"
    );
    be.advance("cycles", 5).unwrap();
    be.advance("instructions_completed", 25).unwrap(); // wraps at the 10th, the rest is dropped
    let (v, t) = values_and_totals(&b);
    assert!(b.is_frozen());
    assert_eq!(v, [45, u64::MAX.wrapping_add(1)]);
    assert_eq!(t, [5, 10]);
    b.iresume().unwrap();
    assert_eq!(b.overflowed(), 0, "the reload clears the overflow");
    be.advance("cycles", 5).unwrap();
    be.advance("instructions_completed", 3).unwrap();
    let (v, t) = values_and_totals(&b);
    assert_eq!(
        v,
        [50, u64::MAX - 6],
        "a-mode went on from 45; i-mode from its ireset"
    );
    assert_eq!(t, [10, 13]);
    // A plain stop/resume keeps both values.
    b.stop().unwrap();
    be.advance("cycles", 100).unwrap(); // stopped: not counted
    b.resume().unwrap();
    be.advance("cycles", 1).unwrap();
    let (v, t) = values_and_totals(&b);
    assert_eq!(v, [51, u64::MAX - 6]);
    assert_eq!(t, [11, 13]);
    // A restart puts every request back to its preset, and the totals still go on.
    b.restart().unwrap();
    be.advance("cycles", 2).unwrap();
    let (v, t) = values_and_totals(&b);
    assert_eq!(v, [42, u64::MAX - 9]);
    assert_eq!(t, [13, 13]);
    let mut short = [0u64; 1];
    let mut v2 = [0u64; 2];
    assert!(matches!(
        b.sample_totals(&mut v2, &mut short),
        Err(Error::BufferTooSmall { len: 1, need: 2 })
    ));
}

#[test]
fn on_perf_page_faults_reload_every_hundred_and_the_totals_match_the_kernel() {
    engine::set_overflow_hook(Some(hook));
    let perf: &'static PerfBackend = Box::leak(Box::new(PerfBackend::new().unwrap()));
    // The stack the handler will use, so that its own faults stay out of the picture (an array
    // in this frame touched the pages above it: a debug build whose sample path grew by a frame
    // took one fault in a handler, a 10,001st fault for one member).
    common::prefault_stack();
    let reqs = [
        Request::new("page-faults"),
        Request::new("page-faults").preset(u64::MAX - 99).notify(),
    ];
    // The overflow path run once before the count, so that the pages of its code and data are
    // in (the instrumented build of the coverage run faulted one in its first handler, after
    // the overflow instant: the a-mode member's 10,001st fault).
    {
        let warm = bind_tagged(perf, &set(&reqs), Target::CurrentThread, 3).unwrap();
        let p = Pages::new(300);
        for i in 0..p.n {
            p.touch(i);
        }
        drop(warm);
    }
    let s = &SEEN[3];
    let bits0 = s.bits[1].load(Ordering::SeqCst);
    let d0 = [engine::dropped_at_freezes(0), engine::dropped_at_freezes(1)];
    let pages = Pages::new(10_000);
    let witness = bind_with(
        perf,
        &set(&[Request::new("page-faults")]),
        Target::CurrentThread,
    )
    .unwrap();
    let mut w0 = [0u64];
    witness.sample(&mut w0).unwrap();
    let b = bind_tagged(perf, &set(&reqs), Target::CurrentThread, 3).unwrap();
    for i in 0..pages.n {
        pages.touch(i);
    }
    let (v, t) = values_and_totals(&b);
    drop(b);
    let mut w1 = [0u64];
    witness.sample(&mut w1).unwrap();
    assert_eq!(s.failed.load(Ordering::SeqCst), 0);
    assert_eq!(
        s.masks_or.load(Ordering::SeqCst),
        0b10,
        "only the i-mode counter"
    );
    assert!(t[1] >= 10_000, "every page faulted once: {t:?}");
    assert_eq!(
        s.bits[1].load(Ordering::SeqCst) - bits0,
        t[1] / 100,
        "an overflow every 100 faults counted"
    );
    assert_eq!(
        v[1],
        (u64::MAX - 99).wrapping_add(t[1] % 100),
        "{v:?} {t:?}"
    );
    assert_eq!(v[0], t[0], "the a-mode counter kept every fault it counted");
    // Each member's count is frozen at the overflow instant; what the kernel counted between
    // that instant and the set's stop is in neither the values nor the totals (for the a-mode
    // member that includes the overflowing fault itself when the kernel counted it there after
    // the i-mode member's overflow). With those, both members saw every fault of the thread.
    let d = [
        engine::dropped_at_freezes(0) - d0[0],
        engine::dropped_at_freezes(1) - d0[1],
    ];
    assert_eq!(t[0] + d[0], t[1] + d[1], "totals {t:?} dropped {d:?}");
    let kernel = w1[0] - w0[0];
    assert!(
        (t[0] + d[0]..=t[0] + d[0] + 8).contains(&kernel),
        "the kernel counted {kernel} faults, the set {t:?}, dropped at freezes {d:?}"
    );
}

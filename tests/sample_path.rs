//! The sample path on the host's perf backend: the counter read made inline
//! (`DirectRead`, from `Group::direct_read`: a `read` system call in the caller's frame) gives what the
//! backend's ordinary read gives; a sample's time is `CLOCK_MONOTONIC` taken during the sample,
//! exactly (bracketed by the clock read before and after it, also across CPU migrations);
//! `sample_untimed` reads the same counts without the clock.

use std::sync::OnceLock;

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::Group;
use perfcompat::engine::now_ns;
use perfcompat::{bind_with, Binding, CounterSet, Request, Target};

mod common;
use common::{skip, Pages};

fn perf() -> &'static PerfBackend {
    static B: OnceLock<PerfBackend> = OnceLock::new();
    B.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"))
}

fn bind(events: &[&str]) -> Binding {
    let mut set = CounterSet::new();
    for e in events {
        set.add(Request::new(*e)).unwrap();
    }
    bind_with(perf(), &set, Target::CurrentThread).unwrap()
}

/// Pin the calling thread to `cpu` (`false` if it cannot be).
fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity reads it.
    unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut s);
        libc::sched_setaffinity(0, std::mem::size_of_val(&s), &s) == 0
    }
}

fn unpin() {
    // SAFETY: as in `pin`.
    unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut s);
        }
        libc::sched_setaffinity(0, std::mem::size_of_val(&s), &s);
    }
}

#[test]
fn the_inline_read_counts_what_the_group_read_counts() {
    // The first pass is a rehearsal of the second, as in `an_untimed_sample_reads_the_same_counts`:
    // the code, stack and profile counters of the measured passes are faulted in before them.
    for (rehearsal, events) in [
        (true, &["page-faults"][..]),
        (false, &["page-faults"][..]),
        (false, &["page-faults", "task-clock", "context-switches"]),
        (
            false,
            &[
                "task-clock",
                "page-faults",
                "context-switches",
                "cpu-migrations",
            ],
        ),
    ] {
        let b = bind(events);
        let g = b.group();
        if perf().caps().pmu {
            // Where rdpmc reads the counters there is no system call to make inline.
            skip("a PMU: the thread's own counters may be read with rdpmc, not inline");
        } else {
            assert!(
                g.direct_read().is_some(),
                "{events:?}: the host's kernel, one unit, no rdpmc"
            );
        }
        let Some(d) = g.direct_read() else {
            continue;
        };
        let fault = events.iter().position(|e| *e == "page-faults").unwrap();
        let pages = Pages::new(200);
        let n = events.len();
        let (mut a, mut c) = ([0u64; 4], [0u64; 4]);
        let ta = d.read(&mut a[..n], || true).unwrap();
        let tb = Group::read(g, &mut c[..n]).unwrap();
        let between = c[fault] - a[fault];
        assert!(tb.enabled >= ta.enabled && tb.running >= ta.running);
        assert!(ta.enabled > 0 && ta.running > 0, "times read: {ta:?}");
        for i in 0..200 {
            pages.touch(i);
        }
        let tc = d.read(&mut a[..n], || true).unwrap();
        let touched = a[fault] - c[fault];
        assert!(tc.enabled >= tb.enabled && tc.running >= tb.running);
        let d = Group::read(g, &mut c[..n]).unwrap();
        assert!(d.enabled >= tc.enabled);
        if !rehearsal {
            assert_eq!(between, 0, "{events:?}: no fault between the reads");
            assert_eq!(touched, 200, "{events:?}: one fault per fresh page");
            assert_eq!(a[fault], c[fault], "{events:?}: the two reads agree");
        }
    }
}

#[test]
fn a_model_kernel_is_not_read_inline() {
    use perfcompat::backend::perf::model::{Config, Model};
    let m = Model::leak(Config::default());
    let backend: &'static PerfBackend = Box::leak(Box::new(PerfBackend::with_kernel(m).unwrap()));
    let set = CounterSet::new().with(Request::new("page-faults")).unwrap();
    let b = bind_with(backend, &set, Target::CurrentThread).unwrap();
    assert!(
        b.group().direct_read().is_none(),
        "the model's reads go through the Kernel seam"
    );
}

#[test]
fn a_sample_is_timed_by_the_monotonic_clock_during_it() {
    let b = bind(&["task-clock", "page-faults", "context-switches"]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = [0u64; 3];
    let mut last = 0i64;
    for i in 0..20_000 {
        // Every 100 samples, move to the other CPU (where there is one).
        if cpus > 1 && i % 100 == 0 {
            pin(i / 100 % 2);
        }
        let before = now_ns();
        let info = b.sample(&mut v).unwrap();
        let after = now_ns();
        assert!(
            before <= info.hrtime && info.hrtime <= after,
            "sample {i}: hrtime {} outside [{before}, {after}]",
            info.hrtime
        );
        assert!(info.hrtime >= last, "sample {i}: the time went back");
        last = info.hrtime;
    }
    unpin();
}

#[test]
fn an_untimed_sample_reads_the_same_counts() {
    let b = bind(&["page-faults", "task-clock"]);
    // The first round is a rehearsal: it runs every instruction of the second once, so the
    // code pages, the stack and (in the coverage build) the profile counters that the measured
    // round writes are faulted in before it. Without it a coverage run counted 51 faults for
    // 50 pages: one instrumented function written to for the first time between the samples.
    for rehearsal in [true, false] {
        let pages = Pages::new(50);
        let (mut t, mut u) = ([0u64; 2], [0u64; 2]);
        let timed = b.sample(&mut t).unwrap();
        let untimed = b.sample_untimed(&mut u).unwrap();
        assert_eq!(untimed.hrtime, 0, "no clock read");
        assert!(timed.hrtime > 0);
        assert!(u[1] >= t[1]);
        assert_eq!(untimed.generation, timed.generation);
        assert!(untimed.running_ns >= timed.running_ns && untimed.complete);
        let between = u[0] - t[0];
        for i in 0..50 {
            pages.touch(i);
        }
        b.sample_untimed(&mut u).unwrap();
        let touched = u[0] - t[0];
        if !rehearsal {
            assert_eq!(between, 0, "no fault between the samples");
            assert_eq!(touched, 50, "one fault per fresh page");
        }
    }
}

// Issue 48: `BoundSet::sample_to` (cpc_set_sample's common case) writes the values straight
// into the caller's slots. A stopped set answers with exactly what `sample` gives (the values,
// time and running time of the freeze), presets near 2^64 included; what it cannot answer
// exactly it leaves to `sample`: a running group read with read() (software events have no
// user-space read), a buffer of another size.
#[test]
fn sample_to_answers_a_stopped_set_as_the_sample_does_and_leaves_the_rest() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let load = |s: &[AtomicU64]| {
        s.iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    };
    let b = bind(&["page-faults", "task-clock"]);
    let slots = [AtomicU64::new(0), AtomicU64::new(0)];
    let user = b.group().direct_read().is_some_and(|d| d.reads_user());
    if !user {
        assert_eq!(
            b.sample_to(&slots),
            None,
            "read with read(): the general sample"
        );
    }
    for preset in [None, Some(u64::MAX - 3)] {
        if let Some(p) = preset {
            b.set_preset(1, p).unwrap();
            b.restart().unwrap();
            if !user {
                assert_eq!(b.sample_to(&slots), None, "running again after the restart");
            }
        }
        b.stop().unwrap();
        let mut v = [0u64; 2];
        let info = b.sample(&mut v).unwrap();
        assert!(info.frozen);
        let (hrtime, bound_running) = b.sample_to(&slots).expect("a stopped set answers");
        assert_eq!(load(&slots), v, "the values of the freeze");
        assert_eq!(hrtime, info.hrtime, "the time of the freeze");
        assert_eq!(bound_running, info.bound_running_ns);
        if let Some(p) = preset {
            // task-clock ran for more than 3 ns between the restart and the stop: wrapped.
            assert!(v[1] < p, "{:#x} from the preset {p:#x} wraps", v[1]);
        }
        let one = [AtomicU64::new(7)];
        let three = [AtomicU64::new(7), AtomicU64::new(7), AtomicU64::new(7)];
        assert_eq!(b.sample_to(&one), None, "a buffer of another size");
        assert_eq!(b.sample_to(&three), None);
        assert_eq!(load(&three), [7, 7, 7], "not written");
    }
}

// Issue 48: `BoundSet::sample_to_untimed` (cpc_set_sample's common case, the clock read by the
// caller) tests frozen, not of the lean kind and unbound with one load of the state word: a
// stopped set answers with the values and time of its freeze; a running set read with read()
// (software events) leaves it to the general sample, and so does a stopped set once unbound
// on another thread, though its values of the freeze are still there.
#[test]
fn sample_to_untimed_answers_a_stopped_set_and_not_an_unbound_one() {
    use std::sync::atomic::AtomicU64;
    let b = bind(&["task-clock"]);
    let slots = [AtomicU64::new(0)];
    let user = b.group().direct_read().is_some_and(|d| d.reads_user());
    assert_eq!(b.is_lean(), user, "the lean kind: read from its pages");
    if !user {
        assert_eq!(
            b.sample_to_untimed(&slots),
            None,
            "running, read with read()"
        );
    }
    b.stop().unwrap();
    let mut v = [0u64; 1];
    let info = b.sample(&mut v).unwrap();
    let s = b.sample_to_untimed(&slots).expect("a stopped set answers");
    assert_eq!(s.frozen_at, Some(info.hrtime), "the time of the freeze");
    assert_eq!(s.bound_running_ns, info.bound_running_ns);
    assert_eq!(slots[0].load(std::sync::atomic::Ordering::Relaxed), v[0]);
    assert_eq!(
        b.sample_to(&slots),
        Some((info.hrtime, info.bound_running_ns))
    );
    // Unbound on another thread: this thread's table keeps the binding until its next bind
    // (so the address stays valid here), stopped, with its values of the freeze.
    let p: *const perfcompat::BoundSet = &*b;
    std::thread::spawn(move || drop(b)).join().unwrap();
    // SAFETY: held by this thread's table (see above).
    let gone = unsafe { &*p };
    assert!(gone.is_gone() && gone.is_frozen());
    assert_eq!(gone.sample_to_untimed(&slots), None, "unbound");
    assert_eq!(gone.sample_to(&slots), None);
}

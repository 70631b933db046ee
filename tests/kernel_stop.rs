//! How the perf backend leaves a notifying page-fault leader at its overflow (issue 19), checked
//! through what the engine reports: the frozen values, the overflows notified, the faults
//! counted between an overflow and where counting resumes (`engine::dropped_at_freezes`), and
//! exact counts after each restart, including restarts made while an overflow's signal is
//! still blocked.
//!
//! - A lone leader on the calling thread counts on after its overflow: the engine freezes at
//!   the kernel's record of it, and the restart reads where counting resumes (the faults in
//!   between are dropped), goes on as it is when nothing counted since, and otherwise stops,
//!   re-arms the whole period and starts again. A second overflow while frozen stops it.
//! - A leader with other members (and a leader counting another thread) is stopped by the
//!   kernel at its overflow instead: every start leaves it an overflow limit of one
//!   (`PERF_EVENT_IOC_REFRESH`), so nothing counts after the overflow even while the signal
//!   waits (a restart made then must give the limit back, or the next overflow would not
//!   stop the group and its late signal would freeze a set whose counters still run).
//! - Every other notifying request (a clock, a hardware event, a member) gets the same limit
//!   of one (the storm guard): the kernel stops it at its overflow, so it signals once however
//!   long the signal stays blocked.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use perfcompat::backend::perf::PerfBackend;
use perfcompat::engine::{self, bind_tagged, OverflowEvent};
use perfcompat::{CounterSet, Request, Target};

mod common;
use common::{
    block_overflow_signal, notifying_page_faults, overflow_signal_pending, prefault_stack, Faults,
};

const TAG: usize = 0x5709;
static OVERFLOWS: AtomicU64 = AtomicU64::new(0);
const CLOCK_TAG: usize = 0xc10c;
const LONE_TAG: usize = 0x10e;
const OTHER_TAG: usize = 0x07e;
static OTHER_OVERFLOWS: AtomicU64 = AtomicU64::new(0);
static LONE_OVERFLOWS: AtomicU64 = AtomicU64::new(0);
static CLOCK_OVERFLOWS: AtomicU64 = AtomicU64::new(0);

/// The process's overflow hook, for both tests (it is per process): counts each test's own.
fn hook(ev: &OverflowEvent) {
    match ev.user_data {
        TAG => OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        CLOCK_TAG => CLOCK_OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        LONE_TAG => LONE_OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        OTHER_TAG => OTHER_OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        _ => 0,
    };
}

fn perf() -> &'static PerfBackend {
    static B: OnceLock<PerfBackend> = OnceLock::new();
    B.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"))
}

#[test]
fn a_lone_leader_counts_on_after_its_overflow_and_the_restart_reads_where_it_resumes() {
    engine::set_overflow_hook(Some(hook));
    const PERIOD: u64 = 10;
    let preset = u64::MAX - (PERIOD - 1);
    let set = notifying_page_faults(preset);
    let mut f = Faults::new();
    prefault_stack();
    let b = bind_tagged(perf(), &set, Target::CurrentThread, LONE_TAG).unwrap();
    let mut v = [0u64];
    b.sample(&mut v).unwrap();
    let overflows = || LONE_OVERFLOWS.load(Ordering::SeqCst);
    for round in 0..12 {
        let seen = overflows();
        let dropped0 = engine::dropped_at_freezes(0);
        block_overflow_signal(true);
        f.take(PERIOD as usize); // the overflow: the event counts on
        f.take(20); // two more overflows' signals wait too
        let after = if round % 2 == 1 {
            // Restart while the signals wait (the set is not frozen yet): counting starts
            // again from the preset; the waiting signals are for overflows it passed.
            b.restart().unwrap();
            f.take(PERIOD as usize);
            f.take(5);
            5
        } else {
            20
        };
        block_overflow_signal(false);
        frozen_at_one_overflow(&b, || overflows() - seen, round);
        // The next signal stopped the event: what it counted after the overflow is dropped.
        dropped_since(
            dropped0,
            after,
            round,
            "faults counted on after the overflow until the stop",
        );
        restart_then_count_3(&b, &mut f, preset, round);
        // The signal taken at once: frozen at the overflow while the event counts on.
        let seen = overflows();
        f.take(PERIOD as usize - 3);
        assert_eq!(came(overflows, seen + 1), seen + 1, "round {round}");
        // Faults before the restart are dropped, and the restart re-arms the whole period
        // (the kernel's own period has 4 faults fewer left).
        let dropped0 = engine::dropped_at_freezes(0);
        f.take(4);
        b.sample(&mut v).unwrap();
        assert_eq!(v[0], 0, "round {round}: still frozen at the wrap");
        b.restart().unwrap();
        dropped_since(
            dropped0,
            4,
            round,
            "faults between the freeze and the restart",
        );
        // Not even the kernel's overflow comes early (the engine would absorb one and re-arm
        // the rest, at the cost of a signal): none is pending with the signal blocked.
        block_overflow_signal(true);
        f.take(PERIOD as usize - 1);
        assert!(
            !overflow_signal_pending(),
            "round {round}: the kernel's period was not re-armed whole at the restart"
        );
        block_overflow_signal(false);
        b.sample(&mut v).unwrap();
        assert_eq!(
            v[0],
            u64::MAX,
            "round {round}: one fault short of the next overflow"
        );
        assert_eq!(overflows(), seen + 1, "round {round}: no early overflow");
        f.take(1);
        assert_eq!(
            came(overflows, seen + 2),
            seen + 2,
            "round {round}: the overflow, exactly"
        );
        // Nothing counted since: the restart reads and lets the event go on.
        let dropped0 = engine::dropped_at_freezes(0);
        b.restart().unwrap();
        dropped_since(
            dropped0,
            0,
            round,
            "faults between the overflow and the restart",
        );
        f.take(PERIOD as usize);
        assert_eq!(
            came(overflows, seen + 3),
            seen + 3,
            "round {round}: a whole period after the restart"
        );
        b.restart().unwrap();
    }
}

/// How long a signal the watcher's discard took may take to come back: it is sent again in the
/// same breath (microseconds), or, to a thread that blocked the signal for good, at the
/// watcher's next look after the unblock (milliseconds); a loaded machine stretches both.
const GIVEN_BACK: std::time::Duration = std::time::Duration::from_secs(2);

/// The overflow count `count()` once it reaches `want`, or after [`GIVEN_BACK`]. A signal sent
/// while another thread of the process blocks the signal for good (this file's clock test)
/// can be taken by the watcher's process-wide discard (issue 44 item 4) and given back a
/// moment later: 23 release runs in 1,000 under load saw it late before the wait, and the
/// overflow itself never lost (docs/differences.md).
fn came(count: impl Fn() -> u64, want: u64) -> u64 {
    let t0 = std::time::Instant::now();
    while count() < want && t0.elapsed() < GIVEN_BACK {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    count()
}

/// Once the blocked signals came (see [`came`]): `b` is frozen exactly at the wrap, and
/// `notified()` (the overflows notified since they were blocked) is one.
fn frozen_at_one_overflow(b: &engine::Binding, notified: impl Fn() -> u64, round: usize) {
    let t0 = std::time::Instant::now();
    while !b.is_frozen() && t0.elapsed() < GIVEN_BACK {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert!(b.is_frozen(), "round {round}: frozen once the signals came");
    assert_eq!(notified(), 1, "round {round}: one overflow notified");
    let mut v = [0u64; 2];
    b.sample(&mut v[..b.len()]).unwrap();
    assert_eq!(v[0], 0, "round {round}: frozen exactly at the wrap");
}

/// The faults dropped at freezes since `before` are exactly `expected`; in round 0 at least
/// that: the handler's paths run for the first time then, and a page of their code or data
/// touched for the first time between the overflow and the stop is a page fault too.
fn dropped_since(before: u64, expected: u64, round: usize, what: &str) {
    let dropped = engine::dropped_at_freezes(0) - before;
    if round == 0 {
        assert!(
            dropped >= expected,
            "round 0: {what}: {dropped} < {expected}"
        );
    } else {
        assert_eq!(dropped, expected, "round {round}: {what}");
    }
}

/// Restart `b` and take 3 faults: it counts exactly those from its preset.
fn restart_then_count_3(b: &engine::Binding, f: &mut Faults, preset: u64, round: usize) {
    b.restart().unwrap();
    f.take(3);
    let mut v = [0u64; 2];
    b.sample(&mut v[..b.len()]).unwrap();
    assert_eq!(
        v[0],
        preset + 3,
        "round {round}: exactly the faults since the restart"
    );
}

#[test]
fn a_group_is_stopped_by_the_kernel_at_the_overflow_even_while_the_signal_waits() {
    engine::set_overflow_hook(Some(hook));
    const PERIOD: u64 = 10;
    let preset = u64::MAX - (PERIOD - 1);
    let set = notifying_page_faults(preset)
        .with(Request::new("context-switches"))
        .unwrap();
    let mut f = Faults::new();
    prefault_stack();
    let b = bind_tagged(perf(), &set, Target::CurrentThread, TAG).unwrap();
    let mut v = [0u64; 2];
    b.sample(&mut v).unwrap();
    let dropped0 = engine::dropped_at_freezes(0);
    for round in 0..12 {
        let seen = OVERFLOWS.load(Ordering::SeqCst);
        block_overflow_signal(true);
        f.take(PERIOD as usize); // the overflow: the kernel stops the group here
        f.take(20); // not counted
        if round % 2 == 1 {
            // Restart while the overflow's signal waits: counting starts again from the
            // preset, and the next overflow must stop the group too.
            b.restart().unwrap();
            f.take(PERIOD as usize);
            f.take(5); // not counted
        }
        block_overflow_signal(false);
        // (A late signal for an overflow a restart already passed is not one.)
        frozen_at_one_overflow(&b, || OVERFLOWS.load(Ordering::SeqCst) - seen, round);
        assert_eq!(
            engine::dropped_at_freezes(0),
            dropped0,
            "round {round}: the faults after the overflow were counted before the stop \
             (the kernel did not stop the group)"
        );
        restart_then_count_3(&b, &mut f, preset, round);
        // And the plain case: the signal taken at once.
        let seen = OVERFLOWS.load(Ordering::SeqCst);
        f.take(PERIOD as usize - 3);
        let overflows = || OVERFLOWS.load(Ordering::SeqCst);
        assert_eq!(came(overflows, seen + 1), seen + 1, "round {round}");
        b.sample(&mut v).unwrap();
        assert_eq!(v[0], 0, "round {round}");
        b.restart().unwrap();
    }
    assert_eq!(engine::dropped_at_freezes(0), dropped0);
}

/// This thread's CPU time in nanoseconds (what `task-clock` counts).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a plain clock read into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn a_clock_leader_is_stopped_by_the_kernel_at_its_overflow() {
    // The storm guard (`STORM_FLOOR_NS` in src/backend/perf/group.rs): a clock's notifying
    // request gets an overflow limit of one at every start, so with the overflow signal
    // blocked the kernel stops it at its overflow: it neither signals again nor counts on
    // until the engine's handler runs. Before the guard the engine stopped it, and the four
    // periods after its overflow were counted and dropped at the freeze; now less than one is.
    engine::set_overflow_hook(Some(hook));
    const PERIOD_NS: u64 = 1_000_000;
    let set = CounterSet::new()
        .with(
            Request::new("task-clock")
                .preset(u64::MAX - (PERIOD_NS - 1))
                .notify(),
        )
        .unwrap();
    block_overflow_signal(true);
    let b = bind_tagged(perf(), &set, Target::CurrentThread, CLOCK_TAG).unwrap();
    let dropped0 = engine::dropped_at_freezes(0);
    // Five periods of this thread's CPU time: the overflow comes after the first. Spent in
    // user mode (the clock counts user time only: a timer tick that lands inside a system
    // call, such as the CPU-time read itself, makes no overflow).
    let until = thread_cpu_ns() + 5 * PERIOD_NS;
    let mut x = 1u64;
    while thread_cpu_ns() < until {
        for _ in 0..20_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    block_overflow_signal(false);
    // The signal comes at the unblock, or, where the thread blocked it with one pending for
    // two of the watcher's looks 4 ms apart (5 ms of CPU time can be many more of wall time
    // on a loaded machine), the watcher took it off (so that an `exec` could not carry it,
    // docs/differences.md) and sends it again at its next look after the unblock.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !b.is_frozen() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(b.is_frozen(), "the clock overflowed");
    assert_eq!(CLOCK_OVERFLOWS.load(Ordering::SeqCst), 1);
    let dropped = engine::dropped_at_freezes(0) - dropped0;
    assert!(
        dropped < PERIOD_NS / 2,
        "the kernel stopped the clock at its overflow: {dropped} ns counted after it and \
         dropped (four periods before the storm guard)"
    );
}

/// Faults the worker of `a_lone_leader_counting_another_thread_...` is to take (it sets it
/// back to 0 when done), and when to stop.
static WORKER_TAKE: AtomicUsize = AtomicUsize::new(0);
static WORKER_DONE: AtomicBool = AtomicBool::new(false);

/// Have the worker take `k` faults, and wait until it has.
fn worker_takes(k: usize) {
    WORKER_TAKE.store(k, Ordering::SeqCst);
    while WORKER_TAKE.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
}

#[test]
fn a_lone_leader_counting_another_thread_is_stopped_by_the_kernel_at_its_record() {
    // The kernel's stop where the set counts another thread (`cpc_bind_pctx`, `cputrack`):
    // the overflow signal goes to the binding's owner, here this thread, while the worker
    // faults on. With the signal blocked the worker takes 20 faults after the overflow: none
    // is counted (the kernel stopped the event; its record is its count at the stop, no read),
    // where the engine's own stop would count them until its handler ran.
    engine::set_overflow_hook(Some(hook));
    const PERIOD: u64 = 10;
    let preset = u64::MAX - (PERIOD - 1);
    let set = notifying_page_faults(preset);
    let tid = std::sync::atomic::AtomicI32::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut f = Faults::new();
            prefault_stack();
            tid.store(engine::gettid(), Ordering::SeqCst);
            while !WORKER_DONE.load(Ordering::SeqCst) {
                let k = WORKER_TAKE.load(Ordering::SeqCst);
                if k > 0 {
                    f.take(k);
                    WORKER_TAKE.store(0, Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
        });
        // Stops the worker however this thread leaves the scope (a failed assertion too).
        struct StopWorker;
        impl Drop for StopWorker {
            fn drop(&mut self) {
                WORKER_DONE.store(true, Ordering::SeqCst);
                WORKER_TAKE.store(0, Ordering::SeqCst);
            }
        }
        let _stop = StopWorker;
        while tid.load(Ordering::SeqCst) == 0 {
            std::hint::spin_loop();
        }
        let b = bind_tagged(
            perf(),
            &set,
            Target::Thread(tid.load(Ordering::SeqCst)),
            OTHER_TAG,
        )
        .unwrap();
        let overflows = || OTHER_OVERFLOWS.load(Ordering::SeqCst);
        let mut v = [0u64];
        for round in 0..12 {
            let seen = overflows();
            let dropped0 = engine::dropped_at_freezes(0);
            block_overflow_signal(true);
            worker_takes(PERIOD as usize + 20);
            block_overflow_signal(false);
            frozen_at_one_overflow(&b, || overflows() - seen, round);
            assert_eq!(
                engine::dropped_at_freezes(0),
                dropped0,
                "round {round}: the worker's faults after the overflow were counted before \
                 the stop (the kernel did not stop the event)"
            );
            b.restart().unwrap();
            worker_takes(3);
            b.sample(&mut v).unwrap();
            assert_eq!(
                v[0],
                preset + 3,
                "round {round}: exactly the faults since the restart"
            );
            // The signal taken as it comes: this thread waits for it.
            worker_takes(PERIOD as usize - 3);
            let t0 = std::time::Instant::now();
            while overflows() == seen + 1 {
                assert!(
                    t0.elapsed().as_secs() < 30,
                    "round {round}: no overflow signal"
                );
                std::hint::spin_loop();
            }
            b.sample(&mut v).unwrap();
            assert_eq!(v[0], 0, "round {round}");
            b.restart().unwrap();
        }
        drop(b);
    });
}

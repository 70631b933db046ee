//! The watcher's discard of the overflow signals pending on a thread that blocks them for good
//! (issue 44 item 4) is process-wide: setting the signal's action to `SIG_IGN` and back takes
//! the signal from every thread. What it took from the other bindings must come back. Before
//! the give-back covered every notifying binding, the overflow of a binding that counts
//! another thread (`cpc_bind_pctx`, `cputrack`), whose signal waited on its owner at the
//! discard, was lost for good: its owner never froze.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use perfcompat::backend::perf::PerfBackend;
use perfcompat::engine::{self, bind_tagged, OverflowEvent};
use perfcompat::Target;

mod common;
use common::{
    block_overflow_signal, notifying_page_faults, overflow_signal_pending, prefault_stack, Faults,
};

const SLEEPER_TAG: usize = 0x51ee;
const OWNER_TAG: usize = 0x0e7e;
static SLEEPER_OVERFLOWS: AtomicU64 = AtomicU64::new(0);
static OWNER_OVERFLOWS: AtomicU64 = AtomicU64::new(0);

fn hook(ev: &OverflowEvent) {
    match ev.user_data {
        SLEEPER_TAG => SLEEPER_OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        OWNER_TAG => OWNER_OVERFLOWS.fetch_add(1, Ordering::SeqCst),
        _ => 0,
    };
}

/// Wait up to `secs` seconds for `cond`.
fn wait_for(secs: u64, cond: impl Fn() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while !cond() {
        if t0.elapsed().as_secs() >= secs {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}

#[test]
fn a_discard_for_a_thread_that_blocks_for_good_gives_another_owner_its_signal_back() {
    engine::set_overflow_hook(Some(hook));
    static PERF: std::sync::OnceLock<PerfBackend> = std::sync::OnceLock::new();
    let perf = PERF.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"));
    const PERIOD: usize = 10;
    let preset = u64::MAX - (PERIOD as u64 - 1);
    let worker_take = AtomicUsize::new(0);
    let worker_tid = AtomicI32::new(0);
    let done = AtomicBool::new(false);
    let sleeper_overflowed = AtomicBool::new(false);
    let sleeper_go = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The worker this thread's binding counts.
        s.spawn(|| {
            let mut f = Faults::new();
            prefault_stack();
            worker_tid.store(engine::gettid(), Ordering::SeqCst);
            while !done.load(Ordering::SeqCst) {
                let k = worker_take.load(Ordering::SeqCst);
                if k > 0 {
                    f.take(k);
                    worker_take.store(0, Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
        });
        // The thread that blocks the signal for good: its own overflow's signal waits while
        // it sleeps, and the watcher discards it (and every other thread's).
        s.spawn(|| {
            let mut f = Faults::new();
            prefault_stack();
            while !sleeper_go.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            block_overflow_signal(true);
            let set = notifying_page_faults(preset);
            let b = bind_tagged(perf, &set, Target::CurrentThread, SLEEPER_TAG).unwrap();
            f.take(PERIOD);
            sleeper_overflowed.store(overflow_signal_pending(), Ordering::SeqCst);
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            drop(b);
            block_overflow_signal(false);
        });
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let _done = Done(&done);
        while worker_tid.load(Ordering::SeqCst) == 0 {
            std::hint::spin_loop();
        }
        block_overflow_signal(true);
        let set = notifying_page_faults(preset);
        let b = bind_tagged(
            perf,
            &set,
            Target::Thread(worker_tid.load(Ordering::SeqCst)),
            OWNER_TAG,
        )
        .unwrap();
        worker_take.store(PERIOD, Ordering::SeqCst);
        while worker_take.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        assert!(
            wait_for(2, overflow_signal_pending),
            "the worker's overflow signals this thread"
        );
        let flushes0 = perfcompat::base::watch::flushes();
        sleeper_go.store(true, Ordering::SeqCst);
        assert!(
            wait_for(10, || perfcompat::base::watch::flushes() > flushes0),
            "the watcher discarded the signal of the thread that blocks it for good \
             (its overflow signalled: {})",
            sleeper_overflowed.load(Ordering::SeqCst)
        );
        assert_eq!(SLEEPER_OVERFLOWS.load(Ordering::SeqCst), 0);
        assert_eq!(OWNER_OVERFLOWS.load(Ordering::SeqCst), 0);
        block_overflow_signal(false);
        assert!(
            wait_for(2, || b.is_frozen()),
            "the overflow whose signal the discard took came back"
        );
        assert_eq!(OWNER_OVERFLOWS.load(Ordering::SeqCst), 1);
        let mut v = [0u64];
        b.sample(&mut v).unwrap();
        assert_eq!(v[0], 0, "frozen at the wrap");
        drop(b);
    });
}

//! The sample, restart and preset paths, and the perf overflow path up to and including the
//! hook, allocate nothing: counted with a global allocator that tallies per thread.

use std::sync::atomic::{AtomicU64, Ordering};

use perfcompat::backend::perf::PerfBackend;
use perfcompat::engine::{self, OverflowEvent};
use perfcompat::{bind_with, CounterSet, Request, Target};

#[macro_use]
mod common;
use common::Pages;

counting_allocator!();

static HOOK_ALLOCS: AtomicU64 = AtomicU64::new(0);
static HOOK_RUNS: AtomicU64 = AtomicU64::new(0);

fn hook(_: &OverflowEvent) {
    let before = allocs();
    let mut v = [0u64; 2];
    engine::with_current(|b| {
        b.sample(&mut v).unwrap();
        b.set_preset(0, u64::MAX - 9).unwrap();
        b.restart().unwrap();
    });
    HOOK_ALLOCS.fetch_add(allocs() - before, Ordering::SeqCst);
    HOOK_RUNS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn hot_paths_do_not_allocate() {
    // An allocation in the handler path does not just fail the count below: when the overflow
    // fires inside malloc (a page fault on fresh heap), the handler's malloc deadlocks on the
    // arena lock. Turn that hang into a prompt failure.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        eprintln!("no_alloc: still running after 60 s: deadlock in the overflow path?");
        std::process::exit(101);
    });
    let perf: &'static PerfBackend = Box::leak(Box::new(PerfBackend::new().unwrap()));
    engine::set_overflow_hook(Some(hook));
    let set = CounterSet::new()
        .with(Request::new("page-faults").preset(u64::MAX - 9).notify())
        .unwrap()
        .with(Request::new("task-clock"))
        .unwrap();
    let mem = Pages::new(400);
    let b = bind_with(perf, &set, Target::CurrentThread).unwrap();
    let before = allocs();
    let mut v = [0u64; 2];
    for _ in 0..1000 {
        b.sample(&mut v).unwrap();
    }
    b.set_preset(1, 5).unwrap();
    b.restart().unwrap();
    for i in 0..300 {
        mem.touch(i);
    }
    let used = allocs() - before;
    let runs = HOOK_RUNS.load(Ordering::SeqCst);
    assert_eq!(runs, 30, "the overflow path ran once per 10 faults");
    assert_eq!(
        HOOK_ALLOCS.load(Ordering::SeqCst),
        0,
        "allocations in the overflow hook path"
    );
    assert_eq!(
        used, 0,
        "allocations in sample/restart/preset and the signal path"
    );
}

/// The preloaded library writes its report from a fatal signal's handler and from `_exit`
/// (issue 37): reading the counts and formatting the report allocate nothing.
#[test]
fn the_preloads_report_allocates_nothing() {
    use perfcompat::commands::perfex::{Options, Reading, SelfCount, Status, MAX_READINGS};
    struct Sink(usize);
    impl std::fmt::Write for Sink {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let opts = Options {
        spec: Some("page-faults,task-clock".into()),
        command: vec!["program".into()],
        ..Options::default()
    };
    let count = SelfCount::start(&opts).unwrap();
    let mut readings = [Reading::default(); MAX_READINGS];
    let mut sink = Sink(0);
    let before = allocs();
    let n = count.readings(&mut readings).unwrap();
    count
        .write_report(&mut sink, &readings[..n], Status::Signaled(libc::SIGTERM))
        .unwrap();
    let made = allocs() - before;
    assert_eq!(n, 2, "two events read");
    assert!(sink.0 > 100, "a report was written ({} bytes)", sink.0);
    assert_eq!(
        made, 0,
        "{made} allocations reading the counts and writing the report"
    );
}

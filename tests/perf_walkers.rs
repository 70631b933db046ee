//! The perf backend lists (for libcpc's walkers, cpc_walk_events_all(3CPC)) only events a
//! thread can count: every listed event binds to the calling thread; `dummy`, which always
//! counts 0, and CPU-wide-only PMU events such as `msr/tsc/` are not listed.

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::Backend;
use perfcompat::{bind_with, CounterSet, Request, Target};
use std::sync::OnceLock;

fn perf() -> &'static PerfBackend {
    static B: OnceLock<PerfBackend> = OnceLock::new();
    B.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"))
}

#[test]
fn every_listed_event_binds_to_a_thread() {
    let perf = perf();
    let events = perf.events();
    assert!(events.iter().any(|e| e.name == "page-faults"));
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert!(!names.contains(&"dummy"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("msr/")), "{names:?}");
    let failed: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let set = CounterSet::new().with(Request::new(&e.name)).ok()?;
            bind_with(perf, &set, Target::CurrentThread)
                .err()
                .map(|err| format!("{}: {err}", e.name))
        })
        .collect();
    assert!(failed.is_empty(), "listed but not countable: {failed:#?}");
}

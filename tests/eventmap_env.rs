//! `PERFCOMPAT_EVENTS` files reach the backends: R10000 numbers and new names both resolve,
//! on the perf backend and on an emulated one. (Its own test binary: the map is read once per
//! process, from the environment.)

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::sim::SimBackend;
use perfcompat::backend::Backend;
use perfcompat::base::eventmap::EventMap;

mod common;
use common::TempDir;
use perfcompat::{bind_with, CounterSet, Request, Target};

#[test]
fn map_file_points_numbers_and_names_at_events() {
    let dir = TempDir::new("map");
    let file = dir.0.join("events");
    std::fs::write(
        &file,
        "# test map\n25 = page-faults   # L1 D-cache misses -> page faults here\n\
         myfaults = minor-faults\nmycycles = Cycle_cnt\n",
    )
    .unwrap();
    // Set before anything reads the map (each integration test file is its own process).
    std::env::set_var("PERFCOMPAT_EVENTS", &file);
    let map = EventMap::global();
    assert_eq!(map.number(25), Some("page-faults"));
    assert_eq!(map.alias("myfaults"), Some("minor-faults"));

    let perf: &'static PerfBackend = Box::leak(Box::new(PerfBackend::new().unwrap()));
    let set = CounterSet::new()
        .with(Request::new("25"))
        .unwrap()
        .with(Request::new("myfaults"))
        .unwrap();
    let b = bind_with(perf, &set, Target::CurrentThread).unwrap();
    let mut before = [0u64; 2];
    b.sample(&mut before).unwrap();
    let v = vec![0u8; 64 * 4096];
    for i in 0..64 {
        // SAFETY: in bounds.
        unsafe { std::ptr::write_volatile(v.as_ptr().add(i * 4096) as *mut u8, 1) };
    }
    let mut after = [0u64; 2];
    b.sample(&mut after).unwrap();
    assert!(
        after[0] - before[0] >= 64 && after[1] - before[1] >= 64,
        "{before:?} {after:?}"
    );
    assert!(perf.events().iter().any(|e| e.name == "myfaults"));

    // Names work on the emulated backends too.
    let us: &'static SimBackend = Box::leak(Box::new(SimBackend::new("ultrasparc").unwrap()));
    let b = bind_with(
        us,
        &CounterSet::new().with(Request::new("mycycles")).unwrap(),
        Target::CurrentThread,
    )
    .unwrap();
    us.advance("mycycles", 7).unwrap();
    us.advance("Cycle_cnt", 3).unwrap();
    let mut x = [0u64];
    b.sample(&mut x).unwrap();
    assert_eq!(x[0], 10);
}

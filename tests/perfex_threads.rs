//! libperfex state is per thread: two threads count their own pairs on the emulated R10000 at
//! the same time, a read needs a start on the same thread, and the cost table loaded by one
//! thread is the process's. (Its own test binary: the backend is chosen once per process.)

use std::sync::{Barrier, Once};

use perfcompat::api::{costs, perfex};
use perfcompat::backend::sim;
use perfcompat::Error;

fn emulated_r10000() {
    static ONCE: Once = Once::new();
    // Before anything reads the backend; every test here calls this first.
    ONCE.call_once(|| std::env::set_var("PERFCOMPAT_BACKEND", "sim:r10000"));
}

#[test]
fn each_thread_counts_its_own_pair() {
    emulated_r10000();
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let run = |events: (i32, i32), names: (&'static str, &'static str), k: u64| {
            let barrier = &barrier;
            s.spawn(move || {
                let g = perfex::start(events.0, events.1).unwrap();
                barrier.wait(); // both pairs are running now
                for _ in 0..100 {
                    sim::advance(names.0, k).unwrap();
                    sim::advance(names.1, 2 * k).unwrap();
                }
                barrier.wait();
                let c = perfex::read(events.0, events.1).unwrap();
                assert_eq!(c.generation, g);
                assert_eq!((c.c0, c.c1), (100 * k as i64, 200 * k as i64));
            })
        };
        let a = run((0, 25), ("0", "25"), 7);
        let b = run((2, 26), ("2", "26"), 11);
        a.join().unwrap();
        b.join().unwrap();
    });
}

#[test]
fn a_read_needs_a_start_on_the_same_thread() {
    emulated_r10000();
    perfex::start(0, 17).unwrap();
    let other = std::thread::spawn(|| perfex::read(0, 17)).join().unwrap();
    assert!(
        matches!(&other, Err(Error::WrongState(m)) if m.contains("not started on this thread")),
        "{other:?}"
    );
    // The starting thread still reads its pair, once.
    assert!(perfex::read(0, 17).is_ok());
    assert!(perfex::read(0, 17).is_err());
}

#[test]
fn the_cost_table_is_one_per_process() {
    emulated_r10000();
    let dir = std::env::temp_dir().join(format!("perfex-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.costs");
    std::fs::write(&file, "24 9 8 10 clks\n").unwrap();
    std::thread::spawn(move || perfex::load_costs(&file).unwrap())
        .join()
        .unwrap();
    let t = costs::current();
    assert_eq!((t.costs[24].typical, t.costs[24].minimum), (9.0, 8.0));
    let report = perfex::format_costs(0, 195_000_000, 24, 1_000_000).unwrap();
    // 1e6 mispredicts x 9 cycles at 195 MHz.
    assert!(report.contains(&format!("{:.6}", 9e6 / 195e6)), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// Issue 48: the C exports try `start_here` and `read_here` first, outside their unwind
// boundary, and take `start` and `read` when they answer `None`. A `None` must leave
// everything as it was: no state made on a thread that never started, no generation drawn,
// the started pair still started (the emulated counters are not read from user space, so
// here the common case never answers: nothing is published).
#[test]
fn the_common_start_and_read_leave_everything_as_it_was_when_they_do_not_answer() {
    emulated_r10000();
    std::thread::spawn(|| {
        assert_eq!(perfex::read_here(0, 18), None, "never started");
        assert_eq!(perfex::start_here(0, 18), None, "no pair yet");
        assert!(
            matches!(perfex::read(0, 18), Err(Error::WrongState(_))),
            "nothing was started by the try"
        );
        let g = perfex::start(0, 18).unwrap();
        assert_eq!(perfex::start_here(0, 18), None, "not read from user space");
        assert_eq!(
            perfex::start_here(99, 18),
            None,
            "a bad event: `start` tells"
        );
        assert_eq!(perfex::read_here(0, 18), None);
        assert_eq!(perfex::read_here(1, 18), None, "other events");
        sim::advance("0", 5).unwrap();
        let c = perfex::read(0, 18).expect("still started");
        assert_eq!(
            (c.c0, c.generation),
            (5, g),
            "origin and generation untouched"
        );
        assert_eq!(perfex::read_here(0, 18), None, "read: stopped");
    })
    .join()
    .unwrap();
}

//! The counters the `perfex` command hands over (`perfex::adopt_handoff`), on the emulated
//! R10000 where counts are exact: each thread counts from its start, reads without a start see
//! them and do not stop them, other events are refused, and an explicit start takes over as
//! before. (Its own test binary: the backend and the hand-over are once per process.)

use perfcompat::api::perfex::{self, Handoff};
use perfcompat::backend::sim;
use perfcompat::Error;

#[test]
fn handed_over_counters_count_each_thread_from_its_start() {
    std::env::set_var("PERFCOMPAT_BACKEND", "sim:r10000");
    assert!(!perfex::handed_over());
    assert!(matches!(perfex::read(0, 25), Err(Error::WrongState(_))));
    sim::advance("0", 5).unwrap(); // before the hand-over: not counted
    perfex::adopt_handoff("0,25").unwrap();
    assert!(perfex::handed_over());

    sim::advance("0", 100).unwrap();
    sim::advance("25", 7).unwrap();
    let c = perfex::read(0, 25).unwrap();
    assert_eq!((c.c0, c.c1), (100, 7));
    // Reads do not stop them; any order and the same event twice are fine.
    sim::advance("0", 1).unwrap();
    let d = perfex::read(25, 0).unwrap();
    assert_eq!((d.c0, d.c1, d.generation), (7, 101, c.generation));
    let e = perfex::read(25, 25).unwrap();
    assert_eq!((e.c0, e.c1, e.generation), (7, 7, c.generation));
    assert_eq!(perfex::generation(), c.generation);
    // An event perfex does not count.
    let err = perfex::read(0, 26).unwrap_err();
    assert!(
        err.to_string()
            .contains("event 26 is not one perfex counts (it counts events 0 and 25)"),
        "{err}"
    );

    // A thread that reports its start counts from there; one that does not has nothing.
    let started = std::thread::spawn(|| {
        perfex::thread_started();
        sim::advance("25", 3).unwrap();
        perfex::read(0, 25).map(|c| (c.c0, c.c1))
    });
    assert_eq!(started.join().unwrap().unwrap(), (0, 3));
    let unreported = std::thread::spawn(|| perfex::read(0, 25)).join().unwrap();
    assert!(
        matches!(&unreported, Err(Error::WrongState(m)) if m.contains("not started")),
        "{unreported:?}"
    );

    // The first explicit start takes over, exactly as without perfex: counts from zero, a new
    // generation, a read needs a start again.
    let g = perfex::start(0, 25).unwrap();
    assert_ne!(g, c.generation);
    sim::advance("0", 9).unwrap();
    let f = perfex::read(0, 25).unwrap();
    assert_eq!((f.c0, f.c1, f.generation), (9, 0, g));
    assert!(matches!(perfex::read(0, 25), Err(Error::WrongState(_))));
    // The same event twice: counted once, both counts its count.
    let g = perfex::start(25, 25).unwrap();
    sim::advance("25", 4).unwrap();
    let h = perfex::read(25, 25).unwrap();
    assert_eq!((h.c0, h.c1, h.generation), (4, 4, g));
    assert!(perfex::start(9, 10).is_err(), "two events of counter 0");
}

#[test]
fn handoff_values() {
    let h = Handoff::parse(" 0, 25").unwrap();
    assert_eq!((h.events.clone(), h.kernel), (vec![0, 25], false));
    assert_eq!(h.to_value(), "0,25");
    let k = Handoff::parse("26,26,kernel").unwrap();
    assert_eq!((k.events.clone(), k.kernel), (vec![26], true));
    assert_eq!(Handoff::parse(&k.to_value()).unwrap(), k);
    for bad in ["", "kernel", "0,25,3", "x", "32", "-1"] {
        assert!(Handoff::parse(bad).is_err(), "{bad:?}");
    }
}

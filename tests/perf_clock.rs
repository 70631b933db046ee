//! Without a PMU, `cycles` is CPU time x a clock: the clock `perfex --calibrate` measured once
//! its host cost cache exists, else the nominal one. (Its own test binary: the cache is named
//! by an environment variable, read when a backend first needs its clock.)

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::Backend;

mod common;
use common::{skip, TempDir};

#[test]
fn the_calibrated_clock_drives_the_cycles_estimate() {
    let dir = TempDir::new("perf-clock");
    let cache = dir.0.join("host.costs");
    std::env::set_var("PERFCOMPAT_HOST_COSTS", &cache);
    let nominal = PerfBackend::new().unwrap();
    assert_eq!(nominal.caps().clock_source, "the nominal clock");
    std::fs::write(
        &cache,
        "# a calibration\nclock 1234.5 MHz\n26 90 10 180 nsec\n",
    )
    .unwrap();
    let calibrated = PerfBackend::new().unwrap();
    assert_eq!(calibrated.caps().mhz, 1234.5);
    assert!(calibrated.caps().clock_source.contains("calibrate"));
    if calibrated.caps().pmu {
        skip("cycles estimate: this host has a PMU, cycles are real");
        return;
    }
    assert!(
        calibrated
            .info()
            .notes
            .iter()
            .any(|n| n.contains("x 1234 MHz (the clock perfex --calibrate measured)")),
        "{:?}",
        calibrated.info().notes
    );
    // A cache that does not parse is not used.
    std::fs::write(&cache, "clock fast MHz\n").unwrap();
    assert_eq!(
        PerfBackend::new().unwrap().caps().clock_source,
        "the nominal clock"
    );
}

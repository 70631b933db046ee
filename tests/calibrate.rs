//! Host calibration (`perfex --calibrate`): a quick calibration on this machine gives sane
//! figures, and its cache becomes the default host table. (Its own test binary: it points
//! `PERFCOMPAT_HOST_COSTS` and `PERFCOMPAT_SYSTEM_COSTS` at a temporary directory.)

use std::sync::OnceLock;
use std::time::Instant;

use perfcompat::api::costs::{self, CostOverlay, CostTable, Flavor, Unit};
use perfcompat::commands::calibrate::{calibrate, calibrate_and_cache, CalibrateOptions};

mod common;
use common::TempDir;

/// The temporary directory holding the cache; set up once, before any test reads the
/// environment.
fn temp_env() -> &'static TempDir {
    static DIR: OnceLock<TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = TempDir::new("calibrate");
        std::env::set_var(costs::HOST_CACHE_ENV, d.0.join("cache/host.costs"));
        std::env::set_var(costs::SYSTEM_COSTS_ENV, d.0.join("no-system.costs"));
        d
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[test]
fn quick_calibration_is_sane_and_its_cache_becomes_the_host_table() {
    let dir = temp_env();
    let t = Instant::now();
    let (cal, path) = calibrate_and_cache(&CalibrateOptions { quick: true }).unwrap();
    let took = t.elapsed();
    eprintln!("{}", cal.report());
    let f = cal.figures;

    // Sane figures.
    for (name, v) in [
        ("clock_mhz", f.clock_mhz),
        ("l2_ns", f.l2_ns),
        ("llc_ns", f.llc_ns),
        ("mem_ns", f.mem_ns),
        ("tlb_miss_ns", f.tlb_miss_ns),
        ("branch_miss_ns", f.branch_miss_ns),
    ] {
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }
    assert!(f.l2_ns <= f.llc_ns && f.llc_ns <= f.mem_ns, "{f:?}");
    assert!(f.mem_ns > f.l2_ns, "memory no slower than the L2: {f:?}");
    let nominal = perfcompat::backend::nominal_mhz();
    assert!(
        f.clock_mhz >= 0.25 * nominal && f.clock_mhz <= 4.0 * nominal,
        "clock {} MHz vs nominal {nominal} MHz",
        f.clock_mhz
    );
    assert!(f.line_bytes.is_power_of_two(), "{}", f.line_bytes);
    assert!(cal.quick);
    assert!(
        took.as_secs_f64() < 15.0,
        "a quick calibration took {took:?}"
    );
    for (label, v) in &cal.measurements {
        assert!(v.is_finite(), "{label}: {v}");
    }
    // On x86-64 and arm64 the clock is measured, and it is the figure unless a note replaced it.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let measured = cal
            .measurements
            .iter()
            .find(|m| m.0.starts_with("clock"))
            .expect("a clock measurement")
            .1;
        if !cal.notes.iter().any(|n| n.starts_with("clock")) {
            assert_eq!(f.clock_mhz, measured);
        }
    }
    let report = cal.report();
    for needle in ["Measurements:", "Figures", "L2 hit", "memory access", "MHz"] {
        assert!(report.contains(needle), "{needle} missing in\n{report}");
    }
    for n in &cal.notes {
        assert!(report.contains(n.as_str()), "note {n} missing in\n{report}");
    }

    // The cache: where PERFCOMPAT_HOST_COSTS says, parseable, and the default host table.
    assert_eq!(path, dir.0.join("cache/host.costs"));
    let overlay = CostOverlay::load(&path).unwrap();
    assert_eq!(overlay.clock_mhz, Some(round2(f.clock_mhz)));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("calibrated on"), "{text}");
    let (table, warnings) = costs::default_table(Flavor::Host);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        table.sources.iter().any(|s| s.contains("calibrated")),
        "{:?}",
        table.sources
    );
    assert_eq!(table.clock_mhz, round2(f.clock_mhz));
    assert_eq!(table.costs, CostTable::for_host(&f).costs);
    // The memory-bound events carry the measured figures.
    let c26 = table.costs[26];
    assert_eq!((c26.typical, c26.unit), (round2(f.mem_ns), Unit::Nsec));
    assert_eq!(table.costs[25].typical, round2(f.l2_ns));
    assert_eq!(table.costs[23].typical, round2(f.tlb_miss_ns));
    assert_eq!(table.costs[24].typical, round2(f.branch_miss_ns));
    assert_eq!(table.l2_line_bytes, f.line_bytes);
}

/// The full calibration, for a person to read: `cargo test --release --test calibrate --
/// --ignored --nocapture` (alone: two calibrations at once disturb each other).
#[test]
#[ignore]
fn full_calibration_report() {
    let t = Instant::now();
    let cal = calibrate(&CalibrateOptions::default()).unwrap();
    eprintln!("{}", cal.report());
    eprintln!("wall time {:.2} s", t.elapsed().as_secs_f64());
    assert!(cal.figures.mem_ns > cal.figures.l2_ns);
}

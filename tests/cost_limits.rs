//! The cost report's numbers (issue 29): `print_costs` prints each count as the exact integer
//! `print_counters` prints (it went through `f64`: 2^63-1 printed as ...808, 2^53+1 as 2^53),
//! and `load_costs` refuses, naming the line, a cost whose time for a 64-bit count would
//! overflow (a cost of 1e308 was loaded, then printed `inf` times).

use perfcompat::api::perfex::{format_costs, format_counters};
use perfcompat::Error;

mod common;
use common::TempDir;

#[test]
fn print_costs_prints_counts_exactly_as_print_counters() {
    let big = i64::MAX;
    let odd = (1i64 << 53) + 1;
    let costs = format_costs(0, big, 25, odd).unwrap();
    let counters = format_counters(0, big, 25, odd).unwrap();
    for n in ["9223372036854775807", "9007199254740993"] {
        assert!(counters.contains(n), "print_counters: {n}\n{counters}");
        assert!(costs.contains(n), "print_costs: {n}\n{costs}");
    }
}

#[test]
fn a_cost_that_would_overflow_a_time_is_refused_naming_its_line() {
    let dir = TempDir::new("cost-limits");
    let f = dir.0.join("huge.costs");
    std::fs::write(
        &f,
        "# a cost no time can carry\n25 1e308 1e308 1e308 clks\n",
    )
    .unwrap();
    match perfcompat::api::costs::load(&f) {
        Err(Error::BadFile { line, reason, .. }) => {
            assert_eq!(line, 2, "{reason}");
            assert!(reason.contains("too large"), "{reason}");
        }
        other => panic!("1e308 loaded: {other:?}"),
    }
    // The largest cost accepted, at the slowest clock, still gives finite times for the
    // largest count.
    std::fs::write(&f, "clock 0.001 MHz\n25 1e280 1e280 1e280 clks\n").unwrap();
    perfcompat::api::costs::load(&f).unwrap();
    let report = format_costs(25, i64::MAX, 25, i64::MAX).unwrap();
    assert!(!report.contains("inf"), "{report}");
}

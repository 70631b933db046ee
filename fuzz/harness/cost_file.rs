//! Fuzz body `cost_file`: the perfex cost-file parser (`CostOverlay::parse`, what `load_costs`
//! and `perfex -c` use) and what is done with a parsed file.
//!
//! Invariants checked on every input:
//! - parsing never panics; a rejected file names a line that exists (0 for the whole file);
//! - an accepted file has at least one entry, and each entry is a finite, non-negative
//!   `minimum <= typical <= maximum` triple; its clock is in [0.001, 1e6] MHz;
//! - laid over each built-in table (R10000, R12000, host) it gives a well-formed table whose
//!   entries are the file's where it has one and the built-in table's elsewhere;
//! - the dump of that table (`perfex -t`) parses back, and the table it gives dumps to the same
//!   text (the dump is the file format);
//! - the cost report and the statistics over that table do not panic, for counts taken from
//!   the input.

use perfcompat::api::costs::{
    format_costs, statistics, CostOverlay, CostTable, EventCount, Flavor,
};
use perfcompat::api::costs::{Cost, EVENTS};

use crate::fuzz_common::check_rejection;

fn well_formed(c: &Cost) -> bool {
    [c.typical, c.minimum, c.maximum]
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0)
        && c.minimum <= c.typical
        && c.typical <= c.maximum
}

fn check_table(t: &CostTable, what: &str) {
    assert!(
        t.clock_mhz.is_finite() && t.clock_mhz > 0.0,
        "{what}: clock {}",
        t.clock_mhz
    );
    for (n, c) in t.costs.iter().enumerate() {
        assert!(well_formed(c), "{what}: event {n}: {c:?}");
    }
}

/// Run one input.
pub fn run(data: &[u8]) {
    // load_costs reads files as UTF-8 (a file that is not is rejected before parsing).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let overlay = match CostOverlay::parse(text, "fuzz.costs") {
        Ok(o) => o,
        Err(e) => return check_rejection(e, "fuzz.costs", text),
    };
    let entries = overlay.costs.iter().flatten().count() + usize::from(overlay.clock_mhz.is_some());
    assert!(entries > 0, "an accepted file with no entry");
    if let Some(mhz) = overlay.clock_mhz {
        assert!(
            mhz.is_finite() && (0.001..=1e6).contains(&mhz),
            "clock {mhz}"
        );
    }
    for (n, c) in overlay.costs.iter().enumerate() {
        if let Some(c) = c {
            assert!(well_formed(c), "event {n}: {c:?}");
        }
    }
    for flavor in [Flavor::R10000, Flavor::R12000, Flavor::Host] {
        let base = CostTable::builtin(flavor);
        let t = base.overlaid(&overlay);
        check_table(&t, "overlaid");
        for n in 0..EVENTS {
            let want = overlay.costs[n].unwrap_or(base.costs[n]);
            assert_eq!(t.costs[n], want, "event {n}");
        }
        assert_eq!(t.clock_mhz, overlay.clock_mhz.unwrap_or(base.clock_mhz));
        assert_eq!(t.sources.len(), base.sources.len() + 1);

        // The dump is the file format: it parses back, and its table dumps the same.
        let dump = t.dump();
        let again = CostOverlay::parse(&dump, "dump")
            .unwrap_or_else(|e| panic!("the dump does not parse back: {e}\n{dump}"));
        let t2 = base.overlaid(&again);
        check_table(&t2, "reloaded dump");
        let dump2 = t2.dump();
        let strip = |d: &str| d.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(strip(&dump), strip(&dump2), "dump, parse, dump differs");

        // The report over counts taken from the input.
        let counts: Vec<EventCount> = data
            .chunks(9)
            .take(8)
            .filter(|c| c.len() == 9)
            .map(|c| EventCount {
                event: usize::from(c[0]) % (EVENTS + 2),
                count: u64::from_le_bytes(c[1..9].try_into().unwrap()) as f64,
            })
            .collect();
        let elapsed = data.first().map(|&b| f64::from(b) / 10.0);
        let report = format_costs(&t, &counts, elapsed);
        assert!(report.starts_with("Cost estimates: "));
        for (name, v) in statistics(&t, &counts, elapsed) {
            assert!(v.is_finite(), "statistic {name} = {v}");
        }
    }
}

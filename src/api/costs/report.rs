//! The cost report: each event's count turned into time by a cost table, sorted by typical
//! time, and the statistics derived from the counts (what `print_costs` and `perfex -y`
//! print).

use std::fmt::Write as _;

use super::{fmt_num, CostTable, Flavor};
use crate::base::costfile::EVENTS;

/// The count of one event in a report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventCount {
    /// R10000 event number, 0-31.
    pub event: usize,
    /// The count (possibly scaled, for multiplexed counting).
    pub count: f64,
}

/// The cost report `print_costs` and `perfex -y` print: the counts with their time estimates,
/// most costly first, then the derived statistics whose events were counted. `elapsed_s` is
/// the measured time, used when cycles were not counted.
pub fn format_costs(table: &CostTable, counts: &[EventCount], elapsed_s: Option<f64>) -> String {
    let shown: Vec<String> = counts.iter().map(|c| fmt_count(c.count)).collect();
    report(table, counts, &shown, &[], elapsed_s)
}

/// [`format_costs`] for counts read from counters (`print_costs`): each count is printed as
/// the exact integer it is (through `f64` a count above 2^53 would print rounded), and used as
/// a floating-point number only for the times and statistics.
pub fn format_exact_costs(
    table: &CostTable,
    counts: &[(usize, i64)],
    elapsed_s: Option<f64>,
) -> String {
    let shown: Vec<String> = counts.iter().map(|c| c.1.to_string()).collect();
    let counts: Vec<EventCount> = counts
        .iter()
        .map(|&(event, count)| EventCount {
            event,
            count: count as f64,
        })
        .collect();
    report(table, &counts, &shown, &[], elapsed_s)
}

/// [`format_costs`] with each count printed as `shown` (same order): `perfex -y` prints the
/// exact integers it read, or its scaled estimates rounded. `counted_as` (same order, shorter
/// means `None`) names the event a count really is when it is not the R10000 event the cost
/// table assumes (an event map's `25 = page-faults`): its line shows that name, and no derived
/// statistic uses it (issue 46 item 5: page faults gave a memory time and a bandwidth).
pub fn format_costs_shown(
    table: &CostTable,
    counts: &[EventCount],
    shown: &[String],
    counted_as: &[Option<String>],
    elapsed_s: Option<f64>,
) -> String {
    report(table, counts, shown, counted_as, elapsed_s)
}

/// The cost report of `counts`, each count printed as `shown`, counted as `counted_as` (same
/// order; see [`format_costs_shown`]).
fn report(
    table: &CostTable,
    counts: &[EventCount],
    shown: &[String],
    counted_as: &[Option<String>],
    elapsed_s: Option<f64>,
) -> String {
    let as_of = |i: usize| counted_as.get(i).and_then(Option::as_deref);
    let name_of = |c: &EventCount, real: Option<&str>| {
        format!(
            "{:>3} {}",
            c.event,
            real.unwrap_or_else(|| table.flavor.event_name(c.event))
        )
    };
    // (count, count as shown, its times, its label)
    type Row<'a> = (EventCount, &'a str, (f64, f64, f64), String);
    let mut rows: Vec<Row> = counts
        .iter()
        .zip(shown)
        .enumerate()
        .filter(|(_, (c, _))| c.event < EVENTS)
        .map(|(i, (c, n))| {
            let t = table.costs[c.event].seconds(c.count, table.clock_mhz);
            (*c, n.as_str(), t, name_of(c, as_of(i)))
        })
        .collect();
    rows.sort_by(|a, b| b.2 .0.total_cmp(&a.2 .0).then(a.0.event.cmp(&b.0.event)));
    let width = rows
        .iter()
        .map(|r| r.3.len() + 3)
        .max()
        .unwrap_or(0)
        .max(48);
    let rule = "=".repeat(width + 19 + 13 * 3);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Cost estimates: {} cost table at {} MHz ({})",
        table.flavor.label(),
        fmt_num(table.clock_mhz),
        table.sources.join(", then ")
    );
    let _ = writeln!(
        s,
        "{:<width$} {:>18} {:>12} {:>12} {:>12}",
        "", "", "Typical", "Minimum", "Maximum"
    );
    let _ = writeln!(
        s,
        "{:<width$} {:>18} {:>12} {:>12} {:>12}",
        " Event", "Count", "time (s)", "time (s)", "time (s)"
    );
    let _ = writeln!(s, "{rule}");
    for (_, count, (typ, min, max), name) in &rows {
        let label = format!("{name} ");
        let _ = writeln!(
            s,
            "{label:.<width$} {count:>18} {typ:>12.6} {min:>12.6} {max:>12.6}"
        );
    }
    let assumed: Vec<EventCount> = counts
        .iter()
        .enumerate()
        .filter(|(i, _)| as_of(*i).is_none())
        .map(|(_, c)| *c)
        .collect();
    let mapped: Vec<String> = counts
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some(format!("{} as {}", c.event, as_of(i)?)))
        .collect();
    if !mapped.is_empty() {
        let _ = writeln!(
            s,
            "(Counted as another event than the R10000 one the cost table prices: {}; no \
             statistic is derived from {}.)",
            mapped.join(", "),
            if mapped.len() > 1 { "them" } else { "it" }
        );
    }
    let stats = statistics(table, &assumed, elapsed_s);
    if !stats.is_empty() {
        let _ = writeln!(s, "\nStatistics");
        let _ = writeln!(s, "{rule}");
        for (name, v) in stats {
            let _ = writeln!(s, "{:.<w$} {v:>12.6}", format!("{name} "), w = width + 19);
        }
    }
    s
}

fn fmt_count(c: f64) -> String {
    if c.fract() == 0.0 && c.abs() < 1e18 {
        format!("{}", c as i64)
    } else {
        format!("{c:.0}")
    }
}

/// The derived statistics computable from `counts`: (name, value) in a fixed order.
pub fn statistics(
    table: &CostTable,
    counts: &[EventCount],
    elapsed_s: Option<f64>,
) -> Vec<(&'static str, f64)> {
    // A missing count is NaN rather than None: NaN carries through the arithmetic, and every
    // statistic that needs a missing count, like every division by zero, fails the final
    // finiteness test and is left out. (With Option<f64>, optimised code compared the
    // uninitialised payload of a None before looking at its tag: harmless, but memcheck rightly
    // reported a jump on an uninitialised value in every print_costs.)
    let get = |e: usize| {
        counts
            .iter()
            .find(|c| c.event == e)
            .map_or(f64::NAN, |c| c.count)
    };
    let or = |a: f64, b: f64| if a.is_nan() { b } else { a };
    let r12k = table.flavor == Flavor::R12000;
    let cycles = if r12k { get(0) } else { or(get(0), get(16)) };
    let grad = if r12k { get(15) } else { or(get(17), get(15)) };
    let (loads, stores, fp) = (get(18), get(19), get(21));
    let ls = loads + stores;
    let (l1m, l2m) = (get(25), get(26));
    let time = or(
        cycles / (table.clock_mhz * 1e6),
        elapsed_s.unwrap_or(f64::NAN),
    );
    let typ_time = |e: usize| table.costs[e].seconds(get(e), table.clock_mhz).0;
    let mut out = Vec::new();
    let mut push = |name: &'static str, v: f64| {
        if v.is_finite() {
            out.push((name, v));
        }
    };
    push("Graduated instructions/cycle", grad / cycles);
    push("Graduated floating point instructions/cycle", fp / cycles);
    push("Graduated loads & stores/cycle", ls / cycles);
    push(
        "Graduated loads & stores/floating point instruction",
        ls / fp,
    );
    push("Mispredicted branches/Decoded branches", get(24) / get(6));
    push("Graduated loads/Issued loads", loads / get(2));
    push("Graduated stores/Issued stores", stores / get(3));
    push("L1 cache line reuse", ls / l1m - 1.0);
    push("L2 cache line reuse", l1m / l2m - 1.0);
    push("L1 data cache hit rate", 1.0 - l1m / ls);
    push("L2 data cache hit rate", 1.0 - l2m / l1m);
    let (t1, t2) = (typ_time(25), typ_time(26));
    let mem = if t1.is_nan() && t2.is_nan() {
        f64::NAN
    } else {
        or(t1, 0.0) + or(t2, 0.0)
    };
    push("Time accessing memory/Total time", mem / time);
    let l1_bytes = l1m * f64::from(table.l1_line_bytes);
    let l2_bytes = l2m * f64::from(table.l2_line_bytes);
    push(
        "L1-L2 bandwidth used (MB/s, average per process)",
        l1_bytes / time / 1e6,
    );
    push(
        "Memory bandwidth used (MB/s, average per process)",
        l2_bytes / time / 1e6,
    );
    push("MFLOPS (average per process)", fp / time / 1e6);
    out
}

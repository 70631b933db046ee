//! The perfex report: the text layout of perfex(1) and the JSON one, with the cost report
//! (`-y`) when a cost table is given.

use std::ffi::OsString;
use std::fmt::{self, Write as _};

use super::counting::Counting;
use super::{Count, NotCounted, Options, Outcome, Status};
use crate::api::costs::{self, CostTable, EventCount as CostCount, Flavor};

/// The command line as the report's first line shows it.
pub(super) fn command_line(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `command` with its control characters (C0, DEL and C1) shown as `\xNN`, so that the
/// report's first line is one line of text whatever the program's arguments hold: an escape
/// sequence would otherwise reach the terminal whole (issue 44 item 8; the `perfex` command's report shows it the same way).
pub(super) fn printable_command(command: &str) -> String {
    let mut s = String::with_capacity(command.len());
    for c in command.chars() {
        if c.is_control() {
            let _ = write!(s, "\\x{:02X}", c as u32);
        } else {
            s.push(c);
        }
    }
    s
}

/// Whether counting covers kernel mode, as the report's header says: `-k` for R10000 events,
/// every request's mode for a specification.
pub(super) fn kernel_mode(opts: &Options, counting: &[Counting]) -> bool {
    opts.kernel || counting.iter().any(|c| c.spec_kernel)
}

/// The end of the report's first line, after the command.
pub(super) fn header_rest(backend: &str, kernel: bool, all: bool) -> String {
    format!(
        " ({backend} backend, {}{})\n",
        if kernel {
            "user and kernel mode"
        } else {
            "user mode"
        },
        if all { ", all events multiplexed" } else { "" }
    )
}

/// One count line: `label` with its dotted leader, the count right-aligned (`raw`, or the
/// scaled estimate `count` when the kernel multiplexed the counter: its `[enabled, running]`
/// nanoseconds differ) and then a note saying so. No allocation.
pub(super) fn write_count(
    w: &mut dyn fmt::Write,
    label: &str,
    raw: u64,
    count: f64,
    [enabled_ns, running_ns]: [u64; 2],
) -> fmt::Result {
    write!(w, "{label:.<60} ")?;
    if running_ns < enabled_ns {
        let pct = 100.0 * running_ns as f64 / enabled_ns as f64;
        writeln!(w, "{count:>20.0}  (counted {pct:.0}% of the time, scaled)")
    } else {
        writeln!(w, "{raw:>20}")
    }
}

/// The report's last lines: the times (elapsed, counting, user, system seconds), the events
/// not counted (`not_counted`, from [`not_counted_text`]) and a signal that killed the
/// command. No allocation.
pub(super) fn write_tail(
    w: &mut dyn fmt::Write,
    times: [f64; 4],
    not_counted: &str,
    status: Status,
) -> fmt::Result {
    writeln!(
        w,
        "\nElapsed {:.6} s, counting {:.6} s, user {:.6} s, system {:.6} s",
        times[0], times[1], times[2], times[3]
    )?;
    w.write_str(not_counted)?;
    if let Status::Signaled(sig) = status {
        writeln!(w, "The command was killed by signal {sig}.")?;
    }
    Ok(())
}

/// The report's lines on the events not counted, grouped by reason.
pub(super) fn not_counted_text(not_counted: &[NotCounted]) -> String {
    let mut reasons: Vec<(&str, Vec<u32>)> = Vec::new();
    for n in not_counted {
        match reasons.iter_mut().find(|(r, _)| *r == n.reason) {
            Some((_, evs)) => evs.push(n.event),
            None => reasons.push((&n.reason, vec![n.event])),
        }
    }
    let mut s = String::new();
    for (reason, evs) in reasons {
        let list: Vec<String> = evs.iter().map(u32::to_string).collect();
        let _ = writeln!(
            s,
            "Not counted: event{} {}: {reason}",
            if evs.len() > 1 { "s" } else { "" },
            list.join(", ")
        );
    }
    s
}

/// The label of a specification's count (`name`, as [`Count::name`]), flagged when the count is
/// an estimate or a stand-in (issue 46 items 1, 4), with its trailing space.
pub(super) fn spec_label(name: &str, estimate: bool, stand_in: Option<&str>) -> String {
    match (stand_in, estimate) {
        (Some(s), _) => format!("{name} (STAND-IN: {s}) "),
        (None, true) => format!("{name} (est. from task-clock, user+sys) "),
        (None, false) => format!("{name} "),
    }
}

/// The count table: one line per event, with a note on scaled counts.
fn count_lines(s: &mut String, flavor: Flavor, counts: &[Count]) {
    for c in counts {
        let label = match &c.name {
            Some(n) => spec_label(n, c.estimate, c.stand_in.as_deref()),
            None => crate::api::perfex::count_label(flavor, c.event),
        };
        let _ = write_count(s, &label, c.raw, c.count, [c.enabled_ns, c.running_ns]);
    }
}

/// One event of the JSON report.
fn json_count(s: &mut String, flavor: Flavor, c: &Count, costs: Option<&CostTable>) {
    let _ = write!(
        s,
        "{{\"event\":{},\"name\":{},\"linux_event\":{},\"count\":{},\"raw\":{},\
         \"scaled\":{},\"enabled_ns\":{},\"running_ns\":{},\"estimate\":{},\"stand_in\":{}",
        match c.name {
            Some(_) => "null".to_string(),
            None => c.event.to_string(),
        },
        json_str(
            c.name
                .as_deref()
                .unwrap_or_else(|| flavor.event_name(c.event as usize))
        ),
        c.linux_event.as_deref().map_or("null".into(), json_str),
        json_num(c.count),
        c.raw,
        c.scaled(),
        c.enabled_ns,
        c.running_ns,
        c.estimate,
        c.stand_in.as_deref().map_or("null".into(), json_str)
    );
    if let Some(t) = costs {
        let (typ, min, max) = t.costs[c.event as usize].seconds(c.count, t.clock_mhz);
        let _ = write!(
            s,
            ",\"time_s\":{{\"typical\":{},\"minimum\":{},\"maximum\":{}}}",
            json_num(typ),
            json_num(min),
            json_num(max)
        );
    }
    s.push('}');
}

/// The event `c` really is when it is not the R10000 event its cost table line assumes: the
/// event of a specification, or the event an event map gives an R10000 number in place of the
/// built-in one (`25 = page-faults`). `perfex -y` shows that name and derives no statistic
/// from it (issue 46 item 5).
fn counted_as(c: &Count) -> Option<String> {
    if let Some(n) = &c.name {
        return Some(n.clone());
    }
    let linux = c.linux_event.as_deref()?;
    let builtin = crate::base::eventmap::r10k_event(c.event).and_then(|e| e.host_str());
    (builtin != Some(linux)).then(|| linux.to_string())
}

impl Outcome {
    /// The counts the cost table's statistics may use: those [`counted_as`] has no other name
    /// for.
    fn assumed_cost_counts(&self) -> Vec<CostCount> {
        self.cost_counts()
            .into_iter()
            .zip(&self.counts)
            .filter(|(_, c)| counted_as(c).is_none())
            .map(|(k, _)| k)
            .collect()
    }

    fn cost_counts(&self) -> Vec<CostCount> {
        self.counts
            .iter()
            .map(|c| CostCount {
                event: c.event as usize,
                count: c.count,
            })
            .collect()
    }

    /// The text report: the counts (or, with `costs`, the cost estimates and statistics),
    /// the times, and the events that could not be counted.
    pub fn text(&self, costs: Option<&CostTable>) -> String {
        let flavor = costs.map_or(Flavor::Host, |t| t.flavor);
        let mut s = format!(
            "Summary for execution of {}{}",
            printable_command(&self.command.join(" ")),
            header_rest(&self.backend, self.kernel, self.all)
        );
        for t in &self.threads {
            let _ = writeln!(
                s,
                "\nThread {} of process {}{}:",
                t.tid,
                t.pid,
                if t.still_running {
                    " (still running when the command ended)"
                } else {
                    ""
                }
            );
            count_lines(&mut s, flavor, &t.counts);
        }
        if !self.threads.is_empty() {
            let _ = writeln!(s, "\nTotals over {} threads:", self.threads.len());
        }
        match costs {
            Some(t) => s.push_str(&costs::format_costs_shown(
                t,
                &self.cost_counts(),
                &self.counts.iter().map(Count::shown).collect::<Vec<_>>(),
                &self.counts.iter().map(counted_as).collect::<Vec<_>>(),
                Some(self.counting_s),
            )),
            None => count_lines(&mut s, flavor, &self.counts),
        }
        let times = [self.elapsed_s, self.counting_s, self.user_s, self.system_s];
        let _ = write_tail(
            &mut s,
            times,
            &not_counted_text(&self.not_counted),
            self.status,
        );
        s
    }

    /// The machine-readable report (one JSON object).
    pub fn json(&self, costs: Option<&CostTable>) -> String {
        let flavor = costs.map_or(Flavor::Host, |t| t.flavor);
        let mut s = String::from("{");
        let _ = write!(
            s,
            "\"command\":[{}],",
            self.command
                .iter()
                .map(|a| json_str(a))
                .collect::<Vec<_>>()
                .join(",")
        );
        let _ = write!(s, "\"backend\":{},", json_str(&self.backend));
        let _ = write!(s, "\"kernel_mode\":{},", self.kernel);
        let _ = write!(s, "\"multiplexed\":{},", self.all);
        match self.status {
            Status::Exited(c) => {
                let _ = write!(s, "\"exit_status\":{c},\"signal\":null,");
            }
            Status::Signaled(g) => {
                let _ = write!(s, "\"exit_status\":null,\"signal\":{g},");
            }
        }
        let _ = write!(
            s,
            "\"elapsed_s\":{},\"counting_s\":{},\"user_s\":{},\"system_s\":{},",
            json_num(self.elapsed_s),
            json_num(self.counting_s),
            json_num(self.user_s),
            json_num(self.system_s)
        );
        s.push_str("\"events\":[");
        for (i, c) in self.counts.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            json_count(&mut s, flavor, c, costs);
        }
        s.push_str("],\"threads\":[");
        for (i, t) in self.threads.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"pid\":{},\"tid\":{},\"still_running\":{},\"events\":[",
                t.pid, t.tid, t.still_running
            );
            for (j, c) in t.counts.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                json_count(&mut s, flavor, c, None);
            }
            s.push_str("]}");
        }
        s.push_str("],\"not_counted\":[");
        for (i, n) in self.not_counted.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"event\":{},\"reason\":{}}}",
                n.event,
                json_str(&n.reason)
            );
        }
        s.push(']');
        if let Some(t) = costs {
            let _ = write!(
                s,
                ",\"cost_table\":{{\"processor\":{},\"clock_mhz\":{},\"sources\":[{}]}}",
                json_str(&format!("{:?}", t.flavor)),
                json_num(t.clock_mhz),
                t.sources
                    .iter()
                    .map(|x| json_str(x))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            s.push_str(",\"statistics\":{");
            let stats = costs::statistics(t, &self.assumed_cost_counts(), Some(self.counting_s));
            for (i, (name, v)) in stats.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{}:{}", json_str(name), json_num(*v));
            }
            s.push('}');
        }
        s.push_str("}\n");
        s
    }
}

impl Outcome {
    /// [`Outcome::json`] with the notices said while counting (each a line, from
    /// [`crate::base::notice::take`]) as its last member, `"notices"`: perfex `--json` keeps
    /// them off standard error, which its report may share (`2> f.json` is then JSON; issue 46
    /// item 7).
    pub fn json_with_notices(&self, costs: Option<&CostTable>, notices: &[String]) -> String {
        let mut s = self.json(costs);
        let end = s.trim_end().len();
        debug_assert!(s[..end].ends_with('}'));
        s.truncate(end - 1);
        let list: Vec<String> = notices.iter().map(|n| json_str(n)).collect();
        let _ = writeln!(s, ",\"notices\":[{}]}}", list.join(","));
        s
    }
}

/// A JSON string literal.
pub(crate) fn json_str(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for ch in v.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A JSON number (`null` for the non-finite values JSON cannot hold).
pub(crate) fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

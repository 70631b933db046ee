//! `perfex -l`: the events perfex counts on this host (issue 46 item 8).
//!
//! Which Linux event each R10000 number becomes was only in a man page, and an unknown event
//! said nowhere where the known ones are: every unknown-event error now points here. The
//! listing is, in this order and in a layout the tests hold stable:
//!
//! 1. a line naming the backend (its description);
//! 2. the 32 R10000 events, one line each: the number, the Linux event it becomes here (the
//!    `PERFCOMPAT_EVENTS` map's, or the built-in one; `-` for none), whether it counts here
//!    (`yes`, `estimated from ...`, `stand-in: counts ...` or `no: <why>`) and last the R10000
//!    name (the R12000's after a `/` where it differs);
//! 3. the other events the backend counts (`cputrack -c`, `cpustat -c`, libcpc's
//!    `cpc_set_add_request`), one a line with the backend's description, stand-ins flagged;
//! 4. the backend's notes, and on a host without a hardware PMU the two ways to count the
//!    events it lacks.
//!
//! Whether an event counts is asked the way a program would find out: a set of that one event
//! is bound to the calling thread and unbound at once.

use std::fmt::Write as _;

use crate::backend::{self, Backend, BackendKind, Substitute};
use crate::base::error::{Error, Result};
use crate::base::eventmap::{EventMap, R10K_EVENTS};
use crate::{CounterSet, Request, RequestFlags, Target};

/// Whether `spec` counts here: `Ok` with what it counts as, `Err` with the short reason.
fn counts_here(b: &'static dyn Backend, spec: &str) -> std::result::Result<String, String> {
    let set = CounterSet::new()
        .with(Request::new(spec).flags(RequestFlags::USER))
        .map_err(|e| e.to_string())?;
    match crate::engine::bind_with(b, &set, Target::CurrentThread) {
        Ok(binding) => {
            drop(binding);
            Ok(match b.substitute(spec) {
                None => "yes".into(),
                Some(Substitute::Estimate { from }) => {
                    format!("estimated from {from} (user+system time)")
                }
                Some(Substitute::StandIn { event, .. }) => format!("stand-in: counts {event}"),
            })
        }
        Err(e) => Err(short_reason(&e)),
    }
}

/// The cause of an error, without the fixes the full message gives.
fn short_reason(e: &Error) -> String {
    match e {
        Error::EventUnavailable { reason, .. } => {
            if reason.contains("this host has no hardware PMU") {
                "no hardware PMU".into()
            } else if reason.contains("has no Linux equivalent") {
                "no Linux equivalent".into()
            } else {
                reason.split(';').next().unwrap_or(reason).to_string()
            }
        }
        Error::UnknownEvent { .. } => "unknown event".into(),
        other => other.to_string(),
    }
}

/// The listing `perfex -l` prints.
pub fn listing() -> Result<String> {
    let b = backend::global()?;
    let info = b.info();
    let on_perf = b.shape_unmeasured().kind == BackendKind::Perf;
    let map = EventMap::global();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Events on this host ({} backend: {})",
        b.shape_unmeasured().kind,
        info.description
    );
    let _ = writeln!(
        s,
        "\nR10000 events (perfex -e N, start_counters, PERFCOMPAT_PRELOAD_EVENTS):"
    );
    let _ = writeln!(
        s,
        "{:>2}  {:<24} {:<46} R10000 event / R12000 event",
        "N", "Linux event", "counts here"
    );
    let mut lacking = false;
    for e in &R10K_EVENTS {
        let name = if e.r10000 == e.r12000 {
            e.r10000.to_string()
        } else {
            format!("{} / {}", e.r10000, e.r12000)
        };
        let spec = e.number.to_string();
        let linux = if on_perf {
            map.host_spec(e.number).ok().map(str::to_string)
        } else {
            b.counted_name(&spec)
        };
        let here = match counts_here(b, &spec) {
            Ok(how) => how,
            Err(why) => {
                lacking |= why == "no hardware PMU";
                format!("no: {why}")
            }
        };
        let _ = writeln!(
            s,
            "{:>2}  {:<24} {here:<46} {name}",
            e.number,
            linux.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(
        s,
        "\nOther events (cputrack -c, cpustat -c, cpc_set_add_request):"
    );
    for ev in b.events() {
        let flag = match b.substitute(&ev.name) {
            Some(Substitute::StandIn { event, .. }) => format!(" [stand-in: counts {event}]"),
            Some(Substitute::Estimate { from }) => {
                format!(" [estimated from {from}, user+system time]")
            }
            None => String::new(),
        };
        let _ = writeln!(s, "  {:<32} {}{flag}", ev.name, ev.description);
    }
    if !info.notes.is_empty() {
        let _ = writeln!(s, "\nNotes:");
        for n in &info.notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    if lacking {
        let _ = writeln!(
            s,
            "\nThis host has no hardware PMU. To count the events marked 'no: no hardware PMU', \
             map each to a software event in a PERFCOMPAT_EVENTS file (a line such as \
             '25 = page-faults'), or set PERFCOMPAT_STANDIN=1 to count the built-in software \
             stand-ins (page-faults for misses, task-clock for work), which every report flags."
        );
    }
    Ok(s)
}

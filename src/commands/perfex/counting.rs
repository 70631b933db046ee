//! Binding perfex's counters and reading them: the requests of `-e`/`-a`/`-c`, one group or
//! one group per event, the events this host cannot count and why, the counts scaled by the
//! enabled time, and the per-thread observer of `-mp`.

use std::fmt::Write as _;

use super::{Count, NotCounted, Options, ThreadCounts};
use crate::api::pctx::Observer;
use crate::api::perfex::pinned_set;
use crate::backend;
use crate::base::error::{Error, Result};
use crate::base::eventmap::EventMap;
use crate::{bind, Binding, CounterSet, Request, RequestFlags, Target};

pub(super) fn flags(kernel: bool) -> RequestFlags {
    RequestFlags {
        system: kernel,
        ..RequestFlags::USER
    }
}

/// One binding and the events it counts.
pub(super) struct Counting {
    pub(super) binding: Binding,
    /// Its R10000 events, or none when it counts a specification ([`Options::spec`]).
    pub(super) events: Vec<u32>,
    /// For a specification: each request's name in the report ([`spec_names`]).
    pub(super) names: Vec<String>,
    /// For a specification: each request's event as given.
    pub(super) specs: Vec<String>,
    /// For a specification: whether every request counts kernel mode too ([`spec_kernel`]).
    pub(super) spec_kernel: bool,
}

impl Counting {
    /// The number of counts the binding reads.
    pub(super) fn len(&self) -> usize {
        self.events.len().max(self.names.len())
    }
}

/// What the report calls each request of a specification's set: its counter and event, its
/// attributes, and its modes where they are not the header's (`kernel`: the header says "user
/// and kernel mode").
fn spec_names(set: &CounterSet, kernel: bool) -> Vec<String> {
    set.requests()
        .iter()
        .map(|r| {
            let mut name = match r.counter {
                Some(p) => format!("pic{p} {}", r.event),
                None => r.event.clone(),
            };
            for a in &r.attrs {
                let _ = write!(name, ",{}={:#x}", a.name, a.value);
            }
            match (r.flags.user, r.flags.system) {
                (true, s) if s == kernel => {}
                (true, true) => name.push_str(" [user and kernel mode]"),
                (true, false) => name.push_str(" [user mode]"),
                (false, _) => name.push_str(" [kernel mode]"),
            }
            name
        })
        .collect()
}

/// Whether a specification's set counts kernel mode in every request (its report's header
/// then says "user and kernel mode").
fn spec_kernel(set: &CounterSet) -> bool {
    set.requests()
        .iter()
        .all(|r| r.flags.user && r.flags.system)
}

/// Bind the counters of `opts` to `target`.
pub(super) fn bind_counters(
    opts: &Options,
    target: Target,
) -> Result<(Vec<Counting>, Vec<NotCounted>)> {
    let flags = flags(opts.kernel);
    if let Some(spec) = &opts.spec {
        let set = crate::commands::eventspec::parse(spec, backend::global()?)?;
        let kernel = spec_kernel(&set);
        let names = spec_names(&set, kernel);
        let specs = set.requests().iter().map(|r| r.event.clone()).collect();
        let binding = bind(&set, target)?;
        return Ok((
            vec![Counting {
                binding,
                events: Vec::new(),
                names,
                specs,
                spec_kernel: kernel,
            }],
            Vec::new(),
        ));
    }
    if !opts.all {
        // One event named twice (`-e 0 -e 0`) needs one counter: it is counted once.
        let mut events = if opts.events.is_empty() {
            vec![0]
        } else {
            opts.events.clone()
        };
        events.dedup();
        let binding = bind(&pinned_set(&events, flags)?, target)?;
        let names = Vec::new();
        return Ok((
            vec![Counting {
                binding,
                events,
                names,
                specs: Vec::new(),
                spec_kernel: false,
            }],
            Vec::new(),
        ));
    }
    let mut counting = Vec::new();
    let mut not_counted = Vec::new();
    for e in 0..32u32 {
        let set = CounterSet::new().with(Request::new(e.to_string()).flags(flags))?;
        match bind(&set, target) {
            Ok(binding) => counting.push(Counting {
                binding,
                events: vec![e],
                names: Vec::new(),
                specs: Vec::new(),
                spec_kernel: false,
            }),
            Err(err @ (Error::EventUnavailable { .. } | Error::UnknownEvent { .. })) => not_counted
                .push(NotCounted {
                    event: e,
                    reason: unavailable_reason(&err),
                }),
            Err(err) => return Err(err),
        }
    }
    Ok((counting, not_counted))
}

/// Why an event is unavailable, without the event's own number (so that events with the same
/// reason are listed together).
fn unavailable_reason(e: &Error) -> String {
    match e {
        // The no-PMU reason names the event's own map line: one reason for all of them here.
        Error::EventUnavailable { reason, .. }
            if reason.contains("this host has no hardware PMU") =>
        {
            "hardware events, and this host has no hardware PMU; to count software stand-ins, \
             map each in a PERFCOMPAT_EVENTS file (a line such as '25 = page-faults') or set \
             PERFCOMPAT_STANDIN=1 (reports flag them); `perfex -l` lists what counts here"
                .to_string()
        }
        Error::EventUnavailable { reason, .. } => {
            match reason.split_once(") has no Linux equivalent") {
                Some((_, rest)) => format!("no Linux equivalent{rest}"),
                None => reason.clone(),
            }
        }
        other => other.to_string(),
    }
}

/// Read every binding of `counting` into counts, scaled when the kernel multiplexed them.
pub(super) fn read_counts(counting: &[Counting]) -> Result<Vec<Count>> {
    let map = EventMap::global();
    let backend = backend::global()?;
    let on_perf = backend.shape_unmeasured().kind == backend::BackendKind::Perf;
    let mut counts = Vec::new();
    for c in counting {
        let mut v = vec![0u64; c.len()];
        let info = c.binding.sample(&mut v)?;
        for (i, &raw) in v.iter().enumerate() {
            let count = scaled(raw, info.enabled_ns, info.running_ns);
            let event = c.events.get(i).copied().unwrap_or(0);
            let name = c.names.get(i).cloned();
            let sub = match c.specs.get(i) {
                Some(spec) => backend.substitute(spec),
                None => backend.substitute(&event.to_string()),
            };
            counts.push(Count {
                estimate: matches!(sub, Some(backend::Substitute::Estimate { .. })),
                stand_in: match sub {
                    Some(backend::Substitute::StandIn { event, .. }) => Some(event),
                    _ => None,
                },
                event,
                linux_event: match &name {
                    Some(_) => None,
                    None => on_perf
                        .then(|| map.host_spec(event).ok().map(str::to_string))
                        .flatten(),
                },
                name,
                raw,
                count: count.round(),
                enabled_ns: info.enabled_ns,
                running_ns: info.running_ns,
            });
        }
    }
    Ok(counts)
}

/// A count read while the kernel multiplexed its counter (`running < enabled`), scaled to the
/// whole time it was enabled; unchanged when it ran all the time (or never).
pub(super) fn scaled(raw: u64, enabled_ns: u64, running_ns: u64) -> f64 {
    if running_ns > 0 && running_ns < enabled_ns {
        raw as f64 * enabled_ns as f64 / running_ns as f64
    } else {
        raw as f64
    }
}

/// The sum over threads of each event's counts (events in the order of the first thread).
pub(super) fn totals(threads: &[ThreadCounts]) -> Vec<Count> {
    let mut sum: Vec<Count> = Vec::new();
    for t in threads {
        for c in &t.counts {
            match sum.iter_mut().find(|s| s.event == c.event) {
                Some(s) => {
                    s.raw = s.raw.wrapping_add(c.raw);
                    s.count += c.count;
                    s.enabled_ns += c.enabled_ns;
                    s.running_ns += c.running_ns;
                }
                None => sum.push(c.clone()),
            }
        }
    }
    sum
}

/// `perfex -mp`: counters bound to each thread as it starts, read as it exits.
pub(super) struct PerThread<'a> {
    pub(super) opts: &'a Options,
    pub(super) live: Vec<(i32, i32, Vec<Counting>)>,
    pub(super) done: Vec<ThreadCounts>,
    pub(super) not_counted: Option<Vec<NotCounted>>,
    pub(super) finishing: bool,
}

impl Observer for PerThread<'_> {
    fn init_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        let (counting, not_counted) = bind_counters(self.opts, Target::Thread(tid))?;
        self.not_counted.get_or_insert(not_counted);
        self.live.push((pid, tid, counting));
        Ok(())
    }

    fn fini_lwp(&mut self, pid: i32, tid: i32) -> Result<()> {
        if let Some(i) = self.live.iter().position(|l| l.0 == pid && l.1 == tid) {
            let (_, _, counting) = self.live.remove(i);
            self.done.push(ThreadCounts {
                pid,
                tid,
                counts: read_counts(&counting)?,
                still_running: self.finishing,
            });
        }
        Ok(())
    }
}

//! Counting a whole program: what the `perfex` command does (perfex(1)).
//!
//! [`run`] forks, binds the counters to the child before it runs a single instruction of the
//! command (the child waits on a pipe), lets it `execvp` the command, and waits for it. The
//! counters inherit into every thread and process the command creates, so the counts cover
//! the command and all its descendants (a descendant's counts are added when it exits, so
//! those the command waits for are all in). Then [`Outcome::text`] or [`Outcome::json`]
//! format the report.
//!
//! # Decisions
//! - Counting is in user mode; `kernel` (`-k`, and `-x`, since Linux handles a program's
//!   exceptions in the kernel and has no separate exception level) adds kernel mode, which
//!   the kernel allows only at `perf_event_paranoid` <= 1 or with `CAP_PERFMON`: otherwise the
//!   error names the level and the fix.
//! - `-e` events are pinned to their R10000 counter, as in libperfex: two events of one
//!   counter are a "conflicting counters" error (as perfex has done since IRIX 6.5.3).
//! - `-a` counts each of the 32 events in a group of its own, so the kernel time-multiplexes
//!   them over the PMU's counters; each total is scaled by `time_enabled / time_running`
//!   (IRIX multiplied by 16). Events this host cannot count are listed with the reason, not
//!   an error. A single unavailable `-e` event is an error.
//! - `-s`: counting starts stopped, SIGUSR1 to perfex starts it and SIGUSR2 stops it (the
//!   counts are the sum of the started intervals).
//! - While the command runs perfex ignores SIGINT and SIGQUIT (the terminal sends them to the
//!   command too), so the report still comes when an interrupted command exits.
//! - The emulated backends count only what the calling process injects, so they cannot count
//!   another program: [`run`] refuses them.

use std::ffi::OsString;
use std::fmt::{self, Write as _};

use crate::api::costs::{self, CostTable, EventCount as CostCount, Flavor};
use crate::api::pctx::{Child, Observer, Pctx, Signals};
use crate::api::perfex::pinned_set;
use crate::base::error::{Error, Result};
use crate::base::eventmap::EventMap;
use crate::engine::now_ns;
use crate::{backend, bind, Binding, CounterSet, Request, RequestFlags, Target};
pub mod mpi;

/// What to count and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// R10000 events to count (`-e`); empty means cycles (event 0). Ignored with `all`.
    pub events: Vec<u32>,
    /// Count all 32 events, multiplexed (`-a`).
    pub all: bool,
    /// Count in kernel mode too (`-k`, `-x`).
    pub kernel: bool,
    /// Start stopped; SIGUSR1 starts and SIGUSR2 stops counting (`-s`).
    pub signals: bool,
    /// Count each thread separately and report each, then the totals (`-mp`).
    pub per_thread: bool,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// An event specification as `cputrack -c` takes it (`page-faults,task-clock`,
    /// `pic0=...,pic1=...`, see [`crate::commands::eventspec`]), counted instead of `events` and `all`.
    pub spec: Option<String>,
}

impl Options {
    /// What the `perfex` command hands to the command it runs in
    /// [`HANDOFF_VAR`](crate::api::perfex::HANDOFF_VAR), so that libperfex in it counts each thread from its
    /// start (see [`adopt_handoff`](crate::api::perfex::adopt_handoff)): the `-e` events (event 0 by
    /// default) and kernel mode with `-k`. Nothing with `-a` (32 multiplexed events are not a
    /// libperfex pair) nor with `-s` (perfex cannot start and stop the program's own counters
    /// on its signals), so that the command's `read_counters` without `start_counters` fails
    /// as elsewhere.
    pub fn handoff(&self) -> Option<crate::api::perfex::Handoff> {
        if self.all || self.signals || self.spec.is_some() {
            return None;
        }
        let mut events = Vec::new();
        for &e in self
            .events
            .iter()
            .chain(self.events.is_empty().then_some(&0))
        {
            if !events.contains(&e) {
                events.push(e);
            }
        }
        Some(crate::api::perfex::Handoff {
            events,
            kernel: self.kernel,
        })
    }
}

pub use crate::api::pctx::Status;

/// The count of one event over the command.
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    /// R10000 event number (0 for an event of a specification, which has `name`).
    pub event: u32,
    /// For an event of a specification ([`Options::spec`]): its counter and event as the
    /// report names them (`pic0 page-faults`); `None` for an R10000 event.
    pub name: Option<String>,
    /// The Linux event it was counted as, when the backend maps it.
    pub linux_event: Option<String>,
    /// The count as read.
    pub raw: u64,
    /// The count scaled to the whole time (equal to `raw` unless multiplexed).
    pub count: f64,
    /// Nanoseconds the counter was enabled (summed over the tasks it covered).
    pub enabled_ns: u64,
    /// Nanoseconds it was really counting; less than `enabled_ns` when multiplexed.
    pub running_ns: u64,
}

impl Count {
    /// Whether the count was scaled because the kernel multiplexed the counter.
    pub fn scaled(&self) -> bool {
        self.running_ns < self.enabled_ns
    }

    /// The count as the reports print it: the exact integer read (through `f64` a count above
    /// 2^53 would print rounded), or the scaled estimate rounded to an integer.
    pub fn shown(&self) -> String {
        if self.scaled() {
            format!("{:.0}", self.count)
        } else {
            self.raw.to_string()
        }
    }
}

/// The counts of one thread (`-mp`).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCounts {
    /// Its process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Its counts.
    pub counts: Vec<Count>,
    /// Whether it was still running when the command ended (a descendant process that the
    /// command did not wait for): its counts stop there.
    pub still_running: bool,
}

/// An event that was not counted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCounted {
    /// R10000 event number.
    pub event: u32,
    /// Why.
    pub reason: String,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command line, for the report.
    pub command: Vec<String>,
    /// The backend that counted.
    pub backend: String,
    /// Whether kernel mode was counted too.
    pub kernel: bool,
    /// Whether all events were multiplexed (`-a`).
    pub all: bool,
    /// The counted events, in event order.
    pub counts: Vec<Count>,
    /// The events that could not be counted (only with `all`).
    pub not_counted: Vec<NotCounted>,
    /// Per-thread counts, in the order the threads ended (only with `per_thread`); `counts`
    /// holds their sums.
    pub threads: Vec<ThreadCounts>,
    /// Wall time from the start of the command to its end, seconds.
    pub elapsed_s: f64,
    /// Wall time during which counting was on, seconds (`elapsed_s` without `-s`).
    pub counting_s: f64,
    /// User CPU time of the command and the descendants it waited for, seconds.
    pub user_s: f64,
    /// System CPU time of the same, seconds.
    pub system_s: f64,
    /// How the command ended.
    pub status: Status,
}

/// Refuse the emulated backends, which cannot count another process.
fn refuse_emulation() -> Result<()> {
    let b = backend::global()?;
    let name = b.shape().kind;
    if name.is_emulated() {
        return Err(Error::Unsupported(format!(
            "the emulated {name} backend counts only events its own process injects, so it \
             cannot count another program; run perfex on the perf backend (unset \
             PERFCOMPAT_BACKEND or set it to perf)"
        )));
    }
    Ok(())
}

fn flags(kernel: bool) -> RequestFlags {
    RequestFlags {
        system: kernel,
        ..RequestFlags::USER
    }
}

/// One binding and the events it counts.
struct Counting {
    binding: Binding,
    /// Its R10000 events, or none when it counts a specification ([`Options::spec`]).
    events: Vec<u32>,
    /// For a specification: each request's name in the report ([`spec_names`]).
    names: Vec<String>,
    /// For a specification: whether every request counts kernel mode too ([`spec_kernel`]).
    spec_kernel: bool,
}

impl Counting {
    /// The number of counts the binding reads.
    fn len(&self) -> usize {
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
fn bind_counters(opts: &Options, target: Target) -> Result<(Vec<Counting>, Vec<NotCounted>)> {
    let flags = flags(opts.kernel);
    if let Some(spec) = &opts.spec {
        let set = crate::commands::eventspec::parse(spec, backend::global()?)?;
        let kernel = spec_kernel(&set);
        let names = spec_names(&set, kernel);
        let binding = bind(&set, target)?;
        return Ok((
            vec![Counting {
                binding,
                events: Vec::new(),
                names,
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
fn read_counts(counting: &[Counting]) -> Result<Vec<Count>> {
    let map = EventMap::global();
    let on_perf = backend::global()?.shape().kind == backend::BackendKind::Perf;
    let mut counts = Vec::new();
    for c in counting {
        let mut v = vec![0u64; c.len()];
        let info = c.binding.sample(&mut v)?;
        for (i, &raw) in v.iter().enumerate() {
            let count = scaled(raw, info.enabled_ns, info.running_ns);
            let event = c.events.get(i).copied().unwrap_or(0);
            let name = c.names.get(i).cloned();
            counts.push(Count {
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
fn scaled(raw: u64, enabled_ns: u64, running_ns: u64) -> f64 {
    if running_ns > 0 && running_ns < enabled_ns {
        raw as f64 * enabled_ns as f64 / running_ns as f64
    } else {
        raw as f64
    }
}

/// The sum over threads of each event's counts (events in the order of the first thread).
fn totals(threads: &[ThreadCounts]) -> Vec<Count> {
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
struct PerThread<'a> {
    opts: &'a Options,
    live: Vec<(i32, i32, Vec<Counting>)>,
    done: Vec<ThreadCounts>,
    not_counted: Option<Vec<NotCounted>>,
    finishing: bool,
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

/// Counting the calling process from inside, from now until [`SelfCount::finish`]: what the
/// preloaded library does for `PERFCOMPAT_PRELOAD_EVENTS`. The counters are bound to the
/// calling thread with inheritance, so they cover every thread and child process it creates
/// afterwards (a child's counts are added when it exits). `opts.command` only names the
/// program in the report; `per_thread` and `signals` are not supported here.
///
/// The report can also be read and written without allocating, taking a lock or using stdio
/// ([`SelfCount::readings`], [`SelfCount::write_report`]): the preloaded library writes it
/// from `_exit` and from a fatal signal's handler. Everything it needs but the counts and the
/// times is formatted when counting starts.
pub struct SelfCount {
    opts: Options,
    backend: String,
    counting: Vec<Counting>,
    not_counted: Vec<NotCounted>,
    start_ns: i64,
    /// The command as the report's first line names it.
    command: String,
    /// The rest of that line: ` (perf backend, user mode)` and its newline.
    header_rest: String,
    /// Each count line's label ([`count_label`](crate::api::perfex::count_label), or a specification's
    /// name), in the order of [`SelfCount::readings`].
    labels: Vec<String>,
    /// The report's lines on events not counted.
    not_counted_text: String,
    /// The counts of the images before an `exec` of this process ([`SelfCount::adopt`]).
    carried: Vec<Reading>,
}

/// One count as read, for [`SelfCount::write_report`]: the raw count and the counter's enabled
/// and running times (the count is scaled when `running_ns < enabled_ns`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// The count as read.
    pub raw: u64,
    /// Nanoseconds the counter was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds it was really counting.
    pub running_ns: u64,
}

/// The most counts a [`SelfCount`] reads (the size of the buffers its signal-safe report
/// needs on the stack).
pub const MAX_READINGS: usize = 64;

/// The longest command a carried report keeps ([`SelfCount::carry`]), in bytes: the rest is
/// cut to `...`, so that the environment of the `exec` stays small.
const CARRIED_COMMAND_MAX: usize = 1024;

/// The calling process's CPU time and that of its waited-for children: user and system
/// seconds (async-signal-safe).
fn cpu_times() -> (f64, f64) {
    let cpu = |who| {
        // SAFETY: rusage is plain data, filled by the kernel.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage.
        unsafe { libc::getrusage(who, &mut ru) };
        let tv = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        (tv(ru.ru_utime), tv(ru.ru_stime))
    };
    let (su, ss) = cpu(libc::RUSAGE_SELF);
    let (cu, cs) = cpu(libc::RUSAGE_CHILDREN);
    (su + cu, ss + cs)
}

impl SelfCount {
    /// Start counting the events of `opts` on the calling thread and its descendants.
    ///
    /// On an emulated backend it counts what the process injects (`perfcompat_sim_advance`).
    pub fn start(opts: &Options) -> Result<SelfCount> {
        if opts.per_thread || opts.signals {
            return Err(Error::InvalidArgument(
                "per-thread and signal-controlled counting need the perfex command".into(),
            ));
        }
        let backend = backend::global()?.shape().kind.to_string();
        let (counting, not_counted) = bind_counters(opts, Target::CurrentThreadInherit)?;
        let mut labels = Vec::new();
        for c in &counting {
            labels.extend(c.names.iter().map(|n| format!("{n} ")));
            labels.extend(
                c.events
                    .iter()
                    .map(|&e| crate::api::perfex::count_label(Flavor::Host, e)),
            );
        }
        if labels.len() > MAX_READINGS {
            return Err(Error::InvalidArgument(format!(
                "{} events: the report takes at most {MAX_READINGS}",
                labels.len()
            )));
        }
        let command = command_line(&opts.command);
        let header_rest = header_rest(&backend, kernel_mode(opts, &counting), opts.all);
        Ok(SelfCount {
            opts: opts.clone(),
            backend,
            not_counted_text: not_counted_text(&not_counted),
            counting,
            not_counted,
            start_ns: now_ns(),
            command,
            header_rest,
            labels,
            carried: Vec::new(),
        })
    }

    /// Read the counts so far into the report of a program that ends with `status`; the CPU
    /// times are the calling process's and its waited-for children's.
    pub fn finish(&self, status: Status) -> Result<Outcome> {
        let elapsed = (now_ns() - self.start_ns) as f64 * 1e-9;
        let (user, system) = cpu_times();
        let mut counts = read_counts(&self.counting)?;
        for (c, r) in counts.iter_mut().zip(&self.carried) {
            c.raw = c.raw.wrapping_add(r.raw);
            c.enabled_ns += r.enabled_ns;
            c.running_ns += r.running_ns;
            c.count = scaled(c.raw, c.enabled_ns, c.running_ns).round();
        }
        let mut outcome = outcome(
            &self.opts,
            self.backend.clone(),
            counts,
            self.not_counted.clone(),
            Vec::new(),
            [elapsed, elapsed, user, system],
            status,
        );
        outcome.kernel = kernel_mode(&self.opts, &self.counting);
        Ok(outcome)
    }

    /// Read every count into `out` (at least [`MAX_READINGS`] long is always enough), the
    /// counts carried over an `exec` added; returns how many. Async-signal-safe.
    pub fn readings(&self, out: &mut [Reading]) -> Result<usize> {
        let mut v = [0u64; MAX_READINGS];
        let mut n = 0;
        for c in &self.counting {
            let len = c.len();
            if n + len > out.len() || len > v.len() {
                return Err(Error::BufferTooSmall {
                    len: out.len(),
                    need: n + len,
                });
            }
            let info = c.binding.sample(&mut v[..len])?;
            for &raw in &v[..len] {
                let before = self.carried.get(n).copied().unwrap_or_default();
                out[n] = Reading {
                    raw: raw.wrapping_add(before.raw),
                    enabled_ns: info.enabled_ns.wrapping_add(before.enabled_ns),
                    running_ns: info.running_ns.wrapping_add(before.running_ns),
                };
                n += 1;
            }
        }
        Ok(n)
    }

    /// Write the report of a program that ends with `status` with the counts `readings`
    /// ([`SelfCount::readings`]) to `w`: the text of [`Outcome::text`] without cost tables.
    /// Async-signal-safe when `w` is (it formats into `w` only: no allocation).
    pub fn write_report(
        &self,
        w: &mut dyn fmt::Write,
        readings: &[Reading],
        status: Status,
    ) -> fmt::Result {
        w.write_str("Summary for execution of ")?;
        w.write_str(&self.command)?;
        w.write_str(&self.header_rest)?;
        for (label, r) in self.labels.iter().zip(readings) {
            let count = scaled(r.raw, r.enabled_ns, r.running_ns).round();
            write_count(w, label, r.raw, count, [r.enabled_ns, r.running_ns])?;
        }
        let elapsed = now_ns().saturating_sub(self.start_ns) as f64 * 1e-9;
        let (user, system) = cpu_times();
        write_tail(
            w,
            [elapsed, elapsed, user, system],
            &self.not_counted_text,
            status,
        )
    }

    /// The counts so far (`readings`, from [`SelfCount::readings`]), the start time and the
    /// command, as one line of text for the image an `exec` of this process starts: it takes
    /// them over with [`SelfCount::adopt`], so that the process prints one report with
    /// everything counted before and after the `exec`.
    pub fn carry(&self, readings: &[Reading]) -> String {
        let mut s = format!("{};", self.start_ns);
        for (i, r) in readings.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(s, "{sep}{}:{}:{}", r.raw, r.enabled_ns, r.running_ns);
        }
        s.push(';');
        let mut end = self.command.len().min(CARRIED_COMMAND_MAX);
        while !self.command.is_char_boundary(end) {
            end -= 1;
        }
        for b in self.command[..end].bytes() {
            if b.is_ascii_graphic() && !matches!(b, b'%' | b';') {
                s.push(b as char);
            } else {
                let _ = write!(s, "%{b:02X}");
            }
        }
        if end < self.command.len() {
            s.push_str("...");
        }
        s
    }

    /// Take over what an image before an `exec` of this process counted ([`SelfCount::carry`]):
    /// its counts are added to this one's, its start time and command are the report's. The
    /// value must come from the same events (as many counts as this counting reads).
    pub fn adopt(&mut self, carried: &str) -> Result<()> {
        let bad = |why: &str| Error::InvalidArgument(format!("{why} in a carried count"));
        let mut parts = carried.splitn(3, ';');
        let (Some(start), Some(counts), Some(command)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("missing fields"));
        };
        let start_ns: i64 = start.parse().map_err(|_| bad("a bad start time"))?;
        if start_ns > self.start_ns {
            return Err(bad("a start after this one"));
        }
        let mut readings = Vec::new();
        for item in counts.split(',').filter(|i| !i.is_empty()) {
            let f: Vec<u64> = item
                .split(':')
                .map(|x| x.parse().map_err(|_| bad("a bad count")))
                .collect::<Result<_>>()?;
            let [raw, enabled_ns, running_ns] = f[..] else {
                return Err(bad("a bad count"));
            };
            readings.push(Reading {
                raw,
                enabled_ns,
                running_ns,
            });
        }
        if readings.len() != self.labels.len() {
            return Err(bad(&format!(
                "{} counts for {} events",
                readings.len(),
                self.labels.len()
            )));
        }
        let mut bytes = Vec::with_capacity(command.len());
        let mut rest = command.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            rest = tail;
            if b != b'%' {
                bytes.push(b);
                continue;
            }
            let hex = rest
                .get(..2)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("a bad command"))?;
            bytes.push(hex);
            rest = &rest[2..];
        }
        self.command = String::from_utf8_lossy(&bytes).into_owned();
        self.start_ns = start_ns;
        self.carried = readings;
        Ok(())
    }
}

/// The command line as the report's first line shows it.
fn command_line(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether counting covers kernel mode, as the report's header says: `-k` for R10000 events,
/// every request's mode for a specification.
fn kernel_mode(opts: &Options, counting: &[Counting]) -> bool {
    opts.kernel || counting.iter().any(|c| c.spec_kernel)
}

/// The end of the report's first line, after the command.
fn header_rest(backend: &str, kernel: bool, all: bool) -> String {
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
fn write_count(
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
fn write_tail(
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
fn not_counted_text(not_counted: &[NotCounted]) -> String {
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

/// The [`Outcome`] of counting `opts`.
fn outcome(
    opts: &Options,
    backend: String,
    counts: Vec<Count>,
    not_counted: Vec<NotCounted>,
    threads: Vec<ThreadCounts>,
    times: [f64; 4],
    status: Status,
) -> Outcome {
    Outcome {
        command: opts
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        backend,
        kernel: opts.kernel,
        all: opts.all,
        counts,
        not_counted,
        threads,
        elapsed_s: times[0],
        counting_s: times[1],
        user_s: times[2],
        system_s: times[3],
        status,
    }
}

/// Run the command of `opts` and count it.
pub fn run(opts: &Options) -> Result<Outcome> {
    refuse_emulation()?;
    if opts.command.is_empty() {
        return Err(Error::InvalidArgument("no command to count".into()));
    }
    if opts.per_thread && opts.signals {
        return Err(Error::InvalidArgument(
            "per-thread reports and signal-controlled counting exclude each other".into(),
        ));
    }
    let backend = backend::global()?.shape().kind.to_string();
    let outcome = |counts, not_counted, threads, times: [f64; 4], status| {
        outcome(opts, backend, counts, not_counted, threads, times, status)
    };
    if opts.per_thread {
        let mut p = Pctx::create(&opts.command)?;
        p.ignore_interrupts();
        let mut obs = PerThread {
            opts,
            live: Vec::new(),
            done: Vec::new(),
            not_counted: None,
            finishing: false,
        };
        let start = now_ns();
        let status = p
            .run(&mut obs, None, 0)?
            .ok_or(Error::WrongState("the command did not end"))?;
        let elapsed = (now_ns() - start) as f64 * 1e-9;
        let (user, system) = p.cpu_times();
        obs.finishing = true;
        p.release(&mut obs)?;
        let counts = totals(&obs.done);
        let times = [elapsed, elapsed, user, system];
        let not_counted = obs.not_counted.take().unwrap_or_default();
        return Ok(outcome(counts, not_counted, obs.done, times, status));
    }
    let mut sig = Signals::block(opts.signals)?;
    let mut child = Child::spawn(&opts.command, &sig.old_mask, false)?;
    sig.ignore_interrupts();
    let (counting, not_counted) = bind_counters(opts, Target::Process(child.pid))?;
    if opts.signals {
        for c in &counting {
            c.binding.stop()?;
        }
    }
    let start = now_ns();
    child.release()?;
    let mut on_since = (!opts.signals).then_some(start);
    let mut counted_ns = 0i64;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let status = loop {
        match sig.next(None)? {
            None | Some(libc::SIGCHLD) => {
                if let Some(st) = child.try_reap(&mut ru)? {
                    break st;
                }
            }
            Some(libc::SIGUSR1) if on_since.is_none() => {
                for c in &counting {
                    c.binding.resume()?;
                }
                on_since = Some(now_ns());
            }
            Some(libc::SIGUSR2) => {
                if let Some(t) = on_since.take() {
                    for c in &counting {
                        c.binding.stop()?;
                    }
                    counted_ns += now_ns() - t;
                }
            }
            _ => {}
        }
    };
    let end = now_ns();
    if let Some(t) = on_since {
        counted_ns += end - t;
    }
    drop(sig);
    let tv = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    let times = [
        (end - start) as f64 * 1e-9,
        counted_ns as f64 * 1e-9,
        tv(ru.ru_utime),
        tv(ru.ru_stime),
    ];
    let counts = read_counts(&counting)?;
    Ok(outcome(counts, not_counted, Vec::new(), times, status))
}

/// The count table: one line per event, with a note on scaled counts.
fn count_lines(s: &mut String, flavor: Flavor, counts: &[Count]) {
    for c in counts {
        let label = match &c.name {
            Some(n) => format!("{n} "),
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
         \"scaled\":{},\"enabled_ns\":{},\"running_ns\":{}",
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
        c.running_ns
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

impl Outcome {
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
            self.command.join(" "),
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
            let stats = costs::statistics(t, &self.cost_counts(), Some(self.counting_s));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished command's outcome with `counts`, a second of everything.
    fn outcome(counts: Vec<Count>) -> Outcome {
        Outcome {
            command: vec!["x".into()],
            backend: "perf".into(),
            kernel: false,
            all: true,
            counts,
            not_counted: vec![],
            threads: vec![],
            elapsed_s: 1.0,
            counting_s: 1.0,
            user_s: 0.0,
            system_s: 0.0,
            status: Status::Exited(0),
        }
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(json_num(1.5), "1.5");
    }

    #[test]
    fn multiplexed_counts_are_scaled_to_the_enabled_time() {
        assert_eq!(scaled(1000, 4_000, 1_000), 4000.0);
        assert_eq!(scaled(1000, 4_000, 4_000), 1000.0);
        assert_eq!(scaled(1000, 0, 0), 1000.0, "never ran: nothing to scale by");
        let c = Count {
            event: 0,
            linux_event: None,
            name: None,
            raw: 10,
            count: scaled(10, 3, 2),
            enabled_ns: 3,
            running_ns: 2,
        };
        assert!(c.scaled());
        let o = outcome(vec![c]);
        assert!(
            o.text(None).contains("(counted 67% of the time, scaled)"),
            "{}",
            o.text(None)
        );
    }

    #[test]
    fn perfex_hands_over_its_pair_but_not_all_events_nor_signal_gated_counting() {
        let h = |o: Options| o.handoff().map(|h| h.to_value());
        assert_eq!(h(Options::default()).as_deref(), Some("0"));
        let two = Options {
            events: vec![0, 25],
            kernel: true,
            per_thread: true,
            ..Options::default()
        };
        assert_eq!(h(two).as_deref(), Some("0,25,kernel"));
        let twice = Options {
            events: vec![26, 26],
            ..Options::default()
        };
        assert_eq!(h(twice).as_deref(), Some("26"));
        for o in [
            Options {
                all: true,
                ..Options::default()
            },
            Options {
                signals: true,
                ..Options::default()
            },
        ] {
            assert_eq!(h(o), None);
        }
    }

    #[test]
    fn counts_print_exactly_in_the_count_and_cost_reports() {
        // 2^53 + 1 and 2^63 - 1: through f64 they print as 2^53 and 2^63 (issue 29).
        let count = |event: u32, raw: u64| Count {
            event,
            linux_event: None,
            name: None,
            raw,
            count: raw as f64,
            enabled_ns: 5,
            running_ns: 5,
        };
        let o = outcome(vec![count(0, (1 << 53) + 1), count(25, i64::MAX as u64)]);
        let table = CostTable::builtin(Flavor::R10000);
        for text in [o.text(None), o.text(Some(&table))] {
            assert!(text.contains("9007199254740993"), "{text}");
            assert!(text.contains("9223372036854775807"), "{text}");
            assert!(!text.contains("9007199254740992"), "{text}");
        }
    }

    /// The report written without allocation (from `_exit` or a signal handler) is the
    /// `perfex` report; an `exec`'s carried counts, start and command survive the trip
    /// through the environment, odd bytes included.
    #[test]
    fn the_signal_safe_report_is_the_perfex_report_and_carries_over_exec() {
        let opts = Options {
            events: vec![0],
            command: vec!["prog".into(), "a;b %41\n\u{e9}".into()],
            ..Options::default()
        };
        let Ok(count) = SelfCount::start(&opts) else {
            return; // a backend that cannot count event 0 here (no PMU and no fallback)
        };
        let mut readings = [Reading::default(); MAX_READINGS];
        let n = count.readings(&mut readings).unwrap();
        assert_eq!(n, 1);
        let mut text = String::new();
        count
            .write_report(&mut text, &readings[..n], Status::Signaled(15))
            .unwrap();
        let outcome = count.finish(Status::Signaled(15)).unwrap();
        let perfex = outcome.text(None);
        // The same lines but the times (and the count, read again).
        let shape = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| {
                    let l = l.split("Elapsed").next().unwrap();
                    l.trim_end_matches(|c: char| c.is_ascii_digit() || c == ' ')
                        .to_string()
                })
                .collect()
        };
        assert_eq!(shape(&text), shape(&perfex), "{text}\n{perfex}");
        assert!(
            text.ends_with("The command was killed by signal 15.\n"),
            "{text}"
        );

        let carried = [Reading {
            raw: 1000,
            enabled_ns: 50,
            running_ns: 25,
        }];
        let value = count.carry(&carried);
        let mut next = SelfCount::start(&opts).unwrap();
        next.adopt(&value).unwrap();
        assert_eq!(next.command, count.command);
        assert_eq!(next.start_ns, count.start_ns);
        let mut after = [Reading::default(); MAX_READINGS];
        next.readings(&mut after).unwrap();
        assert!(
            after[0].raw >= 1000 && after[0].enabled_ns >= 50,
            "{after:?}"
        );
        for bad in [
            "",
            "1;2",
            "x;1:2:3;c",
            "1;1:2;c",
            "1;1:2:3,4:5:6;c",
            "1;1:2:3;%zz",
        ] {
            assert!(next.adopt(bad).is_err(), "{bad:?}");
        }
        // A command longer than the carried limit is cut, at a character boundary.
        let long = Options {
            command: vec!["\u{e9}".repeat(CARRIED_COMMAND_MAX).into()],
            ..opts.clone()
        };
        let count = SelfCount::start(&long).unwrap();
        let mut next = SelfCount::start(&long).unwrap();
        next.adopt(&count.carry(&carried)).unwrap();
        assert!(next.command.ends_with("...") && next.command.len() < count.command.len());
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(Status::Exited(3).exit_code(), 3);
        assert_eq!(Status::Signaled(9).exit_code(), 137);
    }
}

//! Counting the calling process itself ([`SelfCount`]): what libperfex under `perfex` and the
//! `LD_PRELOAD`ed library report at exit, with a signal-safe path ([`SelfCount::readings`],
//! [`SelfCount::write_report`]) and the counts carried over an `exec`.

use std::ffi::OsString;
use std::fmt::{self, Write as _};

use super::counting::{bind_counters, read_counts, scaled, Counting};
use super::report::{
    command_line, header_rest, kernel_mode, not_counted_text, printable_command, write_count,
    write_tail,
};
use super::{outcome, NotCounted, Options, Outcome, Status};
use crate::api::costs::Flavor;
use crate::backend;
use crate::base::error::{Error, Result};
use crate::engine::now_ns;
use crate::Target;

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
    pub(super) start_ns: i64,
    /// The command as the report's first line names it.
    pub(super) command: String,
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
    /// The counter could not be read (the program closed its descriptor, say): the report
    /// says so and why instead of a count (issue 44 item 1).
    pub lost: bool,
}

/// The most counts a [`SelfCount`] reads (the size of the buffers its signal-safe report
/// needs on the stack).
pub const MAX_READINGS: usize = 64;

/// The longest command a carried report keeps ([`SelfCount::carry`]), in bytes: the rest is
/// cut to `...`, so that the environment of the `exec` stays small.
pub(super) const CARRIED_COMMAND_MAX: usize = 1024;

/// The largest count, enabled or running time a carried value may hold: what the kernel's
/// signed 64-bit counters reach (`i64::MAX`). Two of them add up without wrapping, so a
/// carried count plus the new image's never wraps (issue 44 item 8).
pub(super) const CARRIED_VALUE_MAX: u64 = i64::MAX as u64;

/// The options a `PERFCOMPAT_PRELOAD_EVENTS` value stands for, counting the program
/// `command`: `all` (as `perfex -a`), R10000 event numbers (a value of numbers and commas
/// only, each checked as `perfex -e` checks it), or else an event specification as `cputrack
/// -c` takes it (checked when counting starts).
pub fn preload_options(value: &str, command: Vec<OsString>) -> Result<Options> {
    let mut opts = Options {
        command,
        ..Options::default()
    };
    let value = value.trim();
    if value == "all" {
        opts.all = true;
        return Ok(opts);
    }
    let numeric = |c: char| c.is_ascii_digit() || matches!(c, ',' | '-' | '+' | ' ');
    if !value.chars().all(numeric) {
        opts.spec = Some(value.to_string());
        return Ok(opts);
    }
    for item in value.split(',') {
        opts.events.push(crate::api::perfex::parse_event(item)?);
    }
    Ok(opts)
}

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
        let b = backend::global()?;
        let backend = b.shape_unmeasured().kind.to_string();
        let (counting, not_counted) = bind_counters(opts, Target::CurrentThreadInherit)?;
        let mut labels = Vec::new();
        for c in &counting {
            labels.extend(c.names.iter().zip(&c.specs).map(|(n, spec)| {
                let sub = b.substitute(spec);
                let estimate = matches!(sub, Some(backend::Substitute::Estimate { .. }));
                let stand_in = match &sub {
                    Some(backend::Substitute::StandIn { event, .. }) => Some(event.as_str()),
                    _ => None,
                };
                super::report::spec_label(n, estimate, stand_in)
            }));
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
        let command = printable_command(&command_line(&opts.command));
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
            c.raw = c.raw.saturating_add(r.raw);
            c.enabled_ns = c.enabled_ns.saturating_add(r.enabled_ns);
            c.running_ns = c.running_ns.saturating_add(r.running_ns);
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
    /// counts carried over an `exec` added; returns how many. A group of counters that cannot
    /// be read gives readings marked [`Reading::lost`] (the report says why, from the engine's
    /// error), and the others are still read. Async-signal-safe.
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
            let info = c.binding.sample(&mut v[..len]);
            for &raw in &v[..len] {
                let before = self.carried.get(n).copied().unwrap_or_default();
                out[n] = match &info {
                    Ok(info) => Reading {
                        raw: raw.saturating_add(before.raw),
                        enabled_ns: info.enabled_ns.saturating_add(before.enabled_ns),
                        running_ns: info.running_ns.saturating_add(before.running_ns),
                        lost: false,
                    },
                    Err(_) => Reading {
                        lost: true,
                        ..Reading::default()
                    },
                };
                n += 1;
            }
        }
        Ok(n)
    }

    /// Why the counter behind reading `index` cannot be read (reading its group again), for
    /// a reading marked [`Reading::lost`]. Async-signal-safe as [`SelfCount::readings`].
    fn lost_because(&self, index: usize) -> Option<Error> {
        let mut v = [0u64; MAX_READINGS];
        let mut first = 0;
        for c in &self.counting {
            let len = c.len();
            if index < first + len {
                return c.binding.sample(&mut v[..len.min(MAX_READINGS)]).err();
            }
            first += len;
        }
        None
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
        for (i, (label, r)) in self.labels.iter().zip(readings).enumerate() {
            if r.lost {
                write!(w, "{label:.<60} lost: ")?;
                match self.lost_because(i) {
                    Some(e) => writeln!(w, "{e}")?,
                    None => writeln!(w, "its counter could not be read")?,
                }
                continue;
            }
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
    /// value must come from the same events (as many counts as this counting reads), and is
    /// checked as the library's other variables are (issue 44 item 8): each count and time at
    /// most 2^63-1 (so that adding never wraps), a running time within its
    /// enabled time, a start time of the monotonic clock not after this image's start, a
    /// command no longer than a carried one is cut to; its control characters are shown
    /// escaped. Nothing is taken unless all of it is good.
    pub fn adopt(&mut self, carried: &str) -> Result<()> {
        let bad = |why: String| Error::InvalidArgument(why);
        let mut parts = carried.splitn(3, ';');
        let (Some(start), Some(counts), Some(command)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(
                "missing fields (want <start>;<counts>;<command>)".into()
            ));
        };
        let start_ns: i64 = start
            .parse()
            .map_err(|_| bad(format!("the start time {start:?} is not a number")))?;
        if start_ns < 0 {
            return Err(bad(format!(
                "the start time {start_ns} ns is before the monotonic clock's origin"
            )));
        }
        if start_ns > self.start_ns {
            return Err(bad(format!(
                "the start time {start_ns} ns is after this image's ({} ns)",
                self.start_ns
            )));
        }
        let mut readings = Vec::new();
        for (i, item) in counts.split(',').filter(|i| !i.is_empty()).enumerate() {
            if i >= MAX_READINGS {
                return Err(bad(format!("more than {MAX_READINGS} counts")));
            }
            let f: Vec<u64> = item
                .split(':')
                .map(|x| {
                    x.parse()
                        .map_err(|_| bad(format!("count {}: {x:?} is not a count", i + 1)))
                })
                .collect::<Result<_>>()?;
            let [raw, enabled_ns, running_ns] = f[..] else {
                return Err(bad(format!(
                    "count {}: {item:?} is not <count>:<enabled ns>:<running ns>",
                    i + 1
                )));
            };
            if let Some(v) = [raw, enabled_ns, running_ns]
                .into_iter()
                .find(|&v| v > CARRIED_VALUE_MAX)
            {
                return Err(bad(format!(
                    "count {}: {v} is more than {CARRIED_VALUE_MAX}, the most a counter holds",
                    i + 1
                )));
            }
            if running_ns > enabled_ns {
                return Err(bad(format!(
                    "count {}: running {running_ns} ns is more than enabled {enabled_ns} ns",
                    i + 1
                )));
            }
            readings.push(Reading {
                raw,
                enabled_ns,
                running_ns,
                lost: false,
            });
        }
        if readings.len() != self.labels.len() {
            return Err(bad(format!(
                "{} counts for {} events",
                readings.len(),
                self.labels.len()
            )));
        }
        // What carry() writes: at most CARRIED_COMMAND_MAX bytes, each at most 3 characters
        // once escaped, and "...".
        if command.len() > 3 * CARRIED_COMMAND_MAX + 3 {
            return Err(bad(format!(
                "a command of {} bytes, more than a carried one holds ({})",
                command.len(),
                3 * CARRIED_COMMAND_MAX + 3
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
                .ok_or_else(|| bad("a bad escape in the command".into()))?;
            bytes.push(hex);
            rest = &rest[2..];
        }
        self.command = printable_command(&String::from_utf8_lossy(&bytes));
        self.start_ns = start_ns;
        self.carried = readings;
        Ok(())
    }
}

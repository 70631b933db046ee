//! Counting the calling process itself ([`SelfCount`]): what libperfex under `perfex` and the
//! `LD_PRELOAD`ed library report at exit, with a signal-safe path ([`SelfCount::readings`],
//! [`SelfCount::write_report`]) and the counts carried over an `exec`.

use std::fmt::{self, Write as _};

use super::counting::{bind_counters, read_counts, scaled, Counting};
use super::report::{
    command_line, header_rest, kernel_mode, not_counted_text, write_count, write_tail,
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
}

/// The most counts a [`SelfCount`] reads (the size of the buffers its signal-safe report
/// needs on the stack).
pub const MAX_READINGS: usize = 64;

/// The longest command a carried report keeps ([`SelfCount::carry`]), in bytes: the rest is
/// cut to `...`, so that the environment of the `exec` stays small.
pub(super) const CARRIED_COMMAND_MAX: usize = 1024;

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

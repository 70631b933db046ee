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
//!
//! # Files
//! Here the options, the outcome and [`run`]; `counting.rs` binding the counters and reading
//! them, `report.rs` the text and JSON reports, `selfcount.rs` a process counting itself
//! ([`SelfCount`]: libperfex under perfex, the preload), [`mpi`] the MPI layer's per-rank
//! reports.

use std::ffi::OsString;

use crate::api::pctx::{Child, Pctx, Signals};
use crate::base::error::{Error, Result};
use crate::engine::now_ns;
use crate::{backend, Target};

mod counting;
mod list;
pub mod mpi;
mod report;
mod selfcount;

use counting::{bind_counters, read_counts, totals, PerThread};

pub use list::listing;
pub(crate) use report::{json_num, json_str};
pub use selfcount::{preload_options, Reading, SelfCount, MAX_READINGS};

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
    /// Whether the count is an estimate (`cycles` from the task clock without a PMU: user
    /// and system time, whatever the mode).
    pub estimate: bool,
    /// The software event counted instead of the event (`PERFCOMPAT_STANDIN=1` without a
    /// PMU), `None` when the event itself was counted.
    pub stand_in: Option<String>,
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
    let name = b.shape_unmeasured().kind;
    if name.is_emulated() {
        return Err(Error::Unsupported(format!(
            "the emulated {name} backend counts only events its own process injects, so it \
             cannot count another program; run perfex on the perf backend (unset \
             PERFCOMPAT_BACKEND or set it to perf)"
        )));
    }
    Ok(())
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
    let backend = backend::global()?.shape_unmeasured().kind.to_string();
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

#[cfg(test)]
mod tests {
    use super::counting::scaled;
    use super::selfcount::CARRIED_COMMAND_MAX;
    use super::*;
    use crate::api::costs::{CostTable, Flavor};

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
            estimate: false,
            stand_in: None,
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
            estimate: false,
            stand_in: None,
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
            lost: false,
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
            // Issue 44 item 8: values that would wrap or mislead.
            "1;18446744073709551615:2:1;c",
            "1;1:18446744073709551615:1;c",
            "1;1:1:2;c",
            "-9223372036854775808;1:2:1;c",
            "9223372036854775807;1:2:1;c",
        ] {
            assert!(next.adopt(bad).is_err(), "{bad:?}");
        }
        let long = format!("1;1:2:1;{}", "a".repeat(3 * CARRIED_COMMAND_MAX + 4));
        assert!(next.adopt(&long).is_err());
        // An escape sequence in a carried command is shown escaped.
        next.adopt("1;1:2:1;a%1B[31m").unwrap();
        assert_eq!(next.command, "a\\x1B[31m");
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

    /// What a `PERFCOMPAT_PRELOAD_EVENTS` value stands for.
    #[test]
    fn preload_values() {
        let o = preload_options(" 0, 25", Vec::new()).unwrap();
        assert_eq!((o.events, o.all, o.spec), (vec![0, 25], false, None));
        assert!(preload_options("all", Vec::new()).unwrap().all);
        // Numbers only: R10000 events, refused as before when they are not.
        for bad in ["32", "0,,1", "-1", "40"] {
            assert!(preload_options(bad, Vec::new()).is_err(), "{bad}");
        }
        // Anything else is an event specification, checked when counting starts.
        for spec in [
            "page-faults,task-clock",
            "pic0=page-faults",
            "cycles",
            "0,3,x",
        ] {
            let o = preload_options(spec, Vec::new()).unwrap();
            assert_eq!(o.spec.as_deref(), Some(spec));
            assert!(o.events.is_empty() && !o.all);
        }
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(Status::Exited(3).exit_code(), 3);
        assert_eq!(Status::Signaled(9).exit_code(), 137);
    }
}

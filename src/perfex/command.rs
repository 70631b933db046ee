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

use std::ffi::{CString, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

use super::pinned_set;
use crate::costs::{self, CostTable, EventCount as CostCount, Flavor};
use crate::error::{Error, Result};
use crate::eventmap::EventMap;
use crate::{backend, bind, Binding, CounterSet, Request, RequestFlags, Target};

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
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
}

impl Status {
    /// The exit status a shell would report: the status, or 128 + the signal number.
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Exited(c) => c,
            Status::Signaled(s) => 128 + s,
        }
    }
}

/// The count of one event over the command.
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    /// R10000 event number.
    pub event: u32,
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
    let name = &b.info().name;
    if name.starts_with("sim:") {
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

fn os<T: PartialOrd + Default>(rc: T, op: &'static str) -> Result<T> {
    if rc < T::default() {
        Err(Error::last_os(op))
    } else {
        Ok(rc)
    }
}

/// Async-signal-safe write of a whole buffer (for the child between fork and exec).
fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: writes from a live buffer.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// The forked child, waiting for the go-ahead before it runs the command.
struct Child {
    pid: i32,
    go: i32,
    status: i32,
    reaped: bool,
}

impl Child {
    /// Fork; the child restores `mask`, waits for [`Child::release`] and runs `argv`.
    fn spawn(argv: &[CString], mask: &libc::sigset_t) -> Result<Child> {
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (mut go, mut st) = ([0i32; 2], [0i32; 2]);
        // SAFETY: pipe2 writes two fds into each array.
        unsafe {
            os(libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC), "pipe2")?;
            if libc::pipe2(st.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                let e = Error::last_os("pipe2");
                libc::close(go[0]);
                libc::close(go[1]);
                return Err(e);
            }
        }
        // SAFETY: the child only makes async-signal-safe calls before exec or _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: (child) async-signal-safe calls on our own fds and buffers.
            unsafe {
                libc::close(go[1]);
                libc::close(st[0]);
                libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(go[0], (&mut b as *mut u8).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break n;
                    }
                };
                if n != 1 {
                    libc::_exit(127); // perfex gave up before the command could start
                }
                libc::execvp(ptrs[0], ptrs.as_ptr());
                let e = *libc::__errno_location();
                write_all(st[1], &e.to_ne_bytes());
                libc::_exit(if e == libc::ENOENT { 127 } else { 126 });
            }
        }
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(go[0]);
            libc::close(st[1]);
        }
        if pid < 0 {
            let e = Error::last_os("fork");
            // SAFETY: our remaining fds.
            unsafe {
                libc::close(go[1]);
                libc::close(st[0]);
            }
            return Err(e);
        }
        Ok(Child {
            pid,
            go: go[1],
            status: st[0],
            reaped: false,
        })
    }

    /// Let the child run the command; `Err` if it could not (`execvp` failed).
    fn release(&mut self, name: &str) -> Result<()> {
        // SAFETY: write and close of our pipe end.
        unsafe {
            write_all(self.go, b"g");
            libc::close(self.go);
        }
        self.go = -1;
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reads into the rest of a local buffer.
            let n = unsafe { libc::read(self.status, buf[got..].as_mut_ptr().cast(), 4 - got) };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        if got == 4 {
            return Err(Error::CannotRun {
                command: name.to_string(),
                errno: i32::from_ne_bytes(buf),
            });
        }
        Ok(())
    }

    /// Reap the child if it ended; its resource usage then goes into `ru`.
    fn try_reap(&mut self, ru: &mut libc::rusage) -> Result<Option<Status>> {
        let mut st = 0;
        // SAFETY: wait4 on our child with valid out-pointers.
        let r = unsafe { libc::wait4(self.pid, &mut st, libc::WNOHANG, ru) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                return Ok(None);
            }
            return Err(Error::last_os("waiting for the command"));
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        Ok(Some(if libc::WIFSIGNALED(st) {
            Status::Signaled(libc::WTERMSIG(st))
        } else {
            Status::Exited(libc::WEXITSTATUS(st))
        }))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: closing our fds; killing and reaping our own child if it is still there.
        unsafe {
            if self.go >= 0 {
                libc::close(self.go); // the waiting child reads EOF and exits
            }
            libc::close(self.status);
            if !self.reaped {
                if self.go < 0 {
                    libc::kill(self.pid, libc::SIGKILL);
                }
                let mut st = 0;
                while libc::waitpid(self.pid, &mut st, 0) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
            }
        }
    }
}

/// Signal state of perfex while the command runs; restored on drop.
struct Signals {
    old_mask: libc::sigset_t,
    wait: libc::sigset_t,
    old_int: libc::sighandler_t,
    old_quit: libc::sighandler_t,
    ignoring: bool,
}

impl Signals {
    /// Block SIGCHLD (and SIGUSR1/SIGUSR2 with `-s`) so the wait loop takes them in order.
    fn block(usr: bool) -> Result<Signals> {
        // SAFETY: sigset manipulation on local values.
        unsafe {
            let mut wait: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut wait);
            libc::sigaddset(&mut wait, libc::SIGCHLD);
            if usr {
                libc::sigaddset(&mut wait, libc::SIGUSR1);
                libc::sigaddset(&mut wait, libc::SIGUSR2);
            }
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &wait, &mut old_mask);
            if rc != 0 {
                return Err(Error::Os {
                    op: "blocking signals",
                    errno: rc,
                });
            }
            Ok(Signals {
                old_mask,
                wait,
                old_int: libc::SIG_DFL,
                old_quit: libc::SIG_DFL,
                ignoring: false,
            })
        }
    }

    /// Ignore SIGINT and SIGQUIT in perfex (after the fork: the child keeps its own).
    fn ignore_interrupts(&mut self) {
        // SAFETY: setting dispositions to SIG_IGN.
        unsafe {
            self.old_int = libc::signal(libc::SIGINT, libc::SIG_IGN);
            self.old_quit = libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        }
        self.ignoring = true;
    }

    /// The next of the blocked signals.
    fn next(&self) -> Result<i32> {
        loop {
            // SAFETY: waits on a valid set.
            let s = unsafe { libc::sigwaitinfo(&self.wait, std::ptr::null_mut()) };
            if s >= 0 {
                return Ok(s);
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(Error::last_os("sigwaitinfo"));
            }
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        // SAFETY: restores what `block` and `ignore_interrupts` changed.
        unsafe {
            if self.ignoring {
                libc::signal(libc::SIGINT, self.old_int);
                libc::signal(libc::SIGQUIT, self.old_quit);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old_mask, std::ptr::null_mut());
        }
    }
}

/// One binding and the events it counts.
struct Counting {
    binding: Binding,
    events: Vec<u32>,
}

/// Bind the counters of `opts` to process `pid`.
fn bind_counters(opts: &Options, pid: i32) -> Result<(Vec<Counting>, Vec<NotCounted>)> {
    let flags = flags(opts.kernel);
    if !opts.all {
        let events = if opts.events.is_empty() {
            vec![0]
        } else {
            opts.events.clone()
        };
        let binding = bind(&pinned_set(&events, flags)?, Target::Process(pid))?;
        return Ok((vec![Counting { binding, events }], Vec::new()));
    }
    let mut counting = Vec::new();
    let mut not_counted = Vec::new();
    for e in 0..32u32 {
        let set = CounterSet::new().with(Request::new(e.to_string()).flags(flags))?;
        match bind(&set, Target::Process(pid)) {
            Ok(binding) => counting.push(Counting {
                binding,
                events: vec![e],
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

fn tv_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6
}

/// Run the command of `opts` and count it.
pub fn run(opts: &Options) -> Result<Outcome> {
    refuse_emulation()?;
    let name = opts
        .command
        .first()
        .ok_or_else(|| Error::InvalidArgument("no command to count".into()))?;
    let argv = opts
        .command
        .iter()
        .map(|a| {
            CString::new(a.as_bytes())
                .map_err(|_| Error::InvalidArgument(format!("argument {a:?} contains a NUL byte")))
        })
        .collect::<Result<Vec<_>>>()?;
    let name = name.to_string_lossy().into_owned();
    let mut sig = Signals::block(opts.signals)?;
    let mut child = Child::spawn(&argv, &sig.old_mask)?;
    sig.ignore_interrupts();
    let (counting, not_counted) = bind_counters(opts, child.pid)?;
    if opts.signals {
        for c in &counting {
            c.binding.stop()?;
        }
    }
    let start = crate::engine::now_ns();
    child.release(&name)?;
    let mut on_since = (!opts.signals).then_some(start);
    let mut counted_ns = 0i64;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let status = loop {
        match sig.next()? {
            libc::SIGCHLD => {
                if let Some(st) = child.try_reap(&mut ru)? {
                    break st;
                }
            }
            libc::SIGUSR1 if on_since.is_none() => {
                for c in &counting {
                    c.binding.resume()?;
                }
                on_since = Some(crate::engine::now_ns());
            }
            libc::SIGUSR2 => {
                if let Some(t) = on_since.take() {
                    for c in &counting {
                        c.binding.stop()?;
                    }
                    counted_ns += crate::engine::now_ns() - t;
                }
            }
            _ => {}
        }
    };
    let end = crate::engine::now_ns();
    if let Some(t) = on_since {
        counted_ns += end - t;
    }
    drop(sig);
    let map = EventMap::global();
    let on_perf = backend::global()?.info().name == "perf";
    let mut counts = Vec::new();
    for c in &counting {
        let mut v = vec![0u64; c.events.len()];
        let info = c.binding.sample(&mut v)?;
        for (&event, &raw) in c.events.iter().zip(&v) {
            let count = if info.running_ns > 0 && info.running_ns < info.enabled_ns {
                raw as f64 * info.enabled_ns as f64 / info.running_ns as f64
            } else {
                raw as f64
            };
            counts.push(Count {
                event,
                linux_event: on_perf
                    .then(|| map.host_spec(event).ok().map(str::to_string))
                    .flatten(),
                raw,
                count: count.round(),
                enabled_ns: info.enabled_ns,
                running_ns: info.running_ns,
            });
        }
    }
    Ok(Outcome {
        command: opts
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        backend: backend::global()?.info().name.clone(),
        kernel: opts.kernel,
        all: opts.all,
        counts,
        not_counted,
        elapsed_s: (end - start) as f64 * 1e-9,
        counting_s: counted_ns as f64 * 1e-9,
        user_s: tv_s(ru.ru_utime),
        system_s: tv_s(ru.ru_stime),
        status,
    })
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

    fn mode(&self) -> &'static str {
        if self.kernel {
            "user and kernel mode"
        } else {
            "user mode"
        }
    }

    /// The text report: the counts (or, with `costs`, the cost estimates and statistics),
    /// the times, and the events that could not be counted.
    pub fn text(&self, costs: Option<&CostTable>) -> String {
        let flavor = costs.map_or(Flavor::Host, |t| t.flavor);
        let mut s = format!(
            "Summary for execution of {} ({} backend, {}{})\n",
            self.command.join(" "),
            self.backend,
            self.mode(),
            if self.all {
                ", all events multiplexed"
            } else {
                ""
            }
        );
        match costs {
            Some(t) => s.push_str(&costs::format_costs(
                t,
                &self.cost_counts(),
                Some(self.counting_s),
            )),
            None => {
                for c in &self.counts {
                    s.push_str(&super::count_line(
                        flavor,
                        c.event,
                        &format!("{}", c.count as u64),
                    ));
                    if c.scaled() {
                        let pct = 100.0 * c.running_ns as f64 / c.enabled_ns as f64;
                        let _ = write!(s, "  (counted {pct:.0}% of the time, scaled)");
                    }
                    s.push('\n');
                }
            }
        }
        let _ = writeln!(
            s,
            "\nElapsed {:.6} s, counting {:.6} s, user {:.6} s, system {:.6} s",
            self.elapsed_s, self.counting_s, self.user_s, self.system_s
        );
        // Group the events not counted by reason.
        let mut reasons: Vec<(&str, Vec<u32>)> = Vec::new();
        for n in &self.not_counted {
            match reasons.iter_mut().find(|(r, _)| *r == n.reason) {
                Some((_, evs)) => evs.push(n.event),
                None => reasons.push((&n.reason, vec![n.event])),
            }
        }
        for (reason, evs) in reasons {
            let list: Vec<String> = evs.iter().map(u32::to_string).collect();
            let _ = writeln!(
                s,
                "Not counted: event{} {}: {reason}",
                if evs.len() > 1 { "s" } else { "" },
                list.join(", ")
            );
        }
        if let Status::Signaled(sig) = self.status {
            let _ = writeln!(s, "The command was killed by signal {sig}.");
        }
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
            let _ = write!(
                s,
                "{{\"event\":{},\"name\":{},\"linux_event\":{},\"count\":{},\"raw\":{},\
                 \"scaled\":{},\"enabled_ns\":{},\"running_ns\":{}",
                c.event,
                json_str(flavor.event_name(c.event as usize)),
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
fn json_str(v: &str) -> String {
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
fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(json_num(1.5), "1.5");
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(Status::Exited(3).exit_code(), 3);
        assert_eq!(Status::Signaled(9).exit_code(), 137);
    }
}

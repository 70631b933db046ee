//! `cpustat`: the Solaris command that counts events on every CPU, on the perfcompat engine.
//! Argument parsing and output only: what is counted is `perfcompat::commands::cpustat`'s, the event
//! specifications are `perfcompat::commands::eventspec`'s. `cpustat -h` lists the options and events.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use perfcompat::backend;
use perfcompat::commands::cpustat::CpuStat;
use perfcompat::CounterSet;

mod solaris;
use solaris::say;

const USAGE: &str = "\
usage: cpustat -c eventspec [-c eventspec]... [-p period] [-sntD] [-T d|u] [interval [count]]
       cpustat -h

  -c spec   the events of one set: [picn=]event[,attr[n][=val]][,[picn=]event...], with the
            tokens nouser[n] (no user mode) and sys[n] (kernel mode too); several -c options
            are counted in turn
  -p period with several sets, move to the next one every period seconds, rounded to whole
            intervals (default: every interval)
  -s        run a soaker thread on each CPU (lowest priority, SCHED_IDLE) so that no CPU idles
  -n        no column titles
  -t        add a column with the time-stamp counter's ticks over the interval (x86-64)
  -T d|u    print a time stamp before each sample: d as a date, u as seconds since the epoch
  -D        debug: name the engine call that failed in messages
  -h        this text and the events, generic events and attributes of the backend in force
  interval  seconds between samples (fractions allowed; default 5)
  count     number of samples (default: until interrupted)

Counting every CPU needs perf_event_paranoid 0 or less, CAP_PERFMON or root. After the last
sample and on Ctrl-C, a total line per set: everything it counted. Exit status: 0, 1 when
counting failed or the output could not be written, 2 for a usage error (conflicts included). Environment: PERFCOMPAT_BACKEND, PERFCOMPAT_EVENTS (see perfcompat(7)).";

struct Args {
    specs: Vec<String>,
    period: Option<f64>,
    soak: bool,
    no_titles: bool,
    tick: bool,
    stamp: Option<char>,
    debug: bool,
    interval: f64,
    count: Option<u64>,
}

fn parse(argv: Vec<OsString>) -> Result<Option<Args>, String> {
    let mut a = Args {
        specs: Vec::new(),
        period: None,
        soak: false,
        no_titles: false,
        tick: false,
        stamp: None,
        debug: false,
        interval: 5.0,
        count: None,
    };
    // As Solaris getopt(3C): the first operand ends the options (`cpustat 1 3 -n` has three
    // operands, not an option after two).
    let (opts, rest) = solaris::getopt(solaris::utf8(argv)?, "cpT", true)?;
    for (c, v) in opts {
        match c {
            'h' => return Ok(None),
            'c' => a.specs.push(v),
            'p' => a.period = Some(solaris::seconds(&v, "-p", false)?),
            'T' => {
                a.stamp = match v.as_str() {
                    "d" => Some('d'),
                    "u" => Some('u'),
                    _ => return Err(format!("-T takes d or u, not '{v}'")),
                }
            }
            's' => a.soak = true,
            'n' => a.no_titles = true,
            't' => a.tick = true,
            'D' => a.debug = true,
            other => return Err(format!("unknown option -{other}")),
        }
    }
    if a.specs.is_empty() {
        return Err("no -c eventspec: say what to count (cpustat -h lists the events)".into());
    }
    match rest.as_slice() {
        [] => {}
        [i] => a.interval = solaris::seconds(i, "the interval", false)?,
        [i, n] => {
            a.interval = solaris::seconds(i, "the interval", false)?;
            a.count = Some(
                n.parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("the count must be a positive number, not '{n}'"))?,
            );
        }
        _ => return Err("too many arguments: [interval [count]]".into()),
    }
    if a.tick && !cfg!(target_arch = "x86_64") {
        // arm64's nearest counter, CNTVCT_EL0, ticks at the system timer's frequency
        // (CNTFRQ_EL0, often tens of MHz), not in processor cycles: not offered as one.
        return Err(
            "-t reads the time-stamp counter, which only x86-64 has (arm64's system \
                    timer count is not a cycle count)"
                .into(),
        );
    }
    Ok(Some(a))
}

/// The time-stamp counter (x86-64; 0 elsewhere).
#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// The time-stamp counter (x86-64; 0 elsewhere, where `-t` is refused: see `parse`).
#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}

/// Standard output with every write checked.
struct Stdout<W: Write>(W);

impl<W: Write> Stdout<W> {
    /// Write and flush `text`; on a failure say so (naming the output) and return false.
    fn put(&mut self, text: &str) -> bool {
        match self
            .0
            .write_all(text.as_bytes())
            .and_then(|()| self.0.flush())
        {
            Ok(()) => true,
            Err(e) => {
                say(format_args!(
                    "cpustat: cannot write the standard output: {}",
                    perfcompat::base::error::io_text(&e)
                ));
                false
            }
        }
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Sleep until `deadline` or an interrupt; false when interrupted.
fn sleep_until(deadline: Instant) -> bool {
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

/// A busy thread pinned to `cpu` at the lowest priority (`-s`).
fn soaker(cpu: u32) {
    std::thread::spawn(move || {
        // SAFETY: plain system calls on the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            let p = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
        }
        loop {
            std::hint::spin_loop();
            if INTERRUPTED.load(Ordering::Relaxed) {
                return;
            }
        }
    });
}

fn title(sets: &[CounterSet], set: usize, tick: bool) -> String {
    let mut s = format!("{:>7} {:>3} {:>5} ", "time", "cpu", "event");
    if tick {
        s.push_str(&format!("{:>9} ", "tsc"));
    }
    for r in sets[set].requests() {
        // cpustat's "%8s%-2d " cut to 10 characters: the column of a "%9d " count (issue 30:
        // the space was added after the cut, so the second column was one too wide).
        let mut h = format!("{:>8}{:<2} ", "pic", r.counter.unwrap_or(0));
        h.truncate(10);
        s.push_str(&h);
    }
    s.trim_end().to_string() + "\n"
}

fn main() -> ExitCode {
    let a = match parse(std::env::args_os().skip(1).collect()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            let mut out = Stdout(std::io::stdout().lock());
            let written = match backend::global() {
                Ok(b) => out.put(&solaris::help(USAGE, b)),
                Err(e) => {
                    let written = out.put(&format!("{USAGE}\n"));
                    say(format_args!("cpustat: {e}"));
                    written
                }
            };
            return ExitCode::from(u8::from(!written));
        }
        Err(m) => {
            say(format_args!("{}", solaris::usage_message("cpustat", &m)));
            return ExitCode::from(perfcompat::commands::USAGE_STATUS);
        }
    };
    let who = |f: &str| {
        if a.debug {
            format!("cpustat: {f}: ")
        } else {
            "cpustat: ".into()
        }
    };
    let b = match backend::global() {
        Ok(b) => b,
        Err(e) => {
            say(format_args!("{}{e}", who("backend")));
            return ExitCode::from(1);
        }
    };
    let sets = match solaris::parse_specs(&a.specs, b) {
        Ok(s) => s,
        Err(e) => {
            say(format_args!("{}{e}", who("cpc_set_add_request")));
            return ExitCode::from(solaris::spec_status(&e));
        }
    };
    let mut stat = match CpuStat::start(b, sets.clone()) {
        Ok(s) => s,
        Err(e) => {
            say(format_args!("{}{e}", who("cpc_bind_cpu")));
            return ExitCode::from(perfcompat::commands::failure_status(&e));
        }
    };
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    if a.soak {
        for &c in stat.cpus() {
            soaker(c);
        }
    }
    let several = sets.len() > 1;
    // The set changes after every `per_set` samples (the period rounded to intervals).
    let per_set = (a.period.unwrap_or(a.interval) / a.interval)
        .round()
        .max(1.0) as u64;
    let interval = Duration::from_secs_f64(a.interval);
    let start = Instant::now();
    let mut out = Stdout(std::io::stdout().lock());
    let mut next = start + interval;
    let mut tick0 = tsc();
    let mut samples = 0u64;
    let mut titled = None;
    let status = loop {
        let on = sleep_until(next);
        let now = Instant::now();
        let t = (now - start).as_secs_f64();
        let tick1 = tsc();
        if !on {
            // Interrupted in the middle of an interval: what it counted so far goes into the
            // totals (no line of its own).
            if let Err(e) = stat.sample() {
                say(format_args!("{}{e}", who("cpc_set_sample")));
                break 1;
            }
            break 0;
        }
        let set = stat.current();
        let rows = match stat.sample() {
            Ok(r) => r,
            Err(e) => {
                say(format_args!("{}{e}", who("cpc_set_sample")));
                break 1;
            }
        };
        let mut text = String::new();
        if !a.no_titles && titled != Some(set) {
            text.push_str(&title(&sets, set, a.tick));
            titled = Some(set);
        }
        match a.stamp {
            Some('u') => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                text.push_str(&format!("{secs}\n"));
            }
            Some(_) => {
                let mut now_t: libc::time_t = 0;
                let mut buf = [0 as libc::c_char; 64];
                // SAFETY: time and ctime_r with a buffer of 26 bytes or more.
                let d = unsafe {
                    libc::time(&mut now_t);
                    libc::ctime_r(&now_t, buf.as_mut_ptr());
                    std::ffi::CStr::from_ptr(buf.as_ptr())
                        .to_string_lossy()
                        .into_owned()
                };
                text.push_str(&d);
            }
            None => {}
        }
        for r in rows {
            let mut line = format!("{t:>7.3} {:>3} {:>5} ", r.cpu, "tick");
            if a.tick {
                line.push_str(&format!("{:>9} ", tick1.wrapping_sub(tick0)));
            }
            for d in &r.deltas {
                line.push_str(&format!("{d:>9} "));
            }
            if several {
                line.push_str(&format!("# {}", a.specs[r.set]));
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        if !out.put(&text) {
            break 1;
        }
        tick0 = tick1;
        samples += 1;
        if a.count.is_some_and(|c| samples >= c) {
            break 0;
        }
        next += interval;
        if several && samples % per_set == 0 {
            if let Err(e) = stat.next_set() {
                say(format_args!("{}{e}", who("cpc_bind_cpu")));
                break 1;
            }
        }
    };
    let mut status = status;
    if status == 0 {
        // The total line per set, after the last sample or on Ctrl-C, as the original printed
        // it: everything counted, the last partial interval of an interrupt included.
        let t = start.elapsed().as_secs_f64();
        let mut text = String::new();
        for (k, tot) in stat.totals().iter().enumerate() {
            let mut line = format!("{t:>7.3} {:>3} {:>5} ", stat.cpus().len(), "total");
            if a.tick {
                line.push_str(&format!("{:>9} ", ""));
            }
            for v in tot {
                line.push_str(&format!("{v:>9} "));
            }
            if several {
                line.push_str(&format!("# {}", a.specs[k]));
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        if !out.put(&text) {
            status = 1;
        }
    }
    stat.stop();
    ExitCode::from(status)
}

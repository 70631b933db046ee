//! `cputrack`: the Solaris command that counts events in each LWP of a process (or a family
//! of processes), on the perfcompat engine. Argument parsing and output only: what is counted
//! is `perfcompat::commands::cputrack`'s, the event specifications are `perfcompat::commands::eventspec`'s.
//! `cputrack -h` lists the options and events.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perfcompat::backend;
use perfcompat::commands::cputrack::{self, Options, Subject};
use perfcompat::Error;

mod cputrack_out;
mod solaris;

use cputrack_out::Out;
use solaris::say;

const USAGE: &str = "\
usage: cputrack -c eventspec [-c eventspec]... [-efntvD] [-N count] [-o file] [-T interval]
                command [args]
       cputrack -c eventspec [-c eventspec]... -p pid [-efntvD] [-N count] [-o file]
                [-T interval]
       cputrack -h

  -c spec     the events of one set: [picn=]event[,attr[n][=val]][,[picn=]event...], with the
              tokens nouser[n] (no user mode) and sys[n] (kernel mode too); several -c
              options take turns, one set per sample
  -e          go on counting a process after it executes a new program (exec)
  -f          also track the children created by fork, each to its end
  -n          no column titles
  -N count    stop after count samples of each process (a command is then waited for, not
              counted; a -p process is let go)
  -o file     write the output to file
  -p pid      track the running process pid (every thread; let go at the end)
  -t          add a tsc column: each LWP's CPU time over the sample, in cycles
  -T interval seconds between samples (fractions allowed; default 1; 0: sample only when an
              LWP ends, or the process forks, execs or exits)
  -v          verbose: init_lwp and fini_lwp lines for each LWP, fork lines
  -D          debug: name the engine call that failed in messages
  -h          this text and the events, generic events and attributes of the backend in force

Exit status: the command's (128 + N when signal N killed it); 0 with -p; 1 when counting
failed or the output could not be written; 2 for a usage error (conflicts included); 126 or 127 when the command
cannot run. Environment: PERFCOMPAT_BACKEND, PERFCOMPAT_EVENTS (see perfcompat(7)).";

struct Args {
    specs: Vec<String>,
    opts: Options,
    no_titles: bool,
    debug: bool,
    output: Option<String>,
    pid: Option<i32>,
    command: Vec<String>,
}

fn parse(argv: Vec<OsString>) -> Result<Option<Args>, String> {
    let mut a = Args {
        specs: Vec::new(),
        opts: Options {
            sets: Vec::new(),
            interval: Some(Duration::from_secs(1)),
            samples: 0,
            follow_fork: false,
            follow_exec: false,
            verbose: false,
            cycles: false,
        },
        no_titles: false,
        debug: false,
        output: None,
        pid: None,
        command: Vec::new(),
    };
    let (opts, rest) = solaris::getopt(solaris::utf8(argv)?, "cNopT", true)?;
    for (c, v) in opts {
        match c {
            'h' => return Ok(None),
            'c' => a.specs.push(v),
            'e' => a.opts.follow_exec = true,
            'f' => a.opts.follow_fork = true,
            'n' => a.no_titles = true,
            't' => a.opts.cycles = true,
            'v' => a.opts.verbose = true,
            'D' => a.debug = true,
            'N' => {
                a.opts.samples =
                    v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("-N takes a positive number of samples, not '{v}'")
                    })?
            }
            'o' => a.output = Some(v),
            'p' => {
                a.pid = Some(
                    v.parse::<i32>()
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| format!("-p takes a process id, not '{v}'"))?,
                )
            }
            'T' => {
                let s = solaris::seconds(&v, "-T", true)?;
                a.opts.interval = (s > 0.0).then(|| Duration::from_secs_f64(s));
            }
            other => return Err(format!("unknown option -{other}")),
        }
    }
    if a.specs.is_empty() {
        return Err("no -c eventspec: say what to count (cputrack -h lists the events)".into());
    }
    a.command = rest;
    match (a.pid, a.command.is_empty()) {
        (Some(_), false) => return Err("give either a command or -p pid, not both".into()),
        (None, true) => return Err("no command to run and no -p pid".into()),
        _ => {}
    }
    Ok(Some(a))
}

/// SIGPIPE's handler: nothing. A write to a closed pipe then fails with EPIPE, which is
/// reported, and the command, which inherits every ignored signal across exec but no handler,
/// gets SIGPIPE's default action as it would without cputrack (ignoring it, as Rust programs
/// do, would change how `yes | head` ends under cputrack).
extern "C" fn on_sigpipe(_: libc::c_int) {}

/// Install [`on_sigpipe`].
fn catch_sigpipe() {
    // SAFETY: a handler that does nothing, installed with a zeroed (empty) mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigpipe as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGPIPE, &sa, std::ptr::null_mut());
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// The exit status for an error: 126/127 when the command cannot run, 2 for conflicting
/// requests, else 1 ([`perfcompat::commands::failure_status`]).
fn failure(e: &Error) -> ExitCode {
    ExitCode::from(perfcompat::commands::failure_status(e))
}

fn track<W: Write>(a: &Args, mut out: Out<W>) -> ExitCode {
    let who = |f: &str| {
        if a.debug {
            format!("cputrack: {f}: ")
        } else {
            "cputrack: ".into()
        }
    };
    if !a.no_titles {
        out.pending_title = Some(out.title(&a.opts.sets[0]));
    }
    let subject = match a.pid {
        Some(p) => {
            // SAFETY: installing a handler that only stores to an atomic.
            unsafe {
                libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
            }
            Subject::Pid(p)
        }
        None => Subject::Command(a.command.iter().map(OsString::from).collect()),
    };
    let ran = cputrack::run(&a.opts, &subject, &mut out, Some(&INTERRUPTED));
    if out.failed {
        // The lines are not all there (the last ones included: the exit lines): status 1,
        // the write error already said.
        return ExitCode::from(1);
    }
    match ran {
        Ok(Some(status)) if a.pid.is_none() => {
            ExitCode::from(status.exit_code().clamp(0, 255) as u8)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let call = if a.pid.is_some() {
                "pctx_capture"
            } else {
                "pctx_run"
            };
            say(format_args!("{}{e}", who(call)));
            failure(&e)
        }
    }
}

fn main() -> ExitCode {
    let mut a = match parse(std::env::args_os().skip(1).collect()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            let mut out = Out::new(std::io::stdout(), &[], &[], false, false);
            let written = match backend::global() {
                Ok(b) => out.put(&solaris::help(USAGE, b)),
                Err(e) => {
                    let written = out.put(&format!("{USAGE}\n"));
                    say(format_args!("cputrack: {e}"));
                    written
                }
            };
            return ExitCode::from(u8::from(written.is_err()));
        }
        Err(m) => {
            say(format_args!("{}", solaris::usage_message("cputrack", &m)));
            return ExitCode::from(perfcompat::commands::USAGE_STATUS);
        }
    };
    let b = match backend::global() {
        Ok(b) => b,
        Err(e) => {
            say(format_args!("cputrack: {e}"));
            return ExitCode::from(1);
        }
    };
    a.opts.sets = match solaris::parse_specs(&a.specs, b) {
        Ok(s) => s,
        Err(e) => {
            let who = if a.debug {
                "cputrack: cpc_set_add_request: "
            } else {
                "cputrack: "
            };
            say(format_args!("{who}{e}"));
            return ExitCode::from(solaris::spec_status(&e));
        }
    };
    catch_sigpipe();
    let (pid, tsc) = (a.opts.follow_fork, a.opts.cycles);
    match &a.output {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => {
                let mut out = Out::new(f, &a.opts.sets, &a.specs, pid, tsc);
                out.name.clone_from(path);
                track(&a, out)
            }
            Err(e) => {
                say(format_args!(
                    "cputrack: cannot write {path}: {}",
                    perfcompat::base::error::io_text(&e)
                ));
                ExitCode::from(1)
            }
        },
        None => track(
            &a,
            Out::new(std::io::stdout(), &a.opts.sets, &a.specs, pid, tsc),
        ),
    }
}

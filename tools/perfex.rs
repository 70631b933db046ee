//! `perfex`: run a command and report its event counts and cost estimates, as IRIX perfex(1)
//! did, on the perfcompat engine. `perfex --help` lists the options; docs/commands.md,
//! docs/differences.md and `perfcompat::commands::perfex` document the decisions.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use perfcompat::api::costs;
use perfcompat::api::perfex;
use perfcompat::base::error::io_text;
use perfcompat::base::notice;
use perfcompat::commands::perfex::mpi;
use perfcompat::commands::perfex::{self as command, Options};

const USAGE: &str = "\
usage: perfex [-a | -e event0 [-e event1]] [-mp | -s] [-x] [-k] [-y] [-t] [-T] [-o file] [-c file]
              [--json] command [args...]
       perfex -t [-c file]
       perfex -l
       perfex --calibrate [--quick]
       mpirun ... perfex --mpi PREFIX [options] command [args...]
       perfex --merge [--json] [-o file] PREFIX.0 PREFIX.1 ...

  -e N      count R10000 event N (0-31; at most two, not two of the same counter: 0-15 are
            counter 0, 16-31 counter 1); default: event 0, cycles
  -a        count all 32 events, multiplexed; totals are scaled (and may be inaccurate)
  -mp       report each thread (and each descendant process's threads), then the totals
            (perfex traces the command with ptrace to see threads start and end)
  -s        count only between SIGUSR1 and SIGUSR2 sent to perfex
  -k, -x    count in kernel mode too (Linux handles exceptions in the kernel); needs
            perf_event_paranoid <= 1 or CAP_PERFMON
  -y        report cost estimates and derived statistics instead of bare counts
  -t        print the cost table in force (the cost file format) on standard output
  -l, --list  list the events: each R10000 number, the Linux event it becomes and whether it
            counts on this host, then the backend's other events
  -c file   load a cost table file over the default one (for -y and -t)
  -o file   write the report to file instead of standard error
  -T        accepted for compatibility (mixed-CPU systems); no effect
  --json    write the report as one JSON object
  --mpi PREFIX  for each rank of an MPI job: write this rank's counts to PREFIX.<rank> (the
            rank from the launcher's environment: OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or
            SLURM_PROCID) instead of the report; -o still writes the report too
  --merge   print the job report of the rank files (per rank, then per event min/max with
            their ranks, mean, sum, max/mean) on standard output
  --calibrate  measure this machine's latencies and cache the host cost table
  --quick   with --calibrate: a shorter, rougher measurement

The exit status is the command's (128 + N when signal N killed it); 2 for a usage error
(conflicting options or counters included),
1 when counting failed or the report could not be written, 126/127 when the command could
not be run.
Environment: PERFCOMPAT_BACKEND, PERFCOMPAT_EVENTS (event map), PERFCOMPAT_STANDIN (software
stand-ins without a PMU), PERFCOMPAT_SYSTEM_COSTS, PERFCOMPAT_HOST_COSTS (see perfcompat(7)).";

#[derive(Default)]
struct Args {
    opts: Options,
    costs: bool,
    table: bool,
    cost_file: Option<PathBuf>,
    output: Option<PathBuf>,
    json: bool,
    calibrate: bool,
    quick: bool,
    mpi: Option<PathBuf>,
    merge: bool,
    list: bool,
}

/// An error line on standard error, written with one `write(2)` (issue 46 item 6), never a
/// panic: when standard error is gone (a closed pipe, a full disk) nothing is left to tell, and
/// the exit status says it. The notices kept for a `--json` report that will not be written go
/// first, in their order.
fn say(msg: std::fmt::Arguments) {
    notice::release();
    notice::write_stderr(&format!("perfex: {msg}\n"));
}

/// A notice: on standard error, or with `--json` in the report's `notices` (issue 46 item 7).
fn note(msg: std::fmt::Arguments) {
    notice::write(&format!("perfex: {msg}\n"));
}

/// Write `text` to standard output, flushed; a failure is said and is status 1.
fn print(text: &str) -> Result<(), ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| {
            say(format_args!(
                "cannot write the standard output: {}",
                io_text(&e)
            ));
            ExitCode::from(1)
        })
}

/// Run the command with SIGPIPE's default action, as without perfex: Rust programs ignore
/// SIGPIPE (so that a write to a closed pipe fails with EPIPE, reported as status 1), and an
/// ignored signal stays ignored across exec; a handler that does nothing keeps the EPIPE here
/// and is reset to the default by exec.
fn default_sigpipe_for_the_command() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: installing a handler that does nothing, with an empty mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGPIPE, &sa, std::ptr::null_mut());
    }
}

fn usage_error(msg: &str) -> ExitCode {
    say(format_args!("{msg} (perfex --help lists the options)"));
    ExitCode::from(perfcompat::commands::USAGE_STATUS)
}

fn event(v: &OsString) -> Result<u32, String> {
    let s = v.to_string_lossy();
    perfcompat::api::perfex::parse_event(&s).map_err(|_| {
        format!("-e {s}: not an R10000 event number (events are 0-31; perfex -l lists them)")
    })
}

/// Parse the command line; `Err` is a usage error message.
fn parse(argv: Vec<OsString>) -> Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = argv.into_iter();
    let value = |it: &mut std::vec::IntoIter<OsString>, opt: &str| {
        it.next().ok_or_else(|| format!("{opt} needs an argument"))
    };
    while let Some(arg) = it.next() {
        let bytes = arg.as_bytes();
        if bytes.first() != Some(&b'-') || bytes == b"-" {
            a.opts.command.push(arg);
            break;
        }
        match arg.to_string_lossy().as_ref() {
            "--" => break,
            "-h" | "--help" => return Ok(None),
            "-a" => a.opts.all = true,
            "-e" => a.opts.events.push(event(&value(&mut it, "-e")?)?),
            e if e.starts_with("-e") => a.opts.events.push(event(&OsString::from(&e[2..]))?),
            "-s" => a.opts.signals = true,
            "-k" | "-x" => a.opts.kernel = true,
            "-y" => a.costs = true,
            "-t" => a.table = true,
            "-l" | "--list" => a.list = true,
            "-T" => {}
            "-o" => a.output = Some(value(&mut it, "-o")?.into()),
            "-c" => a.cost_file = Some(value(&mut it, "-c")?.into()),
            "--json" => a.json = true,
            "--mpi" | "-mpi" => a.mpi = Some(value(&mut it, "--mpi")?.into()),
            "--merge" => a.merge = true,
            "--calibrate" => a.calibrate = true,
            "--quick" => a.quick = true,
            "-mp" => a.opts.per_thread = true,
            "-p" => return Err("-p (periodic sampling) is not supported: use perf record".into()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    a.opts.command.extend(it);
    if a.opts.all && !a.opts.events.is_empty() {
        return Err("-a and -e exclude each other".into());
    }
    if a.opts.events.len() > 2 {
        return Err("at most two -e events (the R10000 has two counters; -a counts all)".into());
    }
    if a.opts.per_thread && a.opts.signals {
        return Err("-mp and -s exclude each other".into());
    }
    if a.quick && !a.calibrate {
        return Err("--quick goes with --calibrate".into());
    }
    if a.calibrate && !a.opts.command.is_empty() {
        return Err("--calibrate takes no command".into());
    }
    if a.merge && (a.mpi.is_some() || a.calibrate || a.table || a.costs) {
        return Err("--merge takes rank files only (and --json, -o)".into());
    }
    if a.merge && a.opts.command.is_empty() {
        return Err("--merge: no rank files (perfex --mpi PREFIX writes PREFIX.<rank>)".into());
    }
    if a.list && (!a.opts.command.is_empty() || a.merge || a.calibrate || a.mpi.is_some()) {
        return Err("-l takes no command".into());
    }
    if a.opts.command.is_empty() && !a.table && !a.calibrate && !a.list {
        return Err("no command to count".into());
    }
    Ok(Some(a))
}

/// `perfex --calibrate`: measure, print what was measured, cache the host table.
fn calibrate(quick: bool) -> ExitCode {
    use perfcompat::commands::calibrate::{calibrate_and_cache, CalibrateOptions};
    match calibrate_and_cache(&CalibrateOptions { quick }) {
        Ok((cal, path)) => {
            let text = format!(
                "{}Host cost table written to {}\n",
                cal.report(),
                path.display()
            );
            print(&text).map_or_else(|c| c, |()| ExitCode::SUCCESS)
        }
        Err(e) => {
            say(format_args!("calibration failed: {e}"));
            ExitCode::from(1)
        }
    }
}

/// `perfex --merge`: the job report of the rank files.
fn merge(a: &Args) -> ExitCode {
    let mut records = Vec::new();
    for f in &a.opts.command {
        let name = f.to_string_lossy();
        let r = std::fs::read(f)
            .map_err(|e| perfcompat::Error::FileUnreadable {
                file: name.to_string(),
                errno: e.raw_os_error().unwrap_or(libc::EIO),
            })
            .and_then(|bytes| mpi::RankRecord::decode(&String::from_utf8_lossy(&bytes), &name));
        match r {
            Ok(r) => records.push(r),
            Err(e) => {
                say(format_args!("--merge: {e}"));
                return ExitCode::from(1);
            }
        }
    }
    let merged = match mpi::merge(records) {
        Ok(m) => m,
        Err(e) => {
            say(format_args!("--merge: {e}"));
            return ExitCode::from(1);
        }
    };
    let mut report = if a.json { merged.json() } else { merged.text() };
    if a.json {
        report.push('\n');
    }
    let written = match &a.output {
        Some(p) => {
            std::fs::write(p, report).map_err(|e| format!("-o {}: {}", p.display(), io_text(&e)))
        }
        None => std::io::stdout()
            .write_all(report.as_bytes())
            .and_then(|()| std::io::stdout().flush())
            .map_err(|e| format!("the standard output: {}", io_text(&e))),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(format_args!("--merge: {e}"));
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let code = run();
    // Notices kept for a JSON report that was not written (an early failure says its error
    // first) go to standard error last.
    notice::release();
    code
}

fn run() -> ExitCode {
    let a = match parse(std::env::args_os().skip(1).collect()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            return print(&format!("{USAGE}\n")).map_or_else(|c| c, |()| ExitCode::SUCCESS);
        }
        Err(msg) => return usage_error(&msg),
    };
    if a.json && !a.merge {
        // The report may go to standard error, which notices share: keep them for the report's
        // "notices" so that `2> f.json` is JSON (issue 46 item 7).
        notice::capture();
    }
    if a.calibrate {
        return calibrate(a.quick);
    }
    if a.list {
        return match command::listing() {
            Ok(text) => print(&text).map_or_else(|c| c, |()| ExitCode::SUCCESS),
            Err(e) => {
                say(format_args!("-l: {e}"));
                ExitCode::from(1)
            }
        };
    }
    if a.merge {
        return merge(&a);
    }
    // Under an MPI launcher, each rank's record goes to PREFIX.<rank>: know the rank before
    // the command runs.
    let mpi_file = match &a.mpi {
        Some(prefix) => match mpi::rank_from_env() {
            Ok(rank) => {
                let mut f = prefix.clone().into_os_string();
                f.push(format!(".{rank}"));
                Some((rank, PathBuf::from(f)))
            }
            Err(e) => {
                say(format_args!("--mpi: {e}"));
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    if let Some(f) = &a.cost_file {
        if let Err(e) = costs::load(f) {
            say(format_args!("-c: {e}"));
            return ExitCode::from(1);
        }
    }
    if a.table {
        if let Err(code) = print(&costs::current().dump()) {
            return code;
        }
        if a.opts.command.is_empty() {
            return ExitCode::SUCCESS;
        }
    }
    // Open the report file before the command runs, so a bad path costs nothing.
    let (mut out, out_name): (Box<dyn Write>, String) = match &a.output {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => (Box::new(f), p.display().to_string()),
            Err(e) => {
                say(format_args!("-o {}: {}", p.display(), io_text(&e)));
                return ExitCode::from(1);
            }
        },
        None if mpi_file.is_some() => (Box::new(std::io::sink()), String::new()),
        None => (Box::new(std::io::stderr()), "the standard error".into()),
    };
    if a.opts.all {
        note(format_args!(
            "-a counts all 32 events multiplexed over the PMU's counters; each total is \
             scaled from the time it was counted and may be inaccurate"
        ));
    }
    default_sigpipe_for_the_command();
    // Hand the events to the command, so that libperfex in it counts each thread from its
    // start (`perfcompat::api::perfex::adopt_handoff`); with -a or -s, or an outer perfex's value,
    // nothing is handed over. Set here, while perfex has one thread.
    match a.opts.handoff() {
        Some(h) => std::env::set_var(perfex::HANDOFF_VAR, h.to_value()),
        None => std::env::remove_var(perfex::HANDOFF_VAR),
    }
    let outcome = match command::run(&a.opts) {
        Ok(o) => o,
        Err(e) => {
            say(format_args!("{e}"));
            return ExitCode::from(perfcompat::commands::failure_status(&e));
        }
    };
    if let Some((rank, path)) = &mpi_file {
        let record = mpi::RankRecord::from_outcome(*rank, &mpi::hostname(), &outcome);
        if let Err(e) = std::fs::write(path, record.encode()) {
            say(format_args!("--mpi: {}: {}", path.display(), io_text(&e)));
            return ExitCode::from(1);
        }
    }
    let table = a.costs.then(costs::current);
    let report = if a.json {
        outcome.json_with_notices(table.as_ref(), &notice::take())
    } else {
        outcome.text(table.as_ref())
    };
    if let Err(e) = out.write_all(report.as_bytes()).and_then(|_| out.flush()) {
        say(format_args!(
            "writing the report to {out_name}: {}",
            io_text(&e)
        ));
        return ExitCode::from(1);
    }
    ExitCode::from(outcome.status.exit_code().clamp(0, 255) as u8)
}

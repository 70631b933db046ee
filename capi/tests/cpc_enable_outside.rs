//! cpc_enable(3CPC)'s first example run under a controller: a program with no set of its own
//! calls `cpc_disable` before work it does not want counted and `cpc_enable` after it, and the
//! counters a controller bound to its threads from outside (our `cputrack`, and a libpctx
//! client binding with `cpc_bind_pctx`, tests/c/pctx_events.c) see nothing of that work
//! (issue 30, item 3: they counted it). Run alone, the calls return 0 and say nothing.
//! The program, tests/c/cpc_enable_target.c, touches A pages, disables, B pages, enables, C
//! pages, on its main thread and then on a second thread: each thread's count is A + C page
//! faults (and the main thread's start-up), never B.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, cputrack_bin, run_output, run_traced};

const A: u64 = 200;
const B: u64 = 20000;
const C: u64 = 300;

fn target() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_enable_target", &["-pthread"]))
}

fn client() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("pctx_events", &[]))
}

/// `before`, then the target with its A B C and a second thread.
fn command(before: &[&str]) -> Vec<String> {
    let t = target().display().to_string();
    let mut argv: Vec<String> = before.iter().map(|a| a.to_string()).collect();
    argv.push(t);
    argv.extend([A, B, C].iter().map(u64::to_string));
    argv.push("thread".into());
    argv
}

/// Run `bin` with `args`; `None` (after a SKIPPED line) where tracing is not allowed.
fn traced(bin: &Path, args: &[String]) -> Option<String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, stderr, out) = run_traced(bin, &args)?;
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    assert_eq!(
        stderr, "",
        "{args:?} wrote to standard error; stdout: {stdout}"
    );
    Some(stdout)
}

/// The second thread counts exactly its A + C pages (and a few faults of its own start):
/// within 5 % above. The main thread has the program's start-up besides: A + C up to twice.
fn check(who: &str, main: u64, thread: u64, out: &str) {
    let pages = A + C;
    assert!(
        (pages..=pages + pages / 20).contains(&thread),
        "{who}: the second thread counted {thread} page faults, want {pages} (+5%): the \
         {B} pages touched while it was disabled must not count\n{out}"
    );
    assert!(
        (pages..=2 * pages).contains(&main),
        "{who}: the main thread counted {main} page faults, want {pages} and its start-up, \
         not the {B} pages touched while disabled\n{out}"
    );
}

#[test]
fn alone_the_calls_return_zero_and_say_nothing() {
    let out = run_output(target(), "perf", &["10", "10", "10", "thread"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn cputrack_does_not_count_what_the_program_disabled() {
    // With -v each LWP's counts at its end are on its fini_lwp line ("  0.123   2   fini_lwp
    // 503"): an LWP that no tick sampled has no lwp_exit line, as with Sun's cputrack (issue 45
    // item 10). The exit line has the process's.
    let Some(out) = traced(&cputrack_bin(), &command(&["-v", "-c", "page-faults"])) else {
        return;
    };
    let count = |lwp: &str, event: &str| -> u64 {
        out.lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 4 && w[1] == lwp && w[2] == event).then(|| w[3].parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no {event} line of LWP {lwp}: {out}"))
    };
    let (main, thread) = (count("1", "fini_lwp"), count("2", "fini_lwp"));
    assert_eq!(main + thread, count("1", "exit"), "{out}");
    check("cputrack", main, thread, &out);
}

#[test]
fn a_libpctx_client_does_not_count_what_the_program_disabled() {
    let Some(out) = traced(client(), &command(&["track", "20"])) else {
        return;
    };
    // "[p] fini #PID LWP faults N"
    let faults = |lwp: &str| -> u64 {
        out.lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 6 && w[1] == "fini" && w[3] == lwp).then(|| w[5].parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no fini line for LWP {lwp}: {out}"))
    };
    check("libpctx client", faults("1"), faults("2"), &out);
}

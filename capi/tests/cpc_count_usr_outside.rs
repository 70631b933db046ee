//! cpc_count_usr_events(3CPC)'s example run under a controller (issue 45 item 4): a program
//! with no context of its own turns the counting of user events off around code it does not
//! want measured and on around the code it does, and the counters a controller bound to it
//! from outside (our `cputrack`, a libpctx client with `cpc_bind_pctx`) count only the
//! measured part, as version 2's `cpc_enable`/`cpc_disable` do there
//! (capi/tests/cpc_enable_outside.rs). We counted everything: 4,100 page faults where 1,100
//! were enabled, and each call printed "count_usr_events: no performance counter context".
//! Run alone, each call returns -1 with `errno` `EINVAL` and says nothing (item 5).
//! The program is tests/c/cpc_count_usr_target.c: off, A pages, on, B pages, off, C pages.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, cputrack_bin, run_output, run_traced};

const A: u64 = 3000;
const B: u64 = 1000;
const C: u64 = 3000;

fn target() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_count_usr_target", &[]))
}

fn client() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("pctx_events", &[]))
}

/// `before`, then the target with its A B C, traced.
fn command(before: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = before.iter().map(|a| a.to_string()).collect();
    argv.push(target().display().to_string());
    argv.extend([A, B, C].iter().map(u64::to_string));
    argv.push("traced".into());
    argv
}

/// Run `bin` with `args`; `None` (after a SKIPPED line) where tracing is not allowed.
fn traced(bin: &Path, args: &[String]) -> Option<(String, String, bool)> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, stderr, out) = run_traced(bin, &args)?;
    Some((stdout, stderr, out.status.success()))
}

/// The process counted B pages and its start-up (before its first call), never A or C.
fn check(who: &str, count: u64, out: &str, err: &str, ok: bool) {
    assert!(
        (B..B + A / 3).contains(&count),
        "{who}: the program counted {count} page faults, want the {B} touched while user \
         events were enabled (and its start-up), not the {A} + {C} touched while \
         disabled\n{out}\n{err}"
    );
    assert!(ok && err.is_empty(), "{who}: {out}\n{err}");
}

#[test]
fn alone_each_call_fails_with_einval_and_says_nothing() {
    let out = run_output(target(), "perf", &["10", "10", "10", "alone"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.is_empty(), "{out:?}");
}

#[test]
fn cputrack_counts_what_the_program_enabled() {
    let Some((out, err, ok)) = traced(&cputrack_bin(), &command(&["-c", "page-faults"])) else {
        return;
    };
    // "  0.030   1       exit      1103": the process's count.
    let total = out
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 4 && w[2] == "exit").then(|| w[3].parse::<u64>().unwrap())
        })
        .unwrap_or_else(|| panic!("no exit line: {out}\n{err}"));
    check("cputrack", total, &out, &err, ok);
}

#[test]
fn a_libpctx_client_counts_what_the_program_enabled() {
    let Some((out, err, ok)) = traced(client(), &command(&["track", "20"])) else {
        return;
    };
    // "[p] fini #PID LWP faults N"
    let faults = out
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 6 && w[1] == "fini" && w[3] == "1").then(|| w[5].parse::<u64>().unwrap())
        })
        .unwrap_or_else(|| panic!("no fini line for LWP 1: {out}\n{err}"));
    check("libpctx client", faults, &out, &err, ok);
}

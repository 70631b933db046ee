//! A program run by the `perfex` command reads the counts perfex started: `read_counters`
//! without `start_counters`, as IRIX MPI profiling layers did in `MPI_Finalize` under
//! `perfex -mp` (tests/c/perfex_under_perfex.c). perfex hands its events to the command
//! (`PERFCOMPAT_PERFEX_EVENTS`) and the library counts each thread from its start.

mod common;
use common::Guarded;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{c_program, page_fault_map, perfex_bin, run_output, tmp};

/// The R10000 event perfex counts, mapped to page faults.
const EVENT: u32 = 26;
/// Pages the main thread touches (its second thread half as many).
const PAGES: u64 = 20_000;

/// The test program, built once (the tests run in parallel).
fn build() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_now).clone()
}

fn build_now() -> PathBuf {
    c_program("perfex_under_perfex", &["-pthread"])
}

/// `perfex <args> <bin> perfex EVENT PAGES` on perf with EVENT counted as page faults; the
/// report goes to a file. Returns the run and the report.
fn under_perfex(bin: &Path, args: &[&str], name: &str) -> (Output, String) {
    let map = page_fault_map(EVENT);
    let report = tmp().join(format!("{name}.report"));
    let mut cmd = Command::new(perfex_bin());
    cmd.guarded();
    cmd.env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .env("PERFCOMPAT_EVENTS", &map)
        .env("PERFCOMPAT_SYSTEM_COSTS", "/nonexistent/perfex.costs")
        .env("PERFCOMPAT_HOST_COSTS", "/nonexistent/host.costs")
        .env_remove("PERFCOMPAT_PERFEX_EVENTS")
        .arg("-o")
        .arg(&report)
        .args(args)
        .arg("-e")
        .arg(EVENT.to_string())
        .arg(bin)
        .args(["perfex", &EVENT.to_string(), &PAGES.to_string()]);
    // One page fault per page touched (see common::run_output).
    // SAFETY: prctl is a system call, safe between fork and exec; the setting survives exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            Ok(())
        })
    };
    let out = cmd.output().expect("perfex runs");
    let report = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("perfex: 0 failures"),
        "perfex {args:?} failed:\n{}\n{}\nreport:\n{report}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, report)
}

/// The program's "tid <tid> pid <pid> count <c>" lines: its process id, and tid -> the first
/// count read.
fn program_counts(out: &Output) -> (i64, BTreeMap<i64, f64>) {
    let (mut pid, mut m) = (0, BTreeMap::new());
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let ["tid", tid, "pid", p, "count", c] = w[..] {
            pid = p.parse().unwrap();
            m.entry(tid.parse().unwrap())
                .or_insert_with(|| c.parse().unwrap());
        }
    }
    (pid, m)
}

/// The count of the last event line after `header` in a perfex report.
fn count_after(report: &str, header: &str) -> f64 {
    let rest = &report[report
        .find(header)
        .unwrap_or_else(|| panic!("no {header:?} in:\n{report}"))..];
    let line = rest
        .lines()
        .find(|l| l.starts_with(&format!("{EVENT} ")))
        .unwrap_or_else(|| panic!("no event {EVENT} line after {header:?} in:\n{report}"));
    line.split_whitespace().last().unwrap().parse().unwrap()
}

fn within_5_percent(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 0.05 * want,
        "{what}: {got}, expected {want} within 5%"
    );
}

#[test]
fn read_counters_without_start_under_perfex_mp_reads_the_thread_since_it_started() {
    let bin = build();
    let (out, report) = under_perfex(&bin, &["-mp"], "mp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (pid, counts) = program_counts(&out);
    assert_eq!(counts.len(), 2, "two threads read: {counts:?}\n{stderr}");
    // The program's own print_counters: one line for the event asked for twice.
    assert_eq!(
        stderr
            .matches("Event counts (libperfex on the perf backend):")
            .count(),
        2,
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "read_counters: invalid argument: event 0 is not one perfex counts (it counts event {EVENT})"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("read_counters: the counters perfex started on this thread count the parent process (this is a child of fork())"),
        "{stderr}"
    );
    for (&tid, &c) in &counts {
        let pages = if tid == pid { PAGES } else { PAGES / 2 } as f64;
        within_5_percent(
            c,
            pages,
            &format!("thread {tid}: its count vs the pages it touched"),
        );
        let perfex = count_after(&report, &format!("Thread {tid} of process {pid}:"));
        within_5_percent(
            c,
            perfex,
            &format!("thread {tid}: its count vs perfex's line"),
        );
        println!("thread {tid}: touched {pages}, read {c}, perfex {perfex}");
    }
}

#[test]
fn read_counters_without_start_under_perfex_reads_the_thread_since_it_started() {
    let bin = build();
    let (out, report) = under_perfex(&bin, &[], "plain");
    let (_, counts) = program_counts(&out);
    assert_eq!(counts.len(), 2, "{counts:?}");
    let sum: f64 = counts.values().sum();
    within_5_percent(
        sum,
        (PAGES + PAGES / 2) as f64,
        "both threads' counts vs the pages",
    );
    let total = count_after(&report, "Summary for execution");
    within_5_percent(sum, total, "both threads' counts vs perfex's total");
    println!("read {counts:?}, perfex total {total}");
}

#[test]
fn read_counters_without_start_outside_perfex_still_fails() {
    let bin = build();
    let map = page_fault_map(EVENT);
    let out = run_output(
        &bin,
        "perf",
        &["bare", &EVENT.to_string(), "10"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("bare: 0 failures"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "read_counters: the counters were not started on this thread (call start_counters first)"
        ),
        "{stderr}"
    );
}

//! C and C++ programs built only against `include/` and the built library.

mod common;
use common::Guarded;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    compile, link_args, page_fault_map, repo, run, run_env, run_libperfex_program,
    run_same_event_program, skip, tmp,
};

fn build(src: &str, cxx: bool) -> PathBuf {
    let out = tmp().join(format!(
        "{}-{}",
        Path::new(src).file_stem().unwrap().to_str().unwrap(),
        if cxx { "cxx" } else { "c" }
    ));
    let mut cmd = Command::new(if cxx { "c++" } else { "cc" });
    if cxx {
        cmd.args(["-x", "c++", "-std=c++11"]);
    } else {
        cmd.arg("-std=c99");
    }
    cmd.args(["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-o"])
        .arg(&out)
        .arg(repo().join(src))
        .arg(format!("-I{}", repo().join("include").display()))
        .args(link_args());
    compile(&mut cmd, src);
    out
}

#[test]
fn sim_hook_from_c_and_cxx() {
    for cxx in [false, true] {
        let bin = build("tests/c/sim_hook.c", cxx);
        run(&bin, "sim:r10000", &["sim", "cycles", "25", "PAPI_tot_cyc"]);
        run(
            &bin,
            "sim:pentium4",
            &["sim", "branch_retired", "PAPI_tot_cyc"],
        );
        run(&bin, "perf", &["perf"]);
    }
}

#[test]
fn libperfex_usage_pattern_and_errors() {
    for cxx in [false, true] {
        let bin = build("tests/c/perfex_basic.c", cxx);
        run_libperfex_program(&bin, "tests/c/perfex_basic.sim.stderr");
    }
}

/// `start_counters(0, 0)` / `read_counters(0, .., 0, ..)`: one event in both arguments is
/// counted once, both counts are its count (exact on the emulated R10000, pages touched on perf
/// with event 0 mapped to page faults), print_counters/print_costs list it once, and two
/// different events of one counter still conflict.
#[test]
fn the_same_event_twice_is_counted_once() {
    let bin = build("tests/c/perfex_same_event.c", false);
    run_same_event_program(&bin);
}

#[test]
fn t5_event_variables_override_the_arguments() {
    let bin = build("tests/c/perfex_env.c", false);
    let err = run_env(
        &bin,
        "sim:r10000",
        &[],
        &[("T5_EVENT0", "2"), ("T5EVENT1", "19")],
    );
    assert!(!err.contains("ignoring"), "{err}");
    let err = run_env(&bin, "sim:r10000", &["noenv"], &[("T5_EVENT1", "forty")]);
    assert_eq!(
        err.matches("ignoring T5_EVENT1=\"forty\"").count(),
        1,
        "{err}"
    );
}

/// A start/read pair costs at most one counter read each: the counter group stays open between
/// pairs (no open, enable, disable or close per pair). Shown with strace: between the program's
/// markers the only system calls are reads, at most two per pair (fewer where `rdpmc` reads
/// the counters without one).
#[test]
fn a_start_read_pair_is_at_most_two_counter_reads() {
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace not found: CI must install it (.ci/run does)"
        );
        skip("strace not found (apt-get install strace): system calls per start/read not checked");
        return;
    }
    let bin = build("tests/c/perfex_syscalls.c", false);
    let map = page_fault_map(25);
    let trace = tmp().join("perfex_syscalls.strace");
    let pairs = 200;
    let out = Command::new("strace")
        .guarded()
        .args(["-f", "-qq", "-o"])
        .arg(&trace)
        .arg(&bin)
        .arg(pairs.to_string())
        .env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .env("PERFCOMPAT_EVENTS", &map)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("0 failures"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(&trace).unwrap();
    let calls: Vec<&str> = trace
        .lines()
        .skip_while(|l| !l.contains("\"BEGIN\\n\""))
        .skip(1)
        .take_while(|l| !l.contains("\"END\\n\""))
        .collect();
    // Strip strace's "pid " prefix, keep the system call's name.
    let name = |l: &str| {
        let l = l.split_once(' ').map_or(l, |(p, rest)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                rest
            } else {
                l
            }
        });
        l.split('(').next().unwrap_or("").trim().to_string()
    };
    let others: Vec<&&str> = calls.iter().filter(|l| name(l) != "read").collect();
    assert!(
        others.is_empty(),
        "system calls other than reads: {others:#?}"
    );
    assert!(
        calls.len() <= 2 * pairs,
        "{} reads for {pairs} start/read pairs",
        calls.len()
    );
    // Without a PMU nothing reads the counters but read(2): exactly one per call.
    let pmu = perfcompat::backend::perf::PerfBackend::new().is_ok_and(|b| b.caps().pmu);
    if !pmu {
        assert_eq!(calls.len(), 2 * pairs, "reads for {pairs} start/read pairs");
    }
}

/// fork(): the child starts clean: the parent's libperfex pair and libcpc binding are not its
/// own (EINVAL), it counts its own work after its own start or bind, and neither its reads,
/// nor its unbind, nor its exit disturb the parent's counters.
#[test]
fn a_forked_child_starts_clean_and_leaves_the_parent_counting() {
    let bin = build("tests/c/fork.c", false);
    let map = page_fault_map(25);
    let stdout = {
        let out = common::run_output(
            &bin,
            "perf",
            &[],
            &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    assert!(stdout.contains("child: 0 failures"), "{stdout}");
    assert!(stdout.contains("; 0 failures"), "{stdout}");
}

/// exec(): the perf descriptors are close-on-exec, so the new program holds none.
#[test]
fn exec_drops_every_counter_descriptor() {
    let bin = build("tests/c/exec_fds.c", false);
    let map = page_fault_map(25);
    let out = common::run_output(
        &bin,
        "perf",
        &[],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (before, after) = stdout.split_once("after exec:").expect("the shell ran");
    let open: u32 = before.trim().parse().expect("a count of perf descriptors");
    assert!(
        open >= 3,
        "the library had its counters open before the exec: {stdout}"
    );
    assert!(!after.contains("perf_event"), "{stdout}");
}

//! The PMPI layer (`mpi/perfcompat_mpi.c`, `libperfcompat-mpi.so`) on a real MPI: Open MPI's
//! `mpirun --oversubscribe` on this machine, C and Fortran programs whose ranks do known,
//! different amounts of work (tests/c/mpi_pages.c, tests/fortran/mpi_pages.f90).
//!
//! Rank r touches 1000 * (r + 1) fresh pages (from r + 1 threads in the C program), counted as
//! page faults (R10000 event 25 mapped to page-faults): each rank's count within 5 % of that,
//! the sums equal to the sum of the rank lines, the minimum on rank 0 and the maximum on the
//! last rank. On the emulated R10000 the ranks inject their events: exact.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

fn have_mpi() -> bool {
    have_tool("mpicc", "libopenmpi-dev") && have_tool("mpirun", "openmpi-bin")
}

/// The layer, built with the MPI's mpicc against the freshly built library.
fn layer() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tmp().join("mpi");
        std::fs::create_dir_all(&dir).unwrap();
        compile(
            Command::new("mpicc")
                .args([
                    "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o",
                ])
                .arg(dir.join("libperfcompat-mpi.so"))
                .arg(repo().join("mpi/perfcompat_mpi.c"))
                .arg(format!("-I{}", repo().join("include").display()))
                .args(link_args()),
            "mpi/perfcompat_mpi.c",
        );
        dir
    })
}

/// The linker arguments of a program that uses the layer: it comes before the MPI libraries.
fn layer_args() -> Vec<String> {
    let dir = layer();
    let mut v = vec![
        format!("-L{}", dir.display()),
        format!("-Wl,-rpath,{}", dir.display()),
        "-lperfcompat-mpi".into(),
    ];
    v.extend(link_args());
    v
}

fn c_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = layer().join("mpi_pages");
        compile(
            Command::new("mpicc")
                .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pthread", "-o"])
                .arg(&bin)
                .arg(repo().join("tests/c/mpi_pages.c"))
                .arg(format!("-I{}", repo().join("include").display()))
                .args(layer_args()),
            "tests/c/mpi_pages.c",
        );
        bin
    })
}

/// A fresh directory for one mpirun's session files.
fn session_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let d = tmp().join(format!(
        "ompi-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `mpirun --oversubscribe -np N bin args` with `env` passed to every rank; kill it after
/// 120 s (a hang is a failure). Returns (success, stdout + stderr).
fn mpirun(n: usize, bin: &Path, args: &[&str], env: &[(&str, String)]) -> (bool, String) {
    let mut cmd = Command::new("mpirun");
    cmd.guarded();
    cmd.args(["--oversubscribe", "-np", &n.to_string()]);
    for (k, _) in env {
        cmd.args(["-x", k]);
    }
    cmd.arg(bin)
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        // Each mpirun its own session directory: several starting at once race to create
        // the shared default one (/tmp/ompi.<host>.<uid>: "mkdir ... File exists").
        .env("TMPDIR", session_dir())
        .env("OMPI_MCA_orte_tmpdir_base", session_dir())
        // CI runs as root; Open MPI refuses that unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // One fault per page: no transparent huge pages (inherited by the ranks).
    // SAFETY: prctl is a system call, safe between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("mpirun runs");
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "mpirun -np {n} {} hung (killed after 120 s):\n{}{}",
                bin.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (status.success(), text)
}

/// Run a layer program on `n` ranks counting `events`; returns the JSON report.
fn job(n: usize, bin: &Path, args: &[&str], backend: &str, events: &str) -> Value {
    let report = layer().join(format!(
        "report-{}-{n}-{backend}.json",
        bin.display().to_string().len()
    ));
    let _ = std::fs::remove_file(&report);
    let env = [
        ("PERFCOMPAT_BACKEND", backend.to_string()),
        ("PERFCOMPAT_PRELOAD_EVENTS", events.to_string()),
        (
            "PERFCOMPAT_EVENTS",
            page_fault_map(25).display().to_string(),
        ),
        ("PERFCOMPAT_MPI_OUTPUT", report.display().to_string()),
        ("PERFCOMPAT_MPI_FORMAT", "json".to_string()),
    ];
    let (ok, out) = mpirun(n, bin, args, &env);
    assert!(ok, "mpirun -np {n} failed:\n{out}");
    for r in 0..n {
        assert!(out.contains(&format!("rank {r}: 0 failures")), "{out}");
    }
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report from rank 0 ({e}):\n{out}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}"))
}

/// Check a report: per-rank counts of the first event against `expect(rank)` within `tol`
/// (relative), the sums, and the ranks of the minimum and maximum.
fn check(report: &Value, n: usize, expect: impl Fn(usize) -> f64, tol: f64) {
    assert_eq!(report["ranks"], n, "{report}");
    let per_rank = report["per_rank"].as_array().unwrap();
    let mut sum = 0.0;
    for (r, line) in per_rank.iter().enumerate() {
        assert_eq!(line["rank"], r);
        let got = line["events"][0]["count"].as_f64().unwrap();
        let want = expect(r);
        assert!(
            (got - want).abs() <= tol * want,
            "rank {r}: {got} counted, {want} expected (within {}%): {report}",
            tol * 100.0
        );
        sum += got;
    }
    let ev = &report["events"][0];
    assert_eq!(
        ev["sum"].as_f64().unwrap(),
        sum,
        "the sum is the sum of the rank lines"
    );
    assert_eq!(ev["min_rank"], 0, "{report}");
    assert_eq!(ev["max_rank"], n - 1, "{report}");
    assert!(report["missing_ranks"].as_array().unwrap().is_empty());
}

#[test]
fn the_layer_counts_every_rank_of_a_c_program_on_1_2_and_4_ranks() {
    if !have_mpi() {
        return;
    }
    for n in [1, 2, 4] {
        let report = job(n, c_program(), &["pages"], "perf", "25");
        // Rank r's r + 1 threads touch 1000 pages each, plus a few faults of their own.
        check(&report, n, |r| 1000.0 * (r + 1) as f64, 0.05);
    }
}

#[test]
fn the_layer_on_an_emulated_pmu_gives_the_injected_counts_exactly() {
    if !have_mpi() {
        return;
    }
    let report = job(4, c_program(), &["sim", "25"], "sim:r10000", "25");
    check(&report, 4, |r| 1000.0 * (r + 1) as f64, 0.0);
    assert_eq!(report["backend"], "sim:r10000");
}

#[test]
fn programs_that_count_with_libperfex_themselves_keep_working() {
    if !have_mpi() {
        return;
    }
    // mpi_pages checks its own start_counters/read_counters pair (event 25 on its main
    // thread) while the layer counts the whole rank.
    let report = job(2, c_program(), &["libperfex"], "perf", "25");
    check(&report, 2, |r| 1000.0 * (r + 1) as f64, 0.05);
}

#[test]
fn the_layer_counts_every_rank_of_a_fortran_program() {
    if !have_mpi() || !have_tool("mpif90", "libopenmpi-dev") {
        return;
    }
    let bin = layer().join("mpi_pages_f90");
    compile(
        Command::new("mpif90")
            .args(["-O1", "-Wall", "-o"])
            .arg(&bin)
            .arg(repo().join("tests/fortran/mpi_pages.f90"))
            .args(layer_args()),
        "tests/fortran/mpi_pages.f90",
    );
    let report = job(4, &bin, &[], "perf", "25");
    check(&report, 4, |r| 1000.0 * (r + 1) as f64, 0.05);
}

/// A rank that calls MPI_Abort, or is killed by a signal, ends the job in mpirun: it must not
/// hang, and the layer prints no report (none can be complete); README, "MPI".
#[test]
fn a_rank_that_aborts_or_dies_ends_the_job_without_a_report_and_without_hanging() {
    if !have_mpi() {
        return;
    }
    for mode in ["abort", "die"] {
        let report = layer().join(format!("report-{mode}.json"));
        let _ = std::fs::remove_file(&report);
        let env = [
            ("PERFCOMPAT_PRELOAD_EVENTS", "25".to_string()),
            (
                "PERFCOMPAT_EVENTS",
                page_fault_map(25).display().to_string(),
            ),
            ("PERFCOMPAT_MPI_OUTPUT", report.display().to_string()),
        ];
        let (ok, out) = mpirun(4, c_program(), &[mode], &env);
        assert!(!ok, "{mode}: the job must fail:\n{out}");
        assert!(!report.exists(), "{mode}: no report");
    }
}

/// A bad event list: each rank says why on its stderr, runs uncounted, and rank 0's report
/// names every rank as missing instead of hanging or crashing.
#[test]
fn ranks_that_cannot_count_are_reported_missing() {
    if !have_mpi() {
        return;
    }
    let report = layer().join("report-bad.txt");
    let _ = std::fs::remove_file(&report);
    let env = [
        ("PERFCOMPAT_PRELOAD_EVENTS", "99".to_string()),
        ("PERFCOMPAT_MPI_OUTPUT", report.display().to_string()),
    ];
    let (ok, out) = mpirun(2, c_program(), &["pages"], &env);
    assert!(ok, "{out}");
    assert!(out.contains("PERFCOMPAT_PRELOAD_EVENTS=\"99\""), "{out}");
    // No rank counted: there is nothing to report, and rank 0 says so.
    assert!(out.contains("no rank records to merge"), "{out}");
}

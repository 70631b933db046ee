//! `perfex --mpi` and `perfex --merge` on a real MPI (Open MPI's `mpirun --oversubscribe`): each
//! rank's perfex counts the whole rank process and writes its record to `PREFIX.<rank>`; the
//! merge prints the job's table. tests/c/mpi_touch.c is linked with nothing of perfcompat, as a
//! program that cannot be relinked or preloaded.

mod common;
use common::Guarded;
use common::{have_tool as have, TempDir};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn perfex() -> &'static str {
    env!("CARGO_BIN_EXE_perfex")
}

/// `mpirun --oversubscribe -np 4 perfex --mpi PREFIX -e 25 mpi_touch PAGES`, with event 25
/// counted as page faults.
fn job(dir: &Path, bin: &Path, prefix: &Path, pages: u32) {
    let map = dir.join("pf.map");
    std::fs::write(&map, "25 = page-faults\n").unwrap();
    let session = dir.join(format!("ompi-{pages}"));
    std::fs::create_dir_all(&session).unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.guarded();
    cmd.args([
        "--oversubscribe",
        "-np",
        "4",
        "-x",
        "PERFCOMPAT_EVENTS",
        perfex(),
    ])
    .arg("--mpi")
    .arg(prefix)
    .args(["-e", "25"])
    .arg(bin)
    .arg(pages.to_string())
    .env("PERFCOMPAT_EVENTS", &map)
    // Its own session directory: several mpiruns starting at once race to create the shared
    // default one (/tmp/ompi.<host>.<uid>: "mkdir ... File exists").
    .env("TMPDIR", &session)
    .env("OMPI_MCA_orte_tmpdir_base", &session)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    // SAFETY: prctl between fork and exec; one fault per page, no transparent huge pages.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            Ok(())
        });
    }
    let out = cmd.output().expect("mpirun runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for r in 0..4 {
        assert!(text.contains(&format!("rank {r}: 0 failures")), "{text}");
    }
    // The ranks' perfex reports went to their files, not to the shared stderr.
    assert!(!text.contains("Summary for execution"), "{text}");
}

fn merge(files: &[PathBuf], json: bool) -> Output {
    Command::new(perfex())
        .guarded()
        .arg("--merge")
        .args(json.then_some("--json"))
        .args(files)
        .output()
        .unwrap()
}

fn rank_files(prefix: &Path) -> Vec<PathBuf> {
    (0..4)
        .map(|r| PathBuf::from(format!("{}.{r}", prefix.display())))
        .collect()
}

fn per_rank_counts(report: &Value) -> Vec<f64> {
    report["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["events"][0]["count"].as_f64().unwrap())
        .collect()
}

#[test]
fn each_rank_writes_its_record_and_the_merge_prints_the_job() {
    if !have("mpicc", "libopenmpi-dev") || !have("mpirun", "openmpi-bin") {
        return;
    }
    let dir = TempDir::new("perfex-mpi");
    let bin = dir.0.join("mpi_touch");
    let st = Command::new("mpicc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&bin)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mpi_touch.c"))
        .status()
        .unwrap();
    assert!(st.success());
    // perfex counts the whole rank process, MPI_Init included: a job that touches nothing
    // gives each rank's own faults, which the job below adds its pages to.
    let base = dir.0.join("base");
    job(&dir.0, &bin, &base, 0);
    let out = merge(&rank_files(&base), true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let baseline = per_rank_counts(&serde_json::from_slice(&out.stdout).unwrap());
    let prefix = dir.0.join("run");
    job(&dir.0, &bin, &prefix, 5000);
    let out = merge(&rank_files(&prefix), true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts = per_rank_counts(&report);
    for (r, (got, base)) in counts.iter().zip(&baseline).enumerate() {
        let want = base + 5000.0 * (r + 1) as f64;
        assert!(
            (got - want).abs() <= 0.05 * want,
            "rank {r}: {got} faults, {want} expected: {report}"
        );
    }
    let ev = &report["events"][0];
    assert_eq!(ev["sum"].as_f64().unwrap(), counts.iter().sum::<f64>());
    assert_eq!(
        (ev["min_rank"].clone(), ev["max_rank"].clone()),
        (0.into(), 3.into())
    );
    // The text table: one line per rank, then the summary.
    let out = merge(&rank_files(&prefix), false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("MPI job: 4 ranks on 1 host"), "{text}");
    assert!(text.contains("25 page-faults"), "{text}");
    // Two jobs' files do not merge; a file that is not a record names itself.
    let mixed = [rank_files(&prefix)[0].clone(), rank_files(&base)[0].clone()];
    let out = merge(&mixed, false);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rank 0 has two records"));
    let out = merge(std::slice::from_ref(&bin), false);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a perfcompat rank record"));
}

#[test]
fn perfex_mpi_outside_mpirun_says_so_before_running_anything() {
    let out = Command::new(perfex())
        .guarded()
        .args(["--mpi", "/nonexistent/x", "true"])
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMIX_RANK")
        .env_remove("PMI_RANK")
        .env_remove("SLURM_PROCID")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not started by an MPI launcher"), "{err}");
    let out = Command::new(perfex())
        .guarded()
        .arg("--merge")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

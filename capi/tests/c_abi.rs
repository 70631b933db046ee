//! C and C++ programs built only against `include/` and the built library.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Build the shared library fresh (plain `cargo test` builds only the rlib, and a `.so` left in
/// target/ could be stale) into a target directory of its own, and return where it is.
fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-build");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "perfcompat-capi",
                "--lib",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(repo())
            .status()
            .expect("cargo runs");
        assert!(st.success(), "building the perfcompat-capi cdylib failed");
        target.join("debug")
    })
    .clone()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn build(src: &str, cxx: bool) -> PathBuf {
    let lib = lib_dir();
    assert!(
        lib.join("libperfcompat_capi.so").exists(),
        "cargo did not build the cdylib in {}",
        lib.display()
    );
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
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
    let st = cmd
        .args(["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-o"])
        .arg(&out)
        .arg(repo().join(src))
        .arg(format!("-I{}", repo().join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lperfcompat_capi")
        .status()
        .expect("a C compiler (cc) is installed");
    assert!(st.success(), "compiling {src} failed");
    out
}

fn run(bin: &Path, backend: &str, args: &[&str]) -> String {
    run_env(bin, backend, args, &[])
}

fn run_env(bin: &Path, backend: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    // cargo test puts target/debug/deps on LD_LIBRARY_PATH, which would win over the rpath and
    // load whatever (possibly stale) libperfcompat_capi.so the main build left there.
    let out = Command::new(bin)
        .env_remove("LD_LIBRARY_PATH")
        .args(args)
        .env("PERFCOMPAT_BACKEND", backend)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} under {backend} failed:\n{stdout}\n{}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("0 failures"), "{stdout}");
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// Compare with a golden file; `PERFCOMPAT_BLESS=1` rewrites it.
fn golden(name: &str, got: &str) {
    let path = repo().join("tests/c").join(name);
    if std::env::var_os("PERFCOMPAT_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "output differs from {}", path.display());
}

/// A good partial cost file and a malformed one, for the libperfex tests.
fn cost_files() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let good = dir.join("good.costs");
    let bad = dir.join("bad.costs");
    std::fs::write(
        &good,
        "# partial table: the clock and one event\nclock 100 MHz\n\
         26 Secondary data cache misses ..... 500 100 900 nsec\n",
    )
    .unwrap();
    std::fs::write(
        &bad,
        "clock 100 MHz\n26 500 100 900 nsec\n25 1 2 three clks\n",
    )
    .unwrap();
    (good, bad)
}

/// No system cost file and no host calibration cache, so every machine prints the same.
const NO_COST_FILES: [(&str, &str); 2] = [
    ("PERFCOMPAT_SYSTEM_COSTS", "/nonexistent/perfex.costs"),
    ("PERFCOMPAT_HOST_COSTS", "/nonexistent/host.costs"),
];

#[test]
fn libperfex_usage_pattern_and_errors() {
    let (good, bad) = cost_files();
    let files = [good.to_str().unwrap(), bad.to_str().unwrap()];
    for cxx in [false, true] {
        let bin = build("tests/c/perfex_basic.c", cxx);
        let stderr = run_env(
            &bin,
            "sim:r10000",
            &["sim", files[0], files[1]],
            &NO_COST_FILES,
        );
        let stderr = stderr.replace(env!("CARGO_TARGET_TMPDIR"), "<tmp>");
        // The table loaded before the bad file stays in force: both reports are the same.
        let reports: Vec<&str> = stderr.split("Cost estimates:").collect();
        assert_eq!(reports.len(), 4, "{stderr}");
        assert!(reports[2].contains("<tmp>/good.costs"), "{stderr}");
        let table = |r: &str| r.split("\nload_costs").next().unwrap().to_string();
        let table = |r: &str| table(r).split("\nprint_costs").next().unwrap().to_string();
        assert_eq!(table(reports[2]), table(reports[3]));
        assert!(
            stderr.contains("load_costs: <tmp>/bad.costs:3: event 25: maximum cost 'three'"),
            "{stderr}"
        );
        golden("perfex_basic.sim.stderr", &stderr);
        let map = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perfex-map");
        std::fs::write(
            &map,
            "# event 25 (L1 D misses) counted as page faults here\n25 = page-faults\n",
        )
        .unwrap();
        let stderr = run_env(
            &bin,
            "perf",
            &["perf", files[0], files[1]],
            &[
                ("PERFCOMPAT_EVENTS", map.to_str().unwrap()),
                NO_COST_FILES[0],
                NO_COST_FILES[1],
            ],
        );
        assert!(stderr.contains("Linux host cost table"), "{stderr}");
    }
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

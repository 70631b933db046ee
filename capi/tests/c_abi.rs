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

fn run(bin: &Path, backend: &str, args: &[&str]) {
    let out = Command::new(bin)
        .args(args)
        .env("PERFCOMPAT_BACKEND", backend)
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

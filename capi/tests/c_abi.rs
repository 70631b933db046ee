//! C and C++ programs built only against `include/` and the built library.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compile, link_args, repo, run, run_env, run_libperfex_program, tmp};

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

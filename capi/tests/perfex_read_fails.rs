//! `read_counters` that fails sets the counts it can reach to 0, from C and from Fortran 77:
//! the README's idiom `read_counters(...) != gen` passes when `start_counters` failed as well
//! (both -1), and the program then printed what its variables held (docs/differences.md).

mod common;

use std::path::Path;
use std::process::Command;

use common::{c_program, compile, have_gfortran, link_args, repo, run_output, tmp, GFORTRAN_FLAGS};

/// Run `bin` on the emulated R10000; it must exit 0. Its standard output.
fn run_ok(bin: &Path) -> String {
    let out = run_output(bin, "sim:r10000", &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_failed_read_zeroes_the_counts_from_c() {
    let bin = c_program("perfex_read_fails", &[]);
    let stdout = run_ok(&bin);
    assert_eq!(
        stdout,
        "no start: -1 0 0\nfailed start: -1 0 0\nidiom passes: yes\nNULL c1: -1 0 0\n"
    );
}

#[test]
fn a_failed_read_zeroes_the_counts_from_fortran() {
    if !have_gfortran() {
        return;
    }
    let bin = tmp().join("perfex_read_fails_f");
    let src = "tests/fortran/perfex_read_fails.f";
    compile(
        Command::new("gfortran")
            .args(GFORTRAN_FLAGS)
            .arg("-o")
            .arg(&bin)
            .arg(repo().join(src))
            .args(link_args()),
        src,
    );
    let stdout = run_ok(&bin);
    assert!(stdout.contains("no start: -1       0       0"), "{stdout}");
    assert!(
        stdout.contains("failed start: -1 -1       0       0"),
        "{stdout}"
    );
}

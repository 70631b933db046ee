//! Fortran programs built with gfortran against the built library only: a fixed-form F77
//! program declaring the libperfex functions EXTERNAL (as IRIX programs did), once more with
//! g77's double underscores, and a free-form program using the `perfex` module. All three make
//! the same calls and must print the same standard error: one golden file.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    compile, fortran_module, have_gfortran, link_args, repo, run_libperfex_program,
    run_same_event_program, tmp, GFORTRAN_FLAGS,
};

/// Compile `src` (from the repository's root) into `out` with the module directory `moddir`
/// and `extra` flags.
fn build(src: &str, out: &str, moddir: &Path, extra: &[&str]) -> PathBuf {
    let out = tmp().join(out);
    compile(
        Command::new("gfortran")
            .args(GFORTRAN_FLAGS)
            .args(extra)
            .arg(format!("-I{}", moddir.display()))
            .arg("-o")
            .arg(&out)
            .arg(repo().join(src))
            .args(link_args()),
        src,
    );
    out
}

#[test]
fn libperfex_from_fortran_77_and_the_module() {
    if !have_gfortran() {
        return;
    }
    let moddir = tmp().join("fortran-mod");
    fortran_module(&moddir);
    let programs = [
        build("tests/fortran/perfex_f77.f", "perfex_f77", &moddir, &[]),
        // `start_counters__` and `perfcompat_sim_advance__`, as g77 named them.
        build(
            "tests/fortran/perfex_f77.f",
            "perfex_f77_g77",
            &moddir,
            &["-fsecond-underscore"],
        ),
        build(
            "tests/fortran/perfex_f90.f90",
            "perfex_f90",
            &moddir,
            &["-std=f2008", "-pedantic"],
        ),
    ];
    for bin in &programs {
        run_libperfex_program(bin, "tests/fortran/perfex.sim.stderr");
    }
}

/// `START_COUNTERS(0, 0)` / `READ_COUNTERS(0, C0, 0, C1)` from F77 (and with g77's double
/// underscores): the event is counted once and both counts are its count; the same standard
/// error as the C program (tests/c/perfex_same_event.c).
#[test]
fn the_same_event_twice_from_fortran_77() {
    if !have_gfortran() {
        return;
    }
    let moddir = tmp().join("fortran-mod");
    for (out, extra) in [
        ("perfex_same_event_f77", &[][..]),
        ("perfex_same_event_g77", &["-fsecond-underscore"][..]),
    ] {
        let bin = build("tests/fortran/perfex_same_event.f", out, &moddir, extra);
        run_same_event_program(&bin);
    }
}

//! The libperfex programs in examples/, built as a user would build them against an installed
//! perfcompat: headers, the Fortran module and `libperfex.so` under one prefix. The libcpc
//! examples are in cpc_examples.rs.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{fortran_module, have_gfortran, run_output, tmp};

/// The installed layout these tests build against, staged once (see [`common::stage_prefix`]).
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = tmp().join("prefix");
        common::stage_prefix(&prefix);
        prefix
    })
}

/// `compiler <flags> examples/<src> -I<prefix>/include -L<prefix>/lib -Wl,-rpath,.. -lperfex`.
fn build(compiler: &str, flags: &[&str], src: &str, prefix: &Path) -> PathBuf {
    common::build_installed(
        compiler,
        flags,
        &format!("examples/{src}"),
        prefix,
        "perfex",
        &format!("example-{src}"),
    )
}

/// Run an example on the perf backend with event 26 counted as page faults (which the example
/// makes plenty of), and check it printed the count table and the cost report.
fn run_example(bin: &Path) {
    let map = common::page_fault_map(26);
    let out = run_output(
        bin,
        "perf",
        &[],
        &[
            ("PERFCOMPAT_EVENTS", map.to_str().unwrap()),
            common::NO_COST_FILES[0],
            common::NO_COST_FILES[1],
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed:\n{stdout}\n{stderr}",
        bin.display()
    );
    for want in [
        "Event counts (libperfex on the perf backend):",
        " 0 Cycles ....",
        "26 Secondary data cache misses ....",
        "Cost estimates: Linux host cost table",
        "Statistics",
    ] {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
    assert!(stdout.starts_with("sum = "), "{stdout}");
}

#[test]
fn perfex_usage_in_c() {
    let bin = build(
        "cc",
        &["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror"],
        "perfex_usage.c",
        prefix(),
    );
    run_example(&bin);
}

#[test]
fn perfex_usage_in_fortran() {
    if !have_gfortran() {
        return;
    }
    // The module is installed next to the headers, as `make install` will put it.
    fortran_module(&prefix().join("include"));
    let mut flags = common::GFORTRAN_FLAGS.to_vec();
    flags.extend(["-std=f2008", "-pedantic"]);
    let bin = build("gfortran", &flags, "perfex_usage.f90", prefix());
    run_example(&bin);
}

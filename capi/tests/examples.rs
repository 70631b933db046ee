//! The libperfex programs in examples/, built as a user would build them against an installed
//! perfcompat (`tools/install.sh` into a temporary prefix, then `pkg-config`). The libcpc
//! examples are in cpc_examples.rs.

mod common;

use std::path::{Path, PathBuf};

use common::{have_gfortran, run_output};

/// The installed layout these tests build against (see [`common::installed_prefix`]).
fn prefix() -> &'static Path {
    common::installed_prefix()
}

/// `compiler <flags> examples/<src> $(pkg-config --cflags --libs libperfex) -Wl,-rpath,..`.
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
/// makes plenty of), and check it printed the count table, naming the events counted, and the
/// cost report.
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
        // print_counters names what was counted, then the R10000 event it stands for (issue
        // 30 item 9: "26 Secondary data cache misses" over a page-fault count). Event 0 is
        // `cycles`, estimated from the task clock on a host without a PMU.
        " 0 cycles",
        "26 page-faults (R10000 Secondary data cache misses) ....",
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
    // The install command compiled the module next to the headers.
    assert!(prefix().join("include/perfex.mod").exists());
    let mut flags = common::GFORTRAN_FLAGS.to_vec();
    flags.extend(["-std=f2008", "-pedantic"]);
    let bin = build("gfortran", &flags, "perfex_usage.f90", prefix());
    run_example(&bin);
}

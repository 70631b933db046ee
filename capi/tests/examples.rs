//! The programs in examples/, built as a user would build them against an installed
//! perfcompat: headers, the Fortran module and `libperfex.so` under one prefix.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{compile, fortran_module, have_gfortran, lib_dir, repo, run_output, tmp};

/// Stage an installed layout once: `<prefix>/include` with the headers, `<prefix>/lib/libperfex.so`
/// the built library. The real install command, with sonames and symbol versions, comes with
/// issue 5; until then the library is only linked here under the name programs use.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = tmp().join("prefix");
        let _ = std::fs::remove_dir_all(&prefix);
        let (include, lib) = (prefix.join("include"), prefix.join("lib"));
        std::fs::create_dir_all(&include).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        for h in ["libperfex.h", "perfcompat.h"] {
            std::fs::copy(repo().join("include").join(h), include.join(h)).unwrap();
        }
        let so = lib_dir().join("libperfcompat_capi.so");
        std::os::unix::fs::symlink(so, lib.join("libperfex.so")).unwrap();
        prefix
    })
}

/// `compiler <flags> examples/<src> -I<prefix>/include -L<prefix>/lib -Wl,-rpath,.. -lperfex`.
fn build(compiler: &str, flags: &[&str], src: &str, prefix: &Path) -> PathBuf {
    let out = tmp().join(format!("example-{src}"));
    compile(
        Command::new(compiler)
            .args(flags)
            .arg(repo().join("examples").join(src))
            .arg(format!("-I{}", prefix.join("include").display()))
            .arg(format!("-L{}", prefix.join("lib").display()))
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .arg("-lperfex")
            .arg("-o")
            .arg(&out),
        src,
    );
    out
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

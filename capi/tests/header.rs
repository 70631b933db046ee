//! The committed headers are exactly what cbindgen generates from the sources.
//! `PERFCOMPAT_BLESS=1` rewrites them instead of comparing.
//!
//! Each header is generated from its module's source file alone (cbindgen does not follow
//! `mod` declarations from there): `perfcompat.h` from `capi/src/sim.rs`, `libperfex.h` from
//! `capi/src/perfex.rs`, `libcpc.h` from `capi/src/cpc/mod.rs`, `libpctx.h` from
//! `capi/src/pctx.rs`, `perfcompat_mpi.h` from `capi/src/mpi.rs`; so none picks up another library's symbols.
//! libcpc's functions are split over the files of `capi/src/cpc/` by the man pages' grouping:
//! `libcpc.h` is generated from `mod.rs` and those files put one after the other ([`LIBCPC`]),
//! so that the header keeps the order of the man pages.

use std::path::PathBuf;

/// The files `libcpc.h` is generated from, in order.
const LIBCPC: &[&str] = &[
    "src/cpc/mod.rs",
    "src/cpc/open.rs",
    "src/cpc/errors.rs",
    "src/cpc/sets.rs",
    "src/cpc/buffers.rs",
    "src/cpc/binding.rs",
    "src/cpc/sampling.rs",
    "src/cpc/walkers.rs",
    "src/cpc/v1.rs",
    "src/cpc/v1_bind.rs",
];

fn check(config_file: &str, header: &str, source: &str) {
    check_files(config_file, header, &[source]);
}

fn check_files(config_file: &str, header: &str, sources: &[&str]) {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join(config_file)).unwrap();
    // One source file: the files one after the other (the module documentation of the
    // first only: inner doc comments must come first).
    let mut text = String::new();
    for (i, s) in sources.iter().enumerate() {
        for line in std::fs::read_to_string(crate_dir.join(s)).unwrap().lines() {
            if i == 0 || !line.starts_with("//!") {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    let joined = std::env::temp_dir().join(format!(
        "perfcompat-header-{}-{header}.rs",
        std::process::id()
    ));
    std::fs::write(&joined, text).unwrap();
    let builder = cbindgen::Builder::new().with_src(&joined);
    let mut out = Vec::new();
    builder
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    let _ = std::fs::remove_file(&joined);
    let path = crate_dir.join("../include").join(header);
    if std::env::var_os("PERFCOMPAT_BLESS").is_some() {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == out,
        "include/{header} is stale: regenerate it with \
         PERFCOMPAT_BLESS=1 cargo test -p perfcompat-capi --test header, and commit it"
    );
}

#[test]
fn perfcompat_h_is_up_to_date() {
    check("cbindgen.toml", "perfcompat.h", "src/sim.rs");
}

#[test]
fn perfcompat_mpi_h_is_up_to_date() {
    check("cbindgen-mpi.toml", "perfcompat_mpi.h", "src/mpi.rs");
}

#[test]
fn libperfex_h_is_up_to_date() {
    check("cbindgen-libperfex.toml", "libperfex.h", "src/perfex.rs");
}

#[test]
fn libcpc_h_is_up_to_date() {
    check_files("cbindgen-libcpc.toml", "libcpc.h", LIBCPC);
}

#[test]
fn libpctx_h_is_up_to_date() {
    check("cbindgen-libpctx.toml", "libpctx.h", "src/pctx.rs");
}

/// The libcpc and libpctx symbols are declared in their headers only.
#[test]
fn headers_do_not_declare_each_others_symbols() {
    let inc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../include");
    let read = |h: &str| std::fs::read_to_string(inc.join(h)).unwrap();
    for h in ["perfcompat.h", "libperfex.h"] {
        let text = read(h);
        assert!(
            !text.contains("cpc_") && !text.contains("pctx_"),
            "{h} declares libcpc/libpctx symbols"
        );
    }
    let cpc = read("libcpc.h");
    assert!(!cpc.contains("start_counters") && !cpc.contains("perfcompat_sim_advance"));
    assert!(
        !cpc.contains("pctx_run("),
        "libpctx functions belong in libpctx.h"
    );
}

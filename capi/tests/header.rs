//! The committed headers are exactly what cbindgen generates from the sources.
//! `PERFCOMPAT_BLESS=1` rewrites them instead of comparing.
//!
//! Each header is generated from its module's source file alone (cbindgen does not follow
//! `mod` declarations from there): `perfcompat.h` from `capi/src/sim.rs`, `libperfex.h` from
//! `capi/src/perfex.rs`, `libcpc.h` from `capi/src/cpc/mod.rs`, `libpctx.h` from
//! `capi/src/pctx.rs`, `perfcompat_mpi.h` from `capi/src/mpi.rs`; so none picks up another library's symbols.

use std::path::PathBuf;

fn check(config_file: &str, header: &str, source: &str) {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join(config_file)).unwrap();
    let builder = cbindgen::Builder::new().with_src(crate_dir.join(source));
    let mut out = Vec::new();
    builder
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
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
    check("cbindgen-libcpc.toml", "libcpc.h", "src/cpc/mod.rs");
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

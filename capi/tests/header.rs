//! The committed header is exactly what cbindgen generates from the sources.
//! `PERFCOMPAT_BLESS=1` rewrites it instead of comparing.

use std::path::PathBuf;

fn check(config_file: &str, header: &str) {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join(config_file)).unwrap();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
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
    check("cbindgen.toml", "perfcompat.h");
}

#[test]
fn libperfex_h_is_up_to_date() {
    check("cbindgen-libperfex.toml", "libperfex.h");
}

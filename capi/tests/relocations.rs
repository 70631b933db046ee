//! The emulated PMUs' event and generic tables carry no run-time relocation (issue 48, loading
//! the library): a pointer in a static of a shared library is a relocation the
//! dynamic linker writes at load, which makes its page a private copy in every process that
//! loads the library. The tables hold their strings and routes in place
//! (`perfcompat::base::text`), so no relative relocation may land inside them. Read with
//! binutils' `readelf -r` and `nm -S` over the freshly built cdylib.

mod common;

use std::process::Command;

/// A tool's standard output (the test needs binutils: a missing tool fails it, naming it).
fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name} (binutils) does not run: {e}"));
    assert!(out.status.success(), "{name} {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn emulated_pmu_tables_have_no_relocations() {
    let so = common::lib_dir().join("libperfcompat_capi.so");
    let so = so.to_str().unwrap();
    // (start, size, name) of the emulated PMUs' event and generic tables.
    let tables: Vec<(u64, u64, String)> = tool("nm", &["-S", "-C", "--defined-only", so])
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(4, ' ');
            let (a, s, _, n) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let table = n.starts_with("perfcompat::backend::sim::")
                && (n.ends_with("_EVENTS") || n.ends_with("_GENERICS"));
            let start = u64::from_str_radix(a, 16).ok()?;
            let size = u64::from_str_radix(s, 16).ok()?;
            table.then(|| (start, size, n.to_string()))
        })
        .collect();
    // The tables this test watches must be there, or it would watch nothing.
    for want in [
        "sparc::III_EVENTS",
        "mips::R12000_EVENTS",
        "mips::R12000_GENERICS",
    ] {
        assert!(
            tables.iter().any(|t| t.2.ends_with(want)),
            "no symbol {want} in {so}: {tables:?}"
        );
    }
    let mut relative = 0;
    let mut inside = Vec::new();
    for l in tool("readelf", &["-rW", so]).lines() {
        if !l.contains("_RELATIVE") {
            continue;
        }
        relative += 1;
        let at = l.split_whitespace().next().unwrap();
        let at = u64::from_str_radix(at, 16).unwrap();
        if let Some(t) = tables.iter().find(|t| (t.0..t.0 + t.1).contains(&at)) {
            inside.push(format!("{at:#x} in {}", t.2));
        }
    }
    assert!(relative > 0, "readelf found no relative relocation at all");
    assert!(
        inside.is_empty(),
        "{} relocations in the emulated PMUs' tables, e.g. {:?}",
        inside.len(),
        &inside[..inside.len().min(5)]
    );
}

//! Issue 46 item 1 from C: the README's libperfex (`start_counters(0, 25)`), libcpc
//! (`PAPI_tot_ins`), Tru64 pfm (`PF_BRANCHMISS`) and preload (`PERFCOMPAT_PRELOAD_EVENTS=0,25`)
//! examples on a host without a hardware PMU. Each fails with one error line that names the map
//! line that makes it count, `PERFCOMPAT_STANDIN=1` and `perfex -l`; the map line it names
//! makes it count, and so do the built-in stand-ins, which the reports flag.
//!
//! Skipped (saying so) on a host with a PMU, where the examples count as they are.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

fn has_pmu() -> bool {
    let pmu = perfcompat::backend::perf::probe().is_ok_and(|c| c.pmu);
    if pmu {
        eprintln!("SKIPPED: this host has a hardware PMU: the no-PMU behaviour cannot be shown");
    }
    pmu
}

fn programs() -> &'static [PathBuf; 3] {
    static P: OnceLock<[PathBuf; 3]> = OnceLock::new();
    P.get_or_init(|| {
        let pfm = tmp().join("readme_pfm");
        compile(
            std::process::Command::new("cc")
                .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&pfm)
                .arg(repo().join("tests/c/readme_pfm.c"))
                .arg(format!("-I{}", repo().join("include").display()))
                .args(pfcntr_link_args()),
            "tests/c/readme_pfm.c",
        );
        [
            c_program("readme_perfex", &[]),
            c_program("readme_cpc", &[]),
            pfm,
        ]
    })
}

/// `bin` on perf with `env`, no map nor stand-ins unless `env` sets them.
fn run(bin: &Path, env: &[(&str, &str)]) -> Output {
    let mut all = vec![("PERFCOMPAT_EVENTS", ""), ("PERFCOMPAT_STANDIN", "")];
    all.extend_from_slice(env);
    run_output(bin, "perf", &[], &all)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The one error line about `event`, which must name `map_line`, the stand-ins and the list.
fn assert_names_the_fix(out: &str, event: &str, map_line: &str) {
    let line = out
        .lines()
        .find(|l| l.contains(&format!("event '{event}' cannot be counted here")))
        .unwrap_or_else(|| panic!("no error line for {event}: {out}"));
    for want in [
        &format!("put the line '{map_line}' in a PERFCOMPAT_EVENTS file") as &str,
        "PERFCOMPAT_STANDIN=1",
        "`perfex -l`",
    ] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }
}

#[test]
fn the_readme_examples_name_the_fix_and_count_with_it() {
    if has_pmu() {
        return;
    }
    let [perfex, cpc, pfm] = programs();
    let cases: [(&PathBuf, &str, &str); 3] = [
        (perfex, "25", "25 = page-faults"),
        (cpc, "PAPI_tot_ins", "PAPI_tot_ins = task-clock"),
        (pfm, "PAPI_br_msp", "PAPI_br_msp = page-faults"),
    ];
    let dir = tmp().join("newcomer-maps");
    std::fs::create_dir_all(&dir).unwrap();
    for (bin, event, map_line) in cases {
        let o = run(bin, &[]);
        let out = text(&o);
        assert!(!o.status.success(), "{}: {out}", bin.display());
        assert_names_the_fix(&out, event, map_line);

        // The line the error names, as it names it, makes it count.
        let map = dir.join(format!("{event}.map"));
        std::fs::write(&map, format!("{map_line}\n")).unwrap();
        let o = run(bin, &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())]);
        assert!(o.status.success(), "{map_line}: {}", text(&o));

        // So do the built-in stand-ins.
        let o = run(bin, &[("PERFCOMPAT_STANDIN", "1")]);
        let out = text(&o);
        assert!(o.status.success(), "PERFCOMPAT_STANDIN=1: {out}");
        assert!(
            out.contains("PERFCOMPAT_STANDIN=1: hardware events are counted as software stand-ins"),
            "{out}"
        );
    }
    // print_counters flags the stand-in.
    let out = text(&run(perfex, &[("PERFCOMPAT_STANDIN", "1")]));
    assert!(
        out.contains("25 page-faults STAND-IN for L1-dcache-load-misses (R10000 Primary"),
        "{out}"
    );
    // pfm's PF_* name in a map is used (issue 46 item 9: it was loaded and never used).
    let map = dir.join("pf.map");
    std::fs::write(&map, "PF_BRANCHMISS = page-faults\n").unwrap();
    let o = run(pfm, &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())]);
    assert!(
        o.status.success(),
        "PF_BRANCHMISS = page-faults: {}",
        text(&o)
    );
}

#[test]
fn the_preload_example_names_the_fix_and_flags_stand_ins() {
    if has_pmu() {
        return;
    }
    let preload = preload_lib();
    let ld = preload.to_str().unwrap();
    let events = ("PERFCOMPAT_PRELOAD_EVENTS", "0,25");
    let o = run(Path::new("/bin/true"), &[events, ("LD_PRELOAD", ld)]);
    assert_names_the_fix(&text(&o), "25", "25 = page-faults");
    let o = run(
        Path::new("/bin/true"),
        &[events, ("LD_PRELOAD", ld), ("PERFCOMPAT_STANDIN", "1")],
    );
    let out = text(&o);
    assert!(
        out.contains(" 0 cycles est. from task-clock, user+sys (R10000 Cycles) "),
        "{out}"
    );
    assert!(
        out.contains("25 page-faults STAND-IN for L1-dcache-load-misses"),
        "{out}"
    );
    // An event specification's report flags its stand-ins and estimates too.
    let spec = (
        "PERFCOMPAT_PRELOAD_EVENTS",
        "instructions,page-faults,cycles",
    );
    let o = run(
        Path::new("/bin/true"),
        &[spec, ("LD_PRELOAD", ld), ("PERFCOMPAT_STANDIN", "1")],
    );
    let out = text(&o);
    for want in [
        "pic0 instructions (STAND-IN: task-clock) ...",
        "pic1 page-faults ...",
        "pic2 cycles (est. from task-clock, user+sys) ...",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
}

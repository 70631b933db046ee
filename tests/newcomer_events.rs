//! Issue 46 items 1, 4, 8 and 9, through the real `perfex` and `cputrack` binaries: on a host
//! without a hardware PMU (a VM) the README's `perfex -e 0 -e 25` says in its error line the map
//! line that makes it count and the built-in stand-ins; with either it counts, and the reports
//! say which counts are estimates or stand-ins (text and `--json`); `perfex -l` lists the
//! events; unknown events point to it; an event map's lines are checked when it is loaded.
//!
//! The no-PMU parts are skipped (and say so) on a host with a PMU, where event 25 counts.

mod common;
use common::TempDir;

use std::process::{Command, Output};

const PERFEX: &str = env!("CARGO_BIN_EXE_perfex");
const CPUTRACK: &str = env!("CARGO_BIN_EXE_cputrack");

fn no_pmu() -> bool {
    let pmu = perfcompat::backend::perf::probe().is_ok_and(|c| c.pmu);
    if pmu {
        common::skip("this host has a hardware PMU: the no-PMU behaviour cannot be shown");
    }
    !pmu
}

/// `perfex args` with `env` set and every perfcompat variable of the caller's removed.
fn perfex(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(PERFEX);
    for v in [
        "PERFCOMPAT_EVENTS",
        "PERFCOMPAT_STANDIN",
        "PERFCOMPAT_BACKEND",
        "PERFCOMPAT_CYCLES_FALLBACK",
    ] {
        c.env_remove(v);
    }
    c.args(args).envs(env.iter().copied()).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Item 1: the error names both fixes in its one line, and each fix makes it count.
#[test]
fn the_no_pmu_error_names_the_map_line_and_the_stand_ins_and_both_count() {
    if !no_pmu() {
        return;
    }
    let o = perfex(&["-e", "0", "-e", "25", "true"], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("perfex: event '25' cannot be counted here"))
        .unwrap_or_else(|| panic!("no error line for event 25: {err}"));
    for want in [
        "no hardware PMU",
        "put the line '25 = page-faults' in a PERFCOMPAT_EVENTS file",
        "PERFCOMPAT_STANDIN=1",
        "`perfex -l`",
    ] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }

    // The line the error names, as it names it.
    let dir = TempDir::new("newcomer-map");
    let map = dir.0.join("events");
    std::fs::write(&map, "25 = page-faults\n").unwrap();
    let o = perfex(
        &["-e", "0", "-e", "25", "true"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("25 page-faults (R10000 Primary data cache misses)"));

    // The built-in stand-ins, flagged in the report.
    let o = perfex(
        &["-e", "0", "-e", "25", "true"],
        &[("PERFCOMPAT_STANDIN", "1")],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("25 page-faults STAND-IN for L1-dcache-load-misses (R10000 Primary"),
        "{err}"
    );
}

/// Item 4: the `cycles` estimate says it covers system time, and `--json` says which counts
/// are estimates and which are stand-ins.
#[test]
fn reports_say_which_counts_are_estimates_or_stand_ins() {
    if !no_pmu() {
        return;
    }
    let o = perfex(
        &["--json", "-e", "0", "-e", "25", "true"],
        &[("PERFCOMPAT_STANDIN", "1")],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let json = err
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report: {err}"));
    let ev0 = &json[json.find("{\"event\":0,").expect(json)..];
    let ev0 = &ev0[..ev0.find('}').unwrap()];
    assert!(ev0.contains("\"estimate\":true,\"stand_in\":null"), "{ev0}");
    let ev25 = &json[json.find("{\"event\":25,").expect(json)..];
    let ev25 = &ev25[..ev25.find('}').unwrap()];
    assert!(
        ev25.contains("\"linux_event\":\"L1-dcache-load-misses\""),
        "{ev25}"
    );
    assert!(
        ev25.contains("\"estimate\":false,\"stand_in\":\"page-faults\""),
        "{ev25}"
    );

    let o = perfex(&["-e", "0", "true"], &[]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(" 0 cycles est. from task-clock, user+sys (R10000 Cycles) "),
        "{err}"
    );
    assert!(err.contains("CPU time (user and system)"), "{err}");
}

/// Item 8: `perfex -l` lists the 32 events, the Linux event each becomes (the map's when it
/// maps one) and whether it counts here; unknown events point to it.
#[test]
fn perfex_l_lists_the_events_and_unknown_events_point_to_it() {
    for flag in ["-l", "--list"] {
        let o = perfex(&[flag], &[]);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.starts_with("Events on this host (perf backend: "),
            "{out}"
        );
        let rows: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with(" N  Linux event"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(rows.len(), 32, "{out}");
        for (n, row) in rows.iter().enumerate() {
            assert!(row.starts_with(&format!("{n:>2}  ")), "{row}");
        }
        assert!(rows[25].contains("L1-dcache-load-misses"), "{}", rows[25]);
        assert!(
            rows[25].ends_with("Primary data cache misses"),
            "{}",
            rows[25]
        );
        assert!(rows[21].contains("no: no Linux equivalent"), "{}", rows[21]);
        assert!(out.contains("\n  page-faults "), "{out}");
        if no_pmu() {
            assert!(rows[25].contains("no: no hardware PMU"), "{}", rows[25]);
            assert!(
                rows[0].contains("estimated from task-clock (user+system time)"),
                "{}",
                rows[0]
            );
            assert!(out.contains("PERFCOMPAT_STANDIN=1"), "{out}");
        }
    }
    let dir = TempDir::new("newcomer-list");
    let map = dir.0.join("events");
    std::fs::write(&map, "21 = minor-faults\n").unwrap();
    let out = stdout(&perfex(
        &["-l"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    ));
    let row21 = out.lines().find(|l| l.starts_with("21  ")).unwrap();
    assert!(row21.starts_with("21  minor-faults "), "{row21}");
    assert!(row21.contains(" yes "), "{row21}");
    if no_pmu() {
        let out = stdout(&perfex(&["-l"], &[("PERFCOMPAT_STANDIN", "1")]));
        let row25 = out.lines().find(|l| l.starts_with("25  ")).unwrap();
        assert!(row25.contains("stand-in: counts page-faults"), "{row25}");
    }
    assert_eq!(perfex(&["-l", "true"], &[]).status.code(), Some(2));

    let o = Command::new(CPUTRACK)
        .args(["-c", "no_such_event", "true"])
        .env_remove("PERFCOMPAT_BACKEND")
        .env_remove("PERFCOMPAT_EVENTS")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("unknown event 'no_such_event'") && err.contains("`perfex -l` lists"),
        "{err}"
    );
}

/// Item 9: a map line naming an event the backend does not know is refused when the map is
/// loaded, with the file and the line.
#[test]
fn map_lines_are_checked_at_load_with_file_and_line() {
    let dir = TempDir::new("newcomer-badmap");
    let map = dir.0.join("events");
    std::fs::write(
        &map,
        "# stand-ins\n25 = page-faults\nfaults = page-faults\nmine = faults\n26 = no-such-event\n",
    )
    .unwrap();
    let o = perfex(
        &["-e", "25", "true"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    );
    let err = stderr(&o);
    let want = format!(
        "perfcompat: {}:5: unknown event 'no-such-event' on the perf backend",
        map.display()
    );
    assert!(err.contains(&want), "{want:?} not in {err}");
    assert!(
        err.contains("the PERFCOMPAT_EVENTS file is ignored"),
        "{err}"
    );
    // An out-of-range number as a spec is refused too.
    std::fs::write(&map, "faults = 40\n").unwrap();
    let err = stderr(&perfex(
        &["-e", "0", "true"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    ));
    assert!(
        err.contains(&format!("{}:1: unknown event '40'", map.display())),
        "{err}"
    );
}

//! A process's first counting (issue 19: first use at most a tenth of PAPI's): libperfex's first
//! `start_counters` and libcpc's `cpc_open` + first bind do only what counting needs. Traced
//! with strace over tests/c/first_use.c on perf (software events): between the markers no file
//! is read whose answer the path does not use (`perf_event_paranoid`, which only explains a
//! refusal; the calibration cache and the CPU's name and clock, which only the cycles
//! estimate, `cpc_cciname`, `cpc_cpuref` and `cpc_buf_tick` need), and the kernel is probed
//! with two `perf_event_open`s. `cpc_cciname` and `cpc_cpuref`, made on first request
//! afterwards, say what they said before.

mod common;
use common::Guarded;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{c_program, skip, tmp, write_file};

/// The program, compiled once (the tests run in parallel: one must not run it while another
/// writes it).
fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("first_use", &[]))
}

/// libperfex's events 0 and 16 as software events (event 0 is `cycles` otherwise, which
/// without a PMU is estimated from the clock).
fn event_map() -> &'static Path {
    static MAP: OnceLock<PathBuf> = OnceLock::new();
    MAP.get_or_init(|| {
        let map = tmp().join("first-use.map");
        write_file(&map, "0 = task-clock\n16 = page-faults\n");
        map
    })
}

/// The program's standard output and the traced system calls between its markers (strace's
/// lines, process id prefix removed).
fn traced(args: &[&str]) -> Option<(String, Vec<String>)> {
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace not found: CI must install it (.ci/run does)"
        );
        skip("strace not found (apt-get install strace): first use not traced");
        return None;
    }
    let trace = tmp().join(format!("first_use.{}.strace", args[0]));
    let out = Command::new("strace")
        .guarded()
        .args(["-f", "-qq", "-s", "200", "-o"])
        .arg(&trace)
        .arg(program())
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .env("PERFCOMPAT_EVENTS", event_map())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("0 failures"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(&trace).unwrap();
    let calls = trace
        .lines()
        .skip_while(|l| !l.contains("\"BEGIN\\n\""))
        .skip(1)
        .take_while(|l| !l.contains("\"END\\n\""))
        // `strace -f` pads the process id to five columns: "5070  read(..." has two spaces.
        .map(|l| match l.split_once(' ') {
            Some((p, rest)) if p.chars().all(|c| c.is_ascii_digit()) => {
                rest.trim_start().to_string()
            }
            _ => l.to_string(),
        })
        .collect();
    Some((stdout, calls))
}

/// Files the first use must not look at: what it read before issue 19 without using it (the
/// paranoid level and the host calibration cache).
const UNUSED: [&str; 2] = ["perf_event_paranoid", ".costs"];

fn check(calls: &[String], events: usize, also_unused: &[&str]) {
    for word in UNUSED.iter().chain(also_unused) {
        let hits: Vec<&String> = calls.iter().filter(|l| l.contains(word)).collect();
        assert!(hits.is_empty(), "first use looked at {word}: {hits:#?}");
    }
    let opens = calls
        .iter()
        .filter(|l| l.starts_with("perf_event_open("))
        .count();
    assert!(
        opens <= 2 + events,
        "{opens} perf_event_opens (two probes, then the set's {events}): {calls:#?}"
    );
}

#[test]
fn libperfex_first_start_reads_neither_the_paranoid_level_nor_the_clock() {
    let Some((_, calls)) = traced(&["perfex"]) else {
        return;
    };
    // Events 0 and 16 of tests' event map are counted without the cycles estimate: nothing
    // needs the CPU's name or clock.
    check(&calls, 2, &["cpuinfo", "cpufreq"]);
    eprintln!("{} system calls: {calls:#?}", calls.len());
}

#[test]
fn cpc_open_and_first_bind_read_only_what_they_use_and_describe_the_backend_as_before() {
    let Some((stdout, calls)) = traced(&["cpc", "page-faults"]) else {
        return;
    };
    // Issue 48: the nominal clock is looked up by the first sample (`cpc_buf_tick`'s ticks),
    // not by cpc_open or the bind: neither cpufreq nor /proc/cpuinfo is read on this path.
    check(&calls, 1, &["cpufreq", "cpuinfo"]);
    // Nothing on the path seeds a hash table's random keys (the Rust standard library's
    // `getrandom` with GRND_INSECURE).
    let seeds: Vec<&String> = calls
        .iter()
        .filter(|l| l.starts_with("getrandom(") && l.contains("GRND_INSECURE"))
        .collect();
    assert!(
        seeds.is_empty(),
        "random keys seeded on first use: {seeds:#?}"
    );
    let pmu = perfcompat::backend::perf::PerfBackend::new().is_ok_and(|b| b.caps().pmu);
    let info = perfcompat::backend::perf::PerfBackend::new()
        .map(|b| perfcompat::backend::Backend::info(&b).clone())
        .unwrap();
    assert!(
        stdout.contains(&format!("cciname: {}\n", info.description)),
        "{stdout}"
    );
    assert!(
        stdout.contains("cpuref: See perf_event_open(2)"),
        "{stdout}"
    );
    for n in &info.notes {
        assert!(stdout.contains(n.as_str()), "note {n:?} missing: {stdout}");
    }
    if !pmu {
        assert!(stdout.contains("no hardware PMU"), "{stdout}");
    }
}

/// Issue 48 (first use): a bind opens its group stopped (the leader disabled), so its first
/// start has nothing to stop or read (no `PERF_EVENT_IOC_DISABLE` and no `read` of the group
/// before its `PERF_EVENT_IOC_ENABLE`), and the descriptor limit is asked once per group: each
/// member after a leader that was moved up goes above the leader (one `getrlimit`, not one per
/// counter).
#[test]
fn the_first_bind_neither_stops_nor_reads_its_new_group_and_asks_the_limit_once() {
    let Some((_, calls)) = traced(&["perfex"]) else {
        return;
    };
    // libperfex's events 0 and 16: one group of two counters.
    let opens = calls
        .iter()
        .filter(|l| l.starts_with("perf_event_open("))
        .count();
    assert!(opens >= 2, "{calls:#?}");
    let stops: Vec<&String> = calls
        .iter()
        .filter(|l| l.contains("PERF_EVENT_IOC_DISABLE"))
        .collect();
    assert!(stops.is_empty(), "the new group stopped: {stops:#?}");
    let enable = calls
        .iter()
        .position(|l| l.contains("PERF_EVENT_IOC_ENABLE"))
        .unwrap_or_else(|| panic!("no PERF_EVENT_IOC_ENABLE: {calls:#?}"));
    // The group's last member opened before the start.
    let last_open = calls[..enable]
        .iter()
        .rposition(|l| l.starts_with("perf_event_open("))
        .unwrap_or_else(|| panic!("no perf_event_open before the start: {calls:#?}"));
    let reads: Vec<&String> = calls[last_open..enable]
        .iter()
        .filter(|l| l.starts_with("read("))
        .collect();
    assert!(
        reads.is_empty(),
        "the new group read before it started: {reads:#?}"
    );
    let limits: Vec<&String> = calls
        .iter()
        .filter(|l| l.contains("RLIMIT_NOFILE"))
        .collect();
    assert!(
        limits.len() <= 1,
        "the descriptor limit asked {} times for one group: {limits:#?}",
        limits.len()
    );
}

/// The event map is read with one `read` (issue 48, first use): the file is a regular file of
/// the size `statx` gave, so a read that comes back short holding that size is its end, and no
/// second read waits for 0; its `open`, `statx` and `read` are the library's own inline calls.
#[test]
fn the_event_map_is_read_in_one_read() {
    let Some((_, calls)) = traced(&["cpc", "page-faults"]) else {
        return;
    };
    let map = event_map().to_str().unwrap().to_string();
    let open = calls
        .iter()
        .find(|l| l.starts_with("openat(") && l.contains(&map))
        .unwrap_or_else(|| panic!("the map {map} not opened: {calls:#?}"));
    let fd = open.rsplit("= ").next().unwrap().trim().to_string();
    let at = calls.iter().position(|l| l == open).unwrap();
    let closed = calls[at..]
        .iter()
        .position(|l| l.starts_with(&format!("close({fd})")))
        .unwrap_or_else(|| panic!("the map's descriptor {fd} not closed: {calls:#?}"));
    let reads: Vec<&String> = calls[at..at + closed]
        .iter()
        .filter(|l| l.starts_with(&format!("read({fd},")))
        .collect();
    assert_eq!(reads.len(), 1, "{reads:#?}");
}

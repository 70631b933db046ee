//! The `cpustat` command (tools/cpustat.rs over perfcompat::cpustat): per-CPU counting on perf
//! with task-clock on every CPU (as root), the column layout, set cycling, the total line on
//! Ctrl-C, and the refusals (as nobody; bad specifications; usage).

mod common;
use common::skip;
use common::Guarded;

use std::process::{Command, Output};

fn cpustat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpustat"))
        .guarded()
        .args(args)
        .env_remove("PERFCOMPAT_BACKEND")
        .output()
        .unwrap()
}

fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn ncpus() -> usize {
    perfcompat::cpustat::online_cpus().len()
}

/// time, cpu, event, values, the set's specification (several sets)
type Row = (f64, u32, String, Vec<u64>, String);

/// Rows of `time cpu tick values...`, parsed.
fn rows(out: &str) -> Vec<Row> {
    out.lines()
        .filter(|l| !l.trim_start().starts_with("time"))
        .map(|l| {
            let (l, comment) = l.split_once(" # ").unwrap_or((l, ""));
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3..].iter().map(|v| v.parse().unwrap()).collect(),
                comment.to_string(),
            )
        })
        .collect()
}

#[test]
fn counts_task_clock_on_every_cpu_each_interval() {
    if !root() {
        skip("cpustat: CPU-wide counting needs root here (perf_event_paranoid > 0)");
        return;
    }
    let out = cpustat(&["-c", "task-clock,page-faults", "0.25", "4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let title = text.lines().next().unwrap();
    assert_eq!(
        title.split_whitespace().collect::<Vec<_>>(),
        ["time", "cpu", "event", "pic0", "pic1"],
        "{text}"
    );
    let r = rows(&text);
    assert_eq!(r.len(), 4 * ncpus(), "{text}");
    for (k, (t, cpu, ev, vals, _)) in r.iter().enumerate() {
        assert_eq!(ev, "tick");
        assert_eq!(*cpu, perfcompat::cpustat::online_cpus()[k % ncpus()]);
        let want = 0.25 * ((k / ncpus()) + 1) as f64;
        assert!((t - want).abs() < 0.1, "time {t}, {want} expected: {text}");
        // A CPU-wide task-clock counts the whole interval, busy or idle: 250 ms.
        let ms = vals[0] as f64 / 1e6;
        assert!(
            (ms - 250.0).abs() < 60.0,
            "cpu {cpu}: {ms} ms of task-clock: {text}"
        );
    }
}

#[test]
fn several_sets_take_turns_and_say_which_they_are() {
    if !root() {
        skip("cpustat: CPU-wide counting needs root here");
        return;
    }
    let out = cpustat(&[
        "-n",
        "-c",
        "pic0=task-clock",
        "-c",
        "pic0=page-faults",
        "0.1",
        "4",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("time"), "-n prints no titles: {text}");
    let specs: Vec<String> = rows(&text).into_iter().map(|r| r.4).collect();
    let n = ncpus();
    let want: Vec<&str> = ["pic0=task-clock", "pic0=page-faults"]
        .iter()
        .cycle()
        .take(4)
        .flat_map(|s| std::iter::repeat_n(*s, n))
        .collect();
    assert_eq!(specs, want, "{text}");
}

#[test]
fn ctrl_c_prints_the_totals_and_unbinds() {
    if !root() {
        skip("cpustat: CPU-wide counting needs root here");
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_cpustat"))
        .guarded()
        .args(["-c", "task-clock", "0.2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let r = rows(&text);
    let (last, ticks) = r.split_last().unwrap();
    assert_eq!(last.2, "total", "{text}");
    assert_eq!(
        last.1 as usize,
        ncpus(),
        "the total line's cpu column is the CPU count"
    );
    let sum: u64 = ticks.iter().map(|t| t.3[0]).sum();
    assert!(
        last.3[0] >= sum,
        "the total covers every interval printed: {text}"
    );
    // Nothing is left bound: the process is gone and with it its counters.
}

#[test]
fn refusals_name_the_cause() {
    // Usage errors: 2.
    for args in [
        &["0.1"][..],
        &["-c", "task-clock", "-x"],
        &["-c", "task-clock", "0", "1"],
    ] {
        let out = cpustat(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    // Specifications are the tools' grammar, with their messages: 1.
    let out = cpustat(&["-c", "pic0=task-clock,pic0=page-faults", "0.1", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("repeated 'pic0' token"));
    let out = cpustat(&["-c", "no-such-event", "0.1", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-event"));
    // -h: the events of the backend in force.
    let out = cpustat(&["-h"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("CPU performance counter interface"), "{help}");
    assert!(
        help.contains("task-clock") && help.contains("PAPI_"),
        "{help}"
    );
}

/// As nobody, CPU-wide counting is refused with one line naming the paranoid level and the
/// fix, and exit status 1 (root drops to nobody with setpriv to show it).
#[test]
fn unprivileged_users_are_told_the_paranoid_level() {
    if !root() {
        skip("cpustat as nobody: run as root so the test can drop privileges");
        return;
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if paranoid <= 0 {
        skip("cpustat as nobody: perf_event_paranoid allows CPU-wide counting to everyone");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_cpustat"))
        .args(["-c", "task-clock", "0.1", "1"])
        .output();
    let Ok(out) = out else {
        skip("cpustat as nobody: no setpriv");
        return;
    };
    assert_eq!(out.status.code(), Some(1));
    // Under `cargo llvm-cov` (.ci/coverage) the instrumented cpustat also says, as nobody, that
    // it cannot write its profile into the target directory: that line is not cpustat's.
    let err = String::from_utf8_lossy(&out.stderr);
    let err: String = err
        .lines()
        .filter(|l| !l.starts_with("LLVM Profile"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("perf_event_paranoid is {paranoid}")) && err.contains("CAP_PERFMON"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

//! Issue 46 items 5, 6, 7 and 11: what the commands print for a newcomer on a laptop or a VM.
//! `perfex -y` with a mapped event, one `write(2)` per message, `--json` alone on its stream,
//! one exit status for every conflict, no Rust-style "(os error N)", one hint per message.

mod common;
use common::Guarded;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PERFEX: &str = env!("CARGO_BIN_EXE_perfex");
const CPUTRACK: &str = env!("CARGO_BIN_EXE_cputrack");
const CPUSTAT: &str = env!("CARGO_BIN_EXE_cpustat");

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// A map of event 25 (primary data cache misses) to page faults.
fn map25() -> PathBuf {
    let p = tmp("issue46.events");
    std::fs::write(&p, "25 = page-faults\n").unwrap();
    p
}

fn run(cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(cmd)
        .guarded()
        .args(args)
        .env("PERFCOMPAT_BACKEND", "perf")
        .env("PERFCOMPAT_SYSTEM_COSTS", "/nonexistent/perfex.costs")
        .env("PERFCOMPAT_HOST_COSTS", "/nonexistent/host.costs")
        .envs(env.iter().copied())
        .output()
        .expect("the command runs")
}

/// A command, its arguments and its environment.
type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Item 5: a mapped event shows its real name, and no statistic is derived from it.
#[test]
fn perfex_y_with_a_mapped_event_shows_its_name_and_no_memory_statistics() {
    let map = map25();
    let o = run(
        PERFEX,
        &["-e", "25", "-y", "true"],
        &[("PERFCOMPAT_EVENTS", map.to_str().unwrap())],
    );
    let text = err(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains(" 25 page-faults ..."), "{text}");
    assert!(!text.contains("Primary data cache misses"), "{text}");
    assert!(!text.contains("Time accessing memory"), "{text}");
    assert!(!text.contains("bandwidth"), "{text}");
}

/// Item 6: every message on standard error is one `write(2)`, ending its line.
#[test]
fn every_message_is_one_write() {
    if !common::have_tool("strace", "strace") {
        return;
    }
    let trace = tmp("issue46.strace");
    let o = Command::new("strace")
        .guarded()
        .args(["-f", "-qq", "-e", "trace=write", "-s", "4096", "-o"])
        .arg(&trace)
        .args([PERFEX, "-a", "true"])
        .env("PERFCOMPAT_BACKEND", "perf")
        .output()
        .unwrap();
    if !o.status.success() && err(&o).contains("ptrace") {
        common::skip("strace cannot trace here");
        return;
    }
    let t = std::fs::read_to_string(&trace).unwrap();
    let writes: Vec<&str> = t.lines().filter(|l| l.contains("write(2, ")).collect();
    assert!(
        writes.iter().any(|w| w.contains("-a counts all 32 events")),
        "{t}"
    );
    for w in &writes {
        assert!(
            w.contains("\\n\", "),
            "a write that is not whole lines: {w}"
        );
    }
}

/// Item 7: `perfex --json ... 2> f` is JSON, the notices inside it.
#[test]
fn json_on_standard_error_stays_json_with_notices_inside() {
    let o = run(PERFEX, &["--json", "-a", "true"], &[]);
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value =
        serde_json::from_str(&err(&o)).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", err(&o)));
    let notices = v["notices"].as_array().expect("a notices array");
    assert!(
        notices
            .iter()
            .any(|n| n.as_str().unwrap().contains("-a counts all 32 events")),
        "{v}"
    );
}

/// Item 11: every conflict exits 2, the documented usage status.
#[test]
fn every_conflict_exits_with_the_usage_status() {
    let cases: [Case; 5] = [
        (PERFEX, &["-a", "-e", "0", "true"], &[]),
        (PERFEX, &["-mp", "-s", "true"], &[]),
        (PERFEX, &["-e", "0", "-e", "1", "true"], &[]),
        (
            CPUTRACK,
            &["-c", "pic0=task-clock,pic0=page-faults", "true"],
            &[],
        ),
        (
            CPUSTAT,
            &["-c", "issued_instructions,issued_loads", "1", "1"],
            &[("PERFCOMPAT_BACKEND", "sim:r10000")],
        ),
    ];
    for (cmd, args, env) in cases {
        let o = run(cmd, args, env);
        assert_eq!(o.status.code(), Some(2), "{cmd} {args:?}: {}", err(&o));
    }
}

/// Item 11: no message carries Rust's "(os error N)", and a hint is given once.
#[test]
fn messages_have_no_os_error_suffix_and_one_hint() {
    let missing = "/nonexistent/issue46/x";
    let cases: [Case; 7] = [
        (PERFEX, &["-o", missing, "true"], &[]),
        (PERFEX, &["-c", missing, "true"], &[]),
        (PERFEX, &["--merge", missing], &[]),
        (PERFEX, &["/nonexistent/issue46/cmd"], &[]),
        (
            PERFEX,
            &["-e", "0", "true"],
            &[("PERFCOMPAT_EVENTS", missing)],
        ),
        (CPUTRACK, &["-o", missing, "-c", "task-clock", "true"], &[]),
        (CPUTRACK, &["true"], &[]),
    ];
    for (cmd, args, env) in cases {
        let o = run(cmd, args, env);
        let e = err(&o);
        assert!(!e.is_empty(), "{cmd} {args:?} said nothing");
        assert!(!e.contains("(os error"), "{cmd} {args:?}: {e}");
        assert!(e.matches(" -h ").count() <= 1, "{cmd} {args:?}: {e}");
    }
}

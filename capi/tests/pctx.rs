//! libpctx as pctx_capture(3CPC) and pctx_set_events(3CPC) describe it, from C: the
//! callbacks' order and ids for a program that just runs, execs, creates threads, forks with
//! and without a fork callback; the exec callback's -1; ticks every `msec`; and a cputrack-like
//! client (tests/c/pctx_events.c) counting page faults in a parent and its child.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{compile, link_args, repo, run_output, run_traced, tmp};

/// The controller (tests/c/pctx_events.c), the target (tests/c/pctx_target.c) and the
/// page-fault workload (tests/c/perfex_workload.c).
fn programs() -> &'static (PathBuf, PathBuf, PathBuf) {
    static BINS: OnceLock<(PathBuf, PathBuf, PathBuf)> = OnceLock::new();
    BINS.get_or_init(|| {
        let events = tmp().join("pctx_events");
        let target = tmp().join("pctx_target");
        let workload = tmp().join("pctx_workload");
        for (out, src, link) in [
            (&events, "tests/c/pctx_events.c", true),
            (&target, "tests/c/pctx_target.c", false),
            (&workload, "tests/c/perfex_workload.c", false),
        ] {
            let mut cmd = Command::new("cc");
            cmd.args([
                "-std=gnu99",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pthread",
                "-o",
            ])
            .arg(out)
            .arg(repo().join(src))
            .arg(format!("-I{}", repo().join("include").display()));
            if link {
                cmd.args(link_args());
            }
            compile(&mut cmd, src);
        }
        (events, target, workload)
    })
}

fn target() -> String {
    programs().1.display().to_string()
}

/// Run the controller with `args`; `None` (after a SKIPPED line) where tracing is not
/// allowed. Returns its standard output with every `#N` id named: by the target's own
/// `id NAME=N` lines on standard error, else `P` for the first unknown id, `X1`, `X2`...
fn run(args: &[&str]) -> Option<String> {
    let (stdout, stderr, out) = run_traced(&programs().0, args)?;
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    let mut names: HashMap<String, String> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("id "))
        .filter_map(|l| l.split_once('='))
        .map(|(n, v)| (v.trim().to_string(), n.to_string()))
        .collect();
    let mut unknown = 0;
    let mut named = String::new();
    for line in stdout.lines() {
        let words: Vec<String> = line
            .split(' ')
            .map(|w| match w.strip_prefix('#') {
                Some(id) => {
                    let next = match unknown {
                        0 => "P".to_string(),
                        n => format!("X{n}"),
                    };
                    names
                        .entry(id.to_string())
                        .or_insert_with(|| {
                            unknown += 1;
                            next
                        })
                        .clone()
                }
                None => w.to_string(),
            })
            .collect();
        named += &words.join(" ");
        named.push('\n');
    }
    Some(named)
}

/// The lines of one controller (`p`: the caller, `c`: the copy running the fork callback),
/// without their prefix.
fn of(out: &str, who: &str) -> Vec<String> {
    let prefix = format!("[{who}] ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(|l| l.trim().to_string()).collect()
}

/// The callbacks (all registered) of a program that just runs, and what the caller prints
/// after `pctx_run` and `pctx_release`: no lwp_exit, which is for a thread ending before its
/// process (issue 30: it came for the last LWP too); its LWP id is 1.
const JUST_RUNS: &str = "init_lwp P 1
                         fini_lwp P 1
                         exit P 1 0
                         pctx_run 0
                         released";

#[test]
fn a_program_that_just_runs_gives_init_lwp_fini_lwp_exit() {
    let Some(out) = run(&["seq", "true"]) else {
        return;
    };
    // pctx_create's own exec is how the program starts, not an exec event.
    assert_eq!(of(&out, "p"), lines(JUST_RUNS), "{out}");
}

#[test]
fn an_exec_ends_the_threads_then_starts_lwp_1() {
    let Some(out) = run(&["seq", "sh", "-c", "exec /bin/true a ' b'"]) else {
        return;
    };
    assert_eq!(
        of(&out, "p"),
        // The program execed is a program that just runs. The exec callback gets its
        // arguments as Solaris's pr_psargs (issue 30: it got /proc/<pid>/exe's path).
        lines(&format!(
            "init_lwp P 1
             fini_lwp P 1
             exec P 1 '/bin/true a  b'
             {JUST_RUNS}"
        )),
        "{out}"
    );
}

/// pr_psargs holds PRARGSZ (80) bytes with its NUL: the argument string is cut at 79.
#[test]
fn the_exec_callbacks_argument_string_is_cut_as_pr_psargs() {
    let long = "x".repeat(100);
    let Some(out) = run(&["seq", "sh", "-c", &format!("exec /bin/true {long}")]) else {
        return;
    };
    let want = format!("/bin/true {long}")[..79].to_string();
    assert_eq!(of(&out, "p")[2], format!("exec P 1 '{want}'"), "{out}");
}

#[test]
fn the_exec_callbacks_minus_one_ends_pctx_run_with_minus_one() {
    let Some(out) = run(&["seq", "-x", "sh", "-c", "exec /bin/true"]) else {
        return;
    };
    // Nothing after the exec callback: no init_lwp, no fini_lwp at release, no exit.
    assert_eq!(
        of(&out, "p"),
        lines(
            "init_lwp P 1
             fini_lwp P 1
             exec P 1 '/bin/true'
             pctx_run -1
             released"
        ),
        "{out}"
    );
}

/// libpctx.h: -1 from a callback ends `pctx_run` with -1 and no later callback. The lwp_exit
/// callback's -1 was ignored (issue 29): fini_lwp and exit came, and pctx_run returned 0.
#[test]
fn the_lwp_exit_callbacks_minus_one_ends_pctx_run_with_minus_one() {
    let t = target();
    let Some(out) = run(&["seq", "-l", &t, "threads"]) else {
        return;
    };
    assert_eq!(
        of(&out, "p"),
        lines(
            "init_lwp main 1
             lwp_create main 1
             init_lwp main 2
             lwp_exit main 2
             pctx_run -1
             released"
        ),
        "{out}"
    );
}

/// `pctx_create` of a file that cannot be executed (no execute permission, a directory)
/// returns NULL with `errno` `EACCES`, as libpctx.h says, instead of a handle whose
/// `pctx_run` fails (issue 29).
#[test]
fn pctx_create_of_a_file_that_cannot_run_is_null_with_eacces() {
    let dir = tmp().join(format!("pctx-noexec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("not-executable");
    std::fs::write(&file, "#!/bin/sh\ntrue\n").unwrap();
    let (file, dir) = (file.display().to_string(), dir.display().to_string());
    for path in [file.as_str(), dir.as_str()] {
        let out = run_output(&programs().0, "perf", &["create", path], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout.trim(),
            "[p] pctx_create NULL EACCES",
            "{path}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `pctx_capture` of a zombie says the process has exited (`ESRCH`), not that tracing it is
/// forbidden (`EACCES` blaming ptrace_scope, as it did: issue 29).
#[test]
fn pctx_capture_of_a_zombie_says_it_has_exited() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .and_then(|(_, r)| r.trim().chars().next())
    };
    let start = std::time::Instant::now();
    while state() != Some('Z') {
        assert!(
            start.elapsed().as_secs() < 10,
            "{pid} never became a zombie"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = run_output(&programs().0, "perf", &["capture", &pid.to_string()], &[]);
    child.wait().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout.trim(), "[p] pctx_capture NULL ESRCH", "{stderr}");
    assert!(stderr.contains("zombie"), "{stderr}");
    assert!(!stderr.contains("ptrace_scope"), "{stderr}");
}

#[test]
fn threads_get_lwp_create_from_their_creator_then_init_lwp() {
    let t = target();
    let Some(out) = run(&["seq", &t, "threads"]) else {
        return;
    };
    assert_eq!(
        of(&out, "p"),
        // LWP ids are Solaris's small numbers in creation order (issue 30: Linux thread ids),
        // and the last LWP ends with the process: fini_lwp without lwp_exit.
        lines(
            "init_lwp main 1
             lwp_create main 1
             init_lwp main 2
             lwp_exit main 2
             fini_lwp main 2
             lwp_create main 1
             init_lwp main 3
             lwp_exit main 3
             fini_lwp main 3
             fini_lwp main 1
             exit main 1 0
             pctx_run 0
             released"
        ),
        "{out}"
    );
}

/// A process that ends with a thread still running (exit from main, or SIGKILL): every thread
/// ends with the process, so gets fini_lwp alone, no lwp_exit (issue 30: both got lwp_exit);
/// the two threads end at once, in either order; then exit.
#[test]
fn at_process_exit_the_threads_get_fini_lwp_without_lwp_exit() {
    let t = target();
    for (mode, status) in [("exit", "0"), ("kill", "137")] {
        let Some(out) = run(&["seq", &t, mode]) else {
            return;
        };
        let l = of(&out, "p");
        assert_eq!(
            l[..3],
            lines(
                "init_lwp main 1
                 lwp_create main 1
                 init_lwp main 2"
            ),
            "{out}"
        );
        let mut ends = l[3..5].to_vec();
        ends.sort();
        assert_eq!(ends, ["fini_lwp main 1", "fini_lwp main 2"], "{out}");
        assert_eq!(
            l[5..],
            lines(&format!(
                "exit main 1 {status}
                 pctx_run 0
                 released"
            )),
            "{out}"
        );
    }
}

/// The main thread ending alone (pthread_exit) ends before its process: lwp_exit, fini_lwp;
/// the thread left ends with the process: fini_lwp alone, then exit (issue 30: lwp_exit came
/// for every thread).
#[test]
fn the_main_thread_ending_first_gets_lwp_exit_and_the_last_thread_does_not() {
    let t = target();
    let Some(out) = run(&["seq", &t, "main_exit"]) else {
        return;
    };
    let l = of(&out, "p");
    assert_eq!(l[..2], lines("init_lwp main 1\nlwp_create main 1"), "{out}");
    // The new thread's start and the main thread's end come in either order.
    let of_lwp = |id: &str| -> Vec<String> {
        l[2..]
            .iter()
            .filter(|x| x.ends_with(&format!("main {id}")))
            .cloned()
            .collect()
    };
    assert_eq!(of_lwp("1"), ["lwp_exit main 1", "fini_lwp main 1"], "{out}");
    assert_eq!(of_lwp("2"), ["init_lwp main 2", "fini_lwp main 2"], "{out}");
    assert_eq!(
        l[l.len() - 3..],
        lines("exit main 1 0\npctx_run 0\nreleased"),
        "{out}"
    );
}

/// The callbacks of `pctx_target fork` when its child is not followed in the same run.
const PARENT_ALONE: &str = "init_lwp main 1
                            fini_lwp main 1
                            exit main 1 0
                            pctx_run 0
                            released";

#[test]
fn without_a_fork_callback_children_are_not_followed() {
    let t = target();
    let Some(out) = run(&["seq", &t, "fork"]) else {
        return;
    };
    assert!(!out.contains("child"), "{out}");
    assert_eq!(of(&out, "p"), lines(PARENT_ALONE), "{out}");
}

#[test]
fn a_fork_callback_gets_the_child_as_its_own_pctx() {
    let t = target();
    let Some(out) = run(&["seq", "-f", &t, "fork"]) else {
        return;
    };
    // The parent's run sees only the parent.
    assert_eq!(of(&out, "p"), lines(PARENT_ALONE), "{out}");
    // The copy gets (child's pctx, parent pid, child pid, child's LWP id 1) and runs it.
    assert_eq!(
        of(&out, "c"),
        lines(
            "fork main child 1
             init_lwp child 1
             fini_lwp child 1
             exit child 1 0
             pctx_run 0"
        ),
        "{out}"
    );
}

/// `pctx_run(p, msec, nsamples, tick)` on `args`: (ticks, elapsed ms, return code).
fn ticks(msec: u32, n: u32, args: &[&str]) -> Option<(i64, f64, i32)> {
    ticks_mode("ticks", msec, n, args)
}

fn ticks_mode(mode: &str, msec: u32, n: u32, args: &[&str]) -> Option<(i64, f64, i32)> {
    let (m, n) = (msec.to_string(), n.to_string());
    let mut a = vec![mode, &m, &n];
    a.extend_from_slice(args);
    let out = run(&a)?;
    let w: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(w.get(1), Some(&"ticks"), "{out}");
    Some((
        w[2].parse().unwrap(),
        w[4].parse().unwrap(),
        w[6].parse().unwrap(),
    ))
}

#[test]
fn ticks_come_every_msec() {
    for (msec, want) in [(100, 10), (500, 2)] {
        let Some((n, ms, rc)) = ticks(msec, 0, &["sleep", "1"]) else {
            return;
        };
        assert_eq!(rc, 0);
        assert!(
            (n - want).abs() <= 1,
            "{n} ticks of {msec} ms over sleep 1 ({ms:.0} ms), want {want}"
        );
    }
    // nsamples ends the run after that many ticks (cputrack -T 0.1 -N 3).
    let Some((n, ms, rc)) = ticks(100, 3, &["sleep", "2"]) else {
        return;
    };
    assert_eq!((n, rc), (3, 0));
    assert!(
        (290.0..700.0).contains(&ms),
        "3 ticks of 100 ms took {ms} ms"
    );
}

/// `pctx_terminate`, here called from the third tick, ends the run at once with 0.
#[test]
fn pctx_terminate_ends_the_run() {
    let Some((n, ms, rc)) = ticks_mode("terminate", 50, 3, &["sleep", "2"]) else {
        return;
    };
    assert_eq!((n, rc), (3, 0));
    assert!(
        (140.0..1000.0).contains(&ms),
        "3 ticks of 50 ms took {ms} ms"
    );
}

/// The last `fini ... faults N` count of `who`, and its number of exec lines.
fn last_faults(out: &str, who: &str) -> (u64, usize) {
    let l = of(out, who);
    let faults = l
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("fini ").and_then(|r| r.rsplit(' ').next()))
        .unwrap_or_else(|| panic!("no fini line for [{who}]: {out}"))
        .parse()
        .unwrap();
    (faults, l.iter().filter(|l| l.starts_with("exec ")).count())
}

#[test]
fn a_cputrack_like_client_counts_page_faults_of_parent_and_child() {
    let w = programs().2.display();
    let cmd = format!("{w} touch 20000; exec {w} touch 30000");
    let Some(out) = run(&["track", "20", "sh", "-c", &cmd]) else {
        return;
    };
    for (who, pages) in [("p", 30000u64), ("c", 20000)] {
        let (faults, execs) = last_faults(&out, who);
        assert_eq!(execs, 1, "[{who}] execs the target once: {out}");
        let lo = pages;
        let hi = pages + pages / 20;
        assert!(
            (lo..=hi).contains(&faults),
            "[{who}] counted {faults} page faults after its exec, want {pages} (+5%): {out}"
        );
        let l = of(&out, who);
        assert_eq!(
            l.iter().filter(|l| l.starts_with("init ")).count(),
            l.iter().filter(|l| l.starts_with("fini ")).count(),
            "{out}"
        );
        assert!(l.iter().any(|l| l == "pctx_run 0"), "{out}");
    }
    // sh's child (with dash a vfork) is followed in the copy: (parent, child, child's thread).
    assert_eq!(of(&out, "c")[0], "fork P X1 1", "{out}");
    assert!(
        of(&out, "c").contains(&"exec X1 1 pctx_workload touch 20000".to_string()),
        "{out}"
    );
}

/// The target is found where the tests expect it (a guard for the helpers above).
#[test]
fn the_programs_build() {
    assert!(Path::new(&programs().0).exists() && Path::new(&target()).exists());
}

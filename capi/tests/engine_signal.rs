//! Overflows of a program that blocks, ignores or takes over the library's overflow signal
//! (SIGRTMAX-2), or blocks every signal and waits for SIGEMT with `sigtimedwait` (issue 29
//! item 1; tests/c/cpc_engine_signal.c). In every mode the set is frozen at the wrap (value 0,
//! twice, with page faults in between) and each overflow gives exactly one SIGEMT: the
//! sample finds the kernel's overflow record when the signal could not be handled, and the
//! library's watcher thread (src/base/watch.rs) handles it for a thread that waits. Before, the
//! count ran on past the wrap and no SIGEMT came. `.ci/repeat` runs these 10 times in release.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, run_output};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_engine_signal", &[]))
}

/// Run `mode` for `rounds` overflows; returns stderr.
fn run(mode: &str, rounds: u32) -> String {
    let r = rounds.to_string();
    let out = run_output(program(), "perf", &[mode, &r], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success()
            && stdout.contains(&format!("\n{rounds} notifications\n0 failures"))
            && stdout.contains("first frozen value 0,"),
        "{mode}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    stderr
}

const TAKEN_OVER: &str = "the library's overflow signal: overflows are now found";

#[test]
fn engine_signal_control_freezes_at_the_wrap_with_one_sigemt_each() {
    let err = run("normal", 20);
    assert!(!err.contains(TAKEN_OVER), "{err}");
}

#[test]
fn engine_signal_all_blocked_and_sigtimedwait_gets_one_sigemt_per_overflow() {
    let err = run("sigwait", 100);
    assert!(!err.contains(TAKEN_OVER), "{err}");
}

#[test]
fn engine_signal_blocked_the_sample_finds_the_set_frozen() {
    run("blocked", 30);
}

#[test]
fn engine_signal_blocked_sigemt_comes_without_a_sample() {
    run("blockwait", 30);
}

#[test]
fn engine_signal_ignored_freezes_and_notifies_and_is_reported_once() {
    let err = run("ignored", 30);
    assert_eq!(err.matches(TAKEN_OVER).count(), 1, "{err}");
}

#[test]
fn engine_signal_replaced_freezes_and_notifies_and_is_reported_once() {
    let err = run("replaced", 30);
    assert_eq!(err.matches(TAKEN_OVER).count(), 1, "{err}");
}

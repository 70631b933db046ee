//! Hostile programs around the library's overflow signal (SIGRTMAX-2) and SIGEMT (issue 44
//! items 2-4; tests/c/cpc_hostile_signal.c on perf). `.ci/repeat`-style: run these 10-20
//! times in release (`cargo test --release -p perfcompat-capi --test hostile_signal`), their
//! outcome depends on the library's watcher thread's timing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{c_program, compile, repo, run_output, tmp};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_hostile_signal", &[]))
}

/// `tests/c/unblock_ok.c`, built without the library: the image the exec starts.
fn unblock_ok() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = tmp().join("unblock_ok");
        compile(
            Command::new("cc")
                .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&out)
                .arg(repo().join("tests/c/unblock_ok.c")),
            "tests/c/unblock_ok.c",
        );
        out
    })
}

/// Run `mode` for `rounds` overflows and check that it ended by itself with one SIGEMT per
/// overflow and no failed check.
fn run(mode: &str, rounds: u32) {
    let r = rounds.to_string();
    let out = run_output(program(), "perf", &[mode, &r], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("\n{rounds} notifications\n0 failures")),
        "{mode}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
}

/// Item 2: a program that blocks the overflow signal, or takes it over, and samples at once
/// after the overflow reads the frozen value, never the count past the wrap.
#[test]
fn a_sample_right_after_an_unsignalled_overflow_is_frozen_at_the_wrap() {
    run("sample-blocked", 20);
    run("sample-replaced", 20);
}

/// Item 3: a handler of the program's with `SA_RESETHAND` on the overflow signal, put there
/// after the bind: the kernel resets the signal to its default action at the first delivery,
/// and the next overflow signal would end the process.
#[test]
fn a_resethand_handler_on_the_overflow_signal_neither_kills_nor_loses_an_overflow() {
    run("resethand2", 10);
    run("resethand", 10);
}

/// Item 4: a thread that blocks every signal (before or after its bind) overflows and execs a
/// program that unblocks every signal: nothing of the library's is pending there.
#[test]
fn nothing_of_the_librarys_is_left_pending_across_an_exec() {
    let child = unblock_ok().to_str().unwrap().to_string();
    for mode in ["exec-before", "exec-after"] {
        let out = run_output(program(), "perf", &[mode, &child], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.trim_end() == "OK",
            "{mode}: {:?}\n{stdout}\n{stderr}",
            out.status
        );
    }
}

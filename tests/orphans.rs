//! No program a test starts outlives the test suite: the tests start their programs through
//! `common::Guarded`, which has the kernel kill a program when the thread that started it ends
//! (`PR_SET_PDEATHSIG`), so a suite stopped in the middle (a run killed at its time limit)
//! leaves none running. (A pfm example left running by a stopped `cargo test` once filled the
//! user's signal queue for 20 minutes and failed the runs after it.) CI also runs the suite in
//! a session of its own and fails if anything of it is left (`.ci/contained`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::Guarded;

/// Only as the child of the test below (`ORPHANS_PID_FILE` set): a test in the middle of a long
/// program, started as the tests start theirs. Without the variable it returns at once.
#[test]
fn a_test_in_the_middle_of_a_long_program() {
    let Some(file) = std::env::var_os("ORPHANS_PID_FILE") else {
        return;
    };
    let mut child = Command::new("sleep")
        .guarded()
        .arg("600")
        .spawn()
        .expect("sleep runs");
    std::fs::write(file, child.id().to_string()).unwrap();
    // Killed in the middle of this by the test below; were it not, it would end here.
    std::thread::sleep(Duration::from_secs(600));
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether process `pid` still runs (not gone, not a zombie waiting to be reaped).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the command's parenthesised name.
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[test]
fn stopping_the_suite_in_the_middle_of_a_long_program_leaves_no_child() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("orphans-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&file);
    // The suite: this test binary running the test above, as cargo test runs it.
    let mut suite = Command::new(std::env::current_exe().unwrap())
        .guarded()
        .args([
            "--exact",
            "a_test_in_the_middle_of_a_long_program",
            "--nocapture",
        ])
        .env("ORPHANS_PID_FILE", &file)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let pid: u32 = loop {
        if let Some(p) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child test never started its program"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(running(pid), "the long program runs");
    // Stopped as a time limit stops it.
    suite.kill().unwrap();
    suite.wait().unwrap();
    let start = Instant::now();
    while running(pid) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = running(pid);
    if left {
        // SAFETY: a plain kill of the program this test made run, so it does not linger.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let _ = std::fs::remove_file(&file);
    assert!(!left, "program {pid} outlived the suite that started it");
}

//! A program that closes the library's counter descriptors while it counts (issue 44 item 1):
//! `close_range(3, ~0U, 0)` or a loop closing 3..1023, then a pipe of its own, whose numbers
//! could be the counters' old ones (tests/c/closed_fds.c). Every call on the lost counters
//! fails with EBADF and a message naming the closed descriptor; none hangs, and the program's
//! pipe keeps its bytes and stays open through the unbind and `cpc_close`.

mod common;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;

use common::{c_program, page_fault_map, Guarded};

/// How long one run may take before it counts as hung (it takes milliseconds).
const HANG_SECS: &str = "20";

fn program() -> &'static std::path::Path {
    static BIN: OnceLock<std::path::PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("closed_fds", &["-std=gnu99"]))
}

/// Run the program's scenario `what` closing the descriptors `how`, under a timeout. The
/// close loop (3..1023) runs under the usual soft descriptor limit of 1024, which it closes
/// every number of (the library's counters sit near the top of the limit).
fn run(what: &str, how: &str) {
    let map = page_fault_map(25);
    let mut cmd = Command::new("timeout");
    if how == "loop" {
        // SAFETY: one system call between fork and exec; the limit survives exec.
        unsafe {
            cmd.pre_exec(|| {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                lim.rlim_cur = lim.rlim_max.min(1024);
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                Ok(())
            })
        };
    }
    cmd.args(["-s", "KILL", HANG_SECS])
        .arg(program())
        .args([what, how])
        .env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .env("PERFCOMPAT_EVENTS", map.to_str().unwrap());
    let out = cmd.guarded().output().expect("run tests/c/closed_fds");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        None,
        "{what} {how}: hung (killed after {HANG_SECS} s):\n{stdout}\n{stderr}"
    );
    assert!(
        out.status.success() && stdout.contains(": 0 failures"),
        "{what} {how}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    // The error names the cause, on standard error (libcpc: no subcode; libperfex's channel).
    let call = if what == "perfex" {
        "read_counters"
    } else {
        "cpc_set_restart"
    };
    assert!(
        stderr.contains(&format!("{call}: the counter's descriptor "))
            && stderr.contains("was closed by the program"),
        "{what} {how}: no clear error on stderr:\n{stderr}"
    );
}

/// [`run`] with `close_range` and with the close loop.
fn run_both(what: &str) {
    for how in ["close_range", "loop"] {
        run(what, how);
    }
}

#[test]
fn a_sample_after_the_program_closed_the_counters_fails_and_leaves_its_pipe() {
    run_both("sample");
}

#[test]
fn a_restart_after_the_program_closed_the_counters_fails_without_hanging() {
    run_both("restart");
}

#[test]
fn libperfex_after_the_program_closed_the_counters_fails_and_leaves_its_pipe() {
    run_both("perfex");
}

#[test]
fn the_programs_pipe_at_the_counters_numbers_is_never_read_polled_or_closed() {
    run_both("dup2");
}

#[test]
fn an_overflow_restarted_from_sigemt_after_the_close_fails_without_hanging_the_handler() {
    run_both("overflow");
}

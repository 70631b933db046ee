//! How libcpc's SIGEMT reaches the program on perf: since issue 19 the engine calls the
//! program's SIGEMT handler from its own overflow signal handler instead of queueing a second
//! signal, and falls back to queueing whenever a kernel delivery could behave differently.
//! Each test runs one mode of tests/c/cpc_emt_delivery.c, which checks what a program can
//! observe of a delivery: the siginfo, the interrupted context, the signal mask during and after
//! the handler, `signal()`, `SA_NODEFER`, `SA_RESETHAND`, `sigtimedwait`, `signalfd`, leaving
//! the handler with `siglongjmp` (with and without the saved mask), `SIG_IGN` and `SIG_DFL`.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, run_output};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_emt_delivery", &[]))
}

fn mode(m: &str) {
    let out = run_output(program(), "perf", &[m], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{m}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_sa_siginfo_handler_gets_the_siginfo_the_context_and_the_kernels_mask() {
    mode("handler");
}

#[test]
fn a_handler_installed_with_signal_is_called_without_siginfo() {
    mode("plain");
}

#[test]
fn sa_nodefer_leaves_sigemt_unblocked_in_the_handler() {
    mode("nodefer");
}

#[test]
fn sa_resethand_resets_the_disposition_before_the_handler() {
    mode("resethand");
}

#[test]
fn a_blocked_sigemt_is_taken_by_sigtimedwait() {
    mode("wait");
}

#[test]
fn a_blocked_sigemt_is_read_from_a_signalfd() {
    mode("signalfd");
}

#[test]
fn a_handler_leaving_by_siglongjmp_gets_the_saved_mask_back() {
    mode("siglongjmp");
}

#[test]
fn a_handler_leaving_without_the_saved_mask_leaves_the_handlers_mask() {
    mode("longjmp");
}

#[test]
fn an_ignored_sigemt_freezes_the_set_and_the_program_goes_on() {
    mode("ignored");
}

#[test]
fn sigemt_at_its_default_action_ends_the_process() {
    let out = run_output(program(), "perf", &["default"], &[]);
    assert_eq!(
        out.status.signal(),
        Some(63),
        "{:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With `RLIMIT_SIGPENDING` 0 neither the engine's overflow signal nor a SIGEMT can be queued:
/// the kernel sends a plain SIGIO instead, the engine freezes from it, and SIGEMT, delivered
/// from that handler, still reaches the program (queued, it was lost: `rt_tgsigqueueinfo`
/// failed with EAGAIN).
#[test]
fn with_a_full_signal_queue_sigemt_still_reaches_the_handler() {
    mode("fullqueue");
}

#[test]
fn a_handler_with_sa_onstack_runs_on_the_alternate_stack() {
    mode("onstack");
}

/// A SIGEMT already pending is delivered before the next overflow's: the direct call is not
/// made over it (`signal::call_handler`'s pending check; seen failing without it).
#[test]
fn a_pending_sigemt_keeps_its_place_before_the_next_notification() {
    mode("pending");
}

//! What a peer's test suite and real clients still saw differently from Solaris (issue 45),
//! through tests/c/cpc_solaris_diffs.c, a program written from the man pages and `<libcpc.h>`.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_solaris_diffs", &[]))
}

/// Run a mode; its standard output, after checking that it reported no failure.
fn mode(backend: &str, args: &[&str]) -> String {
    let out = run_output(program(), backend, args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(": 0 failures"),
        "{args:?} on {backend}:\n{stdout}{stderr}"
    );
    stdout
}

/// Item 1: cpc_buf_tick counts from the bind; cpc_set_restart does not zero it (it dropped
/// from 8.9e8 to 4.4e7 at a restart).
#[test]
fn the_tick_counts_from_the_bind_through_restarts_on_perf() {
    mode("perf", &["tick", "task-clock"]);
}

/// Item 1 through overflows: restarts from a SIGEMT handler every 100 page faults.
#[test]
fn the_tick_goes_on_through_overflow_restarts_on_perf() {
    mode("perf", &["tick-overflows"]);
}

/// Item 2: CPC_COUNT_SYSTEM alone on the clocks (and the events counted from them) is refused
/// with the reason; page-faults, which the kernel counts by mode, is accepted.
#[test]
fn system_mode_alone_is_refused_where_the_kernel_cannot_count_it() {
    // Without a PMU, cycles and PAPI_tot_cyc are estimated from the task clock ("?": the
    // program asks cpc_cciname which).
    let args = [
        "sysonly",
        "-",
        "task-clock",
        "cpu-clock",
        "?",
        "cycles",
        "PAPI_tot_cyc",
        "+",
        "page-faults",
    ];
    let out = mode("perf", &args);
    assert!(out.contains("task-clock system-only: -1"), "{out}");
}

/// Item 3: `<libcpc.h>` has `<sys/cpc_event.h>`'s names, and they read what version 1 writes.
#[test]
fn the_cpc_event_h_names_decode_the_ultrasparc_pcr() {
    let out = mode("sim:ultrasparc2", &["names"]);
    assert!(out.contains("tsc "), "{out}");
    mode("sim:ultrasparc", &["names"]);
}

/// Item 6: one line per error, the explanation in it, for the default report and a handler.
#[test]
fn an_error_is_one_line_with_its_explanation_for_handlers_too() {
    let out = mode("sim:ultrasparc", &["handler"]);
    assert!(
        out.contains("Unknown event: unknown event 'No_such_event'"),
        "{out}"
    );
    // The default report: the same one line on standard error, as on Solaris.
    let out = run_output(program(), "sim:ultrasparc", &["default"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one error, one line: {stderr}");
    assert!(
        lines[0].starts_with(
            "libcpc: cpc_set_add_request: Unknown event: unknown event 'No_such_event'"
        ),
        "{stderr}"
    );
}

/// Item 9: si_addr is the PC in the handler's context on an emulated PMU, as on perf.
#[test]
fn si_addr_is_the_handlers_pc_on_an_emulated_pmu() {
    mode("sim:ultrasparc", &["siaddr", "Cycle_cnt"]);
}

/// Item 9's reference: on perf it already was.
#[test]
fn si_addr_is_the_handlers_pc_on_perf() {
    mode("perf", &["siaddr", "page-faults"]);
}

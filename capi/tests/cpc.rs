//! libcpc v2 from C: tests/c/cpc_abi.c, built with `-Wall -Wextra -Wpedantic -Werror` against
//! `include/` and the library only, run in each of its modes on the backend the mode needs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{c_program, compile, link_args, repo, run, run_output, skip, tmp};

/// The test program, built once for C (and once for C++ to check the header compiles there).
fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_abi", &["-Wpedantic", "-pthread"]))
}

#[test]
fn the_headers_compile_as_cxx() {
    let src = tmp().join("cpc_headers.cc");
    std::fs::write(
        &src,
        "#include <libcpc.h>\n#include <libpctx.h>\n#include <libcpc.h>\n\
         static void h(const char *, int, const char *, va_list) {}\n\
         int main() { cpc_errhndlr_t *f = h; cpc_attr_t a = {0, 0}; (void)a;\n\
         switch (SIGEMT) { case SIGEMT: break; default: break; }\n\
         return cpc_seterrhndlr(cpc_open(CPC_VER_CURRENT), f) + (int)sizeof(hrtime_t)\n\
         + (int)sizeof(processorid_t) + (int)sizeof(uint_t) + EMT_CPCOVF; }\n",
    )
    .unwrap();
    compile(
        Command::new("c++")
            .args([
                "-std=c++11",
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-o",
            ])
            .arg(tmp().join("cpc_headers_cxx"))
            .arg(&src)
            .arg(format!("-I{}", repo().join("include").display()))
            .args(link_args()),
        "a C++ program including libcpc.h",
    );
}

#[test]
fn documented_errors_with_errno_and_subcode() {
    run(program(), "sim:ultrasparc", &["errors"]);
}

#[test]
fn exact_counts_buffers_and_one_set_per_thread() {
    run(program(), "sim:ultrasparc", &["counts"]);
}

#[test]
fn overflow_notification_without_an_interrupt_is_enotsup() {
    run(program(), "sim:ultrasparc2", &["us2"]);
}

#[test]
fn pentium4_escr_conflict_is_refused_at_bind_and_pinning_resolves_it() {
    let err = run(program(), "sim:pentium4", &["p4"]);
    assert!(!err.contains("libcpc:"), "a handler was set: {err}");
}

#[test]
fn a_hundred_thousand_overflow_signals_with_restarts_lose_no_count() {
    let out = run_output(program(), "sim:ultrasparc", &["ovf-sim"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("signals 100000 total 100000000"),
        "{stdout}"
    );
    assert!(stdout.contains("ovf-sim: 0 failures"), "{stdout}");
}

#[test]
fn page_fault_overflow_sends_sigemt_every_1000_faults() {
    let out = run(program(), "perf", &["ovf-perf"]);
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn inheriting_binding_counts_the_threads_created_after_it() {
    run(program(), "perf", &["inherit"]);
}

/// CPC_BIND_LWP_INHERIT with an overflow-notifying request: per-thread copies, each starting
/// with a SIGEMT where it reads UINT64_MAX, presetting itself and overflowing on its own thread;
/// a grandchild inherits again; the binder counts only itself; copies are closed at thread exit.
#[test]
fn inherited_notifying_sets_are_per_thread_copies_with_a_first_sigemt() {
    let out = run(program(), "perf", &["inherit-emt"]);
    assert!(!out.contains("FAIL"), "{out}");
}

/// The same on an emulated PMU, with exact counts.
#[test]
fn inherited_notifying_sets_are_per_thread_copies_on_an_emulated_pmu() {
    let out = run(program(), "sim:ultrasparc", &["inherit-emt-sim"]);
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn cpu_binding_counts_and_restores_the_affinity() {
    let out = run_output(program(), "perf", &["cpu"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    if let Some(l) = stdout.lines().find(|l| l.starts_with("SKIPPED:")) {
        skip(l.trim_start_matches("SKIPPED: "));
        assert!(
            stderr.contains("perf_event_paranoid"),
            "the refusal says why: {stderr}"
        );
    }
}

#[test]
fn without_a_handler_errors_are_reported_on_stderr_in_libcpcs_words() {
    let err = run(program(), "sim:ultrasparc", &["default"]);
    assert!(
        err.contains("libcpc: cpc_set_add_request: Unknown event: unknown event 'No_such_event'"),
        "libcpc's message, then the engine's explanation on the same line: {err}"
    );
    assert!(
        err.contains("libcpc: cpc_bind_curlwp: the set does not contain any requests"),
        "{err}"
    );
    assert!(!err.contains("'Bogus'"), "the handler took that one: {err}");
    assert!(err.contains("'Bogus2'"), "NULL restores the default: {err}");
    // cpc_disable and cpc_enable without a bound set are silent (issue 30 item 3: they said
    // "the calling thread has no bound set").
    assert!(
        !err.contains("cpc_disable") && !err.contains("cpc_enable"),
        "{err}"
    );
    // A bad index is named as the program gave it (issue 30 item 8: it said "index 0").
    assert!(
        err.contains("libcpc: cpc_buf_get: request index -1 out of range (the set has 1 requests)"),
        "{err}"
    );
    assert!(
        err.contains("libcpc: cpc_buf_set: request index 7 out of range (the set has 1 requests)"),
        "{err}"
    );
}

/// The walkers list what the backend counts: the emulated UltraSPARC's tables exactly, and on
/// perf the software events always, the hardware ones only with a PMU.
#[test]
fn walkers_list_the_backends_events_and_attributes() {
    let out = run_output(program(), "sim:ultrasparc", &["walk"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let has = |l: &str| stdout.lines().any(|x| x == l);
    for l in [
        "npic 2",
        "caps 1",
        "event Cycle_cnt",
        "event EC_ref",
        "event EC_misses",
        "generic PAPI_tot_cyc",
        "pic0 EC_ref",
        "pic1 EC_misses",
        "pic0 Cycle_cnt",
        "pic1 Cycle_cnt",
        "gpic0 PAPI_tot_cyc",
        "attr picnum",
    ] {
        assert!(has(l), "missing '{l}':\n{stdout}");
    }
    assert!(!has("pic1 EC_ref") && !has("event PAPI_tot_cyc") && !has("generic EC_ref"));
    let attrs = stdout.lines().filter(|l| l.starts_with("attr ")).count();
    assert_eq!(attrs, 1, "picnum is the UltraSPARC's only attribute");
    let events = |prefix: &str| {
        let mut v: Vec<&str> = stdout.lines().filter(|l| l.starts_with(prefix)).collect();
        v.sort();
        v.len()
    };
    assert_eq!(
        events("event "),
        {
            let mut names: Vec<&str> = stdout
                .lines()
                .filter_map(|l| l.strip_prefix("event "))
                .collect();
            names.sort();
            names.dedup();
            names.len()
        },
        "each event once"
    );

    let out = run_output(program(), "perf", &["walk"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let has = |l: &str| stdout.lines().any(|x| x == l);
    assert!(
        has("event page-faults") && has("event task-clock"),
        "{stdout}"
    );
    assert!(has("pic15 page-faults") && has("npic 16"), "{stdout}");
    let pmu = perfcompat::backend::perf::PerfBackend::new().is_ok_and(|b| b.caps().pmu);
    assert_eq!(has("event instructions"), pmu, "{stdout}");
    assert_eq!(has("generic PAPI_tot_ins"), pmu, "{stdout}");
    if !pmu {
        assert!(
            stdout.contains("no PMU"),
            "cciname says there is no PMU: {stdout}"
        );
    }
}

#[test]
fn libpctx_runs_a_command_and_cpc_bind_pctx_counts_its_threads() {
    let out = run_output(program(), "perf", &["pctx"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("ptrace") && stderr.contains("permission denied") {
        skip("tracing a child is not allowed here (kernel.yama.ptrace_scope)");
        return;
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("pctx: 0 failures"), "{stdout}\n{stderr}");
}

/// A clock event whose first overflow comes while `cpc_bind_curlwp` is still returning: it is
/// still notified (the binding is tagged for SIGEMT before counting starts) and the set does
/// not stay frozen. Before the fix this failed in most runs; several runs make a regression
/// show.
///
/// It was ignored until issue 19: it failed about 1 run in 5 on a loaded machine (9 of 40 with
/// the library at c93f3cc). The request is armed 1 us away, so task-clock's sampling timer runs
/// at its 10 us floor and goes on overflowing while the bind holds signals blocked; the kernel's
/// work for each overflow slowed the thread until the window lasted seconds, the user's
/// real-time signal queue filled, and the SIGEMT of the first overflow could not be queued
/// (`rt_tgsigqueueinfo`: EAGAIN). SIGEMT is now delivered from the engine's handler (or its
/// SIGIO fallback) without being queued when a handler is installed, so a full queue no longer
/// loses it: `capi/tests/emt_delivery.rs` `with_a_full_signal_queue_sigemt_still_reaches_the_handler`
/// shows that deterministically (RLIMIT_SIGPENDING 0). 160 runs of this program passed with
/// the change, 120 of them while two builds loaded the machine.
#[test]
fn an_overflow_during_the_bind_is_still_notified() {
    let bin = c_program("cpc_clock_overflow", &["-Wpedantic"]);
    for _ in 0..8 {
        let out = run_output(&bin, "perf", &[], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("0 failures"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

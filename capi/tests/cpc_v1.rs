//! libcpc version 1 (issue 31): tests/c/cpc_v1.c runs each function against its page on the
//! emulated UltraSPARC III+ & IV, UltraSPARC I&II and Pentium 4 (exact counts through
//! `perfcompat_sim_advance`) and on perf with software events (page faults, task-clock):
//! translation, counting, `CPC_BIND_EMT_OVF` (one SIGEMT at the 1000th event, the counts
//! frozen at the wrap, a rebind in the handler going on), user and system modes, version 1 and
//! 2 on different threads, the shared (CPU) interface, libpctx, inheritance, and every call
//! with bad input (-1 or NULL, the errno and the error function's message).

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{c_program, run_output};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("cpc_v1", &["-pthread"]))
}

/// The backend each tag of the program names.
fn backend(tag: &str) -> &'static str {
    match tag {
        "us3" => "sim:ultrasparc",
        "us2" => "sim:ultrasparc2",
        "p4" => "sim:pentium4",
        _ => "perf",
    }
}

/// Run test `test` of the program on `tag`'s backend; it must pass. Returns standard error.
fn run(tag: &str, test: &str) -> String {
    let out = run_output(program(), backend(tag), &[tag, test], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains(": 0 failures"),
        "{tag} {test}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    stderr
}

const ALL: [&str; 4] = ["us3", "us2", "p4", "perf"];

#[test]
fn versions_processors_and_their_descriptions() {
    for tag in ALL {
        run(tag, "describe");
    }
}

#[test]
fn events_translate_both_ways_and_add_and_subtract() {
    for tag in ALL {
        run(tag, "translate");
    }
}

#[test]
fn bound_events_count_exactly_from_their_presets() {
    for tag in ALL {
        run(tag, "count");
    }
}

#[test]
fn overflow_with_emt_ovf_signals_once_freezes_at_the_wrap_and_a_rebind_in_the_handler_goes_on() {
    for tag in ALL {
        run(tag, "overflow");
    }
}

#[test]
fn user_and_system_counting_turn_on_and_off() {
    for tag in ALL {
        run(tag, "modes");
    }
}

#[test]
fn bad_input_fails_with_errno_and_the_error_functions_message() {
    for tag in ALL {
        let stderr = run(tag, "errors");
        // The default report, without an error function.
        assert!(
            stderr.contains("libcpc: strtoevent: "),
            "{tag}: no default report in:\n{stderr}"
        );
    }
}

/// Issue 45 item 5: without a context, `cpc_take_sample`, `cpc_count_usr_events` and
/// `cpc_count_sys_events` return -1 with `errno` `EINVAL` and say nothing, to the error
/// function or on standard error (Solaris's bare system calls; we printed
/// "count_usr_events: no performance counter context").
#[test]
fn calls_without_a_context_fail_with_einval_and_say_nothing() {
    for tag in ALL {
        let stderr = run(tag, "quiet");
        assert_eq!(
            stderr, "",
            "{tag}: the calls without a context said something"
        );
    }
}

#[test]
fn versions_1_and_2_count_on_different_threads() {
    for tag in ALL {
        run(tag, "threads");
    }
}

/// Whether this process may count a whole CPU on perf: root, or `perf_event_paranoid` at 0 or
/// below.
fn can_count_cpus() -> bool {
    // SAFETY: a plain libc call.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    root || paranoid.is_some_and(|p| p <= 0)
}

#[test]
fn the_shared_interface_counts_the_bound_cpu() {
    for tag in ALL {
        if tag == "perf" && !can_count_cpus() {
            common::skip("counting a CPU needs perf_event_paranoid <= 0 or CAP_PERFMON");
            continue;
        }
        run(tag, "shared");
    }
}

#[test]
fn libpctx_binds_and_samples_another_process() {
    run("perf", "pctx");
}

#[test]
fn inherited_contexts_start_with_a_sigemt_at_uint64_max() {
    for tag in ["us3", "p4", "perf"] {
        run(tag, "inherit");
    }
}

//! `perfcompat/solaris.h`: libcpc's man-page Examples 1 and 2 (tests/c/manpage_example*.c, the
//! page's code with only the glue the page says a program needs) build against our headers
//! with `-include perfcompat/solaris.h` and no other change, and not without it; they then run:
//! Example 1 on the emulated UltraSPARC I/II with the page's default events, Example 2 on perf
//! with page-faults, taking one SIGEMT per 1000 faults with the %pc and %sp the header names.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Command;

fn build(example: u32, with_header: bool) -> Result<PathBuf, String> {
    let bin = tmp().join(format!(
        "manpage_example{example}{}",
        if with_header { "" } else { "_plain" }
    ));
    let mut cmd = Command::new("cc");
    cmd.args(["-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&bin)
        .arg(format!("-I{}", repo().join("include").display()));
    if with_header {
        cmd.args(["-include", "perfcompat/solaris.h"]);
    }
    let out = cmd
        .arg(repo().join(format!("tests/c/manpage_example{example}.c")))
        .args(link_args())
        .output()
        .unwrap();
    if out.status.success() {
        Ok(bin)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_examples_need_the_header_and_nothing_else() {
    let e = build(1, false).unwrap_err();
    assert!(e.contains("_lwp_self"), "{e}");
    let e = build(2, false).unwrap_err();
    assert!(
        e.contains("'PC' undeclared") || e.contains("‘PC’ undeclared"),
        "{e}"
    );
    assert!(
        e.contains("index"),
        "glibc's index() is in the way without the header: {e}"
    );
    build(1, true).unwrap();
    build(2, true).unwrap();
}

#[test]
fn example_1_samples_twenty_iterations() {
    let bin = build(1, true).unwrap();
    let out = run_output(&bin, "sim:ultrasparc2", &[], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20, "{text}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(
            *l,
            format!("{:3}: 0 0", i + 1),
            "nothing injected, nothing counted"
        );
    }
}

#[test]
fn example_2_takes_a_sigemt_every_thousand_faults() {
    let bin = build(2, true).unwrap();
    let out = run_output(&bin, "perf", &[], &[("EVENT0", "page-faults")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    // 20 iterations of 1000 fresh pages: 20 overflows, each a line from the handler with the
    // LWP, si_addr, %pc and %sp, and the value sampled in the handler: frozen at the wrap.
    assert_eq!(lines.len(), 40, "{text}");
    for pair in lines.chunks(2) {
        let f: Vec<&str> = pair[0].split_whitespace().collect();
        assert!(
            f[0].starts_with("lwp") && f[0][3..].parse::<i32>().is_ok(),
            "{text}"
        );
        // si_addr is the interrupted pc, as in the ucontext.
        assert_eq!(f[3], f[6], "si_addr and %pc: {text}");
        assert!(f[8].starts_with("0x7f"), "%sp is a stack address: {text}");
        assert_eq!(pair[1], "0x0", "the request reads its wrap value: {text}");
    }
}

/// `processor_bind` (the header's, over the thread's affinity) binds the thread to a CPU, as
/// cpc_shared_open(3CPC) asks before the shared counters of libcpc version 1 are used; the
/// counters then count that CPU's page faults, and unbinding makes their samples `EAGAIN`.
#[test]
fn processor_bind_binds_the_thread_for_the_shared_counters() {
    // SAFETY: a plain libc call.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    if !root && paranoid.is_none_or(|p| p > 0) {
        skip("counting a CPU needs perf_event_paranoid <= 0 or CAP_PERFMON");
        return;
    }
    let bin = tmp().join("solaris_pbind");
    let st = Command::new("cc")
        .args([
            "-Wall",
            "-Wextra",
            "-Werror",
            "-include",
            "perfcompat/solaris.h",
            "-o",
        ])
        .arg(&bin)
        .arg(format!("-I{}", repo().join("include").display()))
        .arg(repo().join("tests/c/solaris_pbind.c"))
        .args(link_args())
        .status()
        .unwrap();
    assert!(st.success());
    let out = run_output(&bin, "perf", &[], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("0 failures"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The header may come after any C library header (it failed with CPU_SETSIZE undeclared when
/// <stdio.h> came first: _GNU_SOURCE was set too late), and has cpc_bind_event(3CPC) Example
/// 2's USP; processor_bind works from there (issue 45 item 8).
#[test]
fn the_header_comes_after_other_headers_and_has_usp() {
    let src = tmp().join("solaris_after_stdio.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <stdlib.h>
#include <perfcompat/solaris.h>
#include <libcpc.h>
static volatile long sp;
static void emt(int sig, siginfo_t *si, void *arg) {
    ucontext_t *uap = arg;
    (void)sig; (void)si;
    sp = (long)uap->uc_mcontext.gregs[USP];
}
int main(void) {
    int old = 0, cpu = 0;
    struct sigaction act;
    if (processor_bind(P_LWPID, P_MYID, PBIND_QUERY, &old) != 0) return 1;
    if (processor_bind(P_LWPID, P_MYID, cpu, NULL) != 0) return 2;
    if (processor_bind(P_LWPID, P_MYID, PBIND_QUERY, &old) != 0 || old != cpu) return 3;
    if (processor_bind(P_LWPID, P_MYID, PBIND_NONE, NULL) != 0) return 4;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = emt;
    act.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &act, NULL);
    raise(SIGUSR1);
    if (USP != SP || sp == 0) return 5;
    printf("lwp %d usp %d ok\n", _lwp_self(), USP);
    return 0;
}
"#,
    )
    .unwrap();
    let bin = tmp().join("solaris_after_stdio");
    let out = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&bin)
        .arg(format!("-I{}", repo().join("include").display()))
        .arg(&src)
        .args(link_args())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_output(&bin, "perf", &[], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(" ok"), "{text}");
}

//! perfctr's interface (issue 47): tests/c/perfctr_self.c, a self-monitoring program written
//! from perfctr's documentation, counts exactly on the emulated Pentium III, Pentium 4 and
//! PowerPC 750
//! (a-mode counters and the TSC, then an i-mode counter whose handler calls
//! `vperfctr_iresume`: one signal per overflow, the mask naming the counter), and on perf with
//! software events; bad control data fails with `EINVAL`. The headers compile with
//! `-std=c89 -Wpedantic -Werror`, and their structures have the library's layout.

mod common;

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{
    build_installed, c_program, can_run_as_nobody, compile, installed_prefix, lib_dir, repo,
    run_output, tmp, PublicDir,
};
use perfcompat_capi::perfctr::global::{
    gperfctr_cpu_control, gperfctr_cpu_state, perfctr_cpus_info,
};
use perfcompat_capi::perfctr::{
    perfctr_cpu_control, perfctr_info, perfctr_sum_ctrs, vperfctr_control,
};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("perfctr_self", &["-Wpedantic", "-pthread"]))
}

/// Run the program on `backend`: its standard output, after checking it succeeded.
fn run_on(backend: &str) -> String {
    run_prog(program(), backend, &[])
}

/// The counts the program's work gives on an emulated PMU: phase 1's cycles and instructions,
/// phase 2's, and phase 2's overflows (one every 1000 instructions).
fn expected() -> (u64, u64, u64, u64, u64) {
    let c1: u64 = (1..=20).map(|r| 7919 * r).sum();
    let i1: u64 = (1..=20).map(|r| 331 * r + 5).sum();
    let i2: u64 = (1..=50).map(|r| 137 * r % 997 + 1).sum();
    (c1, i1, 50_000, i2, i2 / 1000)
}

fn check_emulated(backend: &str, cpu: &str) {
    let out = run_on(backend);
    let (c1, i1, c2, i2, sig) = expected();
    assert!(sig >= 10, "the work overflows often: {sig}");
    for line in [
        format!("cpu {cpu}"),
        format!("a-mode: tsc {c1} pmc0 {c1} pmc1 {i1}\n"),
        format!("i-mode: tsc {c2} pmc0 {c2} pmc1 {i2} signals {sig} mask 0x2\n"),
    ] {
        assert!(out.contains(&line), "{backend}: no {line:?} in\n{out}");
    }
}

#[test]
fn counts_exactly_on_the_emulated_pentium_iii() {
    check_emulated("sim:pentium3", "Intel Pentium III, 2 counters");
}

#[test]
fn counts_exactly_on_the_emulated_pentium_4() {
    check_emulated("sim:pentium4", "Intel Pentium 4, 18 counters");
}

#[test]
fn counts_exactly_on_the_emulated_powerpc_750() {
    check_emulated("sim:ppc750", "PowerPC 750, 4 counters");
}

#[test]
fn counts_software_events_on_perf() {
    let out = run_on("perf");
    assert!(out.contains("cpu Linux perf events (software)"), "{out}");
    // The program checks signals == faults / 100 itself; the line is there.
    assert!(out.contains("mask 0x2\n"), "{out}");
}

/// The same program built as a user builds it against the installed library:
/// `cc prog.c $(pkg-config --cflags --libs libperfctr)`, so with `-lperfctr`.
#[test]
fn builds_with_lperfctr_against_the_install() {
    let prefix = installed_prefix();
    let bin = build_installed(
        "cc",
        &["-std=c99", "-Wall", "-Wpedantic", "-Werror", "-pthread"],
        "tests/c/perfctr_self.c",
        prefix,
        "perfctr",
        "perfctr_self_installed",
    );
    let out = run_output(&bin, "sim:pentium3", &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{stdout}"
    );
    let (c1, i1, ..) = expected();
    assert!(
        stdout.contains(&format!("a-mode: tsc {c1} pmc0 {c1} pmc1 {i1}\n")),
        "{stdout}"
    );
    let pc = std::fs::read_to_string(prefix.join("lib/pkgconfig/libperfctr.pc")).unwrap();
    assert!(pc.contains("Libs: -L${libdir} -lperfctr\n"), "{pc}");
}

/// The three headers, alone and together, in strict C89 with every pedantic warning an error.
#[test]
fn headers_compile_as_c89_pedantic() {
    let src = tmp().join("perfctr_c89.c");
    std::fs::write(
        &src,
        "#define _POSIX_C_SOURCE 199309L\n\
         #include <asm/perfctr.h>\n#include <linux/perfctr.h>\n#include <libperfctr.h>\n\
         #include <signal.h>\n\
         static unsigned int mask(const siginfo_t *si) { return (unsigned int)si->si_pmc_ovf_mask; }\n\
         int main(void) {\n\
         struct vperfctr_control c; struct perfctr_sum_ctrs s; siginfo_t si;\n\
         c.cpu_control.ppc.mmcr0 = 0; c.cpu_control.p4.escr[0] = 0; s.tsc = 0; si.si_code = 0;\n\
         return (int)(mask(&si) * 0 + perfctr_cstatus_nrctrs(perfctr_mk_cstatus(1, 2, 1)) - 3)\n\
         + (int)s.tsc + (int)c.cpu_control.ppc.mmcr0; }\n",
    )
    .unwrap();
    compile(
        Command::new("cc")
            .args([
                "-std=c89",
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-fsyntax-only",
            ])
            .arg(format!("-I{}", repo().join("include").display()))
            .arg(&src),
        "the perfctr headers as C89",
    );
}

/// The C structures have the library's sizes and offsets (a C program prints them).
#[test]
fn structures_have_the_library_layout() {
    let src = tmp().join("perfctr_layout.c");
    std::fs::write(
        &src,
        "#include <stddef.h>\n#include <stdio.h>\n#include <libperfctr.h>\n\
         int main(void) {\n\
         printf(\"%zu %zu %zu %zu\\n\", sizeof(struct perfctr_sum_ctrs), \
         sizeof(struct perfctr_cpu_control), sizeof(struct vperfctr_control), \
         sizeof(struct perfctr_info));\n\
         printf(\"%zu %zu %zu %zu %zu\\n\", offsetof(struct perfctr_cpu_control, p4), \
         offsetof(struct perfctr_cpu_control, ireset), offsetof(struct perfctr_cpu_control, ppc), \
         offsetof(struct vperfctr_control, preserve), offsetof(struct perfctr_info, cpu_type));\n\
         printf(\"%zu %zu %zu %zu %zu\\n\", sizeof(struct gperfctr_cpu_control), \
         sizeof(struct gperfctr_cpu_state), offsetof(struct gperfctr_cpu_state, sum), \
         sizeof(struct perfctr_cpus_info), offsetof(struct perfctr_cpus_info, cpus_forbidden));\n\
         return 0; }\n",
    )
    .unwrap();
    let bin = tmp().join("perfctr_layout");
    compile(
        Command::new("cc")
            .arg(format!("-I{}", repo().join("include").display()))
            .arg(&src)
            .arg("-o")
            .arg(&bin),
        "the layout printer",
    );
    let out = Command::new(&bin).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!(
        "{} {} {} {}\n{} {} {} {} {}\n{} {} {} {} {}\n",
        size_of::<perfctr_sum_ctrs>(),
        size_of::<perfctr_cpu_control>(),
        size_of::<vperfctr_control>(),
        size_of::<perfctr_info>(),
        offset_of!(perfctr_cpu_control, p4),
        offset_of!(perfctr_cpu_control, ireset),
        offset_of!(perfctr_cpu_control, ppc),
        offset_of!(vperfctr_control, preserve),
        offset_of!(perfctr_info, cpu_type),
        size_of::<gperfctr_cpu_control>(),
        size_of::<gperfctr_cpu_state>(),
        offset_of!(gperfctr_cpu_state, sum),
        size_of::<perfctr_cpus_info>(),
        offset_of!(perfctr_cpus_info, cpus_forbidden),
    );
    assert_eq!(text, want);
}

// ---- issue 47 items 1, 2 and 4: the remote forms, global mode, perfctr_info_print ------------

/// Run one of the test programs on `backend`: its standard output, after checking it succeeded.
fn run_prog(bin: &Path, backend: &str, args: &[&str]) -> String {
    let out = run_output(bin, backend, args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{backend}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn remote_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("perfctr_remote", &["-Wpedantic", "-pthread"]))
}

/// `rvperfctr_*` on a forked child: its page faults (and a few of its own calls'), the
/// controller's not; the errors (`ESRCH`, `ENOTSUP` for remote i-mode counters, `EPERM`).
#[test]
fn remote_counts_a_child_process_on_perf() {
    let out = run_prog(remote_program(), "perf", &[]);
    assert!(
        out.contains("remote: pmc0 ") && out.contains(" tsc > 0\n"),
        "{out}"
    );
}

/// `rvperfctr_*` on another thread of the process, exact on the emulated Pentium III (its
/// events, not the controller's); another process is refused with `ENOTSUP` there.
#[test]
fn remote_counts_a_thread_exactly_on_the_emulated_pentium_iii() {
    let out = run_prog(remote_program(), "sim:pentium3", &[]);
    assert!(out.contains("remote: pmc0 123457 tsc "), "{out}");
}

fn global_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("perfctr_global", &["-Wpedantic"]))
}

/// The kernel's perf_event_paranoid level.
fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// `gperfctr_*` on the program's CPU, exact on the emulated Pentium III; the CPU list.
#[test]
fn global_counts_a_cpu_exactly_on_the_emulated_pentium_iii() {
    let out = run_prog(global_program(), "sim:pentium3", &[]);
    assert!(out.contains("global: pmc0 exact tsc > 0\n"), "{out}");
    assert!(out.contains("cpus\t\t\t[0"), "{out}");
    assert!(out.contains("cpus_forbidden\t\t[]\n"), "{out}");
}

/// `gperfctr_*` on the program's CPU with software page faults on perf, where CPU-wide counting is allowed
/// (root, or perf_event_paranoid <= 0).
#[test]
fn global_counts_a_cpu_on_perf_where_allowed() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 && paranoid() > 0 {
        common::skip("CPU-wide counting needs root or perf_event_paranoid <= 0");
        return;
    }
    let out = run_prog(global_program(), "perf", &[]);
    assert!(out.contains("global: pmc0 >= PAGES tsc > 0\n"), "{out}");
}

/// As an unprivileged user at perf_event_paranoid > 0, `gperfctr_start` fails with `EACCES`
/// and says why on standard error.
#[test]
fn global_start_is_refused_unprivileged_with_the_reason() {
    if paranoid() <= 0 {
        common::skip("perf_event_paranoid <= 0 lets anyone count a CPU");
        return;
    }
    if !can_run_as_nobody("gperfctr_start refused") {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let dir = PublicDir::new("perfctr-global");
    let d = &dir.0;
    std::fs::copy(
        lib_dir().join("libperfcompat_capi.so"),
        d.join("libperfcompat_capi.so"),
    )
    .unwrap();
    let bin = d.join("perfctr_global");
    compile(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{}", repo().join("include").display()))
            .arg("-o")
            .arg(&bin)
            .arg(repo().join("tests/c/perfctr_global.c"))
            .arg(format!("-L{}", d.display()))
            .arg(format!("-Wl,-rpath,{}", d.display()))
            .arg("-lperfcompat_capi"),
        "tests/c/perfctr_global.c",
    );
    for f in ["libperfcompat_capi.so", "perfctr_global"] {
        std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .arg("refused")
        .current_dir("/")
        .env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf");
    let out = common::output_one_fault_per_page(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("gperfctr_start: permission denied: counting everything on CPU")
            && stderr.contains("perf_event_paranoid is"),
        "{stderr}"
    );
}

/// `perfctr_info_print`'s text, byte for byte (it is formatted in the engine's perfctr layer;
/// the C layer only converts): what vperfctr_info fills, and a program's own structure whose
/// `driver_version` has no NUL (at most 31 bytes are printed).
#[test]
fn info_print_is_pinned_byte_for_byte() {
    let src = tmp().join("perfctr_info_print.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <string.h>\n#include <libperfctr.h>\n\
         int main(void) {\n\
         struct perfctr_info i;\n\
         if (perfctr_get_info(&i) != 0) return 1;\n\
         perfctr_info_print(&i);\n\
         memset(i.driver_version, 'x', sizeof i.driver_version);\n\
         i.cpu_type = 0x103; i.cpu_features = 0; i.cpu_khz = 1234; i.abi_version = 7;\n\
         perfctr_info_print(&i);\n\
         perfctr_info_print(NULL);\n\
         fflush(stdout); return 0; }\n",
    )
    .unwrap();
    let bin = tmp().join("perfctr_info_print");
    compile(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Werror"])
            .arg(format!("-I{}", repo().join("include").display()))
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .args(common::link_args()),
        "the perfctr_info_print program",
    );
    let out = run_output(&bin, "sim:pentium3", &[], &[]);
    assert!(out.status.success(), "{out:?}");
    let v = env!("CARGO_PKG_VERSION");
    let want = format!(
        "abi_version\t\t0x500\n\
         driver_version\t\tperfcompat {v}\n\
         cpu_type\t\t5 (Intel Pentium III)\n\
         cpu_features\t\t0x6\n\
         cpu_khz\t\t\t1000000\n\
         tsc_to_cpu_mult\t\t1\n\
         nrctrs\t\t\t2\n\
         abi_version\t\t0x7\n\
         driver_version\t\t{}\n\
         cpu_type\t\t259 (PowerPC 750)\n\
         cpu_features\t\t0x0\n\
         cpu_khz\t\t\t1234\n\
         tsc_to_cpu_mult\t\t1\n\
         nrctrs\t\t\t4\n",
        "x".repeat(31)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

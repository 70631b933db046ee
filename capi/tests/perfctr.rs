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

use common::{build_installed, c_program, compile, installed_prefix, repo, run_output, tmp};
use perfcompat_capi::perfctr::{
    perfctr_cpu_control, perfctr_info, perfctr_sum_ctrs, vperfctr_control,
};

fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| c_program("perfctr_self", &["-Wpedantic", "-pthread"]))
}

/// Run the program on `backend`: its standard output, after checking it succeeded.
fn run_on(backend: &str) -> String {
    let out = run_output(program(), backend, &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("\n0 failures"),
        "{backend}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
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
        "{} {} {} {}\n{} {} {} {} {}\n",
        size_of::<perfctr_sum_ctrs>(),
        size_of::<perfctr_cpu_control>(),
        size_of::<vperfctr_control>(),
        size_of::<perfctr_info>(),
        offset_of!(perfctr_cpu_control, p4),
        offset_of!(perfctr_cpu_control, ireset),
        offset_of!(perfctr_cpu_control, ppc),
        offset_of!(vperfctr_control, preserve),
        offset_of!(perfctr_info, cpu_type),
    );
    assert_eq!(text, want);
}

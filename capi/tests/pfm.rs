//! Tru64's `/dev/pfcntr` (pfm(7)) through libpfcntr's interposed `open`/`ioctl`/`read`/`close`
//! (`capi/pfcntr/pfcntr.c`, built by [`common::pfcntr_dir`]): `<sys/pfcntr.h>` against the
//! library's values and layouts, every request's success and documented errors
//! (tests/c/pfm_abi.c) linked and preloaded, other files untouched, a reused descriptor number
//! never served as the device (tests/c/pfm_reuse.c), libcpc and the device in one process
//! (tests/c/pfm_with_cpc.c), the examples with exact counts on the emulated EV4/EV5 and on
//! perf, built against the installed libpfcntr, and the PC profile of a hot loop.

mod common;
use common::Guarded;

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{
    compile, link_args, pfcntr_link_args, pfcntr_preload, repo, run, run_env, run_output, tmp,
};
use perfcompat_capi::pfm::{iccsr, pfaddr, pfcntrs, pfcntrs_ev5, pfipls, pfrange, pmctrs_ev5};

const WARN: [&str; 5] = ["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror"];

/// Build `src` (from the repository's root) against include/, the fresh libpfcntr and the
/// library, as `<tmp>/<out>`; `preload` builds it without them (LD_PRELOAD provides them).
fn build(src: &str, out: &str, preload: bool) -> PathBuf {
    build_with(src, out, preload, &[])
}

/// [`build`] with more compiler flags (after the defaults: a later `-O` wins).
fn build_with(src: &str, out: &str, preload: bool, flags: &[&str]) -> PathBuf {
    let out = tmp().join(out);
    let mut cmd = Command::new("cc");
    cmd.args(WARN)
        .arg("-O1")
        .args(flags)
        .arg(format!("-I{}", repo().join("include").display()))
        .arg("-o")
        .arg(&out)
        .arg(repo().join(src));
    if preload {
        cmd.arg("-DPFM_PRELOAD");
    } else {
        cmd.args(pfcntr_link_args());
    }
    compile(&mut cmd, src);
    out
}

fn abi_linked() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("tests/c/pfm_abi.c", "pfm_abi", false))
}

fn abi_preloaded() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("tests/c/pfm_abi.c", "pfm_abi_preload", true))
}

/// Run the unlinked build of tests/c/pfm_abi.c in `mode` with libpfcntr preloaded (it brings
/// the library in).
fn run_preloaded(backend: &str, mode: &str) {
    run_env(
        abi_preloaded(),
        backend,
        &[mode],
        &[("LD_PRELOAD", &pfcntr_preload())],
    );
}

fn stdout(out: &Output) -> String {
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "failed: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// Every numeric `#define` of the header, with the value a C program prints for it.
fn header_values() -> BTreeMap<String, u64> {
    let header = std::fs::read_to_string(repo().join("include/sys/pfcntr.h")).unwrap();
    let names: Vec<String> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| !n.starts_with("PERFCOMPAT_"))
        .map(str::to_string)
        .collect();
    let mut src = String::from("#include <stdio.h>\n#include <sys/pfcntr.h>\nint main(void) {\n");
    for n in &names {
        src += &format!("    printf(\"{n} %llu\\n\", (unsigned long long)({n}));\n");
    }
    src += "    return 0;\n}\n";
    let c = tmp().join("pfcntr_values.c");
    std::fs::write(&c, src).unwrap();
    let bin = tmp().join("pfcntr_values");
    compile(
        Command::new("cc")
            .args(WARN)
            .arg(format!("-I{}", repo().join("include").display()))
            .arg("-o")
            .arg(&bin)
            .arg(&c),
        "the header's values",
    );
    let out = stdout(&Command::new(&bin).guarded().output().unwrap());
    out.lines()
        .map(|l| {
            let (n, v) = l.split_once(' ').unwrap();
            (n.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn the_header_has_the_librarys_values() {
    let got = header_values();
    let want: BTreeMap<String, u64> = perfcompat::api::pfm::header_constants()
        .into_iter()
        .collect();
    assert_eq!(got, want);
    // Every name pfm(7) spells for EV4 is there.
    for n in [
        "PCNTOPENONE",
        "PCNTOPENEACH",
        "PCNTOPENALL",
        "PCNTENABLE",
        "PCNTDISABLE",
        "PCNTSETMUX",
        "PCNTSETITEMS",
        "PCNTLOGALL",
        "PCNTLOGSELECT",
        "PCNTCLEARCNT",
        "PCNTGETCNT",
        "PCNTGETIPLHIS",
        "PCNTGETRSIZE",
        "PCNTSETUADDR",
        "PCNTSETURANGE",
        "PCNTSETKADDR",
        "PCNTSETKRANGE",
        "PCNTCALLER",
        "PCNT5RESTART",
        "PCNT5GETCNT",
        "PFM_COUNTERS",
        "PFM_IPL",
        "PFM_PROFILING",
        "PF_ISSUES",
        "PF_EXTPIN0",
        "PF_DCACHE",
        "PF_EXTPIN1",
        "PMCTRS_ALL_CPUS",
        "PF5_SEL_COUNTER_2",
        "PF5_C0_INT_EVERY_65536",
        "PF5_C1_INT_EVERY_65536",
        "PF5_C2_INT_EVERY_16384",
    ] {
        assert!(got.contains_key(n), "{n} missing");
    }
}

#[test]
fn the_header_has_the_librarys_layouts() {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <sys/pfcntr.h>\n\
         #define S(t) printf(#t \" %zu\\n\", sizeof(t))\n\
         #define O(t, m) printf(#t \".\" #m \" %zu\\n\", offsetof(t, m))\n\
         int main(void) {\n",
    );
    for line in [
        "S(struct iccsr); O(struct iccsr, iccsr_mux1); O(struct iccsr, iccsr_mbz);",
        "S(struct pfcntrs); O(struct pfcntrs, pf_pcc);",
        "S(struct pfcntrs_ev5); O(struct pfcntrs_ev5, pf_pcc);",
        "S(struct pfipls);",
        "S(struct pfaddr); O(struct pfaddr, pfa_end);",
        "S(struct pfrange); O(struct pfrange, pfr_stride);",
        "S(union pmctrs_ev5); O(union pmctrs_ev5, pmctrs_ev5_select);",
        "O(union pmctrs_ev5, pmctrs_ev5_ctr);",
    ] {
        src += line;
        src += "\n";
    }
    src += "return 0; }\n";
    let c = tmp().join("pfcntr_layouts.c");
    std::fs::write(&c, src).unwrap();
    let bin = tmp().join("pfcntr_layouts");
    compile(
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Werror"])
            .arg(format!("-I{}", repo().join("include").display()))
            .arg("-o")
            .arg(&bin)
            .arg(&c),
        "the header's layouts",
    );
    let want = [
        ("struct iccsr", size_of::<iccsr>()),
        ("struct iccsr.iccsr_mux1", offset_of!(iccsr, iccsr_mux1)),
        ("struct iccsr.iccsr_mbz", offset_of!(iccsr, iccsr_mbz)),
        ("struct pfcntrs", size_of::<pfcntrs>()),
        ("struct pfcntrs.pf_pcc", offset_of!(pfcntrs, pf_pcc)),
        ("struct pfcntrs_ev5", size_of::<pfcntrs_ev5>()),
        ("struct pfcntrs_ev5.pf_pcc", offset_of!(pfcntrs_ev5, pf_pcc)),
        ("struct pfipls", size_of::<pfipls>()),
        ("struct pfaddr", size_of::<pfaddr>()),
        ("struct pfaddr.pfa_end", offset_of!(pfaddr, pfa_end)),
        ("struct pfrange", size_of::<pfrange>()),
        ("struct pfrange.pfr_stride", offset_of!(pfrange, pfr_stride)),
        ("union pmctrs_ev5", size_of::<pmctrs_ev5>()),
        (
            "union pmctrs_ev5.pmctrs_ev5_select",
            offset_of!(pmctrs_ev5, pmctrs_ev5_select),
        ),
        (
            "union pmctrs_ev5.pmctrs_ev5_ctr",
            offset_of!(pmctrs_ev5, pmctrs_ev5_ctr),
        ),
    ]
    .map(|(n, v)| format!("{n} {v}"))
    .join("\n")
        + "\n";
    assert_eq!(
        stdout(&Command::new(&bin).guarded().output().unwrap()),
        want
    );
}

#[test]
fn ev4_requests_and_their_errors_linked() {
    run(abi_linked(), "sim:ev4", &["ev4"]);
}

/// The unlinked program asks for the C library's versioned functions (`open@GLIBC_2.2.5` on
/// x86-64): they bind to libpfcntr's unversioned interposers, which come first.
#[test]
fn ev4_requests_and_their_errors_preloaded() {
    let nm = Command::new("nm")
        .arg("-D")
        .arg(abi_preloaded())
        .output()
        .unwrap();
    let undefined = String::from_utf8_lossy(&nm.stdout);
    for f in ["open", "ioctl", "read", "close"] {
        assert!(
            undefined
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("U {f}@GLIBC_"))),
            "no versioned reference to {f} in:\n{undefined}"
        );
    }
    run_preloaded("sim:ev4", "ev4");
}

/// Built with `_FORTIFY_SOURCE`, `open` and `read` become `__open_2` and `__read_chk`, which
/// the library serves too.
#[test]
fn ev4_requests_through_the_fortified_forms() {
    let out = build_with(
        "tests/c/pfm_abi.c",
        "pfm_abi_fortified",
        false,
        &["-O2", "-D_FORTIFY_SOURCE=2"],
    );
    let nm = Command::new("nm").arg("-u").arg(&out).output().unwrap();
    let undefined = String::from_utf8_lossy(&nm.stdout);
    for f in ["__open_2", "__read_chk"] {
        assert!(undefined.contains(f), "no {f} in:\n{undefined}");
    }
    run(&out, "sim:ev4", &["ev4"]);
}

#[test]
fn open_each_keeps_per_cpu_data() {
    run(abi_linked(), "sim:ev4", &["each"]);
}

#[test]
fn ev5_requests_and_their_errors() {
    run(abi_linked(), "sim:ev5", &["ev5"]);
    run_preloaded("sim:ev5", "ev5");
}

#[test]
fn other_files_are_the_c_librarys() {
    run(abi_linked(), "perf", &["files"]);
    run(abi_linked(), "sim:ev4", &["files"]);
    run_preloaded("perf", "files");
}

#[test]
fn counts_on_perf() {
    run(abi_linked(), "perf", &["perf"]);
    run_preloaded("perf", "perf");
}

/// The order a real client uses (issue 45 item 7): open with `PCNTOPENALL`, `PCNTRENABLE`, then
/// `PCNTSETMUX` (tests/c/pfm_abi.c, mode `order`). The enable with the default selection
/// (`PF_ISSUES`, `PF_DCACHE`, which this host cannot count) failed with `ENOENT`; now it works,
/// the default counters read 0 (and the read says why, once), and the selected events count.
#[test]
fn enabling_before_selecting_events_works_on_perf() {
    let map = page_fault_branch_misses();
    let env = [("PERFCOMPAT_EVENTS", map.as_str())];
    let stderr = run_env(abi_linked(), "perf", &["order"], &env);
    assert_eq!(
        stderr
            .matches("PF_ISSUES (counter 0) is pfm(7)'s default selection")
            .count(),
        1,
        "{stderr}"
    );
    run_env(
        abi_preloaded(),
        "perf",
        &["order"],
        &[env[0], ("LD_PRELOAD", &pfcntr_preload())],
    );
}

/// Without the privilege to count a CPU, `PCNTLOGALL` counts the process and says so.
#[test]
fn without_privilege_logall_counts_the_process() {
    let stderr = run(abi_linked(), "perf", &["unpriv"]);
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    if paranoid > 0 {
        assert!(stderr.contains("counting this process"), "{stderr}");
    }
}

/// A program that opens the device and prints the result and errno, linked with `libs`.
fn open_program(out: &str, libs: &[String]) -> PathBuf {
    let src = tmp().join("pfm_nodev.c");
    common::write_file(
        &src,
        "#include <errno.h>\n#include <fcntl.h>\n#include <stdio.h>\n\
         int main(void) { int fd = open(\"/dev/pfcntr\", O_RDONLY);\n\
         printf(\"%d %d\\n\", fd, fd < 0 ? errno : 0); return 0; }\n",
    );
    let bin = tmp().join(out);
    compile(
        Command::new("cc").arg("-o").arg(&bin).arg(&src).args(libs),
        "pfm_nodev.c",
    );
    bin
}

/// On another emulated PMU there is no pfm device.
#[test]
fn no_device_on_other_emulated_pmus() {
    let bin = open_program("pfm_nodev", &pfcntr_link_args());
    let out = stdout(&run_output(&bin, "sim:r10000", &[], &[]));
    assert_eq!(out, format!("-1 {}\n", libc::ENODEV));
}

/// libcpc and libperfex interpose nothing of the C library: linked with the library alone, a
/// program's `open` of `/dev/pfcntr` is the system's (no such file), on an Alpha model too.
#[test]
fn the_library_alone_serves_no_device() {
    let bin = open_program("pfm_no_pfcntr", &link_args());
    let out = stdout(&run_output(&bin, "sim:ev4", &[], &[]));
    assert_eq!(out, format!("-1 {}\n", libc::ENOENT));
}

fn example(name: &str) -> &'static Path {
    static BINS: OnceLock<std::sync::Mutex<BTreeMap<String, &'static Path>>> = OnceLock::new();
    let m = BINS.get_or_init(Default::default);
    let mut m = m.lock().unwrap();
    m.entry(name.to_string()).or_insert_with(|| {
        let p = build(
            &format!("examples/{name}.c"),
            &format!("example-{name}"),
            false,
        );
        Box::leak(p.into_boxed_path())
    })
}

#[test]
fn the_ev4_example_is_exact_on_sim_ev4() {
    let out = stdout(&run_output(example("pfm_ev4"), "sim:ev4", &[], &[]));
    assert_eq!(
        out,
        "counter 0 (PF_CYCLES): 5 interrupts (about 20480 cycles)\n\
         counter 1 (PF_BRANCHMISS): 3 interrupts (about 768 mispredicted branches)\n\
         IPL histogram: 0 0 0 0 0 0 0 0 8\n"
    );
}

#[test]
fn the_ev5_example_is_exact_on_sim_ev5() {
    let out = stdout(&run_output(example("pfm_ev5"), "sim:ev5", &[], &[]));
    assert_eq!(
        out,
        "interrupts: 2 7 4\nevents: 131082 1795 1279\nraw counters: 10 3 255\n"
    );
}

/// A number after `key` in `text`.
fn number_after(text: &str, key: &str) -> u64 {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("no {key:?} in {text}"))
        + key.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_examples_count_cycles_on_perf() {
    let out = stdout(&run_output(example("pfm_ev4"), "perf", &[], &[]));
    assert!(number_after(&out, "counter 0 (PF_CYCLES):") > 1000, "{out}");
    let out = stdout(&run_output(example("pfm_ev5"), "perf", &[], &[]));
    assert!(number_after(&out, "interrupts:") > 100, "{out}");
}

#[test]
fn the_pc_profile_finds_the_hot_loop() {
    let out = stdout(&run_output(example("pfm_profile"), "perf", &[], &[]));
    let samples = number_after(&out, "samples");
    let hot = number_after(&out, "hot");
    assert!(samples >= 200, "{out}");
    assert!(hot * 10 >= samples * 9, "{out}");
}

/// The examples built as a user builds them against the installed library,
/// `$(pkg-config --cflags --libs libpfcntr)` (`-lpfcntr -lperfcompat`: the examples call
/// `perfcompat_sim_advance`), and the installed libpfcntr preloaded.
#[test]
fn the_examples_build_against_the_installed_libpfcntr() {
    let prefix = common::installed_prefix();
    assert!(prefix.join("include/sys/pfcntr.h").exists());
    for (src, backend, want) in [
        (
            "examples/pfm_ev4.c",
            "sim:ev4",
            "counter 0 (PF_CYCLES): 5 interrupts",
        ),
        ("examples/pfm_ev5.c", "sim:ev5", "events: 131082 1795 1279"),
    ] {
        let out = format!("installed-{}", src.rsplit('/').next().unwrap());
        let bin = common::build_installed("cc", &WARN, src, prefix, "pfcntr", &out);
        let text = stdout(&run_output(&bin, backend, &[], &[]));
        assert!(text.contains(want), "{text}");
    }
    // Preloaded: the installed libpfcntr's unversioned interposers, and the library it needs
    // found next to it.
    let lib = prefix.join("lib/libpfcntr.so.1");
    for (backend, mode) in [("sim:ev4", "ev4"), ("perf", "files")] {
        run_env(
            abi_preloaded(),
            backend,
            &[mode],
            &[("LD_PRELOAD", lib.to_str().unwrap())],
        );
    }
    let bin = common::build_installed(
        "cc",
        &["-O1"],
        "examples/pfm_profile.c",
        prefix,
        "pfcntr",
        "installed-pfm_profile",
    );
    let out = stdout(&run_output(&bin, "perf", &[], &[]));
    let (samples, hot) = (number_after(&out, "samples"), number_after(&out, "hot"));
    assert!(samples >= 200 && hot * 10 >= samples * 9, "{out}");
}

/// The two forms of the array requests (issue 29, item 6; tests/c/pfm_forms.c): pfm(7)'s
/// address of a pointer (the header's numbers, and `_IOR` of a pointer) and the original
/// header's array itself (`_IOR` of the element; the header's numbers on a device enabled with
/// `PCNTRENABLE`; every number of a program built with `-DPFCNTR_ORIGINAL_ARGS`). A struct
/// whose first member holds an address is never written through. Before, PAPI's call
/// (`ioctl(fd, PCNTGETCNT, &cntrs)`) wrote the counts through `cntrs.pf_cntr0`, and
/// `PCNTRENABLE` did not exist.
#[test]
fn array_requests_take_both_forms_by_the_size_in_their_number() {
    let bin = build("tests/c/pfm_forms.c", "pfm_forms", false);
    // `run` requires "0 failures" and a zero status.
    for mode in ["pfm7", "renable"] {
        run(&bin, "sim:ev4", &[mode]);
    }
    let original = build_with(
        "tests/c/pfm_forms.c",
        "pfm_forms_original",
        false,
        &["-DPFCNTR_ORIGINAL_ARGS"],
    );
    run(&original, "sim:ev4", &["original"]);
}

/// The ways a program reuses a descriptor number behind libpfcntr's back (tests/c/pfm_reuse.c).
const REUSE_MODES: [&str; 6] = ["dup2", "dup3", "close_range", "dupfd", "syscall", "closed"];

/// After `dup2`, `dup3`, `close_range` then `open`, `fcntl(F_DUPFD)`, or a raw `close` system
/// call then `open`, the device's number names the program's file: it reads the file and pfm
/// requests on it are `ENOTTY`; and the device opens again (issue 29, item 4). Linked and
/// preloaded.
#[test]
fn a_reused_descriptor_number_is_never_the_device() {
    let linked = build("tests/c/pfm_reuse.c", "pfm_reuse", false);
    let preloaded = build("tests/c/pfm_reuse.c", "pfm_reuse_preload", true);
    for mode in REUSE_MODES {
        run(&linked, "sim:ev4", &[mode]);
    }
    for mode in ["dup2", "syscall"] {
        run_env(
            &preloaded,
            "sim:ev4",
            &[mode],
            &[("LD_PRELOAD", &pfcntr_preload())],
        );
    }
}

/// The event map of tests/c/pfm_with_cpc.c: the device's `PF_BRANCHMISS` counts page faults.
fn page_fault_branch_misses() -> String {
    let map = tmp().join("pfm_with_cpc.map");
    common::write_file(&map, "PAPI_br_msp = page-faults\n");
    map.to_str().unwrap().to_string()
}

/// libcpc and the device in one process (tests/c/pfm_with_cpc.c): both count the same page
/// faults (libcpc's count, the device's exact interrupts), and with libcpc's SIGEMT overflows
/// and the device's PC profile on at once, both are delivered by the one engine (one copy of
/// the library mapped). Built against the build tree's libraries and the installed ones.
#[test]
fn libcpc_and_the_device_share_one_engine() {
    let map = page_fault_branch_misses();
    let env = [("PERFCOMPAT_EVENTS", map.as_str())];
    let tree = build("tests/c/pfm_with_cpc.c", "pfm_with_cpc", false);
    let prefix = common::installed_prefix();
    let installed = {
        let out = tmp().join("installed-pfm_with_cpc");
        compile(
            Command::new("cc")
                .args(WARN)
                .arg(repo().join("tests/c/pfm_with_cpc.c"))
                .args(common::pkg_config(prefix, "pfcntr"))
                .args(common::pkg_config(prefix, "cpc"))
                .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
                .arg("-o")
                .arg(&out),
            "tests/c/pfm_with_cpc.c against the install",
        );
        out
    };
    for bin in [&tree, &installed] {
        for mode in ["count", "overflow"] {
            run_env(bin, "perf", &[mode], &env);
        }
    }
}

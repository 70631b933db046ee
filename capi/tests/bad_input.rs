//! Reliability at the C boundary (issue 7, items 1 and 6): tests/c/bad_input.c, built with
//! `-Wall -Wextra -Wpedantic -Werror` against `include/` and the library only. Every exported
//! libcpc, libpctx and libperfex function with bad input gives its documented error and never
//! crashes; out of file descriptors and without privilege the errors name the cause and the fix.
//! docs/reliability.md lists what is tried.

mod common;
use common::Guarded;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{compile, lib_dir, link_args, repo, run_output, skip, tmp};

const FLAGS: [&str; 5] = ["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror"];

/// Compile tests/c/bad_input.c into `out`, linked with `link`.
fn build(out: &Path, link: &[String]) {
    compile(
        Command::new("cc")
            .args(FLAGS)
            .arg("-o")
            .arg(out)
            .arg(repo().join("tests/c/bad_input.c"))
            .arg(format!("-I{}", repo().join("include").display()))
            .args(link),
        "tests/c/bad_input.c",
    );
}

/// The test program, built once.
fn program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = tmp().join("bad_input");
        build(&out, &link_args());
        out
    })
}

/// The program's verdict: it exited 0 (no signal, no crash) and printed "<mode>: 0 failures".
fn check(out: &Output, mode: &str, backend: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fails: Vec<&str> = stderr.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && stdout.contains(&format!("{mode}: 0 failures")),
        "bad_input {mode} on {backend}: {:?}\n{stdout}\n{}",
        out.status,
        fails.join("\n")
    );
    stderr.into_owned()
}

fn cpc_on(backend: &str) {
    let out = run_output(program(), backend, &["cpc"], &[]);
    let err = check(&out, "cpc", backend);
    // The default report (no handler yet) and the handler both saw the errors: the report
    // names the function for the bad handles.
    assert!(
        err.contains("libcpc: cpc_npic:") || err.contains("libcpc: cpc_close:"),
        "{}",
        &err[..err.len().min(4000)]
    );
}

#[test]
fn libcpc_and_libpctx_reject_bad_input_on_an_emulated_pmu() {
    cpc_on("sim:ultrasparc");
}

#[test]
fn libcpc_and_libpctx_reject_bad_input_on_perf() {
    cpc_on("perf");
}

fn perfex_on(backend: &str) {
    let dir = tmp().join(format!("bad-input-costs-{}", backend.replace(':', "-")));
    std::fs::create_dir_all(&dir).unwrap();
    let out = run_output(
        program(),
        backend,
        &["perfex", dir.to_str().unwrap()],
        &common::NO_COST_FILES,
    );
    let err = check(&out, "perfex", backend);
    for want in [
        "start_counters: invalid argument: event -1 is out of range",
        "start_counters: invalid argument: event -2147483648 is out of range",
        "read_counters: NULL count pointer",
        "load_costs: NULL file name",
        "Is a directory",
        "the file is larger than 1048576 bytes",
        "the file is not valid UTF-8",
    ] {
        assert!(err.contains(want), "no '{want}' in stderr");
    }
}

#[test]
fn libperfex_rejects_bad_events_pointers_and_cost_files_on_an_emulated_pmu() {
    perfex_on("sim:r10000");
}

#[test]
fn libperfex_rejects_bad_events_pointers_and_cost_files_on_perf() {
    perfex_on("perf");
}

/// With RLIMIT_NOFILE 16 a set of 16 requests cannot bind on perf: EMFILE with a line that
/// says to raise `ulimit -n`, nothing left bound, a small set still counts; libperfex fails
/// the same way once no descriptor is left, and writes no counts.
#[test]
fn out_of_file_descriptors_is_emfile_naming_ulimit() {
    let mut cmd = Command::new(program());
    cmd.guarded();
    cmd.env_remove("LD_LIBRARY_PATH")
        .env("PERFCOMPAT_BACKEND", "perf")
        .arg("fds");
    // SAFETY: setrlimit is a system call, safe between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 16,
                rlim_max: 16,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = cmd.output().expect("bad_input runs");
    let err = check(&out, "fds", "perf");
    assert!(
        err.contains("libcpc: cpc_bind_curlwp:")
            && err.contains("out of file descriptors: raise ulimit -n"),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("start_counters:")
            && l.contains("out of file descriptors: raise ulimit -n")),
        "{err}"
    );
}

/// `setpriv` to run as nobody, when we are root and have it; `None` (with a SKIPPED line)
/// otherwise.
fn as_nobody() -> Option<Command> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("not root: cannot switch to an unprivileged user (run the suite as root)");
        return None;
    }
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        skip("no /usr/bin/setpriv (apt-get install util-linux)");
        return None;
    }
    let mut cmd = Command::new(setpriv);
    cmd.guarded();
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    Some(cmd)
}

/// The kernel's perf_event_paranoid level.
fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Sets perf_event_paranoid back to what it was when dropped (also when the test fails).
struct RestoreParanoid(i32);

impl Drop for RestoreParanoid {
    fn drop(&mut self) {
        let _ = set_paranoid(self.0);
    }
}

fn set_paranoid(level: i32) -> std::io::Result<()> {
    std::fs::write("/proc/sys/kernel/perf_event_paranoid", format!("{level}\n"))
}

/// As nobody at each perf_event_paranoid level this machine lets root set (the level it had,
/// then 2, 3 and 1; put back afterwards): at 2 and above kernel-mode counting is EACCES with a
/// line naming perf_event_paranoid, its level and how to allow it, while user-mode counting of
/// its own work counts (libcpc and libperfex); at 1 kernel mode counts too. A kernel that
/// refuses unprivileged counting altogether at 3 (Debian's) must make cpc_open and
/// start_counters fail with EACCES and a line naming the level and the fix. One test for all
/// levels: the level is machine-wide, and this binary's other tests run as root, which it does
/// not affect. (perfex_unprivileged.rs is another test binary; `cargo test` runs binaries one
/// at a time.)
#[test]
fn each_perf_event_paranoid_level_counts_or_names_the_cause() {
    let Some(_) = as_nobody() else { return };
    let Some(original) = paranoid() else {
        skip("no /proc/sys/kernel/perf_event_paranoid");
        return;
    };
    // The program and the library where nobody can read them.
    let dir = std::env::temp_dir().join(format!("perfcompat-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cleanup = Cleanup(dir.clone());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(
        lib_dir().join("libperfcompat_capi.so"),
        dir.join("libperfcompat_capi.so"),
    )
    .unwrap();
    let bin = dir.join("bad_input");
    build(
        &bin,
        &[
            format!("-L{}", dir.display()),
            format!("-Wl,-rpath,{}", dir.display()),
            "-lperfcompat_capi".into(),
        ],
    );
    for f in ["libperfcompat_capi.so", "bad_input"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _restore = RestoreParanoid(original);
    let mut tried = Vec::new();
    for level in [original, 2, 3, 1] {
        if tried.contains(&level) {
            continue;
        }
        if level != original {
            if let Err(e) = set_paranoid(level) {
                skip(&format!("cannot set perf_event_paranoid to {level}: {e}"));
                continue;
            }
        }
        assert_eq!(paranoid(), Some(level));
        tried.push(level);
        let out = as_nobody()
            .unwrap()
            .arg(&bin)
            .args(["priv", &level.to_string()])
            .current_dir("/")
            .env_remove("LD_LIBRARY_PATH")
            .env("PERFCOMPAT_BACKEND", "perf")
            .output()
            .expect("setpriv runs");
        let err = check(
            &out,
            "priv",
            &format!("perf at perf_event_paranoid {level}"),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let names_level = |l: &str| {
            l.contains(&format!("perf_event_paranoid is {level}"))
                && l.contains("/proc/sys/kernel/perf_event_paranoid")
        };
        if stdout.contains("denied altogether") {
            assert!(
                err.lines().any(names_level) && err.contains("lower"),
                "level {level}: {err}"
            );
        } else if level >= 2 {
            assert!(
                stdout.contains(&format!("priv {level}: counted"))
                    && err
                        .lines()
                        .any(|l| l.starts_with("libcpc: cpc_bind_curlwp:")
                            && l.contains("kernel mode")
                            && names_level(l)),
                "level {level}: {stdout}\n{err}"
            );
        } else {
            assert!(
                stdout.contains(&format!("priv {level}: counted"))
                    && !err.contains("cpc_bind_curlwp"),
                "level {level}: {stdout}\n{err}"
            );
        }
    }
    eprintln!("perf_event_paranoid levels tried as nobody: {tried:?}");
    drop(cleanup);
}

/// Removes a directory when dropped (also when the test fails).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

//! The perfex command as an unprivileged user (issue 7, item 6): at perf_event_paranoid >= 2
//! `perfex -k` (and `-x`) exits 1 with a line naming perf_event_paranoid and how to allow it,
//! before the command runs; without `-k` it counts the command in user mode. Runs the binary
//! as nobody through `setpriv`, so the suite must run as root; otherwise SKIPPED.

mod common;
use common::Guarded;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use common::{skip, TempDir};

const PERFEX: &str = env!("CARGO_BIN_EXE_perfex");

/// One test at a time: while one copies perfex (its descriptor open for writing), a fork by
/// another test's `Command` would hold that descriptor open in the child until its exec, and
/// executing the copy then fails with "Text file busy" (ETXTBSY; seen in a repeated run).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run `perfex args` as nobody from the copy in `dir` (see [`setup`]).
fn perfex_as_nobody(dir: &Path, args: &[&str]) -> Output {
    Command::new("/usr/bin/setpriv")
        .guarded()
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(dir.join("perfex"))
        .args(args)
        .current_dir("/")
        .env("PERFCOMPAT_BACKEND", "perf")
        .output()
        .expect("setpriv runs")
}

/// A world-readable directory (one per test: `tag`) holding a copy of perfex nobody can execute; `None` (SKIPPED)
/// when not root, without setpriv, or when the kernel lets anyone count kernel mode.
fn setup(tag: &str) -> Option<TempDir> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("not root: cannot switch to an unprivileged user (run the suite as root)");
        return None;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        skip("no /usr/bin/setpriv (apt-get install util-linux)");
        return None;
    }
    let level: Option<i32> = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if level.is_none_or(|l| l < 2) {
        skip(&format!(
            "perf_event_paranoid is {level:?}: an unprivileged user may count kernel mode here"
        ));
        return None;
    }
    let dir = TempDir::new(&format!("perfex-nobody-{tag}"));
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(PERFEX, dir.0.join("perfex")).unwrap();
    std::fs::set_permissions(dir.0.join("perfex"), std::fs::Permissions::from_mode(0o755)).unwrap();
    Some(dir)
}

#[test]
fn perfex_k_as_nobody_exits_1_naming_perf_event_paranoid() {
    let _serial = serial();
    let Some(dir) = setup("k") else { return };
    for flag in ["-k", "-x"] {
        let out = perfex_as_nobody(&dir.0, &[flag, "/bin/echo", "ran"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "perfex {flag}: {stderr}");
        assert!(
            stderr.contains("permission denied")
                && stderr.contains("perf_event_paranoid is")
                && stderr.contains("/proc/sys/kernel/perf_event_paranoid"),
            "perfex {flag}: {stderr}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("ran"),
            "the command must not run when counting is refused"
        );
    }
}

#[test]
fn perfex_as_nobody_counts_user_mode() {
    let _serial = serial();
    let Some(dir) = setup("user") else { return };
    let out = perfex_as_nobody(&dir.0, &["/bin/echo", "ran"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ran"));
    assert!(stderr.contains("user mode"), "{stderr}");
}

//! Files named by the environment or by `load_costs` that are not regular files (issue 29):
//! only regular files are read. A FIFO is refused like a directory, without blocking: the file
//! is opened with `O_NONBLOCK` before it is looked at, so opening a FIFO with no writer cannot
//! hang (before, `PERFCOMPAT_EVENTS=<fifo> perfex -e 0 true` never returned). Every wait here
//! is bounded, so a regression fails instead of hanging the suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use perfcompat::base::costfile::CostOverlay;
use perfcompat::base::eventmap::EventMap;

mod common;
use common::TempDir;

fn fifo(dir: &TempDir) -> PathBuf {
    let p = dir.0.join("fifo");
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

/// `f(path)`'s error message, or a failure if it takes more than 10 s or succeeds.
fn refused_in_time<T: 'static>(
    what: &str,
    path: &Path,
    f: fn(&Path) -> perfcompat::Result<T>,
) -> String {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(f(&p).err().map(|e| e.to_string()));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Some(msg)) => msg,
        Ok(None) => panic!("{what}: a FIFO was accepted"),
        Err(_) => panic!("{what}: still blocked after 10 s on a FIFO"),
    }
}

#[test]
fn every_file_reader_refuses_a_fifo_without_blocking() {
    let dir = TempDir::new("fifo-readers");
    let f = fifo(&dir);
    for (what, msg) in [
        (
            "EventMap::load",
            refused_in_time("EventMap::load", &f, EventMap::load),
        ),
        (
            "CostOverlay::load",
            refused_in_time("CostOverlay::load", &f, CostOverlay::load),
        ),
        (
            "costs::load",
            refused_in_time("costs::load", &f, perfcompat::api::costs::load),
        ),
    ] {
        assert!(msg.contains("not a regular file"), "{what}: {msg}");
        assert!(msg.contains("fifo"), "{what}: {msg}");
    }
}

/// Run perfex with `args` and `env`; it must finish within 20 s.
fn perfex(args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_perfex"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v.as_os_str())))
            .stdin(Stdio::null()),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|| panic!("perfex {args:?} with {env:?}: still running after 20 s"))
}

#[test]
fn perfex_refuses_fifos_named_by_the_environment_and_goes_on() {
    let dir = TempDir::new("fifo-perfex");
    let f = fifo(&dir);
    for (var, args) in [
        ("PERFCOMPAT_EVENTS", &["-e", "0", "true"][..]),
        ("PERFCOMPAT_SYSTEM_COSTS", &["-y", "-e", "0", "true"][..]),
        ("PERFCOMPAT_HOST_COSTS", &["-y", "-e", "0", "true"][..]),
    ] {
        let out = perfex(
            args,
            &[(var, &f), ("PERFCOMPAT_BACKEND", Path::new("perf"))],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{var}: {:?}\n{stderr}", out.status);
        assert!(stderr.contains("not a regular file"), "{var}: {stderr}");
    }
}

/// A `PERFCOMPAT_BACKEND` that is not UTF-8 is refused like an unknown backend (issue 29): it
/// once read as unset, so perf counted as if nothing were wrong.
#[test]
fn a_non_utf8_backend_is_refused_like_an_unknown_one() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"perf\xff");
    for value in [std::ffi::OsStr::new("papi"), bad] {
        let out = perfex(
            &["-e", "0", "true"],
            &[("PERFCOMPAT_BACKEND", Path::new(value))],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{value:?}\n{stderr}");
        assert!(stderr.contains("unknown backend"), "{value:?}: {stderr}");
    }
}

//! Counting a program from the outside: `PERFCOMPAT_PRELOAD_EVENTS`; and adopting the
//! counters of the `perfex` command that runs the program (`PERFCOMPAT_PERFEX_EVENTS`, see
//! [`perfcompat::perfex::adopt_handoff`]).
//!
//! The library carries an ELF constructor. When the variable is set in the environment of a
//! program that loads the library (`LD_PRELOAD=<prefix>/lib/libperfex.so.1 prog`, or a program
//! linked with `-lperfex`/`-lcpc`), the constructor starts counting on the main thread with
//! inheritance (every thread and child process created later is counted too, as by the
//! `perfex` command) and registers an exit handler that prints the perfex report
//! ([`perfcompat::perfex::command::Outcome::text`]) to stderr, or to the file named by
//! `PERFCOMPAT_PRELOAD_OUTPUT`.
//!
//! - The value is a comma-separated list of R10000 event numbers (`0,25`; mapped as for
//!   `perfex -e`, `PERFCOMPAT_EVENTS` included), or `all` (as `perfex -a`). Empty means unset.
//! - Unset, the constructor reads one environment variable and returns.
//! - A bad value or an event the host cannot count prints one line on stderr and the program
//!   runs uncounted. The constructor never stops the program.
//! - The constructor sets `PERFCOMPAT_PRELOAD_PID` to the process id, so the program's
//!   children (other process ids) do not count and report again: their counts are in the
//!   parent's report when the parent has waited for them. A program that `exec`s without
//!   forking keeps its process id, and the new image counts and reports (the old image's
//!   counters end with the `exec`): `valgrind prog` reports on `prog`.
//! - The report comes from `exit` (returning from `main` included; glibc's `on_exit` gives the
//!   status). A program that ends with `_exit` or is killed by a signal prints no report.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsString};
use std::io::Write as _;
use std::os::fd::FromRawFd as _;
use std::os::unix::ffi::OsStringExt as _;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use perfcompat::perfex::command::{Options, SelfCount, Status};
use perfcompat::perfex::{self, parse_event};

use crate::ffi_boundary;

/// [`perfex::HANDOFF_VAR`], as a C string.
const HANDOFF_VAR: &CStr = c"PERFCOMPAT_PERFEX_EVENTS";
/// The variable that turns counting on.
const EVENTS_VAR: &CStr = c"PERFCOMPAT_PRELOAD_EVENTS";
/// The variable naming the process that counts (its children do not).
const OWNER_VAR: &CStr = c"PERFCOMPAT_PRELOAD_PID";
/// The variable naming the report file (default: stderr).
const OUTPUT_VAR: &str = "PERFCOMPAT_PRELOAD_OUTPUT";

/// The counting started by the constructor.
static SESSION: Mutex<Option<SelfCount>> = Mutex::new(None);

/// A copy of standard error taken when counting starts: programs close their standard error
/// in exit handlers that run before the report (GNU coreutils' `close_stdout` does).
static STDERR_COPY: AtomicI32 = AtomicI32::new(-1);

/// The constructor, run by the dynamic loader when the library is loaded (glibc passes
/// `argc`, `argv` and `envp` to `.init_array` functions of shared objects).
#[used]
#[link_section = ".init_array"]
#[export_name = "perfcompat_preload_ctor"]
static PRELOAD_CTOR: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = ctor;

extern "C" {
    /// glibc: run `f(status, arg)` at `exit`.
    fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

extern "C" fn ctor(argc: c_int, argv: *const *const c_char, envp: *const *const c_char) {
    handoff();
    preload(argc, argv, envp);
}

/// The value of the environment variable `name`, unless unset or blank (copied before anything
/// else touches the environment).
fn env_value(name: &CStr) -> Option<String> {
    // Ignored in a privileged process (`perfcompat::sys::env_os`).
    let value = perfcompat::sys::env_os(name.to_str().ok()?)?;
    let value = value.to_string_lossy();
    (!value.trim().is_empty()).then(|| value.into_owned())
}

/// Under the `perfex` command ([`perfex::HANDOFF_VAR`] set): count the events perfex counts on
/// the main thread from now on, and on every thread from its start
/// ([`perfex::adopt_handoff`]; new threads through the `pthread_create` interposer).
fn handoff() {
    let Some(value) = env_value(HANDOFF_VAR) else {
        return;
    };
    ffi_boundary("the perfex hand-over constructor", || {
        if let Err(e) = perfex::adopt_handoff(&value) {
            perfcompat::stderr_line!(
                "libperfex: {}={value:?}: {e}; read_counters needs a start_counters",
                perfex::HANDOFF_VAR
            );
        }
    });
}

/// `PERFCOMPAT_PRELOAD_EVENTS`.
fn preload(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    let Some(value) = env_value(EVENTS_VAR) else {
        return;
    };
    // SAFETY: getpid has no preconditions.
    let pid = CString::new(unsafe { libc::getpid() }.to_string()).unwrap_or_default();
    let owner = OWNER_VAR.to_str().ok().and_then(perfcompat::sys::env_os);
    if owner.is_some_and(|o| o.as_encoded_bytes() != pid.as_bytes()) {
        return; // a child of the counting process: counted there
    }
    // SAFETY: NUL-terminated strings; the loader runs constructors before the program's
    // threads exist.
    unsafe { libc::setenv(OWNER_VAR.as_ptr(), pid.as_ptr(), 1) };
    // SAFETY: the loader passes the program's argument vector (argc entries).
    let command = unsafe { args(argc, argv) };
    ffi_boundary("the PERFCOMPAT_PRELOAD_EVENTS constructor", || {
        if let Err(e) = start(&value, command) {
            perfcompat::stderr_line!(
                "perfcompat: PERFCOMPAT_PRELOAD_EVENTS={value:?}: {e}; not counting"
            );
        }
    });
}

/// The program's arguments, for the report's first line.
///
/// # Safety
/// `argv` is NULL or holds `argc` NUL-terminated strings.
unsafe fn args(argc: c_int, argv: *const *const c_char) -> Vec<OsString> {
    if argv.is_null() {
        return Vec::new();
    }
    (0..argc.max(0) as usize)
        // SAFETY: the caller's promise.
        .map(|i| unsafe { *argv.add(i) })
        .take_while(|p| !p.is_null())
        // SAFETY: as above.
        .map(|p| OsString::from_vec(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()))
        .collect()
}

/// The options a `PERFCOMPAT_PRELOAD_EVENTS` value stands for.
fn options(value: &str, command: Vec<OsString>) -> perfcompat::Result<Options> {
    let mut opts = Options {
        command,
        ..Options::default()
    };
    if value.trim() == "all" {
        opts.all = true;
        return Ok(opts);
    }
    for item in value.split(',') {
        opts.events.push(parse_event(item)?);
    }
    Ok(opts)
}

fn start(value: &str, command: Vec<OsString>) -> perfcompat::Result<()> {
    let session = SelfCount::start(&options(value, command)?)?;
    // SAFETY: fcntl on the standard error descriptor; a failure leaves -1 (stderr is used).
    let copy = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
    STDERR_COPY.store(copy, Ordering::Relaxed);
    *SESSION.lock().unwrap_or_else(|p| p.into_inner()) = Some(session);
    // SAFETY: `report` is a function for the program's whole life.
    if unsafe { on_exit(report, std::ptr::null_mut()) } != 0 {
        return Err(perfcompat::Error::InvalidArgument(
            "cannot register the exit handler".into(),
        ));
    }
    Ok(())
}

/// Stop the constructor's counting without a report: the MPI layer counts the rank itself
/// (capi/src/mpi.rs).
pub(crate) fn take_session() -> Option<SelfCount> {
    SESSION.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The exit handler: read the counts and print the report.
extern "C" fn report(status: c_int, _arg: *mut c_void) {
    ffi_boundary("the PERFCOMPAT_PRELOAD_EVENTS report", || {
        let Some(session) = SESSION.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let text = match session.finish(Status::Exited(status)) {
            Ok(outcome) => outcome.text(None),
            Err(e) => {
                format!("perfcompat: PERFCOMPAT_PRELOAD_EVENTS: cannot read the counts: {e}\n")
            }
        };
        write_report(&text);
    });
}

/// Write the report to `PERFCOMPAT_PRELOAD_OUTPUT` (created or truncated), else to the copy of
/// standard error.
fn write_report(text: &str) {
    let mut text = text.to_string();
    if let Some(path) = perfcompat::sys::env_os(OUTPUT_VAR).filter(|p| !p.is_empty()) {
        match std::fs::write(&path, &text) {
            Ok(()) => return,
            Err(e) => {
                text.insert_str(
                    0,
                    &format!(
                        "perfcompat: {OUTPUT_VAR}={}: {e}; the report follows\n",
                        path.to_string_lossy()
                    ),
                );
            }
        }
    }
    let fd = STDERR_COPY.load(Ordering::Relaxed);
    if fd < 0 {
        let _ = std::io::stderr().write_all(text.as_bytes());
        return;
    }
    // SAFETY: `fd` is the descriptor the constructor duplicated; the report is its last use.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let _ = file.write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::{options, HANDOFF_VAR};

    #[test]
    fn the_handoff_variable_is_the_engines() {
        assert_eq!(
            HANDOFF_VAR.to_str().unwrap(),
            perfcompat::perfex::HANDOFF_VAR
        );
    }

    #[test]
    fn values() {
        let o = options(" 0, 25", Vec::new()).unwrap();
        assert_eq!((o.events, o.all), (vec![0, 25], false));
        assert!(options("all", Vec::new()).unwrap().all);
        for bad in ["32", "x", "0,,1", "-1", "cycles"] {
            assert!(options(bad, Vec::new()).is_err(), "{bad}");
        }
    }
}

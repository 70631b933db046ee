//! Counting a program from the outside: `PERFCOMPAT_PRELOAD_EVENTS`; and adopting the
//! counters of the `perfex` command that runs the program (`PERFCOMPAT_PERFEX_EVENTS`, see
//! [`perfcompat::api::perfex::adopt_handoff`]). The rules (the variables, what an `exec` does
//! with the counts, the report's descriptor) are the engine's
//! ([`perfcompat::api::preload`]); what a value of the variable counts
//! ([`perfcompat::commands::perfex::preload_options`]) and the report's text (the `perfex`
//! report's, [`perfcompat::commands::perfex::SelfCount`]) are the commands layer's; this
//! module holds the process's state and the C entry points.
//!
//! The library carries an ELF constructor. When the variable is set in the environment of a
//! program that loads the library, the constructor starts counting on the main thread with
//! inheritance (every thread and child process created later is counted too, as by the
//! `perfex` command), and the process prints the perfex report
//! ([`perfcompat::commands::perfex::SelfCount::write_report`], the text of `perfex`'s) to
//! stderr, or to the file named by `PERFCOMPAT_PRELOAD_OUTPUT`, once.
//!
//! The library is reached two ways (issue 44 item 6):
//! - `LD_PRELOAD=<prefix>/lib/libperfcompat-preload.so.1` (capi/preload/preload.c): a small
//!   C library that needs this one and defines the C library functions through which a
//!   process ends without its exit handlers or replaces its image (`_exit`, `_Exit`, the
//!   `exec` functions); each calls this library's private entry points
//!   [`perfcompat_preload_end`] and [`perfcompat_preload_exec`], then the C library's own. The
//!   report comes however the process ends.
//! - `LD_PRELOAD=<prefix>/lib/libperfex.so.1` (this library alone), or a program linked with
//!   `-lperfex`/`-lcpc`: the constructor counts and the report comes at `exit`, a return from
//!   `main`, the last thread's `pthread_exit` and a fatal signal, but not at `_exit`/`_Exit`
//!   (no report) nor across an `exec` (the new image, preloaded too, reports its own counts
//!   from its start). This library defines no C library function but libcpc's
//!   `pthread_create`, so a program linked with it keeps the C library's `_exit` and `exec`.
//!
//! # What is counted
//! - The value is a comma-separated list of R10000 event numbers (`0,25`; mapped as for
//!   `perfex -e`, `PERFCOMPAT_EVENTS` included), or `all` (as `perfex -a`), or else an event
//!   specification as `cputrack -c` takes it (`page-faults,task-clock`, `pic0=...,pic1=...`,
//!   [`perfcompat::commands::eventspec`]), whose report names each counter and event. A value made of
//!   numbers only is R10000 events (`40` is refused as before: not an R10000 event number).
//!   Empty means unset.
//! - Unset, the constructor reads one environment variable and returns.
//! - A bad value or an event the host cannot count prints one line on stderr and the program
//!   runs uncounted. The constructor never stops the program.
//!
//! # One report per process, however it ends
//! The process that counts is the one whose id the constructor put in
//! `PERFCOMPAT_PRELOAD_PID`. Every way to the report first claims the session with one atomic
//! exchange (`claim`), so the first wins and there is never a second report; the report is read
//! and formatted on the stack and written with `write(2)`, with no allocation, lock or stdio, so
//! that it may be written in a signal handler.
//! - `exit` and a return from `main` (glibc's `on_exit`, which gives the status); the last
//!   thread's `pthread_exit` (glibc calls `exit(0)` then).
//! - `_exit` and `_Exit` (dash ends that way; no exit handler runs): libperfcompat-preload
//!   defines both and calls [`perfcompat_preload_end`] before it calls the C library's.
//!   `exit` itself ends with the C library's internal `_exit`, which is not ours, and an exit
//!   handler that calls `_exit` claims the report before ours runs.
//! - A signal whose default action ends the process, left at `SIG_DFL` when counting starts
//!   (every one but SIGINT and the real-time signals, see
//!   [`perfcompat::base::signal::FATAL_SIGNALS`]): the handler writes the report with the line
//!   `The command was killed by signal N.`, as `perfex` does for a killed command, then the
//!   signal's default action ends the process (the same wait status, core dump included).
//!   SIGKILL cannot be caught: no report.
//! - `exec` (`execve`, `execv`, `execvp`, `execvpe`, `execl`, `execle`, `execlp`, defined by
//!   libperfcompat-preload): the counts carry over into the new image, which prints the one
//!   report, with the command line the process started with, from its start: the counts so far
//!   go in `PERFCOMPAT_PRELOAD_CARRY` in the new image's environment (the counters end with the
//!   exec: their descriptors close), and the new image's constructor checks them and adds them
//!   to its own. What the dynamic loader does in the new image before the constructor is not
//!   counted (tens of page faults). When the new image would not take them over
//!   ([`perfcompat::api::preload::exec::decide`]: no `LD_PRELOAD` or other events in its
//!   environment, or the file the exec runs, found through `PATH` for `execvp`, is privileged)
//!   or a counter cannot be read, the old image writes its report before the exec instead. A
//!   failed exec that carried goes on counting. Carrying allocates (the new environment): the
//!   counting process's own exec from a signal handler is the one path here that is not
//!   async-signal-safe (a forked or `vfork`ed child's exec does nothing of ours).
//! - A forked child (another process id) stays silent however it ends: its counts are in its
//!   parent's report once the parent has waited for it (the counters are inherited), as in the
//!   `perfex` command's report. It never reads the parent's counters.
//!
//! # Descriptors
//! The report is written to the library's copy of standard error only while that is still the
//! file it was ([`perfcompat::api::preload::output`]): a program that closed it and opened
//! another file with the same number does not get the report in its file. A counter whose
//! descriptor the program took away is named in the report as lost, with the engine's reason.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString, OsString};
use std::fmt::{self, Write as _};
use std::os::unix::ffi::OsStringExt as _;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use perfcompat::api::perfex;
use perfcompat::api::preload::exec::{decide, Decision, Lookup};
use perfcompat::api::preload::output::Output;
use perfcompat::api::preload::{self as rules, CARRY_VAR, EVENTS_VAR, OUTPUT_VAR, OWNER_VAR};
use perfcompat::commands::perfex::{preload_options, Reading, SelfCount, Status, MAX_READINGS};

use crate::ffi_boundary;

/// No counting in this process.
const IDLE: u8 = 0;
/// Counting: the session in [`SESSION`] may be claimed.
const COUNTING: u8 = 1;
/// Claimed by the report (or the MPI layer, or an exec in progress).
const CLAIMED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(IDLE);
/// The process that counts (0: none).
static OWNER: AtomicI32 = AtomicI32::new(0);

/// The counting and where its report goes.
pub(crate) struct Session {
    count: SelfCount,
    /// `PERFCOMPAT_PRELOAD_EVENTS` as it was at the start.
    events: String,
    /// `PERFCOMPAT_PRELOAD_OUTPUT` as it was at the start.
    output: Option<CString>,
    /// Standard error and the library's copy of it, taken when counting starts: programs
    /// close their standard error in exit handlers that run before the report (GNU
    /// coreutils' `close_stdout` does).
    stderr: Output,
}

/// The session: written once by the constructor before [`STATE`] turns [`COUNTING`], then
/// only by whoever moved [`STATE`] from [`COUNTING`] to [`CLAIMED`] ([`claim`]).
struct Slot(UnsafeCell<Option<Session>>);
// SAFETY: access is serialised by STATE, as said above.
unsafe impl Sync for Slot {}
static SESSION: Slot = Slot(UnsafeCell::new(None));

/// The session, for the caller alone from now on, if this process counts and no one claimed
/// it. Async-signal-safe (a system call and an atomic exchange), and safe in a forked child
/// (another process id: `None`, whatever the parent was doing at the fork).
fn claim() -> Option<&'static mut Session> {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != OWNER.load(Ordering::Relaxed) {
        return None;
    }
    STATE
        .compare_exchange(COUNTING, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    // SAFETY: the exchange above gave this caller the session alone.
    unsafe { (*SESSION.0.get()).as_mut() }
}

/// Give a claimed session back (an exec that failed).
fn unclaim() {
    STATE.store(COUNTING, Ordering::Release);
}

/// The constructor, run by the dynamic loader when the library is loaded (glibc passes
/// `argc`, `argv` and `envp` to `.init_array` functions of shared objects).
#[used]
#[link_section = ".init_array"]
#[export_name = "perfcompat_preload_ctor"]
static PRELOAD_CTOR: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = ctor;

extern "C" {
    /// glibc: run `f(status, arg)` at `exit`.
    fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
    /// glibc 2.32 and later: the text of error `errnum`, untranslated and static (what
    /// `strerror` says in the C locale), with no lock or allocation.
    fn strerrordesc_np(errnum: c_int) -> *const c_char;
}

extern "C" fn ctor(argc: c_int, argv: *const *const c_char, envp: *const *const c_char) {
    handoff();
    preload(argc, argv, envp);
}

/// The value of the environment variable `name`, unless unset or blank (copied before anything
/// else touches the environment).
fn env_value(name: &str) -> Option<String> {
    // Ignored in a privileged process (`perfcompat::base::sys::env_os`).
    let value = perfcompat::base::sys::env_os(name)?;
    let value = value.to_string_lossy();
    (!value.trim().is_empty()).then(|| value.into_owned())
}

/// Under the `perfex` command ([`perfex::HANDOFF_VAR`] set): count the events perfex counts on
/// the main thread from now on, and on every thread from its start
/// ([`perfex::adopt_handoff`]; new threads through the `pthread_create` interposer).
fn handoff() {
    let Some(value) = env_value(perfex::HANDOFF_VAR) else {
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
    // The counts an exec of this process carried (taken out of the environment, so that no
    // child sees them).
    let carried = perfcompat::base::sys::env_os(CARRY_VAR);
    if carried.is_some() {
        std::env::remove_var(CARRY_VAR);
    }
    let Some(value) = env_value(EVENTS_VAR) else {
        return;
    };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let pid_text = CString::new(pid.to_string()).unwrap_or_default();
    let owner = perfcompat::base::sys::env_os(OWNER_VAR);
    if owner.is_some_and(|o| o.as_encoded_bytes() != pid_text.as_bytes()) {
        return; // a child of the counting process: counted there
    }
    // SAFETY: NUL-terminated strings; the loader runs constructors before the program's
    // threads exist.
    unsafe { libc::setenv(c"PERFCOMPAT_PRELOAD_PID".as_ptr(), pid_text.as_ptr(), 1) };
    // SAFETY: the loader passes the program's argument vector (argc entries).
    let command = unsafe { args(argc, argv) };
    ffi_boundary("the PERFCOMPAT_PRELOAD_EVENTS constructor", || {
        if let Err(e) = start(&value, command, pid, carried) {
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

fn start(
    value: &str,
    command: Vec<OsString>,
    pid: i32,
    carried: Option<OsString>,
) -> perfcompat::Result<()> {
    let mut count = SelfCount::start(&preload_options(value, command)?)?;
    if let Some(c) = carried {
        adopt(&mut count, &c, pid);
    }
    let output = perfcompat::base::sys::env_os(OUTPUT_VAR)
        .filter(|p| !p.is_empty())
        .and_then(|p| CString::new(p.into_vec()).ok());
    let session = Session {
        count,
        events: value.to_string(),
        output,
        stderr: Output::keep_stderr(),
    };
    // SAFETY: STATE is IDLE: no one else reads the slot before the store below.
    unsafe { *SESSION.0.get() = Some(session) };
    OWNER.store(pid, Ordering::Relaxed);
    STATE.store(COUNTING, Ordering::Release);
    // SAFETY: `at_exit` is a function for the program's whole life.
    if unsafe { on_exit(at_exit, std::ptr::null_mut()) } != 0 {
        return Err(perfcompat::Error::InvalidArgument(
            "cannot register the exit handler".into(),
        ));
    }
    perfcompat::base::signal::report_before_fatal_signals(on_fatal_signal);
    Ok(())
}

/// Take over the counts an `exec` of this process carried (`<pid>;<carry>`, checked by
/// [`rules::carried_for`] and [`SelfCount::adopt`]); a value for another process (left by hand
/// in the environment) is ignored, a bad one refused with one line that says why.
fn adopt(count: &mut SelfCount, carried: &OsString, pid: i32) {
    let taken = rules::carried_for(carried.as_encoded_bytes(), pid)
        .and_then(|rest| rest.map_or(Ok(()), |r| count.adopt(r).map_err(|e| e.to_string())));
    if let Err(e) = taken {
        perfcompat::stderr_line!(
            "perfcompat: {CARRY_VAR}: {e}; refused, counting from this image of the program on"
        );
    }
}

/// Stop the constructor's counting without a report: the MPI layer counts the rank itself
/// (capi/src/mpi.rs).
pub(crate) fn take_session() -> Option<SelfCount> {
    claim()?;
    // SAFETY: claimed: the session is this caller's alone, and no one claims it again.
    unsafe { (*SESSION.0.get()).take() }.map(|s| s.count)
}

/// The exit handler (`exit`, a return from `main`, the last thread's `pthread_exit`).
extern "C" fn at_exit(status: c_int, _arg: *mut c_void) {
    ffi_boundary("the PERFCOMPAT_PRELOAD_EVENTS report", || {
        end(Status::Exited(status))
    });
}

/// The fatal signal `sig` arrived (in its handler, [`perfcompat::base::signal`]'s).
fn on_fatal_signal(sig: i32) {
    ffi_boundary("the PERFCOMPAT_PRELOAD_EVENTS report", || {
        end(Status::Signaled(sig))
    });
}

/// The process ends with `status`: the report, if this process counts and no one wrote it.
/// Async-signal-safe.
pub(crate) fn end(status: Status) {
    if let Some(s) = claim() {
        s.report(status);
    }
}

/// libperfcompat-preload's `_exit` and `_Exit` (capi/preload/preload.c): the process ends with
/// `status` without its exit handlers; the report first, if this process counts. A private
/// entry point (version `PERFCOMPAT_PRIVATE_1`): no program calls it. Async-signal-safe.
#[no_mangle]
pub extern "C" fn perfcompat_preload_end(status: c_int) {
    ffi_boundary("_exit", || end(Status::Exited(status)));
}

/// The C library's `execve` or `execvpe`, which libperfcompat-preload passes to
/// [`perfcompat_preload_exec`].
pub type ExecFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// libperfcompat-preload's `exec` functions (capi/preload/preload.c): `real(file, argv, envp)`
/// (the C library's `execve` when `search` is 0, its `execvpe` otherwise), in the counting
/// process with the counts carried into the new image or reported first (see the module's
/// documentation); when the exec fails (it returned), counting goes on, `errno` kept. A
/// private entry point (version `PERFCOMPAT_PRIVATE_1`): no program calls it.
///
/// # Safety
/// As `execve(2)`/`execvpe(3)`; `real` is a function of that signature.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_preload_exec(
    file: *const c_char,
    search: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
    real: ExecFn,
) -> c_int {
    let lookup = if search != 0 {
        Lookup::Search
    } else {
        Lookup::Path
    };
    ffi_boundary("exec", || {
        // SAFETY: the caller's arguments.
        unsafe { exec(file, lookup, envp, |env| real(file, argv, env)) }
    })
}

impl Session {
    /// Read the counts and write the report. Async-signal-safe: the counts and the text are
    /// on the stack, written with `write(2)`.
    fn report(&self, status: Status) {
        let mut readings = [Reading::default(); MAX_READINGS];
        let read = self.count.readings(&mut readings);
        self.write_report(&readings, read, status);
    }

    /// Write the report of the counts `read` (how many of `readings` were read).
    fn write_report(&self, readings: &[Reading], read: perfcompat::Result<usize>, status: Status) {
        // Nowhere that is still the library's: nothing is written (a program that closed
        // both its standard error and the library's copy; PERFCOMPAT_PRELOAD_OUTPUT is the
        // way to a report for those).
        let mut out = Out::new(self.stderr.fd().unwrap_or(-1));
        let stderr = out.fd;
        if let Some(path) = &self.output {
            // SAFETY: a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                    0o666,
                )
            };
            if fd >= 0 {
                out.fd = fd;
            } else {
                // SAFETY: errno is the calling thread's.
                let errno = unsafe { *libc::__errno_location() };
                let _ = write!(out, "perfcompat: {OUTPUT_VAR}=");
                out.bytes(path.as_bytes());
                let _ = writeln!(out, ": {}; the report follows", OsError(errno));
                out.flush();
            }
        }
        let _ = match read {
            Ok(n) => self.count.write_report(&mut out, &readings[..n], status),
            Err(e) => writeln!(out, "perfcompat: {EVENTS_VAR}: cannot read the counts: {e}"),
        };
        out.flush();
        if out.fd != stderr && out.fd >= 0 {
            // SAFETY: the report file opened above.
            unsafe { libc::close(out.fd) };
        }
    }

    /// What an `exec` of this process of `file` (named as `lookup` says) with the environment
    /// `envp` does with the counts: `Some` (the `PERFCOMPAT_PRELOAD_CARRY=...` entry for it)
    /// to carry them into the new image, `None` when the report was written now instead,
    /// because the new image would not take them over or a counter could not be read.
    ///
    /// # Safety
    /// `file` is NULL or a C string; `envp` is NULL or a NULL-terminated array of C strings.
    unsafe fn before_exec(
        &self,
        file: *const c_char,
        lookup: Lookup,
        envp: *const *const c_char,
    ) -> Option<CString> {
        // SAFETY: the caller's promise.
        let entries = unsafe { entries(envp) };
        let name = if file.is_null() {
            &b""[..]
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(file) }.to_bytes()
        };
        // The C library searches the calling process's PATH (not the new environment's).
        let path_var = std::env::var_os("PATH");
        let decision = decide(
            name,
            lookup,
            path_var.as_ref().map(|p| p.as_encoded_bytes()),
            entries.iter().copied(),
            &self.events,
        );
        let mut readings = [Reading::default(); MAX_READINGS];
        let read = self.count.readings(&mut readings);
        let n = match read {
            Ok(n) if decision == Decision::Carry && readings[..n].iter().all(|r| !r.lost) => n,
            _ => {
                self.write_report(&readings, read, Status::Exited(0));
                return None;
            }
        };
        let value = self.count.carry(&readings[..n]);
        CString::new(format!(
            "{CARRY_VAR}={};{value}",
            OWNER.load(Ordering::Relaxed)
        ))
        .ok()
    }
}

/// The entries of the environment array `envp` (`NAME=value`).
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of C strings that outlive the result.
unsafe fn entries<'a>(envp: *const *const c_char) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut p = envp;
    // SAFETY: the caller's promise: entries up to the NULL one.
    while let Some(e) = (!p.is_null())
        .then(|| unsafe { *p })
        .filter(|e| !e.is_null())
    {
        // SAFETY: a C string.
        out.push(unsafe { CStr::from_ptr(e) }.to_bytes());
        // SAFETY: still within the array.
        p = unsafe { p.add(1) };
    }
    out
}

/// `envp` without any `PERFCOMPAT_PRELOAD_CARRY` entry and with `carry` added, NULL-terminated.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of C strings.
unsafe fn with_carry(envp: *const *const c_char, carry: &CString) -> Vec<*const c_char> {
    let mut out = Vec::new();
    let mut p = envp;
    // SAFETY: the caller's promise: entries up to the NULL one.
    while let Some(e) = (!p.is_null())
        .then(|| unsafe { *p })
        .filter(|e| !e.is_null())
    {
        // SAFETY: a C string.
        let entry = unsafe { CStr::from_ptr(e) }.to_bytes();
        if !entry.starts_with(CARRY_VAR.as_bytes()) || entry.get(CARRY_VAR.len()) != Some(&b'=') {
            out.push(e);
        }
        // SAFETY: still within the array.
        p = unsafe { p.add(1) };
    }
    out.push(carry.as_ptr());
    out.push(std::ptr::null());
    out
}

/// An `exec` of the program: `run(envp)` performs it with the environment it is given. In the
/// counting process the counts are carried into the new image, or reported now (see the
/// module's documentation); when the exec fails (it returned), counting goes on.
///
/// # Safety
/// `file` is NULL or a C string; `envp` is NULL or a NULL-terminated array of C strings.
unsafe fn exec(
    file: *const c_char,
    lookup: Lookup,
    envp: *const *const c_char,
    run: impl FnOnce(*const *const c_char) -> c_int,
) -> c_int {
    let Some(session) = claim() else {
        return run(envp);
    };
    // SAFETY: the caller's promise.
    let Some(carry) = (unsafe { session.before_exec(file, lookup, envp) }) else {
        return run(envp); // reported: the session stays claimed
    };
    // SAFETY: as above.
    let env = unsafe { with_carry(envp, &carry) };
    let r = run(env.as_ptr());
    // SAFETY: errno is the calling thread's; kept across the bookkeeping.
    let errno = unsafe { *libc::__errno_location() };
    unclaim();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    r
}

/// `errno` as strerror(3) says it (`No such file or directory`, no Rust-style `(os error 2)`), from
/// glibc's static untranslated text: no lock, no allocation.
struct OsError(c_int);

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: strerrordesc_np returns NULL or a static C string.
        let text = unsafe { strerrordesc_np(self.0) };
        if !text.is_null() {
            // SAFETY: as above.
            let text = unsafe { CStr::from_ptr(text) };
            f.write_str(&text.to_string_lossy())?;
        } else {
            f.write_str("Unknown error")?;
        }
        // The text alone, as strerror(3) gives it: no Rust-style " (os error N)" (issue 46
        // item 11).
        Ok(())
    }
}

/// A buffer on the stack in front of a descriptor, written with `write(2)` when full and at
/// the end: what the report is formatted into (async-signal-safe).
struct Out {
    fd: c_int,
    buf: [u8; 2048],
    len: usize,
}

impl Out {
    /// Writing to `fd` (-1: nowhere, the text is dropped).
    fn new(fd: c_int) -> Out {
        Out {
            fd,
            buf: [0; 2048],
            len: 0,
        }
    }

    fn bytes(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.len == self.buf.len() {
                self.flush();
            }
            let n = b.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
            self.len += n;
            b = &b[n..];
        }
    }

    fn flush(&mut self) {
        if self.fd < 0 {
            self.len = 0;
            return;
        }
        let mut done = 0;
        while done < self.len {
            // SAFETY: the initialised part of the buffer.
            let n = unsafe {
                libc::write(
                    self.fd,
                    self.buf[done..self.len].as_ptr().cast(),
                    self.len - done,
                )
            };
            if n > 0 {
                done += n as usize;
            // SAFETY: errno is the calling thread's.
            } else if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            } else {
                break; // nowhere to write: the report is lost, the program goes on
            }
        }
        self.len = 0;
    }
}

impl fmt::Write for Out {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

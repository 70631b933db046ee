//! A minimal Solaris `libpctx` (`libpctx.h`): process contexts for cputrack-style tools, over
//! [`perfcompat::api::pctx`] (ptrace). `pctx_create` starts a command stopped before its first
//! instruction, `pctx_capture` takes a running process, `pctx_set_events` registers the
//! callbacks, `pctx_run` runs it calling them, `pctx_release` lets it go. The callbacks get the
//! process id and an LWP id as Solaris numbers them: 1 for the process's first thread, then
//! 2, 3, ... in the order threads are created (for a captured process, found), 1 again for
//! the one thread after an exec. The library maps each to its Linux thread; `cpc_bind_pctx`
//! takes the LWP id.
//!
//! The callbacks come in the order and with the ids pctx_set_events(3CPC) documents (the
//! engine, [`perfcompat::api::pctx`], makes them); this file only calls them. A fork callback
//! makes children followed, each as its own `pctx_t` handed to that callback in a forked copy
//! of the caller (see [`Follow::Copy`]); without one, children run untraced.
//!
//! Differences from Solaris's libpctx:
//! - `pctx_create(file, argv, ...)` runs `file` (searched in `PATH`) with `argv[1..]`; the
//!   program sees `file` as its `argv[0]`;
//! - a callback returning non-zero ends `pctx_run`, which returns -1 without a message (the
//!   callback decided it); the processes stay under control until `pctx_release`, which lets
//!   them go on running;
//! - the `SYSC_EXEC` callback gets the new program's arguments as Solaris's `pr_psargs`
//!   (`/proc/<pid>/cmdline` joined by spaces, at most 79 bytes), read at the exec stop; the
//!   `SYSC_EXIT` callback's LWP id is 1; only successful execs are seen;
//! - the fork callback gets (child's `pctx_t`, parent pid, child pid, 1, arg): the page names
//!   the third and fourth arguments lwpid and child, cputrack reads them as child pid and
//!   lwpid; the child's one thread is its LWP 1 here (Solaris keeps the forking LWP's id);
//! - `pctx_set_events` is variadic; Rust cannot define C variadic functions on stable, so the
//!   exported symbol is a naked trampoline that jumps to a C function (capi/src/cpc/varargs.c)
//!   which reads the (event, callback) pairs and registers each here;
//! - `pctx_terminate` (and `cpc_terminate`, for every run) ends a run within 10 ms; both are
//!   async-signal-safe.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use perfcompat::api::pctx::{Follow, LwpIds, Observer, Pctx, Status};
use perfcompat::{Error, Result};

use std::ffi::c_uint as uint_t;
use std::ffi::OsStr;
use std::sync::Mutex;

use crate::edge::registry;
use crate::edge::{self, call, run, set_errno, Handle, Kind, Tell, Tells};

/// A process context (opaque): made by `pctx_create` or `pctx_capture`.
pub struct pctx_t {
    _opaque: [u8; 0],
}

/// No event (ends `pctx_set_events`'s list).
pub const PCTX_NULL_EVENT: c_int = 0;
/// The process executed a program: `int fn(pctx_t *, pid_t, id_t, char *path, void *arg)`.
pub const PCTX_SYSC_EXEC_EVENT: c_int = 1;
/// The process forked: `void fn(pctx_t *child, pid_t parent, id_t child_pid, pid_t child_lwp,
/// void *arg)`, called in a copy of the caller (see `pctx_set_events`).
pub const PCTX_SYSC_FORK_EVENT: c_int = 2;
/// The process exited: `void fn(pctx_t *, pid_t, id_t, int status, void *arg)`.
pub const PCTX_SYSC_EXIT_EVENT: c_int = 3;
/// A thread created a thread: `int fn(pctx_t *, pid_t, id_t, void *arg)`.
pub const PCTX_SYSC_LWP_CREATE_EVENT: c_int = 4;
/// A thread is now observed (before it runs): `int fn(pctx_t *, pid_t, id_t, void *arg)`.
pub const PCTX_INIT_LWP_EVENT: c_int = 5;
/// A thread is about to exit or is released: `int fn(pctx_t *, pid_t, id_t, void *arg)`.
pub const PCTX_FINI_LWP_EVENT: c_int = 6;
/// A thread is exiting: `int fn(pctx_t *, pid_t, id_t, void *arg)`.
pub const PCTX_SYSC_LWP_EXIT_EVENT: c_int = 7;

/// The error callback type of `pctx_create`/`pctx_capture` (`pctx_errfn_t`), declared in the
/// header by hand: its last parameter is a `va_list`.
pub type pctx_errfn_t = c_void;

type LwpFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_void) -> c_int;
type ExecFn =
    unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_char, *mut c_void) -> c_int;
type ForkFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, libc::pid_t, *mut c_void);
type ExitFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, c_int, *mut c_void);

#[derive(Default, Clone, Copy)]
struct Callbacks {
    exec: Option<ExecFn>,
    fork: Option<ForkFn>,
    exit: Option<ExitFn>,
    lwp_create: Option<LwpFn>,
    init_lwp: Option<LwpFn>,
    fini_lwp: Option<LwpFn>,
    lwp_exit: Option<LwpFn>,
}

impl Callbacks {
    /// Record `f` as the callback of `event`.
    ///
    /// # Safety
    /// `f` is NULL or a function of the type `event` takes.
    unsafe fn set(&mut self, event: c_int, f: Option<unsafe extern "C" fn()>) -> Result<()> {
        let f = f.map(|f| f as *const ());
        // SAFETY: the caller passes a function of the type its event takes.
        unsafe {
            let lwp = || f.map(|f| std::mem::transmute::<*const (), LwpFn>(f));
            match event {
                PCTX_SYSC_EXEC_EVENT => {
                    self.exec = f.map(|f| std::mem::transmute::<*const (), ExecFn>(f))
                }
                PCTX_SYSC_FORK_EVENT => {
                    self.fork = f.map(|f| std::mem::transmute::<*const (), ForkFn>(f))
                }
                PCTX_SYSC_EXIT_EVENT => {
                    self.exit = f.map(|f| std::mem::transmute::<*const (), ExitFn>(f))
                }
                PCTX_SYSC_LWP_CREATE_EVENT => self.lwp_create = lwp(),
                PCTX_INIT_LWP_EVENT => self.init_lwp = lwp(),
                PCTX_FINI_LWP_EVENT => self.fini_lwp = lwp(),
                PCTX_SYSC_LWP_EXIT_EVENT => self.lwp_exit = lwp(),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown pctx event {event}"
                    )))
                }
            }
        }
        Ok(())
    }
}

/// What a `pctx_t` points to.
pub(crate) struct Ctx {
    pid: i32,
    arg: *mut c_void,
    callbacks: Mutex<Callbacks>,
    /// The process under control; out of the handle while `pctx_run` runs it.
    pctx: Mutex<Option<Pctx>>,
    /// Set by `pctx_terminate`.
    terminate: AtomicBool,
    /// The LWP ids the callbacks pass, and the Linux threads they stand for.
    ids: Arc<Mutex<LwpIds>>,
}

// SAFETY: only `register` records Kind::Pctx pointers, boxes of Ctx.
unsafe impl Handle for pctx_t {
    const KIND: Kind = Kind::Pctx;
    type Target = Ctx;
    const BAD: &'static str = "invalid argument: not a pctx_t from pctx_create or pctx_capture";
}

impl Tells for Ctx {
    fn tell(&self) -> Tell {
        Tell::Pctx
    }
}

static TERMINATE: AtomicBool = AtomicBool::new(false);

/// Ask every `pctx_run` in progress to return within 10 ms (`cpc_terminate`).
pub(crate) fn terminate_all() {
    TERMINATE.store(true, Ordering::Release);
}

/// The process a live `pctx_t` controls.
pub(crate) fn pid_of(p: *mut pctx_t) -> Option<i32> {
    edge::get(p).map(|c: &Ctx| c.pid)
}

/// The Linux thread of LWP `id` (as the callbacks of a live `pctx_t` pass it), if it is one
/// of its process's observed threads.
pub(crate) fn tid_of(p: *mut pctx_t, id: libc::id_t) -> Option<i32> {
    edge::get(p).and_then(|c: &Ctx| lock(&c.ids).tid(id))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new handle for `pctx`, registered.
fn register(pctx: Pctx, arg: *mut c_void) -> Result<*mut pctx_t> {
    let ctx = Ctx {
        pid: pctx.pid(),
        arg,
        callbacks: Mutex::new(Callbacks::default()),
        pctx: Mutex::new(Some(pctx)),
        terminate: AtomicBool::new(false),
        ids: Arc::default(),
    };
    // Dropped when it cannot be registered: the process is let go.
    edge::new_handle(ctx, |p| registry::insert(p, Kind::Pctx))
}

/// The command `pctx_create` runs: `filename`, then `argv[1..]`.
///
/// # Safety
/// `filename` is NULL or a string; `argv` is NULL or a NULL-terminated array of strings.
unsafe fn c_command(filename: *const c_char, argv: *const *mut c_char) -> Result<Vec<OsString>> {
    if filename.is_null() {
        return Err(Error::InvalidArgument("NULL file name".into()));
    }
    let os = |p: *const c_char| {
        // SAFETY: a string, per the caller.
        OsStr::from_bytes(unsafe { CStr::from_ptr(p) }.to_bytes()).to_os_string()
    };
    let mut command = vec![os(filename)];
    // SAFETY: a NULL-terminated array of strings, per the caller.
    unsafe {
        if !argv.is_null() && !(*argv).is_null() {
            let mut i = 1;
            while !(*argv.add(i)).is_null() {
                command.push(os(*argv.add(i)));
                i += 1;
            }
        }
    }
    Ok(command)
}

/// Start `filename` with the arguments `argv[1..]` (NULL-terminated; a NULL `argv` gives
/// none) under control, stopped before its first instruction; see pctx_capture(3CPC).
/// `filename` is searched in `PATH` as `execvp` does. `verbose` and `errfn` are accepted and
/// unused: errors are reported on standard error.
///
/// # Returns
/// The context, or NULL with `errno` set, nothing started: `EINVAL` for a NULL `filename`,
/// `ENOENT` when no such file is found, `EACCES` when the file found cannot be executed (not
/// a regular file, or no execute permission), `EPERM`/`EACCES` when it cannot be traced.
///
/// # Safety
/// `filename` is NULL or a string; `argv` is NULL or a NULL-terminated array of strings.
#[no_mangle]
pub unsafe extern "C" fn pctx_create(
    filename: *const c_char,
    argv: *const *mut c_char,
    arg: *mut c_void,
    verbose: c_int,
    errfn: *mut pctx_errfn_t,
) -> *mut pctx_t {
    let _ = (verbose, errfn);
    run(Tell::Pctx, c"pctx_create", std::ptr::null_mut(), || {
        // SAFETY: the caller's promises.
        let command = unsafe { c_command(filename, argv) }?;
        register(Pctx::create_for_cpc(&command)?, arg)
    })
}

/// Take control of the running process `pid` (all its threads); see pctx_capture(3CPC).
///
/// # Returns
/// The context, or NULL with `errno` set and a line saying why: `ESRCH` no such process, or
/// one that has exited and is a zombie; `EACCES` not allowed to trace it.
#[no_mangle]
pub extern "C" fn pctx_capture(
    pid: libc::pid_t,
    arg: *mut c_void,
    verbose: c_int,
    errfn: *mut pctx_errfn_t,
) -> *mut pctx_t {
    let _ = (verbose, errfn);
    run(Tell::Pctx, c"pctx_capture", std::ptr::null_mut(), || {
        register(Pctx::capture(pid)?, arg)
    })
}

/// Record one callback of `pctx_set_events` (called by the C side for each pair; event 0,
/// `PCTX_NULL_EVENT`, only checks the handle).
///
/// # Safety
/// `f` is NULL or a function of the type `event` takes.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_pctx_set_event(
    pctx: *mut pctx_t,
    event: c_int,
    f: Option<unsafe extern "C" fn()>,
) -> c_int {
    call(c"pctx_set_events", pctx, Tell::Pctx, -1, |c: &Ctx| {
        // PCTX_NULL_EVENT: only the handle check (varargs.c makes it first, so that a bad
        // handle with an empty list is still EINVAL).
        if event == 0 {
            return Ok(0);
        }
        let mut cb = c.callbacks.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller passes a function of the type its event takes.
        unsafe { cb.set(event, f) }.map(|()| 0)
    })
}

extern "C" {
    /// In varargs.c: reads the variadic pairs and calls [`perfcompat_pctx_set_event`].
    fn perfcompat_pctx_set_events_va(pctx: *mut c_void, ...) -> c_int;
}

/// `int pctx_set_events(pctx_t *pctx, ...)`: register callbacks as (event, function) pairs
/// ending with `PCTX_NULL_EVENT`; see pctx_set_events(3CPC). A trampoline: it jumps, with the
/// caller's registers and stack untouched, to the C function that reads the variadic
/// arguments. Returns 0, or -1 with `errno` `EINVAL` for a bad handle or an unknown event (the
/// pairs after it are not read).
///
/// The header declares it variadic (`libpctx.h`); this Rust signature only names the first
/// argument.
///
/// # Safety
/// Called from C as the variadic function it is declared as.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn pctx_set_events(pctx: *mut pctx_t) -> c_int {
    #[cfg(target_arch = "x86_64")]
    std::arch::naked_asm!("jmp {}", sym perfcompat_pctx_set_events_va);
    #[cfg(target_arch = "aarch64")]
    std::arch::naked_asm!("b {}", sym perfcompat_pctx_set_events_va);
}

/// Calls the program's callbacks for [`Pctx::run`].
struct Calls {
    handle: *mut pctx_t,
    arg: *mut c_void,
    cb: Callbacks,
    tick: Option<TickFn>,
    ids: Arc<Mutex<LwpIds>>,
}

/// `pctx_run`'s tick callback.
type TickFn = unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_void) -> c_int;

/// The error that ends a run when a callback returns non-zero.
fn refused(what: &'static str, rc: c_int) -> Error {
    Error::CallbackRefused { what, rc }
}

impl Calls {
    /// The calls for handle `handle`, with its argument and callbacks.
    fn new(handle: *mut pctx_t, c: &Ctx, tick: Option<TickFn>) -> Calls {
        Calls {
            handle,
            arg: c.arg,
            cb: *c.callbacks.lock().unwrap_or_else(|p| p.into_inner()),
            tick,
            ids: Arc::clone(&c.ids),
        }
    }

    /// The LWP id of thread `tid` of process `pid`.
    fn id(&self, pid: i32, tid: i32) -> libc::id_t {
        lock(&self.ids).id(pid, tid)
    }

    fn lwp(
        &self,
        f: Option<LwpFn>,
        what: &'static str,
        pid: i32,
        tid: i32,
    ) -> perfcompat::Result<()> {
        let Some(f) = f else { return Ok(()) };
        let id = self.id(pid, tid);
        // SAFETY: the program's callback.
        match unsafe { f(self.handle, pid, id, self.arg) } {
            0 => Ok(()),
            rc => Err(refused(what, rc)),
        }
    }
}

impl Observer for Calls {
    fn init_lwp(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        self.lwp(self.cb.init_lwp, "init_lwp", pid, tid)
    }
    fn fini_lwp(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        let r = self.lwp(self.cb.fini_lwp, "fini_lwp", pid, tid);
        // The thread is gone (or let go): its id names nothing any more.
        lock(&self.ids).forget(tid);
        r
    }
    fn lwp_create(&mut self, pid: i32, tid: i32, new: i32) -> perfcompat::Result<()> {
        // The new thread's id is given in the order of creation, before its init_lwp.
        let creator = self.id(pid, tid);
        self.id(pid, new);
        let Some(f) = self.cb.lwp_create else {
            return Ok(());
        };
        // SAFETY: the program's callback.
        match unsafe { f(self.handle, pid, creator, self.arg) } {
            0 => Ok(()),
            rc => Err(refused("lwp_create", rc)),
        }
    }
    fn lwp_exit(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        self.lwp(self.cb.lwp_exit, "lwp_exit", pid, tid)
    }
    fn fork(&mut self, _pid: i32, _tid: i32, _child: i32) -> Follow {
        if self.cb.fork.is_some() {
            Follow::Copy
        } else {
            Follow::No
        }
    }
    fn adopt(&mut self, child: perfcompat::Result<Pctx>, pid: i32, _tid: i32) {
        let Some(f) = self.cb.fork else { return };
        let child = match child {
            Ok(c) => c,
            Err(e) => return edge::fail(Tell::Pctx, c"pctx_run", &e),
        };
        let cpid = child.pid();
        let Ok(handle) = register(child, self.arg) else {
            return;
        };
        // SAFETY: the program's callback, with a live handle it may run and release. The
        // child's one thread is its LWP 1 (its own init_lwp will say so).
        unsafe { f(handle, pid, cpid as libc::id_t, 1, self.arg) };
        if registry::contains(handle as usize, Kind::Pctx) {
            // SAFETY: still live: the callback did not release it.
            unsafe { pctx_release(handle) };
        }
    }
    fn exec(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        // The exec left one thread: LWP 1 of the new program.
        lock(&self.ids).exec();
        let id = self.id(pid, tid);
        let Some(f) = self.cb.exec else { return Ok(()) };
        // Solaris passes pr_psargs: the arguments joined by spaces, at most PRARGSZ - 1 bytes.
        let args = CString::new(perfcompat::api::pctx::psargs(pid)).unwrap_or_default();
        // SAFETY: the program's callback; the string lives through the call.
        let rc = unsafe { f(self.handle, pid, id, args.as_ptr() as *mut c_char, self.arg) };
        match rc {
            0 => Ok(()),
            rc => Err(refused("exec", rc)),
        }
    }
    fn exit(&mut self, pid: i32, status: Status) {
        if let Some(f) = self.cb.exit {
            // SAFETY: the program's callback.
            unsafe { f(self.handle, pid, 1, status.exit_code(), self.arg) };
        }
    }
    fn tick(&mut self, pid: i32, tid: i32) -> perfcompat::Result<()> {
        let Some(f) = self.tick else { return Ok(()) };
        let id = self.id(pid, tid);
        // SAFETY: the program's callback.
        match unsafe { f(self.handle, pid, id, self.arg) } {
            0 => Ok(()),
            rc => Err(refused("tick", rc)),
        }
    }
    fn stop_requested(&mut self) -> bool {
        TERMINATE.load(Ordering::Acquire)
            || edge::get(self.handle).is_some_and(|c: &Ctx| c.terminate.load(Ordering::Acquire))
    }
}

/// Run the process, calling the registered callbacks as threads start and end and `tick` for
/// every thread every `msec` milliseconds by the clock (0: no ticks), until the process
/// exits, after `nsamples` ticks when it is not 0, or when `pctx_terminate` or
/// `cpc_terminate` is called; see pctx_run(3CPC). The callbacks come in pctx_set_events(3CPC)'s
/// order: a program that just runs gives init_lwp, fini_lwp, exit; a thread created gives
/// lwp_create (the creating thread's id) before its init_lwp; a thread ending before the
/// process gives lwp_exit, fini_lwp (the threads ending with the process only fini_lwp); an
/// exec gives fini_lwp for every thread, exec, then init_lwp for the process's one thread
/// (LWP 1). The command's
/// own start (`pctx_create`'s exec) is not an exec event: its init_lwp comes before its first
/// instruction. Children are followed only with a fork callback registered, each in a copy
/// of the caller: the callback gets the child's own `pctx_t`, the parent's pid, the child's
/// pid, the child's LWP id (1) and `arg`; it may set events on the
/// child's handle and run it; when it returns the child is released and the copy exits.
///
/// # Returns
/// 0 when the process exited, the ticks were done or the run was terminated; -1 when a
/// callback returned non-zero (no later callback is made; the processes stay stopped under
/// control until `pctx_release`), or, with `errno` set and a message, when the process could
/// not be followed.
///
/// # Safety
/// `tick` is NULL or a function of this type; `pctx` is driven by this thread only.
#[no_mangle]
pub unsafe extern "C" fn pctx_run(
    pctx: *mut pctx_t,
    msec: uint_t,
    nsamples: uint_t,
    tick: Option<unsafe extern "C" fn(*mut pctx_t, libc::pid_t, libc::id_t, *mut c_void) -> c_int>,
) -> c_int {
    run(Tell::Pctx, c"pctx_run", -1, || {
        // The process leaves the handle while it runs: the callbacks may use the handle
        // (cpc_bind_pctx reads its pid) and even release it.
        let (mut p, mut calls) = take_process(pctx, if msec == 0 { None } else { tick })?;
        let r = p.run_ms(&mut calls, msec, nsamples);
        put_back(pctx, p);
        r.map(|done| if done { 0 } else { -1 })
    })
}

/// The process of a live handle that is not running, and the calls its run makes.
fn take_process(pctx: *mut pctx_t, tick: Option<TickFn>) -> Result<(Pctx, Calls)> {
    let c: &Ctx = edge::get(pctx).ok_or(Error::BadArgument(NOT_RUNNABLE))?;
    let p = c.pctx.lock().unwrap_or_else(|p| p.into_inner()).take();
    Ok((
        p.ok_or(Error::BadArgument(NOT_RUNNABLE))?,
        Calls::new(pctx, c, tick),
    ))
}

const NOT_RUNNABLE: &str =
    "invalid argument: not a live pctx_t, or one already running or released";

/// After a run: the process back in its handle, or let go when a callback released it.
fn put_back(pctx: *mut pctx_t, p: Pctx) {
    TERMINATE.store(false, Ordering::Release);
    match edge::get(pctx) {
        Some(c) => {
            let c: &Ctx = c;
            *c.pctx.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
            c.terminate.store(false, Ordering::Release);
        }
        None => drop(p),
    }
}

/// Stop controlling the process: every observed thread gets the `PCTX_FINI_LWP_EVENT`
/// callback, the process goes on running (a created command that never ran is killed), the
/// copies of the caller following its children are waited for, and the handle is freed; see
/// pctx_capture(3CPC).
///
/// # Safety
/// `pctx` is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pctx_release(pctx: *mut pctx_t) {
    run(Tell::Pctx, c"pctx_release", (), || {
        let Some(c) = edge::take(pctx) else {
            return Err(Error::BadArgument("invalid argument: not a live pctx_t"));
        };
        let calls = Calls::new(pctx, &c, None);
        match c.pctx.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(p) => p.release(&mut { calls }),
            None => Ok(()),
        }
    })
}

/// Make the `pctx_run` in progress on `pctx` return 0 within 10 ms, its processes still under
/// control (`pctx_release` lets them go); a later `pctx_run` is not affected. Async-signal-safe:
/// meant for a signal handler (SIGINT) or a callback. A bad handle sets `errno` to `EINVAL`,
/// without a message.
#[no_mangle]
pub extern "C" fn pctx_terminate(pctx: *mut pctx_t) {
    match edge::get(pctx) {
        Some(c) => {
            let c: &Ctx = c;
            c.terminate.store(true, Ordering::Release)
        }
        None => set_errno(libc::EINVAL),
    }
}

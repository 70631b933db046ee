//! The command [`Pctx::create`](super::Pctx::create) starts: created to wait on a pipe
//! (sharing the controller's memory until its exec, [`Child::spawn_traced`]; perfex's
//! untraced command is forked, [`Child::spawn`]), seized, let go to `execvp` it (searched in
//! `PATH` as the shell does), and reaped.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use super::{errno, hear, Status};
use crate::base::error::{Error, Result};

/// Async-signal-safe write of a whole buffer (for a child between fork and exec).
pub(super) fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: writes from a live buffer.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Whether `execvp` could find `name`: a path (with a `/`) that exists, or a file of that name
/// in a `PATH` directory (glibc's default path when `PATH` is unset): the candidates of
/// [`exec_paths`].
fn findable(name: &std::ffi::OsStr) -> bool {
    if name.is_empty() {
        return false;
    }
    let given = name.as_bytes().contains(&b'/');
    exec_paths(name).iter().any(|c| {
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(c.as_bytes()));
        if given {
            p.exists()
        } else {
            p.is_file()
        }
    })
}

/// Whether `execvp` could run `name`: `Ok`, or the errno it would fail with (`ENOENT` when no
/// file of that name is found, `EACCES` when the file found is not an executable regular
/// file). As `execvp`, a `PATH` search goes on past a file it cannot execute and reports
/// `EACCES` only when it finds none it can; the candidates are [`exec_paths`]'s.
pub(super) fn executable(name: &std::ffi::OsStr) -> std::result::Result<(), i32> {
    let runnable = |c: &CString| -> std::result::Result<(), i32> {
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(c.as_bytes()));
        let meta = std::fs::metadata(p).map_err(|e| e.raw_os_error().unwrap_or(libc::ENOENT))?;
        // SAFETY: a valid NUL-terminated path.
        if !meta.is_file() || unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
            return Err(libc::EACCES);
        }
        Ok(())
    };
    if name.is_empty() {
        return Err(libc::ENOENT);
    }
    let given = name.as_bytes().contains(&b'/');
    let mut found = Err(libc::ENOENT);
    for c in &exec_paths(name) {
        match runnable(c) {
            Ok(()) => return Ok(()),
            Err(e) if given => return Err(e),
            Err(libc::EACCES) => found = Err(libc::EACCES),
            Err(_) => {}
        }
    }
    found
}

/// Whether process `pid` is a zombie (state `Z` in `/proc/<pid>/stat`).
pub(super) fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// A child (forked, or sharing this process's memory: [`Child::spawn_traced`]) waiting for the
/// go-ahead before it runs a command: the counters (or the
/// tracer) attach to it first.
pub(crate) struct Child {
    pub(crate) pid: i32,
    name: String,
    go: i32,
    status: i32,
    pub(super) reaped: bool,
    /// Spawned by [`Child::spawn_traced`].
    mask_at_exec: bool,
    // What the child reads until its exec (its arguments, its pipes) and the stack it runs on
    // when it shares this process's memory: kept until it is gone (dropped after Drop::drop).
    _argv: Vec<CString>,
    _launch: Box<Launch>,
    _stack: Option<Stack>,
}

/// What the child runs between its creation and its exec ([`run_launch`]).
struct Launch {
    /// The go-ahead pipe (read end, write end) and the exec-failure pipe (read, write).
    go: [i32; 2],
    st: [i32; 2],
    /// The signal mask to restore before the exec (`None`: the tracer sets it at the exec
    /// stop, [`Child::spawn_traced`]).
    mask: Option<libc::sigset_t>,
    hear: bool,
    /// The command's arguments, NULL-terminated (pointing into [`Child`]'s `_argv`).
    argv: Vec<*const libc::c_char>,
    /// For a child sharing this process's memory: the paths `execvp` would try, in its order
    /// ([`exec_search`]), and the shell's argument vector for a file without `#!` (its
    /// second slot is set to the path tried). Empty for a forked child, which calls
    /// `execvp` itself.
    paths: Vec<CString>,
    script: std::cell::UnsafeCell<Vec<*const libc::c_char>>,
    /// The command is a path (with a `/`): `execvp` tries it alone.
    path_given: bool,
}

/// The paths `execvp` tries for `name`, in its order: `name` itself when it has a `/`, else
/// `name` in each `PATH` directory (the current one for an empty entry; glibc's default path
/// when `PATH` is unset).
fn exec_paths(name: &std::ffi::OsStr) -> Vec<CString> {
    let name = name.as_bytes();
    if name.contains(&b'/') {
        return CString::new(name).into_iter().collect();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    path.as_bytes()
        .split(|&b| b == b':')
        // As glibc's search: an entry too long for a path is passed over.
        .filter(|dir| dir.len() < libc::PATH_MAX as usize)
        .filter_map(|dir| {
            let mut p = dir.to_vec();
            if !dir.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name);
            CString::new(p).ok()
        })
        .collect()
}

unsafe extern "C" {
    /// The process's environment, as `execvp` passes it on.
    static environ: *const *const libc::c_char;
}

/// (The child sharing its creator's memory and thread pointer, hence its `errno`.) glibc's
/// `execvp` made with system calls that leave `errno` alone: each path of `launch.paths` in
/// turn; a file the kernel cannot execute (`ENOEXEC`) run by `/bin/sh`; past a path that
/// does not exist (or cannot be searched), on to the next; `EACCES` if one was found but not
/// executable. Returns the errno the search ends with.
///
/// # Safety
/// In that child only, with `launch` alive.
unsafe fn exec_search(launch: &Launch) -> i32 {
    use crate::base::signal::syscall3_keeping_errno as sys;
    // SAFETY: the child's contract; the kernel reads the NUL-terminated paths and vectors.
    unsafe {
        let env = environ as usize;
        let mut eacces = false;
        let mut last = libc::ENOENT;
        for path in &launch.paths {
            let argv = launch.argv.as_ptr() as usize;
            let mut e = -sys(libc::SYS_execve, path.as_ptr() as usize, argv, env) as i32;
            if e == libc::ENOEXEC {
                let script = &mut *launch.script.get();
                script[1] = path.as_ptr();
                e = -sys(
                    libc::SYS_execve,
                    script[0] as usize,
                    script.as_ptr() as usize,
                    env,
                ) as i32;
            }
            match e {
                _ if launch.path_given => return e,
                libc::EACCES => eacces = true,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                e => return e,
            }
            last = e;
        }
        if eacces {
            libc::EACCES
        } else {
            last
        }
    }
}

/// The stack of a child that shares this process's memory until its exec: mapped apart
/// (nothing of this process next to it), unmapped when the Child is dropped.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    /// Room for `execvp` (its `PATH` search builds each candidate on the stack, and a script
    /// without `#!` gets an argument vector one longer there) and the filter's installation.
    fn for_exec(argv: &[*const libc::c_char]) -> Result<Stack> {
        let path = std::env::var_os("PATH").map_or(0, |p| p.len());
        let len = (64 * 1024 + 2 * path + 16 * argv.len() + 4095) & !4095;
        // SAFETY: a fresh private anonymous mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::last_os("mmap of the command's first stack"));
        }
        Ok(Stack { base, len })
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used (the child is gone or has executed).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Create the child on `stack`, sharing this process's memory, with every signal blocked
/// in it (and in this thread around the `clone`, so that the child starts so).
///
/// # Safety
/// `launch` and `stack` must outlive the child's run up to its exec or end.
unsafe fn clone_sharing(launch: &Launch, stack: &Stack) -> Result<i32> {
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Launch` clone_sharing was given, alive (its contract).
        unsafe { run_launch(&*(arg as *const Launch)) }
    }
    let was = block_all();
    // The stack grows down from the mapping's end (page-aligned, so 16-byte aligned).
    let top = stack.base.wrapping_byte_add(stack.len);
    // SAFETY: a new process on a stack of its own, running `entry` on `launch`, both alive
    // as long as it uses them (this function's contract).
    let pid = unsafe {
        libc::clone(
            entry,
            top,
            libc::CLONE_VM | libc::SIGCHLD,
            (launch as *const Launch).cast_mut().cast(),
        )
    };
    let e = (pid < 0).then(|| Error::last_os("clone"));
    // SAFETY: restores this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &was, std::ptr::null_mut()) };
    e.map_or(Ok(pid), Err)
}

/// Block every signal in the calling thread; returns the mask it had.
fn block_all() -> libc::sigset_t {
    // SAFETY: sigset manipulation on local values; the thread's own mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut was: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut was);
        was
    }
}

/// (The child, before its exec: async-signal-safe calls on its own descriptors and the
/// buffers `launch` points to.) Wait for the go-ahead, install the filter, run the command;
/// on an exec failure say why on the status pipe and exit.
///
/// # Safety
/// Only in a new child, with `launch` alive.
unsafe fn run_launch(launch: &Launch) -> ! {
    // System calls made without the C library: no `errno` written (a shared child's is its
    // creator's thread's) and no cancellation point (that thread's state).
    use crate::base::signal::syscall3_keeping_errno as sys;
    // SAFETY: this function's contract; each call on our own descriptors and buffers.
    unsafe {
        let (go, st) = (launch.go, launch.st);
        sys(libc::SYS_close, go[1] as usize, 0, 0);
        sys(libc::SYS_close, st[0] as usize, 0, 0);
        if let Some(mask) = &launch.mask {
            libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
        }
        let mut b = 0u8;
        let n = loop {
            let n = sys(
                libc::SYS_read,
                go[0] as usize,
                &mut b as *mut u8 as usize,
                1,
            );
            if n != -(libc::EINTR as isize) {
                break n;
            }
        };
        if n != 1 {
            libc::_exit(127); // the parent gave up before the command could start
        }
        if launch.hear {
            hear::install_filter();
        }
        let e = if launch.mask.is_none() {
            exec_search(launch)
        } else {
            libc::execvp(launch.argv[0], launch.argv.as_ptr());
            *libc::__errno_location()
        };
        // A pipe of its own with room for 4 bytes: one write.
        let e4 = e.to_ne_bytes();
        sys(
            libc::SYS_write,
            st[1] as usize,
            e4.as_ptr() as usize,
            e4.len(),
        );
        libc::_exit(if e == libc::ENOENT { 127 } else { 126 });
    }
}

impl Child {
    /// Fork; the child restores `mask`, waits for [`Child::release`] and runs `command`
    /// (with `hear`, under the filter of [`hear`]).
    pub(crate) fn spawn(command: &[OsString], mask: &libc::sigset_t, hear: bool) -> Result<Child> {
        // A command that is nowhere is refused before the fork, as `pctx_create` documents;
        // every other exec failure (permissions, format) is reported by the child.
        if let Some(name) = command.first().filter(|n| !findable(n)) {
            return Err(Error::CannotRun {
                command: name.to_string_lossy().into_owned(),
                errno: libc::ENOENT,
            });
        }
        Self::start(command, mask, hear, false)
    }

    /// [`Child::spawn`] for a tracer that made sure `execvp` can find the command (with
    /// [`executable`]: the path is not looked up again, issue 48) and that takes the child's
    /// exec stop: the child shares this process's memory until its exec instead of copying it
    /// (`clone(CLONE_VM)` on a stack of its own, as `posix_spawn` does), and runs with every
    /// signal blocked until then (no handler of this process can run in it); the tracer sets
    /// the command's signal mask, `mask`, at the exec stop ([`Child::mask_at_exec`]).
    ///
    /// Why (issue 48): after a `fork`, each page of this process's data, heap and stack that
    /// it writes before the command ends is copied (a copy-on-write fault), and the exec tears
    /// down the child's copy of the address space: with cputrack's, about 0.3 M instructions
    /// per command in the arm64 guest (issue 48's notes). The child writes only its own
    /// stack and the [`Launch`] that [`Child`] keeps until it is gone (it reads the command's
    /// arguments there and the environment); it makes no call that takes a lock or allocates.
    /// Its `errno` and thread state are this thread's (it has no thread pointer of its own),
    /// so its system calls go without the C library ([`run_launch`], [`exec_search`]: glibc's
    /// `execvp` search) and leave `errno` alone; the C library's are `prctl`'s
    /// `PR_SET_NO_NEW_PRIVS`, which cannot fail, and `_exit`.
    pub(super) fn spawn_traced(
        command: &[OsString],
        mask: &libc::sigset_t,
        hear: bool,
    ) -> Result<Child> {
        Self::start(command, mask, hear, true)
    }

    fn start(
        command: &[OsString],
        mask: &libc::sigset_t,
        hear: bool,
        shared: bool,
    ) -> Result<Child> {
        let name = command
            .first()
            .ok_or_else(|| Error::InvalidArgument("no command to run".into()))?;
        let argv = command
            .iter()
            .map(|a| {
                CString::new(a.as_bytes()).map_err(|_| {
                    Error::InvalidArgument(format!("argument {a:?} contains a NUL byte"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (mut go, mut st) = ([0i32; 2], [0i32; 2]);
        // SAFETY: pipe2 writes two fds into each array.
        unsafe {
            if libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                return Err(Error::last_os("pipe2"));
            }
            if libc::pipe2(st.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
                let e = Error::last_os("pipe2");
                libc::close(go[0]);
                libc::close(go[1]);
                return Err(e);
            }
        }
        let (paths, script) = if shared {
            let mut script = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
            script.extend_from_slice(&ptrs[1..]);
            (exec_paths(name), script)
        } else {
            (Vec::new(), Vec::new())
        };
        let launch = Box::new(Launch {
            go,
            st,
            mask: (!shared).then_some(*mask),
            hear,
            argv: ptrs,
            paths,
            script: std::cell::UnsafeCell::new(script),
            path_given: name.as_bytes().contains(&b'/'),
        });
        let mut stack = None;
        let pid = if shared {
            match Stack::for_exec(&launch.argv) {
                // SAFETY: the stack and `launch` outlive the child's use of them (the Child
                // keeps both until the child is gone, see Drop).
                Ok(s) => unsafe { clone_sharing(&launch, stack.insert(s)) },
                Err(e) => Err(e),
            }
        } else {
            // SAFETY: the child only makes async-signal-safe calls before exec or _exit.
            match unsafe { libc::fork() } {
                // SAFETY: (child) `launch` is this process's own copy.
                0 => unsafe { run_launch(&launch) },
                -1 => Err(Error::last_os("fork")),
                pid => Ok(pid),
            }
        };
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(go[0]);
            libc::close(st[1]);
        }
        let pid = match pid {
            Ok(pid) => pid,
            Err(e) => {
                // SAFETY: our remaining fds.
                unsafe {
                    libc::close(go[1]);
                    libc::close(st[0]);
                }
                return Err(e);
            }
        };
        Ok(Child {
            pid,
            name: name.to_string_lossy().into_owned(),
            go: go[1],
            status: st[0],
            reaped: false,
            mask_at_exec: shared,
            _argv: argv,
            _launch: launch,
            _stack: stack,
        })
    }

    /// Whether the child waits for its exec with every signal blocked: its tracer sets the
    /// command's mask at the exec stop ([`Child::spawn_traced`]).
    pub(super) fn mask_at_exec(&self) -> bool {
        self.mask_at_exec
    }

    /// Let the child run the command; [`Error::CannotRun`] if `execvp` failed. Waits until the
    /// child has executed the command or failed to.
    pub(crate) fn release(&mut self) -> Result<()> {
        self.let_go();
        self.exec_error()
    }

    /// Let the child run the command, without waiting for its exec: a tracer learns of it
    /// from the exec stop, and of its failure from the child's end ([`Child::exec_error`]).
    pub(super) fn let_go(&mut self) {
        if self.go < 0 {
            return;
        }
        write_all(self.go, b"g");
        // SAFETY: our pipe end.
        unsafe { libc::close(self.go) };
        self.go = -1;
    }

    /// [`Error::CannotRun`] if the child, let go, could not execute the command (it says why
    /// on the status pipe before it ends). Blocks until it has executed the command or ended.
    pub(super) fn exec_error(&mut self) -> Result<()> {
        if self.status < 0 {
            return Ok(());
        }
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reads into the rest of a local buffer.
            let n = unsafe { libc::read(self.status, buf[got..].as_mut_ptr().cast(), 4 - got) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        // SAFETY: our pipe end, read to its end.
        unsafe { libc::close(self.status) };
        self.status = -1;
        if got == 4 {
            return Err(Error::CannotRun {
                command: self.name.clone(),
                errno: i32::from_ne_bytes(buf),
            });
        }
        Ok(())
    }

    /// Reap the child if it ended (`WNOHANG`); its resource usage goes into `ru`.
    pub(crate) fn try_reap(&mut self, ru: &mut libc::rusage) -> Result<Option<Status>> {
        let mut st = 0;
        // SAFETY: wait4 on our child with valid out-pointers.
        let r = unsafe { libc::wait4(self.pid, &mut st, libc::WNOHANG, ru) };
        if r < 0 {
            if errno() == libc::EINTR {
                return Ok(None);
            }
            return Err(Error::last_os("waiting for the command"));
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        Ok(Some(Status::from_wait(st)))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: closing our fds; killing and reaping our own child if it is still there.
        unsafe {
            if self.go >= 0 {
                libc::close(self.go); // the waiting child reads EOF and exits
            }
            if self.status >= 0 {
                libc::close(self.status);
            }
            if !self.reaped {
                if self.go < 0 {
                    libc::kill(self.pid, libc::SIGKILL);
                }
                let mut st = 0;
                while libc::waitpid(self.pid, &mut st, libc::__WALL) < 0 && errno() == libc::EINTR {
                }
            }
        }
    }
}

//! The C library functions the library defines so that a counted process reports however it
//! ends (`PERFCOMPAT_PRELOAD_EVENTS`, see [`crate::preload`]): `_exit` and `_Exit`, which run
//! no exit handler, and the `exec` functions that replace the image (`execve`, `execv`,
//! `execvp`, `execvpe`, and the variadic `execl`, `execle`, `execlp` through
//! capi/src/exec_variadic.c). Each does the library's part (nothing at all in a process that does
//! not count, a forked child included) and then calls the C library's own, found with
//! `dlsym(RTLD_NEXT, ...)` when the library is loaded (so that no `dlsym` runs in a forked
//! child or a signal handler), or makes the system call when there is none.
//!
//! They carry the C library's own symbol versions on the target (`capi/abi.manifest`, the
//! `libc` node): a program's versioned reference (`_exit@GLIBC_2.2.5`) binds only to a
//! definition of the same version, so with these the preloaded library is reached first, as a
//! program linked with `-lperfex`/`-lcpc` reaches it. Not covered: `fexecve`, `execveat`,
//! `posix_spawn` (a child, which never reports),
//! a raw `exit_group` system call, and the C library's internal calls (`exit` ends with its
//! own `_exit`, which is what keeps the report to one).

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

use perfcompat::commands::perfex::Status;

use crate::{ffi_boundary, preload};

type ExitFn = unsafe extern "C" fn(c_int) -> !;
type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

static REAL_EXIT: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVE: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVPE: AtomicUsize = AtomicUsize::new(0);

/// The C library's `name`, after ours in the search order, unless it is ours.
fn next(name: &std::ffi::CStr, ours: usize) -> usize {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if p == ours {
        0
    } else {
        p
    }
}

/// The constructor that finds the C library's functions, before the program runs.
#[used]
#[link_section = ".init_array"]
#[export_name = "perfcompat_interpose_ctor"]
static INTERPOSE_CTOR: extern "C" fn() = resolve;

/// Find the C library's functions.
extern "C" fn resolve() {
    REAL_EXIT.store(
        next(c"_exit", _exit as *const () as usize),
        Ordering::Relaxed,
    );
    REAL_EXECVE.store(
        next(c"execve", execve as *const () as usize),
        Ordering::Relaxed,
    );
    REAL_EXECVPE.store(
        next(c"execvpe", execvpe as *const () as usize),
        Ordering::Relaxed,
    );
}

/// End the process as the C library's `_exit` does.
fn real_exit(status: c_int) -> ! {
    let p = REAL_EXIT.load(Ordering::Relaxed);
    if p != 0 {
        // SAFETY: the address of the C library's `_exit`.
        unsafe { std::mem::transmute::<usize, ExitFn>(p)(status) }
    }
    loop {
        // SAFETY: exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// The C library's `execve`, or the system call.
///
/// # Safety
/// As `execve(2)`.
unsafe fn real_execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    match REAL_EXECVE.load(Ordering::Relaxed) {
        // SAFETY: the caller's arguments.
        0 => unsafe { libc::syscall(libc::SYS_execve, path, argv, envp) as c_int },
        // SAFETY: the address of the C library's `execve`.
        p => unsafe { std::mem::transmute::<usize, ExecveFn>(p)(path, argv, envp) },
    }
}

/// `_exit(2)`: the report of a counted process, then the C library's `_exit`.
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    ffi_boundary("_exit", || preload::end(Status::Exited(status)));
    real_exit(status)
}

/// `_Exit(3)`: as [`_exit`].
#[no_mangle]
pub extern "C" fn _Exit(status: c_int) -> ! {
    ffi_boundary("_Exit", || preload::end(Status::Exited(status)));
    real_exit(status)
}

/// `execve(2)`: in a counted process, the counts carry into the new image (or are reported
/// first, see [`crate::preload`]).
///
/// # Safety
/// As `execve(2)`.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    ffi_boundary("execve", || {
        // SAFETY: the caller's arguments.
        unsafe { preload::exec(path, envp, |env| real_execve(path, argv, env)) }
    })
}

/// `execv(3)`: `execve` with the program's environment.
///
/// # Safety
/// As `execv(3)`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: the caller's arguments and the program's environment.
    unsafe { execve(path, argv, preload::environ()) }
}

/// `execvp(3)`: `execvpe` with the program's environment.
///
/// # Safety
/// As `execvp(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: the caller's arguments and the program's environment.
    unsafe { execvpe(file, argv, preload::environ()) }
}

/// `execvpe(3)`: as `execvp`, with the environment `envp`; the counts carry as for `execve`.
///
/// # Safety
/// As `execvpe(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    ffi_boundary("execvpe", || {
        // SAFETY: the caller's arguments.
        unsafe { preload::exec(file, envp, |env| real_execvpe(file, argv, env)) }
    })
}

extern "C" {
    /// In exec_variadic.c: gather the arguments and call [`execv`].
    fn perfcompat_execl_va(path: *const c_char, arg: *const c_char, ...) -> c_int;
    /// In exec_variadic.c: gather the arguments and the environment and call [`execve`].
    fn perfcompat_execle_va(path: *const c_char, arg: *const c_char, ...) -> c_int;
    /// In exec_variadic.c: gather the arguments and call [`execvp`].
    fn perfcompat_execlp_va(file: *const c_char, arg: *const c_char, ...) -> c_int;
}

/// `execl(3)`, variadic: a trampoline that jumps, with the caller's registers and stack
/// untouched, to the C function that gathers the arguments and calls [`execv`] (the Rust
/// signature names the first two arguments only).
///
/// # Safety
/// Called from C as the variadic function it is declared as.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execl(path: *const c_char, arg: *const c_char) -> c_int {
    #[cfg(target_arch = "x86_64")]
    std::arch::naked_asm!("jmp {}", sym perfcompat_execl_va);
    #[cfg(target_arch = "aarch64")]
    std::arch::naked_asm!("b {}", sym perfcompat_execl_va);
}

/// `execle(3)`, variadic: as [`execl`], with the environment after the arguments' NULL, to
/// [`execve`].
///
/// # Safety
/// Called from C as the variadic function it is declared as.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execle(path: *const c_char, arg: *const c_char) -> c_int {
    #[cfg(target_arch = "x86_64")]
    std::arch::naked_asm!("jmp {}", sym perfcompat_execle_va);
    #[cfg(target_arch = "aarch64")]
    std::arch::naked_asm!("b {}", sym perfcompat_execle_va);
}

/// `execlp(3)`, variadic: as [`execl`], through `PATH`, to [`execvp`].
///
/// # Safety
/// Called from C as the variadic function it is declared as.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execlp(file: *const c_char, arg: *const c_char) -> c_int {
    #[cfg(target_arch = "x86_64")]
    std::arch::naked_asm!("jmp {}", sym perfcompat_execlp_va);
    #[cfg(target_arch = "aarch64")]
    std::arch::naked_asm!("b {}", sym perfcompat_execlp_va);
}

/// The C library's `execvpe`; without one found at load time (a program that links the
/// library statically), the search through `PATH` done here, with no `dlsym` (a forked child
/// must not take the loader's lock) and no allocation.
///
/// # Safety
/// As `execvpe(3)`.
unsafe fn real_execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    match REAL_EXECVPE.load(Ordering::Relaxed) {
        // SAFETY: the caller's arguments.
        0 => unsafe { search_path(file, argv, envp) },
        // SAFETY: the address of the C library's `execvpe`.
        p => unsafe { std::mem::transmute::<usize, ExecveFn>(p)(file, argv, envp) },
    }
}

/// `execvpe` by hand: `file` as a path when it has a `/`, else in each directory of the
/// program's `PATH` (`/bin:/usr/bin` when unset; an empty entry is the current directory).
///
/// # Safety
/// As `execvpe(3)`.
unsafe fn search_path(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let set_errno = |e| {
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = e };
        -1
    };
    // SAFETY: a C string, as execvpe takes.
    let name = unsafe { std::ffi::CStr::from_ptr(file) }.to_bytes();
    if name.is_empty() {
        return set_errno(libc::ENOENT);
    }
    if name.contains(&b'/') {
        // SAFETY: the caller's arguments.
        return unsafe { real_execve(file, argv, envp) };
    }
    // SAFETY: the program's environment array.
    let path =
        unsafe { preload::env_entry(preload::environ(), b"PATH") }.unwrap_or(b"/bin:/usr/bin");
    let mut errno = libc::ENOENT;
    let mut buf = [0u8; libc::PATH_MAX as usize];
    for dir in path.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let len = dir.len() + 1 + name.len();
        if len >= buf.len() {
            continue;
        }
        buf[..dir.len()].copy_from_slice(dir);
        buf[dir.len()] = b'/';
        buf[dir.len() + 1..len].copy_from_slice(name);
        buf[len] = 0;
        // SAFETY: a NUL-terminated path and the caller's arguments.
        unsafe { real_execve(buf.as_ptr().cast(), argv, envp) };
        // SAFETY: errno is the calling thread's.
        match unsafe { *libc::__errno_location() } {
            libc::EACCES => errno = libc::EACCES,
            libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG => {}
            other => return set_errno(other),
        }
    }
    set_errno(errno)
}

//! The few system facts every layer needs: the calling thread's id and thread pointer, the monotonic clock and
//! the real-time signal that carries counter overflows. A leaf module (it imports nothing from
//! the crate), so that backends need not import the engine or the signal handler for them.

use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: a plain syscall.
    unsafe { syscall6(libc::SYS_gettid, [0; 6]) as i32 }
}

/// `openat(dir, path, flags | O_CLOEXEC)` with a system call made inline (see [`syscall6`]),
/// again while it is interrupted: a descriptor owned, or the errno. The files a first use or
/// a first sample reads (the event map, cpufreq, `/proc/cpuinfo`) are opened so, without a
/// look-up of the C library's `open` (issue 48).
pub fn openat(
    dir: i32,
    path: &std::ffi::CStr,
    flags: i32,
) -> std::result::Result<std::os::fd::OwnedFd, i32> {
    use std::os::fd::FromRawFd;
    loop {
        // SAFETY: a NUL-terminated path; the descriptor, if any, is ours.
        let r = unsafe {
            syscall6(
                libc::SYS_openat,
                [
                    dir as usize,
                    path.as_ptr() as usize,
                    (flags | libc::O_CLOEXEC) as usize,
                    0,
                    0,
                    0,
                ],
            )
        };
        match sys_result(r) {
            Err(libc::EINTR) => continue,
            // SAFETY: a fresh descriptor we own.
            r => return r.map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }),
        }
    }
}

/// `read(2)` as one inline system call ([`syscall6`]): no C library wrapper (nor its
/// cancellation point), no call through the library's own `read` interposer, `errno`
/// untouched. The byte count, or `-errno`. Async-signal-safe: the group read of a sample, and
/// the files a first use or a first sample reads.
///
/// # Safety
/// As `read(2)`: `buf` holds `len` writable bytes.
#[inline(always)]
pub unsafe fn read(fd: i32, buf: *mut u8, len: usize) -> isize {
    // SAFETY: as `read(2)`, the caller's contract.
    unsafe { syscall6(libc::SYS_read, [fd as usize, buf as usize, len, 0, 0, 0]) }
}

/// Close `fd` with a system call made inline (see [`syscall6`]): a first use closes the event
/// map's file and the low numbers of the counters it moves up, and `OwnedFd`'s drop would look
/// up the C library's `close` for it (issue 48, first use). `EINTR` leaves the descriptor
/// closed on Linux, as `close` does; nothing else can fail for a descriptor owned.
pub fn close(fd: std::os::fd::OwnedFd) {
    use std::os::fd::IntoRawFd;
    let raw = fd.into_raw_fd();
    // SAFETY: closes a descriptor this function owns now, once.
    unsafe { syscall6(libc::SYS_close, [raw as usize, 0, 0, 0, 0, 0]) };
}

/// The bytes of the NUL-terminated string at `p`, without the NUL: `CStr::from_ptr`'s, found
/// without the C library's `strlen`, which a first use would look up for it (issue 48).
///
/// # Safety
/// `p` points to a NUL-terminated string that outlives `'a` and is not changed meanwhile.
pub unsafe fn c_bytes<'a>(p: *const libc::c_char) -> &'a [u8] {
    let p = p.cast::<u8>();
    let mut n = 0;
    // SAFETY: the caller's: every byte up to the NUL is readable.
    while unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the `n` bytes before the NUL, read above.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// System call `nr` with up to six arguments (unused ones 0): the kernel's result, a negated
/// errno on failure; `errno` is left alone. Made inline on Linux x86-64 and arm64, without the C
/// library's wrapper: a first use of the counters makes its system calls so, and the library,
/// bound lazily, does not look up a C library function for each (issue 48, first use: ~800
/// instructions a lookup in the arm64 guest). Elsewhere through the C library's `syscall()`.
///
/// # Safety
/// As the system call itself: pointer arguments valid for what the kernel reads or writes, a
/// descriptor it closes or replaces not owned elsewhere.
#[inline(always)]
pub unsafe fn syscall6(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY (both): the caller's contract; the instruction clobbers rcx and r11 on x86-64,
    // nothing but x0 on arm64; the memory the kernel reads or writes is the arguments'.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr as usize,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    // SAFETY: the caller's contract; the thread's own errno, restored.
    unsafe {
        let e = libc::__errno_location();
        let saved = *e;
        let r = libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
        ret = if r < 0 { -(*e as isize) } else { r as isize };
        *e = saved;
    }
    ret
}

/// [`syscall6`]'s result as a `Result`: the value, or the errno.
#[inline]
pub fn sys_result(r: isize) -> Result<usize, i32> {
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r as usize)
    }
}

/// Have `child` run in the child of every `fork` from now on (the C library's `pthread_atfork`
/// with a child handler alone). With glibc the registration is its `__register_atfork`, with
/// this library's `__dso_handle` (a `dlclose` drops the handler), which is what glibc's own
/// `pthread_atfork` does: that one is not in `libc.so.6` but a stub from `libc_nonshared.a`
/// linked at the end of the text, where calling it cost a first use one more 64 KiB window of
/// the library's text (issue 48, first use: ~13k instructions in the arm64 guest).
pub fn on_fork_in_child(child: unsafe extern "C" fn()) {
    #[cfg(target_env = "gnu")]
    {
        extern "C" {
            fn __register_atfork(
                prepare: Option<unsafe extern "C" fn()>,
                parent: Option<unsafe extern "C" fn()>,
                child: Option<unsafe extern "C" fn()>,
                dso_handle: *mut libc::c_void,
            ) -> libc::c_int;
            /// The C runtime's handle of the object being linked (crtbegin's, hidden).
            static __dso_handle: u8;
        }
        // SAFETY: glibc's exported registration (GLIBC_2.3.2 on x86-64, 2.17 on arm64), called
        // as its pthread_atfork calls it; `__dso_handle` is only passed by address.
        unsafe {
            __register_atfork(
                None,
                None,
                Some(child),
                std::ptr::addr_of!(__dso_handle) as *mut libc::c_void,
            )
        };
    }
    #[cfg(not(target_env = "gnu"))]
    // SAFETY: registers a plain function.
    unsafe {
        libc::pthread_atfork(None, None, Some(child))
    };
}

/// The calling thread's thread pointer: on x86-64 the address of its thread control block
/// (`%fs:0`, which glibc and musl keep pointing at the block itself), on arm64 `tpidr_el0`; one
/// instruction, no call (a thread-local's address in a shared library is a call to the TLS
/// descriptor's resolver: issue 48). Elsewhere the address of a thread-local. No system call;
/// async-signal-safe.
///
/// Unique among the live threads of the process, like a thread-local's address, and for the
/// same reason not over time: a thread created after another exited may get its thread block,
/// and so its thread pointer, again (glibc keeps the stacks of exited threads for new ones). A
/// caller that records it must forget the record when the thread exits (or check it against
/// something the thread's exit clears).
#[inline(always)]
pub fn thread_pointer() -> usize {
    #[cfg(target_arch = "aarch64")]
    {
        let tp: usize;
        // SAFETY: reads the thread's own register EL0 may read; no memory, no flags.
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp,
                options(nomem, nostack, preserves_flags, pure))
        };
        tp
    }
    #[cfg(target_arch = "x86_64")]
    {
        let tp: usize;
        // SAFETY: the first word of the thread control block, which the C library keeps
        // pointing at the block (the x86-64 TLS ABI); read only, constant for the thread.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
                options(nostack, preserves_flags, readonly, pure))
        };
        tp
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    {
        thread_local! {
            static MARK: u8 = const { 0 };
        }
        MARK.with(|m| m as *const u8 as usize)
    }
}

/// Monotonic clock in nanoseconds (vDSO; async-signal-safe). Inlined across crates: the
/// sample reads it on every call.
///
/// The vDSO's own `clock_gettime` is called directly where it is found (`vdso_clock`):
/// libc's wrapper and the call through the procedure linkage table before it were 15
/// instructions of each one-event `cpc_set_sample` in the arm64 guest, a quarter of the
/// clock's cost (issue 48). Elsewhere, or should it fail, libc's `clock_gettime`.
// Always inline: with the lean sample beside the general one, LLVM called it (issue 48).
#[inline(always)]
pub fn now_ns() -> i64 {
    // Not zeroed first (two stores of every timed sample, issue 48): read only once a call
    // that succeeded wrote it.
    let mut ts = std::mem::MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `CLOCK` holds a function with clock_gettime's signature (see `Clock`), which
    // writes into `ts` when it returns 0.
    if unsafe { clock()(libc::CLOCK_MONOTONIC, ts.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: written by the call that returned 0.
    let ts = unsafe { ts.assume_init() };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Look the vDSO's `clock_gettime` up now, if not done yet ([`now_ns`] would at its first
/// call): at a bind, so that a sample's cost does not depend on whether it is the process's
/// first.
pub fn prepare_clock() {
    if clock() as usize == first_clock as Clock as usize {
        set_clock();
    }
}

/// A `clock_gettime`: the vDSO's (`0 or -errno`) or libc's (`0 or -1`).
type Clock = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int;

/// The clock [`now_ns`] calls: [`first_clock`] until the first call (or
/// [`prepare_clock`]) finds the vDSO's `clock_gettime`, then that function, or libc's where
/// there is none. Always a function to call: the sample tests nothing before its call (issue
/// 48: "not looked for yet" and "none" were three instructions of each timed sample).
static CLOCK: AtomicPtr<()> = AtomicPtr::new(first_clock as *mut ());

/// Read `CLOCK_MONOTONIC` into `ts`: the vDSO's (or libc's) `clock_gettime` itself, called
/// with nothing around it, so that a caller may make it its last call (a jump: issue 48,
/// `cpc_set_sample` keeps the time as the clock writes it). 0, else the clock's failure
/// (`-errno` from the vDSO, -1 from libc), which `CLOCK_MONOTONIC` never has on Linux.
///
/// # Safety
/// `ts` is valid for the writes of a `timespec`.
#[inline(always)]
pub unsafe fn monotonic_into(ts: *mut libc::timespec) -> libc::c_int {
    // SAFETY: `CLOCK` holds a function with clock_gettime's signature; `ts` is the caller's.
    unsafe { clock()(libc::CLOCK_MONOTONIC, ts) }
}

/// The function in [`CLOCK`].
#[inline(always)]
fn clock() -> Clock {
    // SAFETY: `CLOCK` only ever holds the address of a `Clock` (see `set_clock`).
    unsafe { std::mem::transmute::<*mut (), Clock>(CLOCK.load(Ordering::Relaxed)) }
}

/// The clock's first call: find the vDSO's `clock_gettime` ([`set_clock`]), then call it.
/// Async-signal-safe, as the search.
unsafe extern "C" fn first_clock(id: libc::clockid_t, ts: *mut libc::timespec) -> libc::c_int {
    // SAFETY: the caller's promise (`ts` is writable), passed on.
    unsafe { set_clock()(id, ts) }
}

/// libc's `clock_gettime`, where the vDSO has none.
unsafe extern "C" fn libc_clock(id: libc::clockid_t, ts: *mut libc::timespec) -> libc::c_int {
    // SAFETY: the caller's promise (`ts` is writable), passed on.
    unsafe { libc::clock_gettime(id, ts) }
}

/// Find the clock (the vDSO's `clock_gettime`, else libc's) and keep it in [`CLOCK`].
/// Async-signal-safe: the search reads the vDSO's image in memory and nothing else.
#[cold]
fn set_clock() -> Clock {
    let f = find_vdso_clock().map_or(libc_clock as *mut (), |a| a as *mut ());
    CLOCK.store(f, Ordering::Relaxed);
    clock()
}

/// The address of the vDSO's `clock_gettime` (`__kernel_clock_gettime` on arm64,
/// `__vdso_clock_gettime` on x86-64): the vDSO's ELF image (`AT_SYSINFO_EHDR`), its dynamic
/// section, and its symbol table, counted by its `DT_HASH` table (the kernel links the vDSO
/// with one), as the kernel's own `tools/testing/selftests/vDSO` reads it.
#[cold]
#[inline(never)]
fn find_vdso_clock() -> Option<usize> {
    let name: &[u8] = if cfg!(target_arch = "aarch64") {
        b"__kernel_clock_gettime\0"
    } else if cfg!(target_arch = "x86_64") {
        b"__vdso_clock_gettime\0"
    } else {
        return None;
    };
    if !cfg!(all(target_os = "linux", target_pointer_width = "64")) {
        return None;
    }
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    if base == 0 {
        return None;
    }
    // SAFETY: the kernel maps the whole vDSO image at `base`, an ELF64 file of the
    // process's own byte order; every offset read below is checked against its header's
    // counts or comes from its dynamic section.
    unsafe {
        let at = |off: usize| (base + off) as *const u8;
        let rd16 = |p: *const u8| std::ptr::read_unaligned(p as *const u16) as usize;
        let rd32 = |p: *const u8| std::ptr::read_unaligned(p as *const u32) as usize;
        let rd64 = |p: *const u8| std::ptr::read_unaligned(p as *const u64) as usize;
        if std::slice::from_raw_parts(at(0), 5) != b"\x7fELF\x02" {
            return None;
        }
        let (phoff, phentsize, phnum) = (rd64(at(32)), rd16(at(54)), rd16(at(56)));
        let (mut bias, mut dynamic) = (None, None);
        for i in 0..phnum {
            let ph = at(phoff + i * phentsize);
            let (kind, offset, vaddr) = (rd32(ph), rd64(ph.add(8)), rd64(ph.add(16)));
            match kind as u32 {
                libc::PT_LOAD if bias.is_none() => bias = Some((base + offset).wrapping_sub(vaddr)),
                libc::PT_DYNAMIC => dynamic = Some(base + offset),
                _ => {}
            }
        }
        let (bias, dynamic) = (bias?, dynamic?);
        let (mut symtab, mut strtab, mut hash) = (0, 0, 0);
        for i in 0.. {
            let d = (dynamic + i * 16) as *const u8;
            let (tag, val) = (rd64(d), rd64(d.add(8)));
            match tag as u64 {
                0 => break, // DT_NULL
                4 => hash = bias.wrapping_add(val),
                5 => strtab = bias.wrapping_add(val),
                6 => symtab = bias.wrapping_add(val),
                _ => {}
            }
            if i > 64 {
                return None;
            }
        }
        if symtab == 0 || strtab == 0 || hash == 0 {
            return None;
        }
        // DT_HASH: nbucket, nchain; nchain is the number of symbols.
        let nsyms = rd32((hash + 4) as *const u8);
        for i in 0..nsyms {
            // Elf64_Sym: st_name (4), st_info (1), st_other (1), st_shndx (2), st_value (8).
            let sym = (symtab + i * 24) as *const u8;
            let (st_name, st_info, st_shndx) = (rd32(sym), *sym.add(4), rd16(sym.add(6)));
            if st_info & 0xf != 2 || st_shndx == 0 {
                continue; // not a defined function
            }
            let sname = std::ffi::CStr::from_ptr((strtab + st_name) as *const libc::c_char);
            if sname.to_bytes_with_nul() == name {
                return Some(bias.wrapping_add(rd64(sym.add(8))));
            }
        }
        None
    }
}

/// Whether the process runs with privileges the user who started it may not have: a setuid or
/// setgid program, or one with file capabilities (the kernel's `AT_SECURE`, the rule of glibc's
/// `secure_getenv`). Such a process does not take its environment from that user: see
/// [`env_os`].
pub fn secure() -> bool {
    static SECURE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: getauxval has no preconditions.
    *SECURE.get_or_init(|| unsafe { libc::getauxval(libc::AT_SECURE) } != 0)
}

/// The name of an environment variable the library reads, as a `&'static str` constant whose
/// bytes lie in the text's first 64 KiB window, with the functions that run at load
/// (`.text.startup.*`, which tools/install.sh and GNU ld place first in the text), not in the
/// read-only data (issue 48): looking a variable up reads its name, and the names of a load's and
/// a first use's variables, spread over the read-only data, each cost a page fault of a window
/// of it (about 14k instructions in the arm64 guest) that nothing else of the load or the first
/// use touched.
macro_rules! env_name {
    ($(#[$m:meta])* $vis:vis const $id:ident = $name:literal;) => {
        $(#[$m])*
        $vis const $id: &str = {
            #[link_section = ".text.startup.perfcompat_env_names"]
            static NAME: [u8; $name.len()] = $crate::base::sys::name_bytes($name);
            // SAFETY: the bytes of a string literal, whole.
            unsafe { ::std::str::from_utf8_unchecked(&NAME) }
        };
    };
}
pub(crate) use env_name;

/// `name`'s bytes as an array of its length (for [`env_name`]).
pub(crate) const fn name_bytes<const N: usize>(name: &str) -> [u8; N] {
    let b = name.as_bytes();
    assert!(b.len() == N, "name_bytes: wrong length");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// The library's environment variable `name`, as [`std::env::var_os`] gives it, except in a
/// secure process ([`secure`]): there every variable the library reads is ignored, because
/// those that name files (event maps, cost files, the calibration cache and the `HOME` or
/// `XDG_CACHE_HOME` it is found under, report outputs) would let the user read or write files
/// through the privileged process, and the others would let them change what it does. The
/// first variable found set is reported once on standard error, by name, never by value.
/// Built-in defaults and the system-wide files (`/etc/perfex.costs`) still apply.
///
/// The value is looked up in the process's environment array (`environ`), not through
/// `getenv`: a program that defines its own `getenv` (bash does, and answers from its own
/// table, which it fills after the library's constructors ran) would otherwise answer for the
/// library (issue 37).
pub fn env_os(name: &str) -> Option<std::ffi::OsString> {
    let v = environ_value(name.as_bytes())?;
    if !secure() {
        return Some(v);
    }
    static TOLD: std::sync::Once = std::sync::Once::new();
    TOLD.call_once(|| {
        crate::stderr_line!(
            "perfcompat: this program runs with privileges its user may not have (setuid, \
             setgid or file capabilities): the library ignores its environment variables \
             ({name} is set) and uses its defaults"
        );
    });
    None
}

/// The value of `name` in the environment array, copied; the first entry wins, as with
/// `getenv`. Reads `environ` in place: `std::env::vars_os` copied the whole environment into
/// strings on every call, and opening libcpc reads a dozen variables (a fifth of a first
/// `cpc_open`'s instructions in the arm64 guest's profile, issue 32).
fn environ_value(name: &[u8]) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: `environ` is NULL or a NULL-terminated array of NUL-terminated strings, which
    // the C library keeps valid until the program changes its environment (as for getenv).
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return None;
        }
        while !(*p).is_null() {
            let entry: *const u8 = (*p).cast();
            let matches =
                (0..name.len()).all(|i| *entry.add(i) == name[i]) && *entry.add(name.len()) == b'=';
            if matches {
                let value = c_bytes(entry.add(name.len() + 1).cast());
                return Some(std::ffi::OsString::from_vec(value.to_vec()));
            }
            p = p.add(1);
        }
    }
    None
}

/// [`env_os`] as a string: `None` also when the value is not UTF-8 (as [`std::env::var`]).
pub fn env_var(name: &str) -> Option<String> {
    env_os(name)?.into_string().ok()
}

thread_local! {
    static CREATING_INTERNAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f`, which creates a thread of the library's own (the overflow watcher): the
/// thread-creation hook gives such a thread nothing to inherit (no libcpc set, no libperfex
/// counters).
pub fn create_internal_thread<R>(f: impl FnOnce() -> R) -> R {
    CREATING_INTERNAL.with(|c| c.set(true));
    let r = f();
    CREATING_INTERNAL.with(|c| c.set(false));
    r
}

/// Whether the calling thread is creating a thread of the library's own
/// ([`create_internal_thread`]).
pub fn creating_internal_thread() -> bool {
    CREATING_INTERNAL.try_with(|c| c.get()).unwrap_or(false)
}

/// The signal the perf backend asks the kernel to send on counter overflow. A real-time
/// signal, so that overflows queue instead of coalescing; `PERFCOMPAT_OVERFLOW_SIGNAL` can
/// name another one (a number) when the program uses this one itself. Read once (the first
/// call must not be in a signal handler); async-signal-safe afterwards.
pub fn overflow_signal() -> i32 {
    signals().0
}

/// libcpc's SIGEMT: `PERFCOMPAT_SIGEMT`, else the system's SIGEMT, else [`DEFAULT_SIGEMT`].
/// Read once, with [`overflow_signal`]; async-signal-safe afterwards.
pub fn sigemt_signal() -> i32 {
    signals().1
}

/// The default SIGEMT number on Linux architectures without one: real-time signal 63.
pub const DEFAULT_SIGEMT: i32 = 63;

/// The system's own SIGEMT (MIPS and SPARC have one).
fn system_sigemt() -> Option<i32> {
    #[cfg(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    ))]
    {
        Some(libc::SIGEMT)
    }
    #[cfg(not(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )))]
    {
        None
    }
}

static OVERFLOW: AtomicI32 = AtomicI32::new(0);
static SIGEMT: AtomicI32 = AtomicI32::new(0);

/// (overflow signal, SIGEMT), chosen once from the environment; a refused value is reported
/// on standard error and its default used.
fn signals() -> (i32, i32) {
    let o = OVERFLOW.load(Ordering::Acquire);
    if o != 0 {
        return (o, SIGEMT.load(Ordering::Relaxed));
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let env = |v| env_os(v).filter(|s| !s.is_empty());
        let c = choose_signals(
            env(OVERFLOW_VAR),
            env(SIGEMT_VAR),
            (libc::SIGRTMIN(), libc::SIGRTMAX()),
            system_sigemt().unwrap_or(DEFAULT_SIGEMT),
        );
        for m in &c.refused {
            crate::stderr_line!("perfcompat: {m}");
        }
        SIGEMT.store(c.sigemt, Ordering::Relaxed);
        OVERFLOW.store(c.overflow, Ordering::Release);
    });
    (
        OVERFLOW.load(Ordering::Acquire),
        SIGEMT.load(Ordering::Relaxed),
    )
}

env_name! { const OVERFLOW_VAR = "PERFCOMPAT_OVERFLOW_SIGNAL"; }
env_name! { const SIGEMT_VAR = "PERFCOMPAT_SIGEMT"; }

/// The two signals and the messages for the values refused.
#[derive(Debug, PartialEq)]
struct Chosen {
    overflow: i32,
    sigemt: i32,
    refused: Vec<String>,
}

/// The rule: each variable must name a real-time signal (`rt`, SIGRTMIN..=SIGRTMAX as the C
/// library reports them at run time: glibc keeps the first ones for itself) other than the
/// other one's; anything else is refused and the default kept. The overflow signal is checked
/// against the SIGEMT asked for (when that one is a real-time signal) or SIGEMT's default, then
/// SIGEMT against the overflow signal chosen, so the two always differ.
fn choose_signals(
    overflow: Option<std::ffi::OsString>,
    sigemt: Option<std::ffi::OsString>,
    rt: (i32, i32),
    sigemt_default: i32,
) -> Chosen {
    let parse = |var: &str, v: &Option<std::ffi::OsString>| -> Result<Option<i32>, String> {
        let Some(v) = v else { return Ok(None) };
        let shown = v.to_string_lossy();
        let n = v
            .to_str()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .ok_or_else(|| format!("{var}={shown} is refused: not a signal number"))?;
        if n < rt.0 || n > rt.1 {
            return Err(format!(
                "{var}={shown} is refused: not a real-time signal (SIGRTMIN..=SIGRTMAX is {}..={} here)",
                rt.0, rt.1
            ));
        }
        Ok(Some(n))
    };
    let overflow_default = rt.1 - 2;
    let want_overflow = parse(OVERFLOW_VAR, &overflow);
    let want_sigemt = parse(SIGEMT_VAR, &sigemt);
    let sigemt_candidate = want_sigemt.clone().ok().flatten().unwrap_or(sigemt_default);
    let mut refused = Vec::new();
    // The number wanted, or the default when it was refused or is `clash`.
    let mut pick = |var: &str, want, clash, clash_is: &str, default, what: &str| {
        let why = match want {
            Ok(None) => return default,
            Ok(Some(n)) if n != clash => return n,
            Ok(Some(n)) => format!("{var}={n} is refused: it is {clash_is}"),
            Err(m) => m,
        };
        refused.push(format!("{why}; {what} stays {default}"));
        default
    };
    let overflow = pick(
        OVERFLOW_VAR,
        want_overflow,
        sigemt_candidate,
        "libcpc's SIGEMT (PERFCOMPAT_SIGEMT)",
        overflow_default,
        "the overflow signal",
    );
    let sigemt = pick(
        SIGEMT_VAR,
        want_sigemt,
        overflow,
        "the engine's overflow signal (PERFCOMPAT_OVERFLOW_SIGNAL)",
        sigemt_default,
        "SIGEMT",
    );
    Chosen {
        overflow,
        sigemt,
        refused,
    }
}

/// The CPUs that are online now (`/sys/devices/system/cpu/online`, else every CPU `sysconf`
/// counts).
pub fn online_cpus() -> Vec<u32> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let mut v = Vec::new();
        for part in s.trim().split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                v.extend(a..=b);
            }
        }
        if !v.is_empty() {
            return v;
        }
    }
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    (0..n).collect()
}

/// Signal `sig`'s bit in a kernel signal set (the kernel's 64 signals: as `/proc` shows a mask,
/// and as `rt_sigprocmask` takes one); 0 for a number outside 1-64. The one place the library
/// computes it.
#[inline]
pub fn sig_bit(sig: libc::c_int) -> u64 {
    if (1..=64).contains(&sig) {
        1 << (sig - 1)
    } else {
        0
    }
}

/// Nanoseconds thread `tid` of process `pid` has run so far: the first field of
/// `/proc/<pid>/task/<tid>/schedstat`. `None` when the thread is gone or the kernel keeps no
/// scheduler statistics. The one place the perfctr remote TSC, `cputrack`'s times and the
/// watcher read a thread's CPU time. Allocates: not for signal handlers.
pub fn thread_cpu_ns(pid: i32, tid: i32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether `tid` is a thread of process `pid` now (`/proc/<pid>/task/<tid>` exists; never for
/// an id of 0 or below).
pub fn is_thread_of(pid: i32, tid: i32) -> bool {
    pid > 0 && tid > 0 && std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_cpu_time_and_membership_come_from_proc() {
        let (pid, tid) = (std::process::id() as i32, gettid());
        let before = thread_cpu_ns(pid, tid).expect("this thread's schedstat");
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::black_box(t0.elapsed());
        }
        let after = thread_cpu_ns(pid, tid).unwrap();
        assert!(
            after >= before + 5_000_000,
            "{before} -> {after} after 20 ms spinning"
        );
        assert!(is_thread_of(pid, tid));
        // A thread that has ended is no thread of ours, and has no CPU time to read.
        let gone = std::thread::spawn(gettid).join().unwrap();
        assert!(!is_thread_of(pid, gone));
        assert_eq!(thread_cpu_ns(pid, gone), None);
        assert!(!is_thread_of(pid, 0) && !is_thread_of(0, tid));
    }

    #[test]
    fn the_clock_is_the_vdsos_and_agrees_with_libcs() {
        let libc_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes into `ts`.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            ts.tv_sec * 1_000_000_000 + ts.tv_nsec
        };
        if cfg!(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )) {
            assert!(
                find_vdso_clock().is_some(),
                "the vDSO's clock_gettime found"
            );
            // Issue 48: the clock to call is the look-up's own until it is done, then the
            // vDSO's (libc's only where the vDSO has none).
            prepare_clock();
            assert_ne!(clock() as usize, first_clock as Clock as usize, "looked up");
            assert_ne!(clock() as usize, libc_clock as Clock as usize, "the vDSO's");
        }
        for _ in 0..100 {
            let (a, t, b) = (libc_ns(), now_ns(), libc_ns());
            assert!(a <= t && t <= b, "{a} <= {t} <= {b}");
        }
    }

    #[test]
    fn the_environment_array_is_read_as_getenv_reads_it() {
        // Variables the test process has, compared with std's copy (no set_var here: another
        // test thread may be reading the array).
        for (k, v) in std::env::vars_os().take(20) {
            let k = k.into_encoded_bytes();
            assert_eq!(
                environ_value(&k),
                Some(v),
                "{}",
                String::from_utf8_lossy(&k)
            );
            // The name less its last byte, or with one more, is another variable.
            for other in [k[..k.len() - 1].to_vec(), [&k[..], b"_"].concat()] {
                let want = std::str::from_utf8(&other)
                    .ok()
                    .filter(|n| !n.is_empty())
                    .and_then(std::env::var_os);
                assert_eq!(environ_value(&other), want);
            }
        }
        assert_eq!(environ_value(b"PERFCOMPAT_SURELY_NOT_SET_ANYWHERE"), None);
    }

    fn choose(o: Option<&str>, e: Option<&str>) -> Chosen {
        choose_signals(o.map(Into::into), e.map(Into::into), (34, 64), 63)
    }

    #[test]
    fn defaults_and_free_real_time_signals_are_taken() {
        assert_eq!(
            choose(None, None),
            Chosen {
                overflow: 62,
                sigemt: 63,
                refused: vec![]
            }
        );
        assert_eq!(
            choose(Some("40"), Some(" 41 ")),
            Chosen {
                overflow: 40,
                sigemt: 41,
                refused: vec![]
            }
        );
        // Swapped: each differs from the other.
        assert_eq!(
            choose(Some("63"), Some("62")),
            Chosen {
                overflow: 63,
                sigemt: 62,
                refused: vec![]
            }
        );
    }

    #[test]
    fn anything_else_is_refused_and_the_default_kept() {
        for (o, e, overflow, sigemt, says) in [
            (
                Some("garbage"),
                None,
                62,
                63,
                "PERFCOMPAT_OVERFLOW_SIGNAL=garbage is refused",
            ),
            (
                Some("9"),
                None,
                62,
                63,
                "PERFCOMPAT_OVERFLOW_SIGNAL=9 is refused",
            ),
            (
                Some("0"),
                None,
                62,
                63,
                "PERFCOMPAT_OVERFLOW_SIGNAL=0 is refused",
            ),
            (Some("33"), None, 62, 63, "34..=64"),
            (
                Some("63"),
                None,
                62,
                63,
                "PERFCOMPAT_OVERFLOW_SIGNAL=63 is refused: it is libcpc's SIGEMT",
            ),
            (None, Some("9"), 62, 63, "PERFCOMPAT_SIGEMT=9 is refused"),
            (None, Some("11"), 62, 63, "PERFCOMPAT_SIGEMT=11 is refused"),
            (None, Some("65"), 62, 63, "PERFCOMPAT_SIGEMT=65 is refused"),
            (
                None,
                Some("62"),
                62,
                63,
                "PERFCOMPAT_SIGEMT=62 is refused: it is the engine's overflow signal",
            ),
            (
                Some("40"),
                Some("40"),
                62,
                40,
                "PERFCOMPAT_OVERFLOW_SIGNAL=40 is refused: it is libcpc",
            ),
        ] {
            let c = choose(o, e);
            assert_eq!((c.overflow, c.sigemt), (overflow, sigemt), "{o:?} {e:?}");
            assert_eq!(c.refused.len(), 1, "{o:?} {e:?}: {:?}", c.refused);
            assert!(c.refused[0].contains(says), "{:?}", c.refused);
        }
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![0xff, b'4', b'0']);
        let c = choose_signals(Some(bad), None, (34, 64), 63);
        assert_eq!((c.overflow, c.refused.len()), (62, 1));
    }
}

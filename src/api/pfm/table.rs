//! The device's table of descriptors: which descriptor numbers are open pfm devices, opening
//! and closing them, and finding a device from a descriptor without a lock (the overflow hook
//! and `read` do).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{
    errno_of, Chip, Device, Errno, OpenMode, PCNTOPENALL, PCNTOPENEACH, PCNTOPENMASK, PCNTOPENONE,
};
use crate::backend::sim::alpha;
use crate::backend::{self, BackendKind};
use crate::OverflowEvent;

/// Per-process table of open devices: the C layer's descriptor table and the overflow hook's
/// way to its device. Lock-free: `users` counts the threads and handlers using a slot's device;
/// close unpublishes the device and waits for them.
///
/// A descriptor number can be reused behind the library's back (the program's `dup2`, `dup3`,
/// `close_range`, `fcntl(F_DUPFD)` after one of those, a raw `close` system call, then an
/// `open` that returns the number): so each slot also records which open file the device's
/// descriptor is ([`FileId`]), and a call that names the number is served only while the number
/// still refers to that file. A slot found reused is marked `stale`: no call is served from it
/// again, and it is torn down by the next `close` of its number or the next [`open`].
struct Slot {
    fd: AtomicI32,
    users: AtomicUsize,
    dev: AtomicPtr<Device>,
    /// The device's file, set before `fd` is published: `st_dev` and `st_ino`.
    file_dev: AtomicU64,
    file_ino: AtomicU64,
    /// The number was found to refer to another file ([`with_fd`]).
    stale: AtomicBool,
}

impl Slot {
    fn file(&self) -> FileId {
        FileId {
            dev: self.file_dev.load(Ordering::SeqCst),
            ino: self.file_ino.load(Ordering::SeqCst),
        }
    }

    /// Whether the published number `fd` still refers to the device's file; if not, the slot
    /// becomes stale. Async-signal-safe (one `fstat`).
    fn still_device(&self, fd: i32) -> bool {
        if self.stale.load(Ordering::SeqCst) {
            return false;
        }
        if FileId::of(fd) == Some(self.file()) {
            return true;
        }
        self.stale.store(true, Ordering::SeqCst);
        false
    }
}

/// An open file as `fstat` names it: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The file `fd` refers to (`None`: `fd` is not open). Leaves `errno` as it was;
    /// async-signal-safe.
    // `st_dev` and `st_ino` are `u64` on the 64-bit targets only: the casts are for the others.
    #[allow(clippy::unnecessary_cast)]
    fn of(fd: i32) -> Option<FileId> {
        // SAFETY: errno is thread-local; fstat writes into the local buffer.
        unsafe {
            let saved = *libc::__errno_location();
            let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
            let ok = libc::fstat(fd, st.as_mut_ptr()) == 0;
            *libc::__errno_location() = saved;
            ok.then(|| {
                let st = st.assume_init();
                FileId {
                    dev: st.st_dev as u64,
                    ino: st.st_ino as u64,
                }
            })
        }
    }
}

/// Devices one process can have open at once (one per CPU with `PCNTOPENONE`).
pub const MAX_OPEN: usize = 16;

static SLOTS: [Slot; MAX_OPEN] = [const {
    Slot {
        fd: AtomicI32::new(-1),
        users: AtomicUsize::new(0),
        dev: AtomicPtr::new(std::ptr::null_mut()),
        file_dev: AtomicU64::new(0),
        file_ino: AtomicU64::new(0),
        stale: AtomicBool::new(false),
    }
}; MAX_OPEN];

/// How many slots hold a device: the interposers' fast path (0: no descriptor is ours).
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// The CPUs the process's open devices hold (EBUSY for another open on them).
static BUSY: Mutex<Vec<bool>> = Mutex::new(Vec::new());

/// The tag of the device's profiling bindings in [`OverflowEvent::user_data`] (the slot
/// number is in the low byte).
pub(super) const TAG: usize = 0x5046_4d00_0000_0000 >> (64 - usize::BITS);
const TAG_MASK: usize = !0xff;

/// Whether any descriptor of the process is a pfm device (async-signal-safe, one load).
pub fn any_open() -> bool {
    OPEN.load(Ordering::Acquire) != 0
}

/// The count behind [`any_open`], for an interposer in another library that reads it with one
/// atomic load per call (`libpfcntr`, through the C layer): non-zero while a device is open.
pub fn open_count() -> &'static AtomicUsize {
    &OPEN
}

/// Run `f` on the device open as `fd`, if `fd` is one and still refers to the device's file:
/// a number found to name another file now (reused behind the library's back) is marked stale
/// and never served again. Async-signal-safe as far as `f` is (one `fstat`, atomics).
pub fn with_fd<R>(fd: i32, f: impl FnOnce(&Device) -> R) -> Option<R> {
    if fd < 0 || !any_open() {
        return None;
    }
    for s in &SLOTS {
        if s.fd.load(Ordering::Acquire) != fd {
            continue;
        }
        s.users.fetch_add(1, Ordering::SeqCst);
        let p = s.dev.load(Ordering::SeqCst);
        if p.is_null() || s.fd.load(Ordering::SeqCst) != fd || !s.still_device(fd) {
            s.users.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        // SAFETY: published devices are freed only after `users` falls to 0.
        let r = f(unsafe { &*p });
        s.users.fetch_sub(1, Ordering::SeqCst);
        return Some(r);
    }
    None
}

/// Open a device for `flags` (the `open` flags with the `PCNTOPEN*` bits; `O_CLOEXEC` is kept)
/// and return its new descriptor: an empty, sealed memfd named `pfcntr`, a file of its own
/// (`/dev/null` or an event descriptor where there is no memfd). Errors: `EINVAL` for two
/// open-mode bits, or `PCNTOPENONE` when the caller is not bound to one CPU; `EBUSY` when the
/// CPUs are taken by another open device of the process; `ENODEV` on an emulated PMU that is
/// not an Alpha; `EMFILE` when [`MAX_OPEN`] devices are open; the backend's errno when it
/// cannot start, the system's when no descriptor can be made.
///
/// Devices whose descriptor number was reused behind the library's back are torn down first,
/// so their CPUs are free again.
pub fn open(flags: i32) -> Result<i32, Errno> {
    let bits = flags & PCNTOPENMASK;
    let mode = match bits {
        0 | PCNTOPENALL => OpenMode::All,
        PCNTOPENEACH => OpenMode::Each,
        PCNTOPENONE => OpenMode::One(bound_cpu().ok_or(libc::EINVAL)?),
        _ => return Err(libc::EINVAL),
    };
    let backend = backend::global().map_err(|e| errno_of(&e))?;
    let chip = match backend.shape_unmeasured().kind {
        BackendKind::Sim(m) if std::ptr::eq(m, &alpha::EV4) => Some(Chip::Ev4),
        BackendKind::Sim(m) if std::ptr::eq(m, &alpha::EV5) => Some(Chip::Ev5),
        BackendKind::Sim(_) => return Err(libc::ENODEV),
        BackendKind::Perf | BackendKind::Other(_) => None,
    };
    for s in &SLOTS {
        let fd = s.fd.load(Ordering::SeqCst);
        if fd >= 0 && !s.still_device(fd) {
            teardown(s, fd);
        }
    }
    // SAFETY: sysconf is a plain libc call.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
    let cpus: Vec<u32> = match mode {
        OpenMode::One(c) => vec![c],
        _ => (0..ncpu as u32).collect(),
    };
    {
        let mut busy = BUSY.lock().unwrap_or_else(|p| p.into_inner());
        if busy.len() < ncpu {
            busy.resize(ncpu, false);
        }
        if cpus.iter().any(|&c| busy.get(c as usize) == Some(&true)) {
            return Err(libc::EBUSY);
        }
        let slot = SLOTS
            .iter()
            .position(|s| {
                s.dev.load(Ordering::Acquire).is_null() && s.fd.load(Ordering::Acquire) < 0
            })
            .ok_or(libc::EMFILE)?;
        let (fd, file) = device_fd(flags & libc::O_CLOEXEC != 0)?;
        for &c in &cpus {
            busy[c as usize] = true;
        }
        let nslots = if mode == OpenMode::Each { ncpu } else { 1 };
        let dev = Box::new(Device::new(slot, mode, cpus, nslots, backend, chip));
        let s = &SLOTS[slot];
        s.file_dev.store(file.dev, Ordering::SeqCst);
        s.file_ino.store(file.ino, Ordering::SeqCst);
        s.stale.store(false, Ordering::SeqCst);
        s.dev.store(Box::into_raw(dev), Ordering::SeqCst);
        s.fd.store(fd, Ordering::SeqCst);
        OPEN.fetch_add(1, Ordering::SeqCst);
        Ok(fd)
    }
}

/// A new descriptor for a device, close-on-exec when asked, and its file. A memfd named
/// `pfcntr`, empty and sealed (reads give 0 bytes, writes fail): every memfd is a file of its
/// own, so a reuse of the number by any other file is seen. Where there is no `memfd_create`
/// (a kernel before 3.17, a seccomp filter), `/dev/null`, then an event descriptor: those are
/// one file for every open of them, so a reuse by another `/dev/null` (or another event,
/// signal, timer or epoll descriptor) is not seen.
fn device_fd(cloexec: bool) -> Result<(i32, FileId), Errno> {
    // SAFETY: plain system calls with constant arguments.
    let fd = unsafe {
        let fd = libc::memfd_create(
            c"pfcntr".as_ptr(),
            libc::MFD_ALLOW_SEALING | if cloexec { libc::MFD_CLOEXEC } else { 0 },
        );
        if fd >= 0 {
            let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
            libc::fcntl(fd, libc::F_ADD_SEALS, seals | libc::F_SEAL_WRITE);
            fd
        } else {
            let cloexec = if cloexec { libc::O_CLOEXEC } else { 0 };
            let null = c"/dev/null".as_ptr();
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                null,
                libc::O_RDONLY | cloexec,
            );
            if fd >= 0 {
                fd as i32
            } else {
                libc::eventfd(0, if cloexec != 0 { libc::EFD_CLOEXEC } else { 0 })
            }
        }
    };
    if fd < 0 {
        // SAFETY: errno is thread-local.
        return Err(unsafe { *libc::__errno_location() });
    }
    match FileId::of(fd) {
        Some(file) => Ok((fd, file)),
        None => {
            // SAFETY: our own new descriptor.
            unsafe { libc::close(fd) };
            Err(libc::EBADF)
        }
    }
}

/// Close the device registered as `fd`: disable it and free it. False when no device is
/// registered as `fd` (the caller closes it as an ordinary descriptor). The caller closes `fd`
/// either way: a number found reused is the program's own file now, and its device is torn
/// down all the same.
pub fn close(fd: i32) -> bool {
    if fd < 0 || !any_open() {
        return false;
    }
    match SLOTS.iter().find(|s| s.fd.load(Ordering::Acquire) == fd) {
        Some(s) => teardown(s, fd),
        None => false,
    }
}

/// Unpublish the device of slot `s` registered as `fd`, wait for its users, disable and free
/// it and free its CPUs. False when another thread did it first.
fn teardown(s: &Slot, fd: i32) -> bool {
    if s.fd
        .compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    let p = s.dev.swap(std::ptr::null_mut(), Ordering::SeqCst);
    while s.users.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    OPEN.fetch_sub(1, Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: unpublished and unused: this is the last reference.
        let dev = unsafe { Box::from_raw(p) };
        dev.disable_all();
        let mut busy = BUSY.lock().unwrap_or_else(|p| p.into_inner());
        for &c in &dev.cpus {
            if let Some(b) = busy.get_mut(c as usize) {
                *b = false;
            }
        }
    }
    true
}

/// The CPU the calling thread is bound to, if its affinity is exactly one CPU.
fn bound_cpu() -> Option<u32> {
    // SAFETY: CPU_* and sched_getaffinity write into the local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        if libc::CPU_COUNT(&set) != 1 {
            return None;
        }
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
    }
}

/// The engine's overflow hook for the device's profile bindings. Async-signal-safe.
pub(super) fn hook(ev: &OverflowEvent) {
    if ev.user_data & TAG_MASK != TAG {
        return;
    }
    let Some(s) = SLOTS.get(ev.user_data & 0xff) else {
        return;
    };
    s.users.fetch_add(1, Ordering::SeqCst);
    let p = s.dev.load(Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: published devices are freed only after `users` falls to 0.
        let dev = unsafe { &*p };
        dev.prof.in_hook.fetch_add(1, Ordering::SeqCst);
        if !dev.prof.closed.load(Ordering::SeqCst) {
            dev.serve(ev.pc);
        }
        dev.prof.in_hook.fetch_sub(1, Ordering::SeqCst);
    }
    s.users.fetch_sub(1, Ordering::SeqCst);
}

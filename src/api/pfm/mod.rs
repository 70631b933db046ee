//! The Tru64 UNIX pfm(7) pseudo-device `/dev/pfcntr`, served over the engine.
//!
//! This module holds the device's semantics and its table of descriptors; `libpfcntr`
//! (`capi/pfcntr/pfcntr.c`) interposes `open`/`ioctl`/`read`/`close` for that one path and
//! calls the C ABI layer (`perfcompat-capi`, `pfm.rs`), which copies the ioctl arguments in
//! and out and calls the functions here. The numbers, flags and structure layouts of
//! `<sys/pfcntr.h>` are ours: pfm(7) names them but does not give their values.
//!
//! # Model
//! A [`Device`] has two or three counters (EV4 or EV5 interface), each with a selected event and
//! an interrupt period 2^n. The counts it reports are in units of the period, as the Tru64
//! driver's are (it counts interrupts): a counter's count is `floor(events / 2^n)`, computed
//! from the engine's exact 64-bit count, so no signal is needed to count. The events left
//! over (fewer than a period) are the "raw" counter that EV5's `PCNT5GETCNT2` and
//! `PCNT5READCNTRS` report.
//!
//! What is counted depends on the logging mode: `PCNTLOGALL` (the default at open) counts
//! everything that runs on the device's CPUs ([`Target::Cpu`], one binding per CPU);
//! without the privilege to count a CPU (`perf_event_paranoid` above 0 without
//! `CAP_PERFMON`), it counts the calling process and its descendants instead, and says so once
//! on stderr. `PCNTLOGSELECT` counts the calling process (and the children it creates later,
//! on the perf backend) as [`Target::Process`].
//!
//! **Profiling.** With `PFM_PROFILING` selected and a user address range set, each counter's
//! interrupt (every 2^n events) adds the interrupted program counter to a histogram: a second
//! binding of the calling thread whose requests notify on overflow, restarted from the overflow
//! hook (async-signal-safe: no allocation, no lock, no output). Buckets are 32-bit counts, one
//! per `stride` instructions, where an instruction is 4 bytes (an Alpha instruction), so the
//! data size is a quarter of the range at the default stride of 4; stride 0 is one bucket for
//! the whole range.
//!
//! **IPL histogram.** Linux has no interrupt priority levels a program can see. On the
//! emulated PMUs every interrupt comes from `perfcompat_sim_advance`, in user mode: entry 8
//! (user mode) counts the interrupts of the enabled counters. On perf the entries are Linux
//! clock ticks (`USER_HZ`) since the histogram was cleared: 8 user (user + nice), 0 kernel
//! (system), 1 soft interrupts, 4 hardware interrupts, 7 idle (idle + iowait), per CPU from
//! `/proc/stat` when the device counts CPUs; for a process (`PCNTLOGSELECT`, or without
//! privilege) 8 and 0 are the process's user and system ticks (its waited-for children
//! included) and the other entries stay 0. The histogram starts over when a logging-mode change
//! moves it from CPUs to the process or back.

// Per-slot and per-counter state lives in parallel arrays indexed by slot and counter number.
#![allow(clippy::needless_range_loop)]

use std::cell::UnsafeCell;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Mutex;

use crate::backend::sim::{alpha, model::Model};
use crate::backend::{self, Backend, BackendKind};
use crate::base::error::Error;
use crate::base::set::{CounterSet, Request, RequestFlags, Target};
use crate::base::sigsafe::Blocked;
use crate::engine::{self, Binding, OverflowEvent};

/// The one path the device is served at.
pub const PATH: &str = "/dev/pfcntr";

/// Open-mode bit: collect on the CPU the opener is bound to.
pub const PCNTOPENONE: i32 = 0x1000_0000;
/// Open-mode bit: all CPUs, data kept per CPU.
pub const PCNTOPENEACH: i32 = 0x2000_0000;
/// Open-mode bit: all CPUs, data aggregated.
pub const PCNTOPENALL: i32 = 0x4000_0000;
/// The three open-mode bits.
pub const PCNTOPENMASK: i32 = PCNTOPENONE | PCNTOPENEACH | PCNTOPENALL;

/// Data item: interrupt counts.
pub const PFM_COUNTERS: u32 = 1;
/// Data item: the IPL histogram.
pub const PFM_IPL: u32 = 2;
/// Data item: PC profiling.
pub const PFM_PROFILING: u32 = 4;

/// Entries of the IPL histogram (0-5 IPL0-5, 6 unused, 7 idle, 8 user).
pub const NIPL: usize = 9;

/// `pmctrs_ev5_cpu` value for every CPU.
pub const PMCTRS_ALL_CPUS: i64 = -1;
/// EV5 counter selection bits.
pub const PF5_SEL_COUNTER_0: u64 = 1;
/// EV5 counter selection bits.
pub const PF5_SEL_COUNTER_1: u64 = 2;
/// EV5 counter selection bits.
pub const PF5_SEL_COUNTER_2: u64 = 4;
/// EV5 context bit: count in user mode.
pub const PF5_CTXT_USER: u64 = 1;
/// EV5 context bit: count in kernel mode.
pub const PF5_CTXT_KERNEL: u64 = 2;

/// EV5 frequency field of counter `c` (2 bits at `2c`): 1 is the counter's low frequency
/// (65536, 65536, 16384 events), 2 is 256 events; 0 leaves the counter's frequency as it is.
pub const fn pf5_freq(counter: u32, value: u64) -> u64 {
    value << (2 * counter)
}

/// The EV5 event selector of `code` on `counter` (`PF5_MUX<counter>_*`): one byte per counter.
pub const fn pf5_mux(counter: u32, code: u32) -> u64 {
    (code as u64) << (8 * counter)
}

/// The ioctl request codes. Ours: Linux's `_IO('P', 0x80 + n)`, with neither direction nor
/// size, so that tools decoding ioctl numbers (strace, valgrind) do not read the argument of
/// a request that reaches a real descriptor.
///
/// The four requests that return an array ([`req::PCNTGETCNT`], [`req::PCNTGETIPLHIS`],
/// [`req::PCNT5GETCNT`], [`req::PCNT5GETCNT2`]) were written two ways in Tru64's life, and
/// both are served ([`req::array_arg`]): pfm(7)'s sample passes the address of a pointer to
/// the array (`ioctl(fd, PCNTGETCNT, &p)`), the form of our header's numbers and of a
/// pointer-sized `_IOR('P', n, struct pfcntrs *)`; the original header's
/// `_IOR('P', n, struct pfcntrs)` made the argument the array itself (`ioctl(fd, PCNTGETCNT,
/// &cntrs)`, as PAPI's Alpha substrate calls it), the form of an element-sized `_IOR`. A
/// program's source does not say which header it was written to, so ours serves pfm(7)'s (the
/// page is the contract) unless the program defines `PFCNTR_ORIGINAL_ARGS`, and a device
/// enabled or disabled with `PCNTRENABLE`/`PCNTRDISABLE`, names only the original header had,
/// takes our numbers in the original form too ([`Device::speaks_original`]).
pub mod req {
    const fn r(n: u64) -> u64 {
        ((b'P' as u64) << 8) | (0x80 + n)
    }
    /// Linux's `_IOR('P', 0x80 + n, T)` for a `T` of `size` bytes: the direction (read) in bits
    /// 30-31, the size in bits 16-29, the type in 8-15, the number in 0-7.
    pub const fn ior(n: u64, size: usize) -> u64 {
        (2 << 30) | (((size as u64) & 0x3fff) << 16) | r(n)
    }
    const W: usize = std::mem::size_of::<usize>();
    /// `sizeof(struct pfcntrs)`: three `unsigned long`s.
    pub const PFCNTRS_SIZE: usize = 3 * W;
    /// `sizeof(struct pfcntrs_ev5)`: four `unsigned long`s.
    pub const PFCNTRS_EV5_SIZE: usize = 4 * W;
    /// `sizeof(struct pfipls)`: [`super::NIPL`] `unsigned long`s.
    pub const PFIPLS_SIZE: usize = super::NIPL * W;
    /// Disable performance counter interrupts.
    pub const PCNTDISABLE: u64 = r(0);
    /// Enable performance counter interrupts.
    pub const PCNTENABLE: u64 = r(1);
    /// Select events and frequencies (EV4: `struct iccsr *`).
    pub const PCNTSETMUX: u64 = r(2);
    /// Select the data items (`int *`: `PFM_*` bits).
    pub const PCNTSETITEMS: u64 = r(3);
    /// Count all system activity.
    pub const PCNTLOGALL: u64 = r(4);
    /// Count the selected (marked) processes and mark this one.
    pub const PCNTLOGSELECT: u64 = r(5);
    /// Unmark this process (pfm(7) documents the operation, not its name: the name is ours).
    pub const PCNTLOGUSER: u64 = r(6);
    /// Clear the counts and/or the IPL histogram.
    pub const PCNTCLEARCNT: u64 = r(7);
    /// Read the counts (`struct pfcntrs **`).
    pub const PCNTGETCNT: u64 = r(8);
    /// Size of the profile data (`long *`).
    pub const PCNTGETRSIZE: u64 = r(9);
    /// Read the IPL histogram(s) (`struct pfipls **`).
    pub const PCNTGETIPLHIS: u64 = r(10);
    /// Kernel profiling of callers (not available on Linux: kernel profiling is never on).
    pub const PCNTCALLER: u64 = r(11);
    /// Kernel profiling address range (`struct pfaddr *`; not available on Linux).
    pub const PCNTSETKADDR: u64 = r(12);
    /// Kernel profiling range and stride (`struct pfrange *`; not available on Linux).
    pub const PCNTSETKRANGE: u64 = r(13);
    /// User profiling address range (`struct pfaddr *`).
    pub const PCNTSETUADDR: u64 = r(14);
    /// User profiling range and stride (`struct pfrange *`).
    pub const PCNTSETURANGE: u64 = r(15);
    /// The original header's name for [`PCNTENABLE`] (pfm(7) lists one enable request): does
    /// what it does, and says the program was written to that header. No argument.
    pub const PCNTRENABLE: u64 = r(16);
    /// The original header's name for [`PCNTDISABLE`] (see [`PCNTRENABLE`]). No argument.
    pub const PCNTRDISABLE: u64 = r(17);
    /// EV5: select the events of the three counters (`long *`: `PF5_MUXn_*` ORed).
    pub const PCNT5MUX: u64 = r(32);
    /// EV5: select the interrupt frequencies (`long *`: `PF5_Cn_INT_EVERY_*` ORed).
    pub const PCNT5FREQ: u64 = r(33);
    /// EV5: enable the selected counters (`union pmctrs_ev5 *`).
    pub const PCNT5ENABLE: u64 = r(34);
    /// EV5: zero and enable the selected counters (`union pmctrs_ev5 *`).
    pub const PCNT5RESTART: u64 = r(35);
    /// EV5: disable the selected counters (`union pmctrs_ev5 *`).
    pub const PCNT5DISABLE: u64 = r(36);
    /// EV5: write the selected raw counters (`union pmctrs_ev5 *`).
    pub const PCNT5WRITE: u64 = r(37);
    /// EV5: the contexts to count in (`long *`: `PF5_CTXT_*` ORed).
    pub const PCNT5CTXT: u64 = r(38);
    /// EV5: read the counts (`struct pfcntrs_ev5 **`).
    pub const PCNT5GETCNT: u64 = r(39);
    /// EV5: read the counts shifted by the counter width plus the raw counters.
    pub const PCNT5GETCNT2: u64 = r(40);
    /// EV5: read the raw counters of the selected CPU (`union pmctrs_ev5 *`).
    pub const PCNT5READCNTRS: u64 = r(41);

    /// Where a request that returns an array finds it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ArrayArg {
        /// The argument is the array (the original header's form).
        Here,
        /// The argument is the address of a pointer to the array (pfm(7)'s sample).
        Behind,
        /// Our header's own number: [`ArrayArg::Behind`], unless the device was told the
        /// program speaks the original header ([`super::Device::speaks_original`]).
        Header,
    }

    /// The array request `request` stands for and where its array is: our header's number
    /// ([`ArrayArg::Header`]), `_IOR` of the element ([`ArrayArg::Here`]) or of a pointer
    /// ([`ArrayArg::Behind`]). `None` for any other request, including these numbers with
    /// another size or direction.
    pub fn array_arg(request: u64) -> Option<(u64, ArrayArg)> {
        [
            (PCNTGETCNT, PFCNTRS_SIZE),
            (PCNTGETIPLHIS, PFIPLS_SIZE),
            (PCNT5GETCNT, PFCNTRS_EV5_SIZE),
            (PCNT5GETCNT2, PFCNTRS_EV5_SIZE),
        ]
        .into_iter()
        .find_map(|(canon, size)| {
            let n = (canon & 0xff) - 0x80;
            if request == canon {
                Some((canon, ArrayArg::Header))
            } else if request == ior(n, size) {
                Some((canon, ArrayArg::Here))
            } else if request == ior(n, W) {
                Some((canon, ArrayArg::Behind))
            } else {
                None
            }
        })
    }
}

/// The counter interface a device speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chip {
    /// Two counters, `PCNTSETMUX`.
    Ev4,
    /// Three counters, `PCNT5MUX`/`PCNT5FREQ`.
    Ev5,
}

impl Chip {
    fn model(self) -> &'static Model {
        match self {
            Chip::Ev4 => &alpha::EV4,
            Chip::Ev5 => &alpha::EV5,
        }
    }
    fn ncounters(self) -> usize {
        self.model().ncounters as usize
    }
}

/// The event of the pfm(7) menu of `counter` with select code `code` on `chip`.
pub fn menu_event(chip: Chip, counter: u32, code: u32) -> Option<&'static str> {
    chip.model()
        .events
        .iter()
        .find(|e| {
            e.routes
                .iter()
                .any(|r| r.counters == 1 << counter && r.code == code)
        })
        .map(|e| e.name)
}

/// Every `(name, value)` constant `<sys/pfcntr.h>` defines: what the header test compares the
/// header against.
pub fn header_constants() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = vec![
        ("PCNTOPENONE".into(), PCNTOPENONE as u64),
        ("PCNTOPENEACH".into(), PCNTOPENEACH as u64),
        ("PCNTOPENALL".into(), PCNTOPENALL as u64),
        ("PFM_COUNTERS".into(), PFM_COUNTERS.into()),
        ("PFM_IPL".into(), PFM_IPL.into()),
        ("PFM_PROFILING".into(), PFM_PROFILING.into()),
        ("PF_NIPL".into(), NIPL as u64),
        ("PMCTRS_ALL_CPUS".into(), PMCTRS_ALL_CPUS as u64),
        ("PF5_SEL_COUNTER_0".into(), PF5_SEL_COUNTER_0),
        ("PF5_SEL_COUNTER_1".into(), PF5_SEL_COUNTER_1),
        ("PF5_SEL_COUNTER_2".into(), PF5_SEL_COUNTER_2),
        ("PF5_CTXT_USER".into(), PF5_CTXT_USER),
        ("PF5_CTXT_KERNEL".into(), PF5_CTXT_KERNEL),
        ("PF5_C0_INT_EVERY_65536".into(), pf5_freq(0, 1)),
        ("PF5_C0_INT_EVERY_256".into(), pf5_freq(0, 2)),
        ("PF5_C1_INT_EVERY_65536".into(), pf5_freq(1, 1)),
        ("PF5_C1_INT_EVERY_256".into(), pf5_freq(1, 2)),
        ("PF5_C2_INT_EVERY_16384".into(), pf5_freq(2, 1)),
        ("PF5_C2_INT_EVERY_256".into(), pf5_freq(2, 2)),
    ];
    use req::*;
    for (n, r) in [
        ("PCNTDISABLE", PCNTDISABLE),
        ("PCNTENABLE", PCNTENABLE),
        ("PCNTSETMUX", PCNTSETMUX),
        ("PCNTSETITEMS", PCNTSETITEMS),
        ("PCNTLOGALL", PCNTLOGALL),
        ("PCNTLOGSELECT", PCNTLOGSELECT),
        ("PCNTLOGUSER", PCNTLOGUSER),
        ("PCNTCLEARCNT", PCNTCLEARCNT),
        ("PCNTGETCNT", PCNTGETCNT),
        ("PCNTGETRSIZE", PCNTGETRSIZE),
        ("PCNTGETIPLHIS", PCNTGETIPLHIS),
        ("PCNTCALLER", PCNTCALLER),
        ("PCNTSETKADDR", PCNTSETKADDR),
        ("PCNTSETKRANGE", PCNTSETKRANGE),
        ("PCNTSETUADDR", PCNTSETUADDR),
        ("PCNTSETURANGE", PCNTSETURANGE),
        ("PCNTRENABLE", PCNTRENABLE),
        ("PCNTRDISABLE", PCNTRDISABLE),
        ("PCNT5MUX", PCNT5MUX),
        ("PCNT5FREQ", PCNT5FREQ),
        ("PCNT5ENABLE", PCNT5ENABLE),
        ("PCNT5RESTART", PCNT5RESTART),
        ("PCNT5DISABLE", PCNT5DISABLE),
        ("PCNT5WRITE", PCNT5WRITE),
        ("PCNT5CTXT", PCNT5CTXT),
        ("PCNT5GETCNT", PCNT5GETCNT),
        ("PCNT5GETCNT2", PCNT5GETCNT2),
        ("PCNT5READCNTRS", PCNT5READCNTRS),
    ] {
        v.push((n.into(), r));
    }
    for c in 0..2u32 {
        for e in alpha::EV4.events {
            if let Some(r) = e.routes.iter().find(|r| r.counters == 1 << c) {
                v.push((e.name.into(), r.code.into()));
            }
        }
    }
    for c in 0..3u32 {
        for e in alpha::EV5.events {
            if let Some(r) = e.routes.iter().find(|r| r.counters == 1 << c) {
                v.push((ev5_selector_name(e.name, c), pf5_mux(c, r.code)));
            }
        }
    }
    v
}

/// The `PF5_MUX<c>_` name of an EV5 event on counter `c` (the two events two counters share
/// are `PF5_CYCLES` and `PF5_SCACHEWRITE` in the model: the header names each counter's).
pub fn ev5_selector_name(event: &str, c: u32) -> String {
    match event.strip_prefix("PF5_MUX") {
        Some(_) => event.to_string(),
        None => format!("PF5_MUX{c}_{}", event.trim_start_matches("PF5_")),
    }
}

/// How the device was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `PCNTOPENONE`: the CPU the opener is bound to.
    One(u32),
    /// `PCNTOPENEACH`: every CPU, data per CPU.
    Each,
    /// `PCNTOPENALL`: every CPU, data aggregated.
    All,
}

/// An errno value (the device's error convention).
pub type Errno = i32;

fn errno_of(e: &Error) -> Errno {
    e.errno()
}

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
const TAG: usize = 0x5046_4d00_0000_0000 >> (64 - usize::BITS);
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
    let chip = match backend.shape().kind {
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

/// Counts of one CPU slot: interrupt counts of up to three counters and the elapsed time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Per counter: interrupts (whole periods) since the last clear.
    pub ticks: [u64; 3],
    /// Per counter: events since the last interrupt (the raw counter).
    pub raw: [u64; 3],
    /// Per counter: log2 of its period.
    pub shift: [u32; 3],
    /// Nanoseconds since the counters were cleared (the cycle counter of a 1 GHz clock: pfm's
    /// `pcc` value).
    pub pcc: u64,
}

/// One counting binding and where its counts go.
struct Live {
    binding: Binding,
    slot: usize,
    /// Per request: its counter.
    counters: Vec<usize>,
    /// Per counter: the engine value counting resumed from.
    base: [u64; 3],
}

struct State {
    chip: Chip,
    /// Per counter: select code in its menu.
    code: [u32; 3],
    /// Per counter: log2 of the interrupt period.
    shift: [u32; 3],
    /// Per counter: enabled (not disabled by `iccsr` or `PCNT5DISABLE`).
    active: [bool; 3],
    items: u32,
    select: bool,
    marked: bool,
    user: bool,
    system: bool,
    /// Whether `PCNT5CTXT` chose the modes (else a process is counted in user mode only).
    ctxt_set: bool,
    enabled: bool,
    live: Vec<Live>,
    /// Per slot and counter: whole periods folded in from earlier bindings.
    acc: Vec<[u64; 3]>,
    /// Per slot and counter: events left over from earlier bindings (less than a period).
    rem: Vec<[u64; 3]>,
    pcc0: i64,
    /// Per slot: the IPL histogram when last cleared.
    ipl0: Vec<[u64; NIPL]>,
    /// Per slot: the sim IPL user ticks carried over counter clears.
    ipl_carry: Vec<u64>,
    /// Per slot: the sim tick total at the last IPL clear.
    ipl_base: Vec<u64>,
    /// User profiling: start, end, stride (instructions).
    urange: Option<(usize, usize, u64)>,
    read_pos: usize,
    fallback_said: bool,
    /// Whether the last bind counted CPUs (else the process): where the IPL ticks come from.
    cpu_wide: bool,
}

/// The signal-side state of the profile: read by the overflow hook without locks.
struct Prof {
    in_hook: AtomicUsize,
    closed: AtomicBool,
    binding: UnsafeCell<Option<Binding>>,
    /// Per request: the period of its counter.
    periods: UnsafeCell<[u64; 3]>,
    buckets: UnsafeCell<Box<[AtomicU32]>>,
    start: AtomicUsize,
    end: AtomicUsize,
    /// log2 of the bytes per bucket (>= 64: one bucket).
    shift: AtomicU32,
    nb: AtomicUsize,
}

/// An open pfm device.
pub struct Device {
    slot: usize,
    mode: OpenMode,
    cpus: Vec<u32>,
    nslots: usize,
    backend: &'static dyn Backend,
    sim: Option<Chip>,
    st: Mutex<State>,
    prof: Prof,
    // The program spoke the original header's names (`Device::speaks_original`).
    original: AtomicBool,
}

// SAFETY: the UnsafeCells of `prof` are written only by `Device::prof_mut` with every hook
// shut out (see there) and read by the hook and by holders of `st`.
unsafe impl Sync for Device {}
// SAFETY: as above.
unsafe impl Send for Device {}

/// The default periods (log2) of a chip's counters.
fn default_shifts(chip: Chip) -> [u32; 3] {
    let m = chip.model();
    [0, 1, 2].map(|c| {
        if c < m.ncounters {
            m.default_width(c)
        } else {
            16
        }
    })
}

impl Device {
    fn new(
        slot: usize,
        mode: OpenMode,
        cpus: Vec<u32>,
        nslots: usize,
        backend: &'static dyn Backend,
        sim: Option<Chip>,
    ) -> Device {
        let chip = sim.unwrap_or(Chip::Ev4);
        Device {
            slot,
            mode,
            cpus,
            nslots,
            backend,
            sim,
            st: Mutex::new(State {
                chip,
                code: [0; 3],
                shift: default_shifts(chip),
                active: [true; 3],
                items: PFM_COUNTERS,
                select: false,
                marked: false,
                user: true,
                system: true,
                ctxt_set: false,
                enabled: false,
                live: Vec::new(),
                acc: vec![[0; 3]; nslots],
                rem: vec![[0; 3]; nslots],
                pcc0: engine::now_ns(),
                ipl0: vec![[0; NIPL]; nslots],
                ipl_carry: vec![0; nslots],
                ipl_base: vec![0; nslots],
                urange: None,
                read_pos: 0,
                fallback_said: false,
                cpu_wide: false,
            }),
            prof: Prof {
                in_hook: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
                binding: UnsafeCell::new(None),
                periods: UnsafeCell::new([0; 3]),
                buckets: UnsafeCell::new(Box::new([])),
                start: AtomicUsize::new(0),
                end: AtomicUsize::new(0),
                shift: AtomicU32::new(64),
                nb: AtomicUsize::new(0),
            },
            original: AtomicBool::new(false),
        }
    }

    /// How the device was opened.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// Elements of the per-CPU arrays (`PCNTGETCNT`, `PCNTGETIPLHIS`): the number of CPUs for
    /// `PCNTOPENEACH`, else 1.
    pub fn nslots(&self) -> usize {
        self.nslots
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The interface the device speaks now.
    pub fn chip(&self) -> Chip {
        self.state().chip
    }

    /// `PCNTSETMUX`: EV4 events and frequencies. `freq0`: counter 0 every 2^12 (else 2^16);
    /// `freq1`: counter 1 every 2^8 (else 2^12); `disable`: bit n disables counter n.
    /// `EINVAL` for an unknown event, `disable` 3 or more, a non-zero `mbz`, or an emulated EV5.
    pub fn set_mux_ev4(
        &self,
        freq0: bool,
        freq1: bool,
        mux0: u32,
        mux1: u32,
        disable: u32,
        mbz: u32,
    ) -> Result<(), Errno> {
        if disable >= 3
            || mbz != 0
            || self.sim == Some(Chip::Ev5)
            || menu_event(Chip::Ev4, 0, mux0).is_none()
            || menu_event(Chip::Ev4, 1, mux1).is_none()
        {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.chip = Chip::Ev4;
            st.code = [mux0, mux1, 0];
            st.shift = [if freq0 { 12 } else { 16 }, if freq1 { 8 } else { 12 }, 16];
            st.active = [disable & 1 == 0, disable & 2 == 0, false];
            Ok(())
        })
    }

    /// `PCNT5MUX`: the three EV5 events, one byte each ([`pf5_mux`]). `EINVAL` for a code not
    /// in its counter's menu, or on an emulated EV4.
    pub fn set_mux_ev5(&self, v: u64) -> Result<(), Errno> {
        let codes = [0, 1, 2].map(|c| ((v >> (8 * c)) & 0xff) as u32);
        if self.sim == Some(Chip::Ev4)
            || v >> 24 != 0
            || (0..3).any(|c| menu_event(Chip::Ev5, c as u32, codes[c]).is_none())
        {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            if st.chip != Chip::Ev5 {
                st.chip = Chip::Ev5;
                st.shift = default_shifts(Chip::Ev5);
                st.active = [false; 3];
            }
            st.code = codes;
            Ok(())
        })
    }

    /// `PCNT5FREQ`: per counter 0 (unchanged), 1 (65536, 65536, 16384 events) or 2 (256).
    pub fn set_freq_ev5(&self, v: u64) -> Result<(), Errno> {
        if self.sim == Some(Chip::Ev4) || v >> 6 != 0 || (0..3).any(|c| (v >> (2 * c)) & 3 == 3) {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            if st.chip != Chip::Ev5 {
                st.chip = Chip::Ev5;
                st.code = [0; 3];
                st.active = [false; 3];
            }
            let low = default_shifts(Chip::Ev5);
            for c in 0..3 {
                match (v >> (2 * c)) & 3 {
                    1 => st.shift[c] = low[c],
                    2 => st.shift[c] = 8,
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// `PCNT5CTXT`: count in user mode, kernel mode or both. `EINVAL` for none or unknown bits.
    pub fn set_ctxt_ev5(&self, v: u64) -> Result<(), Errno> {
        if v == 0 || v & !(PF5_CTXT_USER | PF5_CTXT_KERNEL) != 0 {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.user = v & PF5_CTXT_USER != 0;
            st.system = v & PF5_CTXT_KERNEL != 0;
            st.ctxt_set = true;
            Ok(())
        })
    }

    /// `PCNTSETITEMS`: `EINVAL` when no item (or an unknown bit) is selected.
    pub fn set_items(&self, items: u32) -> Result<(), Errno> {
        if items == 0 || items & !(PFM_COUNTERS | PFM_IPL | PFM_PROFILING) != 0 {
            return Err(libc::EINVAL);
        }
        self.reconfigure(|st| {
            st.items = items;
            Ok(())
        })
    }

    /// `PCNTLOGALL` (`select` false), `PCNTLOGSELECT` (true, and this process is marked).
    pub fn set_log(&self, select: bool) -> Result<(), Errno> {
        self.reconfigure(|st| {
            st.select = select;
            if select {
                st.marked = true;
            }
            Ok(())
        })
    }

    /// `PCNTLOGUSER`: unmark this process (with `PCNTLOGSELECT`, nothing is counted then).
    pub fn unmark(&self) -> Result<(), Errno> {
        self.reconfigure(|st| {
            st.marked = false;
            Ok(())
        })
    }

    /// `PCNTRENABLE`/`PCNTRDISABLE` were used on this device: the program was written to the
    /// original header, whose array requests take the array itself ([`req::ArrayArg`]).
    pub fn speaks_original(&self) -> bool {
        self.original.load(Ordering::Relaxed)
    }

    /// Note that the program uses the original header's names (see [`Device::speaks_original`]).
    pub fn heard_original(&self) {
        self.original.store(true, Ordering::Relaxed);
    }

    /// `PCNTENABLE`: start counting the active counters (all of them when none is).
    pub fn enable(&self) -> Result<(), Errno> {
        let mut st = self.state();
        self.unbind(&mut st);
        if !st.active.iter().any(|&a| a) {
            // EV5 counters start disabled (PCNT5ENABLE selects them): enable them all.
            st.active = [true; 3];
        }
        self.bind(&mut st)
    }

    /// `PCNTDISABLE`: stop counting; the counts stay.
    pub fn disable(&self) -> Result<(), Errno> {
        let mut st = self.state();
        self.unbind(&mut st);
        st.enabled = false;
        Ok(())
    }

    fn disable_all(&self) {
        let _ = self.disable();
    }

    /// EV5 `PCNT5ENABLE`/`PCNT5RESTART`/`PCNT5DISABLE`: `select` counters (`PF5_SEL_*`),
    /// `cpu` a CPU or [`PMCTRS_ALL_CPUS`] (`EINVAL` otherwise, or for an empty selection).
    pub fn select_ev5(&self, select: u64, cpu: i64, op: Ev5Op) -> Result<(), Errno> {
        self.check_cpu(cpu)?;
        if select == 0 || select & !7 != 0 || self.sim == Some(Chip::Ev4) {
            return Err(libc::EINVAL);
        }
        let mut st = self.state();
        self.unbind(&mut st);
        if st.chip != Chip::Ev5 {
            st.chip = Chip::Ev5;
            st.code = [0; 3];
            st.shift = default_shifts(Chip::Ev5);
            st.active = [false; 3];
        }
        let before = st.active;
        for c in 0..3 {
            if select & (1 << c) == 0 {
                continue;
            }
            match op {
                Ev5Op::Enable => st.active[c] = true,
                Ev5Op::Restart => {
                    st.active[c] = true;
                    for s in 0..self.nslots {
                        st.acc[s][c] = 0;
                        st.rem[s][c] = 0;
                    }
                }
                Ev5Op::Disable => st.active[c] = false,
            }
        }
        if op == Ev5Op::Disable && !st.enabled {
            return Ok(());
        }
        if st.active.iter().any(|&a| a) {
            // A selection that cannot be counted changes nothing.
            self.bind(&mut st).inspect_err(|_| st.active = before)
        } else {
            st.enabled = false;
            Ok(())
        }
    }

    /// `PCNT5WRITE`: set the raw counters of `select` (on `cpu`'s slot, or every slot) to
    /// `values`; the interrupt counts stay. `EINVAL` for a value of a whole period or more.
    pub fn write_ev5(&self, select: u64, cpu: i64, values: [u64; 3]) -> Result<(), Errno> {
        self.check_cpu(cpu)?;
        if select & !7 != 0 || self.sim == Some(Chip::Ev4) {
            return Err(libc::EINVAL);
        }
        let mut st = self.state();
        if (0..3).any(|c| select & (1 << c) != 0 && values[c] >> st.shift[c] != 0) {
            return Err(libc::EINVAL);
        }
        let was = st.enabled;
        self.unbind(&mut st);
        for s in 0..self.nslots {
            if self.mode == OpenMode::Each && cpu >= 0 && s != cpu as usize {
                continue;
            }
            for c in 0..3 {
                if select & (1 << c) != 0 {
                    st.rem[s][c] = values[c];
                }
            }
        }
        if was {
            self.bind(&mut st)?;
        }
        Ok(())
    }

    fn check_cpu(&self, cpu: i64) -> Result<(), Errno> {
        if cpu == PMCTRS_ALL_CPUS || (cpu >= 0 && self.cpus.contains(&(cpu as u32))) {
            Ok(())
        } else {
            Err(libc::EINVAL)
        }
    }

    /// `PCNTCLEARCNT`: clear the counts (with `PFM_COUNTERS`) and the IPL histogram (with
    /// `PFM_IPL`); `EINVAL` with neither selected.
    pub fn clear(&self) -> Result<(), Errno> {
        let mut st = self.state();
        let counters = st.items & PFM_COUNTERS != 0;
        let ipl = st.items & PFM_IPL != 0;
        if !counters && !ipl {
            return Err(libc::EINVAL);
        }
        let now = self.counts_locked(&mut st);
        if counters {
            for s in 0..self.nslots {
                st.ipl_carry[s] += sim_ticks(&now[s], &st.active).saturating_sub(st.ipl_base[s]);
                st.ipl_base[s] = 0;
            }
            let values = self.sample_live(&st);
            for (l, v) in st.live.iter_mut().zip(values) {
                l.base = v;
            }
            st.acc = vec![[0; 3]; self.nslots];
            st.rem = vec![[0; 3]; self.nslots];
            st.pcc0 = engine::now_ns();
        }
        if ipl {
            let now = self.counts_locked(&mut st);
            for s in 0..self.nslots {
                st.ipl_carry[s] = 0;
                st.ipl_base[s] = sim_ticks(&now[s], &st.active);
            }
            st.ipl0 = self.linux_ipl(&st);
        }
        Ok(())
    }

    /// `PCNTGETCNT`/`PCNT5GETCNT`: the counts per slot ([`Device::nslots`]). `EINVAL` without
    /// `PFM_COUNTERS`.
    pub fn counts(&self) -> Result<Vec<Counts>, Errno> {
        let mut st = self.state();
        if st.items & PFM_COUNTERS == 0 {
            return Err(libc::EINVAL);
        }
        Ok(self.counts_locked(&mut st))
    }

    /// `PCNT5READCNTRS`: the raw counters of `cpu`'s slot (the sum of every slot for
    /// [`PMCTRS_ALL_CPUS`]).
    pub fn raw_ev5(&self, cpu: i64) -> Result<[u64; 3], Errno> {
        self.check_cpu(cpu)?;
        let mut st = self.state();
        let all = self.counts_locked(&mut st);
        let mut out = [0u64; 3];
        for (s, c) in all.iter().enumerate() {
            if self.mode == OpenMode::Each && cpu >= 0 && s != cpu as usize {
                continue;
            }
            for i in 0..3 {
                out[i] += c.raw[i];
            }
        }
        Ok(out)
    }

    /// `PCNTGETIPLHIS`: the IPL histogram per slot (see the module documentation). `EINVAL`
    /// without `PFM_IPL`.
    pub fn ipl(&self) -> Result<Vec<[u64; NIPL]>, Errno> {
        let mut st = self.state();
        if st.items & PFM_IPL == 0 {
            return Err(libc::EINVAL);
        }
        if self.sim.is_some() {
            let now = self.counts_locked(&mut st);
            return Ok((0..self.nslots)
                .map(|s| {
                    let mut h = [0u64; NIPL];
                    h[8] = st.ipl_carry[s]
                        + sim_ticks(&now[s], &st.active).saturating_sub(st.ipl_base[s]);
                    h
                })
                .collect());
        }
        let now = self.linux_ipl(&st);
        Ok(now
            .iter()
            .zip(&st.ipl0)
            .map(|(n, z)| {
                let mut h = [0u64; NIPL];
                for i in 0..NIPL {
                    h[i] = n[i].saturating_sub(z[i]);
                }
                h
            })
            .collect())
    }

    /// The Linux clock ticks per slot as IPL entries.
    fn linux_ipl(&self, st: &State) -> Vec<[u64; NIPL]> {
        let mut out = vec![[0u64; NIPL]; self.nslots];
        if st.cpu_wide {
            let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
            for line in stat.lines() {
                let mut w = line.split_whitespace();
                let Some(cpu) = w.next().and_then(|n| n.strip_prefix("cpu")) else {
                    continue;
                };
                let Ok(cpu) = cpu.parse::<u32>() else {
                    continue;
                };
                if !self.cpus.contains(&cpu) {
                    continue;
                }
                let f: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
                let g = |i: usize| f.get(i).copied().unwrap_or(0);
                let s = if self.mode == OpenMode::Each {
                    cpu as usize
                } else {
                    0
                };
                let Some(h) = out.get_mut(s) else { continue };
                h[8] += g(0) + g(1);
                h[0] += g(2);
                h[7] += g(3) + g(4);
                h[4] += g(5);
                h[1] += g(6);
            }
        } else {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            // Fields after the command name (which ends at the last ')'): state is field 3.
            let rest = stat.rsplit_once(')').map_or("", |r| r.1);
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let g = |n: usize| f.get(n - 3).copied().unwrap_or(0);
            out[0][8] = g(14) + g(16);
            out[0][0] = g(15) + g(17);
        }
        out
    }

    fn counts_locked(&self, st: &mut State) -> Vec<Counts> {
        let values = self.sample_live(st);
        let mut out: Vec<Counts> = (0..self.nslots)
            .map(|_| Counts {
                ticks: [0; 3],
                raw: [0; 3],
                shift: st.shift,
                pcc: (engine::now_ns() - st.pcc0).max(0) as u64,
            })
            .collect();
        // Whole periods: folded ones, plus those of the live bindings' events and the
        // leftovers they started from; the leftover of all that is the raw counter.
        let mut events = st.rem.clone();
        for (l, v) in st.live.iter().zip(&values) {
            for c in 0..3 {
                events[l.slot][c] += v[c].wrapping_sub(l.base[c]);
            }
        }
        for s in 0..self.nslots {
            for c in 0..3 {
                let sh = st.shift[c];
                out[s].ticks[c] = st.acc[s][c] + (events[s][c] >> sh);
                out[s].raw[c] = events[s][c] & ((1u64 << sh) - 1);
            }
        }
        out
    }

    /// Per live binding, per counter: its engine value now (0 for counters it does not count).
    fn sample_live(&self, st: &State) -> Vec<[u64; 3]> {
        st.live
            .iter()
            .map(|l| {
                let mut v = [0u64; 3];
                let mut vals = [0u64; 3];
                if l.binding.sample(&mut vals[..l.counters.len()]).is_ok() {
                    for (i, &c) in l.counters.iter().enumerate() {
                        v[c] = vals[i];
                    }
                } else {
                    // Unbound (after fork): nothing more than at the last fold.
                    v = l.base;
                }
                v
            })
            .collect()
    }

    /// Fold the live bindings into `acc`/`rem` and drop them (and the profile's).
    fn unbind(&self, st: &mut State) {
        let values = self.sample_live(st);
        let live = std::mem::take(&mut st.live);
        for (l, v) in live.iter().zip(values) {
            for c in 0..3 {
                st.rem[l.slot][c] += v[c].wrapping_sub(l.base[c]);
            }
        }
        drop(live);
        for s in 0..self.nslots {
            for c in 0..3 {
                let sh = st.shift[c];
                st.acc[s][c] += st.rem[s][c] >> sh;
                st.rem[s][c] &= (1u64 << sh) - 1;
            }
        }
        // SAFETY: inside `prof_mut`.
        self.prof_mut(|p| *unsafe { cell(&p.binding) } = None);
    }

    /// The event request of counter `c` (`None` when it has no Linux counterpart on perf).
    fn request(&self, st: &State, c: usize, flags: RequestFlags) -> Result<Request, Errno> {
        let name = menu_event(st.chip, c as u32, st.code[c]).ok_or(libc::EINVAL)?;
        if self.sim.is_some() {
            return Ok(Request::new(name)
                .flags(flags)
                .on_counter(c as u32)
                .attr("int_every", 1u64 << st.shift[c]));
        }
        let generic = st
            .chip
            .model()
            .generics
            .iter()
            .find(|g| g.event == name)
            .map(|g| g.name);
        match generic {
            Some(g) => Ok(Request::new(g).flags(flags)),
            None => {
                crate::stderr_line!(
                    "pfm: {name} (counter {c}) has no Linux counterpart; select another event \
                     or disable the counter"
                );
                Err(libc::ENOENT)
            }
        }
    }

    /// Bind the active counters (and the profile) and mark the device enabled.
    fn bind(&self, st: &mut State) -> Result<(), Errno> {
        st.enabled = true;
        let ncounters = st.chip.ncounters();
        let counters: Vec<usize> = (0..ncounters).filter(|&c| st.active[c]).collect();
        if counters.is_empty() {
            return Ok(());
        }
        // SAFETY: getpid is a plain system call.
        let pid = unsafe { libc::getpid() };
        let mut targets: Vec<(Target, usize)> = Vec::new();
        let cpu_wide = !st.select;
        if cpu_wide {
            for (i, &c) in self.cpus.iter().enumerate() {
                let slot = if self.mode == OpenMode::Each { i } else { 0 };
                targets.push((Target::Cpu(c), slot));
            }
        } else if st.marked {
            targets.push((Target::Process(pid), 0));
        }
        let flags = RequestFlags {
            user: st.user,
            system: st.system && (cpu_wide || (self.sim.is_none() && st.ctxt_set)),
            hypervisor: false,
            notify_overflow: false,
        };
        let mut set = CounterSet::new();
        for &c in &counters {
            set.add(self.request(st, c, flags)?)
                .map_err(|e| errno_of(&e))?;
        }
        let mut live = Vec::new();
        for (t, slot) in targets {
            match engine::bind_with(self.backend, &set, t) {
                Ok(b) => live.push(self.live(b, slot, &counters)),
                Err(e)
                    if matches!(t, Target::Cpu(_))
                        && matches!(e.errno(), libc::EACCES | libc::EPERM) =>
                {
                    // No privilege to count a CPU: count this process instead.
                    live.clear();
                    if !st.fallback_said {
                        crate::stderr_line!(
                            "pfm: counting a CPU needs privilege ({e}); counting this process \
                             and its children instead"
                        );
                        st.fallback_said = true;
                    }
                    let mut set = CounterSet::new();
                    let user_only = RequestFlags {
                        system: false,
                        ..flags
                    };
                    for &c in &counters {
                        set.add(self.request(st, c, user_only)?)
                            .map_err(|e| errno_of(&e))?;
                    }
                    let b = engine::bind_with(self.backend, &set, Target::Process(pid))
                        .map_err(|e| self.bind_error(st, &counters, &e))?;
                    live.push(self.live(b, 0, &counters));
                    break;
                }
                Err(e) => {
                    st.enabled = false;
                    return Err(self.bind_error(st, &counters, &e));
                }
            }
        }
        let cpu_wide = live
            .iter()
            .any(|l| matches!(l.binding.target(), Target::Cpu(_)));
        if cpu_wide != st.cpu_wide {
            // The ticks now come from elsewhere (the CPUs or the process): start over.
            st.cpu_wide = cpu_wide;
            st.ipl0 = self.linux_ipl(st);
        }
        st.live = live;
        if st.items & PFM_PROFILING != 0 && st.urange.is_some() {
            self.bind_profile(st, &counters)?;
        }
        Ok(())
    }

    /// Say why a bind failed, naming the pfm event when it is the host that cannot count it
    /// (then `ENOENT`, the kernel's word for an event it does not have).
    fn bind_error(&self, st: &State, counters: &[usize], e: &Error) -> Errno {
        let unavailable = matches!(
            e,
            Error::UnknownEvent { .. } | Error::EventUnavailable { .. }
        );
        let which: Vec<String> = counters
            .iter()
            .filter_map(|&c| {
                menu_event(st.chip, c as u32, st.code[c]).map(|n| format!("{n} (counter {c})"))
            })
            .collect();
        crate::stderr_line!("pfm: counting {}: {e}", which.join(", "));
        if unavailable {
            libc::ENOENT
        } else {
            errno_of(e)
        }
    }

    fn live(&self, binding: Binding, slot: usize, counters: &[usize]) -> Live {
        let mut v = [0u64; 3];
        let mut base = [0u64; 3];
        if binding.sample(&mut v[..counters.len()]).is_ok() {
            for (i, &c) in counters.iter().enumerate() {
                base[c] = v[i];
            }
        }
        Live {
            binding,
            slot,
            counters: counters.to_vec(),
            base,
        }
    }

    /// The profile: the calling thread's notifying binding of the active counters.
    fn bind_profile(&self, st: &State, counters: &[usize]) -> Result<(), Errno> {
        engine::add_overflow_hook(hook).map_err(|e| errno_of(&e))?;
        let flags = RequestFlags {
            user: true,
            system: false,
            hypervisor: false,
            notify_overflow: true,
        };
        let mut set = CounterSet::new();
        let mut periods = [0u64; 3];
        for (i, &c) in counters.iter().enumerate() {
            periods[i] = 1u64 << st.shift[c];
            set.add(
                self.request(st, c, flags)?
                    .preset(0u64.wrapping_sub(periods[i])),
            )
            .map_err(|e| errno_of(&e))?;
        }
        let b = engine::bind_with(self.backend, &set, Target::CurrentThread)
            .map_err(|e| self.bind_error(st, counters, &e))?;
        self.prof_mut(|p| {
            b.set_user_data(TAG | self.slot);
            // SAFETY: inside `prof_mut`.
            unsafe {
                *cell(&p.periods) = periods;
                *cell(&p.binding) = Some(b);
            }
        });
        Ok(())
    }

    /// `PCNTSETURANGE` (and `PCNTSETUADDR` with the current stride, 4 at first): profile the
    /// user addresses `[start, end)`, one bucket per `stride` instructions (of 4 bytes), 0
    /// for one bucket. `EINVAL` without `PFM_PROFILING`, for an empty range or a stride that
    /// is not a power of two; `ENOMEM` when the buckets cannot be allocated.
    pub fn set_urange(&self, start: usize, end: usize, stride: Option<u64>) -> Result<(), Errno> {
        let mut st = self.state();
        if st.items & PFM_PROFILING == 0 || start >= end {
            return Err(libc::EINVAL);
        }
        let stride = stride.unwrap_or(st.urange.map_or(4, |r| r.2));
        if stride != 0 && !stride.is_power_of_two() {
            return Err(libc::EINVAL);
        }
        let shift = if stride == 0 { 64 } else { stride.ilog2() + 2 };
        let len = (end - start) as u64;
        let nb = if shift >= 64 {
            1
        } else {
            len.div_ceil(1 << shift)
        };
        let total = nb.checked_mul(self.nslots as u64).ok_or(libc::ENOMEM)?;
        if total > (1 << 28) {
            return Err(libc::ENOMEM);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(total as usize)
            .map_err(|_| libc::ENOMEM)?;
        v.extend((0..total).map(|_| AtomicU32::new(0)));
        let buckets = v.into_boxed_slice();
        st.urange = Some((start, end, stride));
        st.read_pos = 0;
        self.prof_mut(|p| {
            // SAFETY: inside `prof_mut`.
            *unsafe { cell(&p.buckets) } = buckets;
            p.start.store(start, Ordering::Relaxed);
            p.end.store(end, Ordering::Relaxed);
            p.shift.store(shift, Ordering::Relaxed);
            p.nb.store(nb as usize, Ordering::Relaxed);
        });
        if st.enabled && !st.live.is_empty() && self.prof_binding_missing() {
            let counters = st.live[0].counters.clone();
            self.bind_profile(&st, &counters)?;
        }
        Ok(())
    }

    fn prof_binding_missing(&self) -> bool {
        // SAFETY: read only, with `st` held (writers hold it too).
        unsafe { &*self.prof.binding.get() }.is_none()
    }

    /// `PCNTSETKADDR`/`PCNTSETKRANGE`: `EINVAL` without `PFM_PROFILING`, else `ENOTSUP`
    /// (Linux does not show a program the kernel's program counters).
    pub fn set_krange(&self) -> Result<(), Errno> {
        if self.state().items & PFM_PROFILING == 0 {
            Err(libc::EINVAL)
        } else {
            Err(libc::ENOTSUP)
        }
    }

    /// `PCNTGETRSIZE`: bytes of profile data (0 without profiling or a range).
    pub fn rsize(&self) -> u64 {
        let st = self.state();
        if st.items & PFM_PROFILING == 0 || st.urange.is_none() {
            return 0;
        }
        (self.prof.nb.load(Ordering::Relaxed) * self.nslots * 4) as u64
    }

    /// `read(2)`: up to `max` bytes of the profile (32-bit native-endian bucket counts, slot
    /// after slot) from the read position, which advances; a read at the end returns nothing
    /// and rewinds, so the next read starts over.
    pub fn read(&self, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.read_into(max, |b| {
            out.extend_from_slice(b);
            Ok(())
        });
        out
    }

    /// [`Device::read`] delivering the bytes to `sink` (the copy into the caller's buffer):
    /// the read position moves only when `sink` succeeds, so a read that fails (`EFAULT`)
    /// changes nothing. Returns the number of bytes delivered (0 at the end, which rewinds
    /// without calling `sink`).
    pub fn read_into(
        &self,
        max: usize,
        sink: impl FnOnce(&[u8]) -> Result<(), Errno>,
    ) -> Result<usize, Errno> {
        let mut st = self.state();
        let total = if st.items & PFM_PROFILING == 0 || st.urange.is_none() {
            0
        } else {
            self.prof.nb.load(Ordering::Relaxed) * self.nslots * 4
        };
        let from = st.read_pos.min(total);
        let to = (from.saturating_add(max)).min(total);
        if from == to {
            st.read_pos = 0;
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity(to - from);
        // SAFETY: the buckets are replaced only by `prof_mut`, which needs `st` (held here)
        // to be called from `set_urange`.
        let buckets = unsafe { &*self.prof.buckets.get() };
        for i in from / 4..to.div_ceil(4) {
            let v = buckets.get(i).map_or(0, |b| b.load(Ordering::Relaxed));
            let b = v.to_ne_bytes();
            for (k, byte) in b.iter().enumerate() {
                let at = i * 4 + k;
                if at >= from && at < to {
                    bytes.push(*byte);
                }
            }
        }
        sink(&bytes)?;
        st.read_pos = to;
        Ok(bytes.len())
    }

    /// Change the profile's signal-side state with every overflow hook shut out (and every
    /// signal blocked on this thread), then serve an overflow the hook had to leave.
    fn prof_mut(&self, f: impl FnOnce(&Prof)) {
        let _b = Blocked::all();
        self.prof.closed.store(true, Ordering::SeqCst);
        while self.prof.in_hook.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        f(&self.prof);
        self.prof.closed.store(false, Ordering::SeqCst);
        // An overflow that came while the hook was shut out froze the binding: serve it.
        // SAFETY: read only; writers are `prof_mut` callers, which hold `st`.
        if let Some(b) = unsafe { &*self.prof.binding.get() } {
            if b.is_frozen() {
                self.prof.in_hook.fetch_add(1, Ordering::SeqCst);
                self.serve(0);
                self.prof.in_hook.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// The overflow of the profile binding: record `pc`, set the overflowed counters a period
    /// from their next interrupt and the others where they are, count again.
    /// Async-signal-safe. Runs with `in_hook` held.
    fn serve(&self, pc: usize) {
        // SAFETY: `prof_mut` waits for `in_hook` to fall to 0 before changing these.
        let (b, periods) = unsafe { (&*self.prof.binding.get(), &*self.prof.periods.get()) };
        let Some(b) = b else { return };
        let n = b.len().min(3);
        let mut v = [0u64; 3];
        if b.sample(&mut v[..n]).is_err() {
            return;
        }
        let over = b.overflowed();
        if over == 0 {
            return;
        }
        for i in 0..n {
            if over & (1 << i) != 0 {
                self.record(pc);
                let _ = b.set_preset(i, 0u64.wrapping_sub(periods[i]));
            } else {
                let _ = b.set_preset(i, v[i]);
            }
        }
        let _ = b.restart();
    }

    /// Add one sample at `pc` (async-signal-safe).
    fn record(&self, pc: usize) {
        let p = &self.prof;
        let (start, end) = (
            p.start.load(Ordering::Relaxed),
            p.end.load(Ordering::Relaxed),
        );
        if pc < start || pc >= end {
            return;
        }
        let nb = p.nb.load(Ordering::Relaxed);
        let idx = ((pc - start) as u64)
            .checked_shr(p.shift.load(Ordering::Relaxed))
            .unwrap_or(0) as usize;
        let slot = if self.mode == OpenMode::Each {
            // SAFETY: sched_getcpu reads the CPU number (vDSO or getcpu).
            let cpu = unsafe { libc::sched_getcpu() };
            self.cpus.iter().position(|&c| c as i32 == cpu).unwrap_or(0)
        } else {
            0
        };
        // SAFETY: as in `serve`.
        let buckets = unsafe { &*p.buckets.get() };
        if idx < nb {
            if let Some(b) = buckets.get(slot * nb + idx) {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A mutable reference to a cell of the profile's state.
///
/// # Safety
/// Only inside [`Device::prof_mut`], which has shut every hook out and is called with the
/// device's state locked (so no other thread writes either).
#[allow(clippy::mut_from_ref)]
unsafe fn cell<T>(c: &UnsafeCell<T>) -> &mut T {
    // SAFETY: the caller's promise.
    unsafe { &mut *c.get() }
}

/// What [`Device::select_ev5`] does with the selected counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev5Op {
    /// `PCNT5ENABLE`.
    Enable,
    /// `PCNT5RESTART`: zero, then enable.
    Restart,
    /// `PCNT5DISABLE`.
    Disable,
}

/// The sim's IPL user ticks: interrupts of the active counters.
fn sim_ticks(c: &Counts, active: &[bool; 3]) -> u64 {
    (0..3).filter(|&i| active[i]).map(|i| c.ticks[i]).sum()
}

impl Device {
    /// Apply a configuration change; re-bind when enabled (counts carry over).
    fn reconfigure(&self, f: impl FnOnce(&mut State) -> Result<(), Errno>) -> Result<(), Errno> {
        let mut st = self.state();
        let was = st.enabled;
        if was {
            self.unbind(&mut st);
        }
        f(&mut st)?;
        if was {
            self.bind(&mut st)
        } else {
            Ok(())
        }
    }
}

/// The engine's overflow hook for the device's profile bindings. Async-signal-safe.
fn hook(ev: &OverflowEvent) {
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

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
//! everything that runs on the device's CPUs ([`Target::Cpu`](crate::Target::Cpu), one binding per CPU);
//! without the privilege to count a CPU (`perf_event_paranoid` above 0 without
//! `CAP_PERFMON`), it counts the calling process and its descendants instead, and says so once
//! on stderr. `PCNTLOGSELECT` counts the calling process (and the children it creates later,
//! on the perf backend) as [`Target::Process`](crate::Target::Process).
//!
//! **Default selection.** Until the program selects events (`PCNTSETMUX`, `PCNT5MUX`), the
//! counters count pfm(7)'s default selection (EV4 `PF_ISSUES`, `PF_DCACHE`). On perf a default
//! counter the host cannot count is left out when the device is enabled and reads 0 (the first
//! read says so once), so that enabling before selecting, as programs do, works; an event the
//! program selected that the host cannot count is `ENOENT` at the enable.
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
//!
//! # Files
//! Here the constants, the chips' event menus and the [`Device`]'s state; `table.rs` the
//! table of descriptors ([`open`], [`close`], [`with_fd`]); [`req`] the ioctl request numbers;
//! the device's methods by idea: `config.rs` (events, periods, modes), `enable.rs` (enable and disable),
//! `counts.rs` (reading and clearing the counts, the IPL histogram), `bind.rs` (the engine
//! bindings the configuration makes), `profile.rs` (the PC histogram and its overflow path).

// Per-slot and per-counter state lives in parallel arrays indexed by slot and counter number.
#![allow(clippy::needless_range_loop)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
use std::sync::Mutex;

use crate::backend::sim::{alpha, model::Model};
use crate::backend::Backend;
use crate::base::error::Error;
use crate::engine::Binding;

mod bind;
mod config;
mod counts;
mod enable;
mod profile;
pub mod req;
mod table;

pub use table::{any_open, close, open, open_count, with_fd, MAX_OPEN};

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
        .map(|e| e.name.as_str())
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
                v.push((e.name.as_str().into(), r.code.into()));
            }
        }
    }
    for c in 0..3u32 {
        for e in alpha::EV5.events {
            if let Some(r) = e.routes.iter().find(|r| r.counters == 1 << c) {
                v.push((ev5_selector_name(&e.name, c), pf5_mux(c, r.code)));
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
    /// Whether the program selected the events (`PCNTSETMUX`, `PCNT5MUX`); else they are
    /// pfm(7)'s default selection, of which the host may lack some.
    chosen: bool,
    /// Per counter: active but not counted by the last bind, because it is the default
    /// selection and the host cannot count its event (it reads 0).
    pending: [bool; 3],
    /// The read that found pending counters said so.
    pending_said: bool,
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

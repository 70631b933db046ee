//! A model of the kernel's `perf_event_open` interface: a test double.
//!
//! [`Model`] implements [`Kernel`] in process, as perf_event_open(2) documents the interface,
//! for a PMU with a fixed number of counters of a fixed width (48 bits by default). The real
//! perf backend runs over it ([`super::PerfBackend::with_kernel`]), which executes the paths
//! that need a hardware PMU (the `rdpmc` fast path, hardware overflow, multiplexing, full
//! groups) on hosts without one, such as our CI virtual machines. It is not a simulator of a
//! CPU: counts advance only when the test says that events happened ([`Model::advance`]), and
//! time only when it says so ([`Model::tick`]).
//!
//! What it models:
//!
//! * **Descriptors.** Each event is a real descriptor (a `memfd`), so that the backend owns and
//!   closes it as it would a perf descriptor; the model tells a live one from a closed one
//!   whose number was reused by its inode.
//! * **Opening.** Software events (`PERF_TYPE_SOFTWARE`) need no counter. Every other type
//!   needs one of the PMU's counters: without a PMU they fail with `ENOENT`; a group whose
//!   hardware events do not fit the counters fails with `EINVAL` when the member that does not
//!   fit is opened (the kernel's group validation; [`Config::group_check`] says whether a
//!   disabled leader is left out of it, as on arm64, where a group one over opens and never
//!   runs). [`Config::cycle_counter`] adds a counter only `cycles` can use (arm64's
//!   `PMCCNTR`); [`Config::armv8_pmuv3`] is that driver. Kernel-mode counting at
//!   `perf_event_paranoid` above 1, CPU-wide counting above 0 give `EACCES` (unless the model
//!   is privileged); a `pid` that does not exist gives `ESRCH`; a descriptor limit gives
//!   `EMFILE`; [`Model::refuse`] makes chosen events fail with a chosen errno, and
//!   [`Model::refuse_sampling`] makes sampling of an event fail with `EOPNOTSUPP`.
//! * **Scheduling.** A group counts while its leader (and the member) is enabled and the group
//!   is on the PMU. At every enable, disable and [`Model::tick`] the enabled groups are placed
//!   whole on the counters in round-robin order starting one further at each tick (the kernel's
//!   rotation); a group that does not fit waits, so `time_running < time_enabled`. Time
//!   passes at [`Model::tick`], and with [`Config::ioctl_ns`] at each enable and disable.
//! * **Reads.** `read()` gives the documented layouts: one value or, with `PERF_FORMAT_GROUP`,
//!   `nr` and a value per member, with the times, ids and lost counts the read format asks for;
//!   a buffer too small gives `ENOSPC`.
//! * **ioctls.** `ENABLE`, `DISABLE`, `RESET` (with `PERF_IOC_FLAG_GROUP`), `REFRESH`,
//!   `PERIOD` and `ID` (through a pointer: an address that is not mapped, such as a value
//!   passed by mistake, fails with `EFAULT` as the kernel's copy does), `SET_OUTPUT`.
//!   A new period takes effect at once: the next overflow comes that many events later, as
//!   measured on the running kernel for a disabled event.
//! * **Counters.** A counter on the PMU is a `width`-bit register. As the kernel does, the
//!   model programs it with minus the events left to the next interrupt (the sampling period,
//!   or at most `2^(width-1) - 1` for counting), takes an interrupt when it wraps through zero
//!   and reprograms it there; the 64-bit count is kept beside it.
//! * **The mmap'd page.** `mmap` of one page, or of one page and 2^n ring pages, gives a
//!   `struct perf_event_mmap_page` that the model keeps up to date under its `lock` sequence
//!   number: `index` (counter + 1 while the event is on a counter and user reads are allowed,
//!   else 0), `offset` (the count minus the sign-extended register), `pmc_width`,
//!   `cap_user_rdpmc`, `time_enabled` and `time_running`. [`Model::interfere`] makes the next
//!   `rdpmc` reads land in the middle of an update (the register and offset change and `lock`
//!   moves), as when an interrupt or a context switch comes between the reader's two reads of
//!   `lock`.
//! * **rdpmc.** [`Kernel::rdpmc`] reads the model's register: `width` bits, so the reader's
//!   sign extension is needed.
//! * **Overflow.** An event with a sampling period overflows every `period` events. With
//!   `O_ASYNC` and an owner set (`F_SETOWN_EX`), the model sends the owner thread the signal
//!   set with `F_SETSIG` as the kernel does: `si_code` `POLL_IN`, `si_band`, `si_fd`
//!   (`rt_tgsigqueueinfo`; sending a kernel-style siginfo is only allowed to the calling
//!   thread, so to another thread the descriptor travels in `si_value` with `SI_QUEUE`). The
//!   signal comes [`Config::skid`] events after the overflow (0: at it): [`Model::advance`]
//!   stops there, sends it without holding its lock (the handler re-enters the model) and then
//!   counts the rest of the events, which are lost if the handler stopped the group. `IOC_REFRESH` limits the overflows; at the limit
//!   the event is disabled and the signal carries `POLL_HUP`. With a ring buffer mapped (its
//!   own or the `SET_OUTPUT` target's), each overflow also writes a `PERF_RECORD_SAMPLE` with
//!   the fields `sample_type` asks for (`IDENTIFIER`, `IP`, `TID`, `TIME`, `ID`, `STREAM_ID`,
//!   `CPU`, `PERIOD`, `READ` in the group or single read format; other bits fail with
//!   `EINVAL` at open), the values as they were at the overflow.
//!
//! The model is for tests: it takes a mutex, which the backend's sample path does not (the
//! backend's async-signal-safety is not what this exercises); it never takes it while sending
//! a signal, so a handler that re-enters it does not deadlock.
//!
//! # Files
//! Here the configuration, the state and the tests' controls ([`Model::advance`], [`Model::tick`],
//! [`Model::refuse`], ...); `pmu.rs` the PMU at work (events, time, the groups placed on the
//! counters), `record.rs` what the kernel writes for the backend (the user page, overflow records,
//! `read()` layouts), `calls.rs` the system calls ([`Kernel`](super::kernel::Kernel) for [`Model`]).

use std::sync::{Mutex, MutexGuard};

use perf_event_open_sys::bindings::{self as b, perf_event_attr, perf_event_mmap_page};

use super::names::PerfCode;

mod calls;
mod pmu;
mod record;

const PAGE: usize = 4096;

/// The `sample_type` bits the model writes into its sample records (others fail with `EINVAL`).
pub const SAMPLE_TYPES: u64 = (b::PERF_SAMPLE_IDENTIFIER
    | b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_ID
    | b::PERF_SAMPLE_STREAM_ID
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD
    | b::PERF_SAMPLE_READ) as u64;

/// How the modelled PMU and kernel are configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Whether there is a hardware PMU; without one, every non-software event fails with
    /// `ENOENT`.
    pub pmu: bool,
    /// Hardware counters.
    pub counters: usize,
    /// Counter width in bits (`pmc_width`), 2 to 64.
    pub width: u32,
    /// Whether user space may read the counters (`cap_user_rdpmc`; the x86 `rdpmc` sysfs knob).
    pub user_rdpmc: bool,
    /// `perf_event_paranoid`.
    pub paranoid: i32,
    /// Whether the caller has `CAP_PERFMON` (paranoid checks do not apply).
    pub privileged: bool,
    /// Most descriptors open at once (`EMFILE` beyond).
    pub max_fds: usize,
    /// Most pages of user mappings at once (`EPERM` beyond: the mlock allowance).
    pub max_mapped_pages: usize,
    /// CPUs (`cpu` must be below; `EINVAL` otherwise).
    pub cpus: i32,
    /// Events that happen between an overflow and its signal (counted by the group, as the
    /// delivery of the signal lets them be). The sample record is still written at the
    /// overflow: a PMU's own skid, which makes the interrupt itself (and so the record) late,
    /// is not modelled.
    pub skid: u64,
    /// Whether `use_clockid` is known (Linux 4.1 and later); `EINVAL` for it otherwise.
    pub use_clockid: bool,
    /// Whether the PMU has, besides [`Config::counters`], a dedicated cycle counter that only
    /// `cycles` (`PERF_COUNT_HW_CPU_CYCLES`) can use (arm64's `PMCCNTR`). It is counter
    /// number `counters` in the model; a `cycles` event takes it when it is free, else a
    /// general counter.
    pub cycle_counter: bool,
    /// How the kernel checks a group's hardware members at open ([`GroupCheck`]).
    pub group_check: GroupCheck,
    /// Nanoseconds that pass at each `PERF_EVENT_IOC_ENABLE` and `_DISABLE` (accounted as
    /// [`Model::tick`] accounts them, without rotating the groups): on a real kernel time
    /// passes between an enable and the next read. 0 (the default): time passes only at
    /// [`Model::tick`].
    pub ioctl_ns: u64,
}

/// How `perf_event_open` checks that a group's hardware members fit the PMU (the driver's
/// group validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCheck {
    /// Every hardware member counts, disabled or not: the member that does not fit fails with
    /// `EINVAL` (x86).
    AllMembers,
    /// Disabled members (a leader opened disabled) are left out of the check, as arm64's
    /// `armv8_pmuv3` driver does: a group one member over the PMU opens, and then never runs
    /// (`time_running` stays 0 while `time_enabled` grows); one more member fails with
    /// `EINVAL`.
    EnabledOnly,
}

impl Default for Config {
    /// A PMU with 4 counters of 48 bits that user space may read, paranoid 2, unprivileged,
    /// no skid.
    fn default() -> Config {
        Config {
            pmu: true,
            counters: 4,
            width: 48,
            user_rdpmc: true,
            paranoid: 2,
            privileged: false,
            max_fds: 1024,
            max_mapped_pages: 1 << 20,
            cpus: 2,
            skid: 0,
            use_clockid: true,
            cycle_counter: false,
            group_check: GroupCheck::AllMembers,
            ioctl_ns: 0,
        }
    }
}

impl Config {
    /// Linux 6.1's `armv8_pmuv3` driver as seen in a QEMU arm64 guest (`-cpu max`): 6 general
    /// event counters and the dedicated cycle counter, 64 bits wide (`config1` bits 0 and 1),
    /// groups checked without their disabled leader, time passing between an enable and the
    /// next read. `instructions` is there (the guest with `-icount`); [`Model::refuse`] takes
    /// it away as the guest without `-icount` does.
    pub fn armv8_pmuv3() -> Config {
        Config {
            counters: 6,
            width: 64,
            cycle_counter: true,
            group_check: GroupCheck::EnabledOnly,
            ioctl_ns: 1000,
            ..Config::default()
        }
    }
}

/// Whether `code` is `cycles`, the one event the dedicated cycle counter takes.
fn is_cycles(code: PerfCode) -> bool {
    code.type_ == b::PERF_TYPE_HARDWARE && code.config == b::PERF_COUNT_HW_CPU_CYCLES as u64
}

/// Whether hardware events with these codes fit `general` free general counters and, with
/// `cycle_free`, the free cycle counter.
fn fits(codes: &[PerfCode], general: usize, cycle_free: bool) -> bool {
    let cycles = codes.iter().filter(|c| is_cycles(**c)).count();
    let others = codes.len() - cycles;
    others <= general && codes.len() <= general + usize::from(cycle_free)
}

/// What one overflow left in the model's log ([`Model::overflows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    /// The descriptor of the event that overflowed.
    pub fd: i32,
    /// Its 64-bit count at the overflow.
    pub count: u64,
    /// The signal sent (0: none, no owner or no `O_ASYNC`).
    pub signal: i32,
    /// The thread it was sent to.
    pub tid: i32,
}

struct Event {
    fd: i32,
    ino: u64,
    code: PerfCode,
    attr: perf_event_attr,
    leader: i32,
    id: u64,
    hardware: bool,
    enabled: bool,
    count: u64,
    enabled_ns: u64,
    running_ns: u64,
    // Sampling: period (0: counting only) and events left to the next overflow.
    period: u64,
    left: u64,
    overflows: u64,
    limit: Option<u64>,
    // Signal routing (fcntl).
    async_: bool,
    sig: i32,
    owner: i32,
    // On the PMU: the counter and its register.
    counter: Option<usize>,
    hw: u64,
    page: *mut perf_event_mmap_page,
    map_len: usize,
    output: Option<i32>,
}

struct State {
    events: Vec<Event>,
    next_id: u64,
    rotation: usize,
    refused: Vec<(PerfCode, i32)>,
    no_sampling: Vec<PerfCode>,
    interfere: u32,
    rdpmc_reads: u64,
    reads: u64,
    log: Vec<Overflow>,
    mapped_pages: usize,
    now_ns: u64,
}

// SAFETY: the page pointers are the model's own mappings, only touched under the mutex.
unsafe impl Send for State {}

/// The model kernel (see the [module documentation](self)).
pub struct Model {
    cfg: Config,
    state: Mutex<State>,
}

/// A signal to send once the lock is released.
struct Pending {
    sig: i32,
    tid: i32,
    fd: i32,
    code: i32,
}

const POLL_IN: i32 = 1;
const POLL_HUP: i32 = 6;
const F_SETSIG: i32 = 10;
const F_SETOWN_EX: i32 = 15;
const F_OWNER_TID: i32 = 0;
const F_OWNER_PID: i32 = 1;

fn sext(v: u64, width: u32) -> i64 {
    let s = 64 - width;
    ((v << s) as i64) >> s
}

fn is_hardware(code: PerfCode) -> bool {
    code.type_ != b::PERF_TYPE_SOFTWARE
}

impl Model {
    /// A model configured by `cfg`.
    pub fn new(cfg: Config) -> Model {
        assert!((2..=64).contains(&cfg.width), "counter width 2..=64");
        Model {
            cfg,
            state: Mutex::new(State {
                events: Vec::new(),
                next_id: 1,
                rotation: 0,
                refused: Vec::new(),
                no_sampling: Vec::new(),
                interfere: 0,
                rdpmc_reads: 0,
                reads: 0,
                log: Vec::new(),
                mapped_pages: 0,
                now_ns: 0,
            }),
        }
    }

    /// A model leaked for the life of the process, as [`super::PerfBackend::with_kernel`]
    /// wants it.
    pub fn leak(cfg: Config) -> &'static Model {
        Box::leak(Box::new(Model::new(cfg)))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mask(&self) -> u64 {
        if self.cfg.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.cfg.width) - 1
        }
    }

    /// The largest number of events the kernel lets a counter run before an interrupt.
    fn max_period(&self) -> u64 {
        (1u64 << (self.cfg.width - 1)) - 1
    }

    /// Make opening the event `code` fail with `errno`.
    pub fn refuse(&self, code: PerfCode, errno: i32) {
        self.lock().refused.push((code, errno));
    }

    /// Make opening the event `code` with a sampling period fail with `EOPNOTSUPP`.
    pub fn refuse_sampling(&self, code: PerfCode) {
        self.lock().no_sampling.push(code);
    }

    /// Make the next `n` `rdpmc` reads come in the middle of an update of the page.
    pub fn interfere(&self, n: u32) {
        self.lock().interfere = n;
    }

    /// `rdpmc` reads so far.
    pub fn rdpmc_reads(&self) -> u64 {
        self.lock().rdpmc_reads
    }

    /// Pages of user mappings now (event pages and rings).
    pub fn mapped_pages(&self) -> usize {
        self.lock().mapped_pages
    }

    /// Events opened so far (`perf_event_open` calls that succeeded), closed ones included.
    pub fn opened(&self) -> u64 {
        self.lock().next_id - 1
    }

    /// `read()` calls so far.
    pub fn reads(&self) -> u64 {
        self.lock().reads
    }

    /// Every overflow so far, in order.
    pub fn overflows(&self) -> Vec<Overflow> {
        self.lock().log.clone()
    }

    /// Descriptors of the live events counting `code`, in the order they were opened.
    pub fn fds(&self, code: PerfCode) -> Vec<i32> {
        let mut st = self.lock();
        self.purge(&mut st);
        st.events
            .iter()
            .filter(|e| e.code == code)
            .map(|e| e.fd)
            .collect()
    }

    /// The live event `fd`'s 64-bit count, its hardware counter and its register, if it is on
    /// one.
    pub fn event(&self, fd: i32) -> Option<(u64, Option<(usize, u64)>)> {
        let st = self.lock();
        let e = st.events.iter().find(|e| e.fd == fd)?;
        Some((e.count, e.counter.map(|c| (c, e.hw))))
    }

    /// The attribute the event `fd` was opened with.
    pub fn attr(&self, fd: i32) -> Option<perf_event_attr> {
        self.lock()
            .events
            .iter()
            .find(|e| e.fd == fd)
            .map(|e| e.attr)
    }

    /// Live events.
    pub fn open_events(&self) -> usize {
        let mut st = self.lock();
        self.purge(&mut st);
        st.events.len()
    }
}

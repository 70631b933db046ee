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

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr;
use std::sync::{Mutex, MutexGuard};

use perf_event_open_sys::bindings::{self as b, perf_event_attr, perf_event_mmap_page};

use super::kernel::Kernel;
use super::names::PerfCode;

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

    /// `n` events of kind `code` happen: every event counting `code` that is enabled, whose
    /// leader is enabled and whose group is on the PMU counts them. Overflows signal at the
    /// exact event (see the [module documentation](self)).
    pub fn advance(&self, code: PerfCode, n: u64) {
        self.advance_where(n, |e| e.code == code);
    }

    /// `n` events happen for the event `fd` alone.
    pub fn advance_fd(&self, fd: i32, n: u64) {
        self.advance_where(n, |e| e.fd == fd);
    }

    fn advance_where(&self, mut n: u64, sel: impl Fn(&Event) -> bool) {
        // Signals of overflows not yet delivered, with the events still to come before they
        // are (the skid).
        let mut queued: Vec<(u64, Pending)> = Vec::new();
        while n > 0 {
            let due;
            {
                let mut st = self.lock();
                self.purge(&mut st);
                let counting: Vec<usize> = (0..st.events.len())
                    .filter(|&i| sel(&st.events[i]) && self.counts(&st, i))
                    .collect();
                if counting.is_empty() {
                    break;
                }
                // The largest step that crosses no interrupt, no overflow and no delivery.
                let mut step = queued.iter().fold(n, |s, (d, _)| s.min(*d));
                for &i in &counting {
                    let e = &st.events[i];
                    if e.period != 0 {
                        step = step.min(e.left);
                    }
                    if e.counter.is_some() {
                        step = step.min(self.to_interrupt(e.hw));
                    }
                }
                let mask = self.mask();
                let mut overflowed = Vec::new();
                for &i in &counting {
                    let e = &mut st.events[i];
                    e.count = e.count.wrapping_add(step);
                    let mut interrupt = false;
                    if e.counter.is_some() {
                        e.hw = e.hw.wrapping_add(step) & mask;
                        interrupt = e.hw == 0;
                    }
                    if e.period != 0 {
                        e.left -= step;
                        if e.left == 0 {
                            e.left = e.period;
                            overflowed.push(i);
                            interrupt = true;
                        }
                    }
                    if interrupt && e.counter.is_some() {
                        self.program(e);
                    }
                }
                n -= step;
                for q in &mut queued {
                    q.0 -= step;
                }
                for i in overflowed {
                    if let Some(p) = self.overflow(&mut st, i) {
                        queued.push((self.cfg.skid, p));
                    }
                }
                for i in 0..st.events.len() {
                    self.sync_page(&st, i);
                }
                let (now, later) = queued.into_iter().partition(|(d, _)| *d == 0);
                (due, queued) = (now, later);
            }
            // Without the lock: the handler re-enters the model.
            for (_, p) in due {
                send(&p);
            }
        }
        // The rest come when the thread returns to user space.
        for (_, p) in queued {
            send(&p);
        }
    }

    /// `ns` nanoseconds pass: enabled events accumulate `time_enabled`, those on the PMU
    /// `time_running`; then the groups rotate.
    pub fn tick(&self, ns: u64) {
        let mut st = self.lock();
        self.purge(&mut st);
        self.pass(&mut st, ns);
        st.rotation += 1;
        self.schedule(&mut st);
    }

    /// `ns` nanoseconds pass: enabled events accumulate `time_enabled`, those on the PMU
    /// `time_running`.
    fn pass(&self, st: &mut State, ns: u64) {
        st.now_ns += ns;
        for i in 0..st.events.len() {
            if self.enabled(st, i) {
                let running = self.on_pmu(st, i);
                let e = &mut st.events[i];
                e.enabled_ns += ns;
                if running {
                    e.running_ns += ns;
                }
            }
        }
        for i in 0..st.events.len() {
            self.sync_page(st, i);
        }
    }

    /// Events until the register wraps through zero.
    fn to_interrupt(&self, hw: u64) -> u64 {
        (self.mask() - hw).wrapping_add(1) & self.mask()
    }

    /// Program the register of an event on a counter with minus the events to its next
    /// interrupt (the kernel's x86 scheme).
    fn program(&self, e: &mut Event) {
        let left = if e.period != 0 { e.left } else { u64::MAX };
        let left = left.min(self.max_period()).max(1);
        e.hw = left.wrapping_neg() & self.mask();
    }

    fn index(&self, st: &State, fd: i32) -> Option<usize> {
        st.events.iter().position(|e| e.fd == fd)
    }

    /// Forget the events whose descriptors were closed.
    fn purge(&self, st: &mut State) {
        let before = st.events.len();
        // A page still mapped when its descriptor is closed stays mapped (as in the kernel).
        st.events.retain(|e| inode(e.fd) == Some(e.ino));
        if st.events.len() != before {
            self.schedule(st);
        }
    }

    fn leader_of(&self, st: &State, i: usize) -> Option<usize> {
        self.index(st, st.events[i].leader)
    }

    fn enabled(&self, st: &State, i: usize) -> bool {
        st.events[i].enabled && self.leader_of(st, i).is_some_and(|l| st.events[l].enabled)
    }

    /// Whether event `i`'s group is on the PMU: every enabled hardware member has a counter
    /// (groups are scheduled whole; one without hardware members always is).
    fn on_pmu(&self, st: &State, i: usize) -> bool {
        let leader = st.events[i].leader;
        st.events
            .iter()
            .filter(|e| e.leader == leader && e.hardware && e.enabled)
            .all(|e| e.counter.is_some())
    }

    fn counts(&self, st: &State, i: usize) -> bool {
        self.enabled(st, i) && self.on_pmu(st, i)
    }

    /// Place the enabled groups on the counters, round-robin from the rotation point.
    fn schedule(&self, st: &mut State) {
        let leaders: Vec<i32> = st
            .events
            .iter()
            .filter(|e| e.leader == e.fd && e.enabled)
            .map(|e| e.fd)
            .collect();
        let mut assigned: Vec<(i32, usize)> = Vec::new();
        let mut free: Vec<usize> = (0..self.cfg.counters).collect();
        // The dedicated cycle counter (number `counters`), while free.
        let mut cycle_free = self.cfg.cycle_counter;
        let k = leaders.len();
        for j in 0..k {
            let l = leaders[(st.rotation + j) % k];
            let members: Vec<usize> = (0..st.events.len())
                .filter(|&i| {
                    st.events[i].leader == l && st.events[i].hardware && st.events[i].enabled
                })
                .collect();
            let codes: Vec<PerfCode> = members.iter().map(|&m| st.events[m].code).collect();
            if fits(&codes, free.len(), cycle_free) {
                // As the driver does: `cycles` takes the cycle counter while it is free, the
                // rest the general counters in order.
                for &m in &members {
                    let c = if cycle_free && is_cycles(st.events[m].code) {
                        cycle_free = false;
                        self.cfg.counters
                    } else {
                        free.remove(0)
                    };
                    assigned.push((st.events[m].fd, c));
                }
            }
        }
        for i in 0..st.events.len() {
            let new = assigned
                .iter()
                .find(|(fd, _)| *fd == st.events[i].fd)
                .map(|(_, c)| *c);
            let e = &mut st.events[i];
            if e.counter != new {
                e.counter = new;
                if new.is_some() {
                    self.program(e);
                }
            }
            self.sync_page(st, i);
        }
    }

    /// Rewrite event `i`'s user page under its sequence lock.
    fn sync_page(&self, st: &State, i: usize) {
        let e = &st.events[i];
        if e.page.is_null() {
            return;
        }
        let running = self.on_pmu(st, i) && self.enabled(st, i);
        let p = e.page;
        // SAFETY: the model's own live mapping of at least one page.
        unsafe {
            let lock = ptr::read_volatile(&(*p).lock);
            ptr::write_volatile(&mut (*p).lock, lock.wrapping_add(1));
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            let rdpmc = e.hardware && self.cfg.user_rdpmc;
            let (index, offset) = match e.counter {
                Some(c) if rdpmc && running => (
                    c as u32 + 1,
                    e.count.wrapping_sub(sext(e.hw, self.cfg.width) as u64) as i64,
                ),
                _ => (0, e.count as i64),
            };
            ptr::write_volatile(&mut (*p).index, index);
            ptr::write_volatile(&mut (*p).offset, offset);
            ptr::write_volatile(&mut (*p).time_enabled, e.enabled_ns);
            ptr::write_volatile(&mut (*p).time_running, e.running_ns);
            // Bit 1: cap_bit0_is_deprecated; bit 2: cap_user_rdpmc.
            let caps = 1u64 << 1 | u64::from(rdpmc) << 2;
            ptr::write_volatile(&mut (*p).__bindgen_anon_1.capabilities, caps);
            ptr::write_volatile(
                &mut (*p).pmc_width,
                if e.hardware { self.cfg.width as u16 } else { 0 },
            );
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            ptr::write_volatile(&mut (*p).lock, lock.wrapping_add(2));
        }
    }

    /// Record event `i`'s overflow: the sample record, the refresh limit, the signal to send.
    fn overflow(&self, st: &mut State, i: usize) -> Option<Pending> {
        st.events[i].overflows += 1;
        let mut code = POLL_IN;
        if let Some(l) = st.events[i].limit.as_mut() {
            *l = l.saturating_sub(1);
            if *l == 0 {
                st.events[i].limit = None;
                st.events[i].enabled = false;
                code = POLL_HUP;
            }
        }
        self.write_sample(st, i);
        let e = &st.events[i];
        let wakeup = u64::from(unsafe_wakeup_events(&e.attr)).max(1);
        let deliver = e.async_ && e.owner != 0 && e.overflows % wakeup == 0;
        let sig = if deliver {
            if e.sig != 0 {
                e.sig
            } else {
                libc::SIGIO
            }
        } else {
            0
        };
        let (fd, count, owner) = (e.fd, e.count, e.owner);
        st.log.push(Overflow {
            fd,
            count,
            signal: sig,
            tid: owner,
        });
        if code == POLL_HUP {
            self.schedule(st);
        }
        (sig != 0).then_some(Pending {
            sig,
            tid: owner,
            fd,
            code,
        })
    }

    /// The read-format words of event `i` (its group's, with `PERF_FORMAT_GROUP`).
    fn read_words(&self, st: &State, i: usize, out: &mut Vec<u64>) {
        let e = &st.events[i];
        let f = e.attr.read_format;
        let times = |out: &mut Vec<u64>, l: &Event| {
            if f & b::PERF_FORMAT_TOTAL_TIME_ENABLED as u64 != 0 {
                out.push(l.enabled_ns);
            }
            if f & b::PERF_FORMAT_TOTAL_TIME_RUNNING as u64 != 0 {
                out.push(l.running_ns);
            }
        };
        let id_lost = |out: &mut Vec<u64>, m: &Event| {
            if f & b::PERF_FORMAT_ID as u64 != 0 {
                out.push(m.id);
            }
            if f & b::PERF_FORMAT_LOST as u64 != 0 {
                out.push(0);
            }
        };
        if f & b::PERF_FORMAT_GROUP as u64 != 0 {
            let l = self.leader_of(st, i).unwrap_or(i);
            let members: Vec<&Event> = st
                .events
                .iter()
                .filter(|m| m.leader == st.events[l].fd)
                .collect();
            out.push(members.len() as u64);
            times(out, &st.events[l]);
            for m in members {
                out.push(m.count);
                id_lost(out, m);
            }
        } else {
            out.push(e.count);
            times(out, e);
            id_lost(out, e);
        }
    }

    /// Append a `PERF_RECORD_SAMPLE` for event `i` to its ring buffer (or its `SET_OUTPUT`
    /// target's), if one is mapped.
    fn write_sample(&self, st: &State, i: usize) {
        let e = &st.events[i];
        let ring = match e.output {
            Some(fd) => self.index(st, fd),
            None => Some(i),
        };
        let Some(r) = ring else { return };
        let re = &st.events[r];
        if re.page.is_null() || re.map_len <= PAGE {
            return;
        }
        let t = e.attr.sample_type;
        let mut w: Vec<u64> = Vec::new();
        if t & b::PERF_SAMPLE_IDENTIFIER as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_IP as u64 != 0 {
            w.push(0);
        }
        if t & b::PERF_SAMPLE_TID as u64 != 0 {
            // SAFETY: plain system calls.
            let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid) as i32) };
            w.push(pid as u32 as u64 | (tid as u32 as u64) << 32);
        }
        if t & b::PERF_SAMPLE_TIME as u64 != 0 {
            // With use_clockid, the clock asked for; else the model's own time.
            w.push(if e.attr.use_clockid() != 0 {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: writes into `ts`.
                unsafe { libc::clock_gettime(e.attr.clockid, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            } else {
                st.now_ns
            });
        }
        if t & b::PERF_SAMPLE_ID as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_STREAM_ID as u64 != 0 {
            w.push(e.id);
        }
        if t & b::PERF_SAMPLE_CPU as u64 != 0 {
            w.push(0);
        }
        if t & b::PERF_SAMPLE_PERIOD as u64 != 0 {
            w.push(e.period);
        }
        if t & b::PERF_SAMPLE_READ as u64 != 0 {
            self.read_words(st, i, &mut w);
        }
        let size = 8 + 8 * w.len();
        let header = b::PERF_RECORD_SAMPLE as u64
            | (b::PERF_RECORD_MISC_USER as u64) << 32
            | (size as u64) << 48;
        let p = re.page;
        let data = re.map_len - PAGE;
        // SAFETY: the model's own mapping: `PAGE` header bytes then `data` ring bytes.
        unsafe {
            let head = ptr::read_volatile(&(*p).data_head);
            let tail = ptr::read_volatile(&(*p).data_tail);
            if head.wrapping_sub(tail) as usize + size > data {
                return;
            }
            let base = (p as *mut u8).add(PAGE);
            let mut at = head as usize;
            for word in std::iter::once(header).chain(w) {
                for (k, byte) in word.to_ne_bytes().into_iter().enumerate() {
                    ptr::write_volatile(base.add((at + k) % data), byte);
                }
                at += 8;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            ptr::write_volatile(&mut (*p).data_head, head + size as u64);
        }
    }

    fn check_open(
        &self,
        st: &State,
        attr: &perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<(), i32> {
        let code = PerfCode {
            type_: attr.type_,
            config: attr.config,
            // SAFETY: plain integers in unions.
            config1: unsafe { attr.__bindgen_anon_3.config1 },
            // SAFETY: as above.
            config2: unsafe { attr.__bindgen_anon_4.config2 },
        };
        if attr.size as usize != std::mem::size_of::<perf_event_attr>() {
            return Err(libc::E2BIG);
        }
        if pid == -1 && cpu == -1 {
            return Err(libc::EINVAL);
        }
        if cpu >= self.cfg.cpus || cpu < -1 {
            return Err(libc::EINVAL);
        }
        if let Some(&(_, errno)) = st.refused.iter().find(|(c, _)| *c == code) {
            return Err(errno);
        }
        match attr.type_ {
            b::PERF_TYPE_SOFTWARE if attr.config >= b::PERF_COUNT_SW_MAX as u64 => {
                return Err(libc::ENOENT)
            }
            b::PERF_TYPE_SOFTWARE => {}
            _ if !self.cfg.pmu => return Err(libc::ENOENT),
            b::PERF_TYPE_HARDWARE if attr.config >= b::PERF_COUNT_HW_MAX as u64 => {
                return Err(libc::EINVAL)
            }
            _ => {}
        }
        // SAFETY: a plain integer in a union.
        let sampling = unsafe { attr.__bindgen_anon_1.sample_period } != 0;
        if sampling && st.no_sampling.contains(&code) {
            return Err(libc::EOPNOTSUPP);
        }
        if attr.use_clockid() != 0 && !self.cfg.use_clockid {
            return Err(libc::EINVAL);
        }
        if attr.sample_type & !SAMPLE_TYPES != 0 || attr.read_format >= b::PERF_FORMAT_MAX as u64 {
            return Err(libc::EINVAL);
        }
        if !self.cfg.privileged {
            if pid == -1 && self.cfg.paranoid > 0 {
                return Err(libc::EACCES);
            }
            if attr.exclude_kernel() == 0 && self.cfg.paranoid > 1 {
                return Err(libc::EACCES);
            }
        }
        // SAFETY: kill with signal 0 only checks the target exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && last_errno() == libc::ESRCH {
            return Err(libc::ESRCH);
        }
        if st.events.len() >= self.cfg.max_fds {
            return Err(libc::EMFILE);
        }
        if group_fd != -1 {
            let Some(l) = self.index(st, group_fd) else {
                return Err(libc::EBADF);
            };
            if st.events[l].leader != group_fd {
                return Err(libc::EINVAL);
            }
            if is_hardware(code) {
                // The driver's group validation: the hardware members (and the new one) must
                // fit an empty PMU; with GroupCheck::EnabledOnly the disabled ones are left out.
                let checked = |enabled: bool| match self.cfg.group_check {
                    GroupCheck::AllMembers => true,
                    GroupCheck::EnabledOnly => enabled,
                };
                let mut codes: Vec<PerfCode> = st
                    .events
                    .iter()
                    .filter(|e| e.leader == group_fd && e.hardware && checked(e.enabled))
                    .map(|e| e.code)
                    .collect();
                if checked(attr.disabled() == 0) {
                    codes.push(code);
                }
                if !fits(&codes, self.cfg.counters, self.cfg.cycle_counter) {
                    return Err(libc::EINVAL);
                }
            }
        }
        Ok(())
    }
}

fn unsafe_wakeup_events(attr: &perf_event_attr) -> u32 {
    // SAFETY: a plain integer in a union.
    unsafe { attr.__bindgen_anon_2.wakeup_events }
}

/// Copy a `T` from (or, with `to_user`, to) address `addr` of this process, or fail with
/// `EFAULT` as the kernel's copy does when the address is not mapped (an integer passed where a
/// pointer was due).
fn copy_user<T: Copy>(addr: usize, val: &mut T, to_user: bool) -> Result<(), i32> {
    let len = std::mem::size_of::<T>();
    let local = libc::iovec {
        iov_base: (val as *mut T).cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: process_vm_readv/writev on our own process check the remote address and fail
    // with EFAULT where it is not mapped; the local one is `val`.
    let n = unsafe {
        if to_user {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    if n == len as isize {
        Ok(())
    } else {
        Err(libc::EFAULT)
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn inode(fd: i32) -> Option<u64> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into `st`.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded.
    Some(unsafe { st.assume_init() }.st_ino)
}

/// Send an overflow signal as the kernel's `send_sigio` does.
fn send(p: &Pending) {
    // SAFETY: a zeroed siginfo filled in field by field at the kernel's SIGPOLL layout:
    // si_signo, si_errno, si_code, then in the union `long si_band` and `int si_fd`.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let base = &mut info as *mut libc::siginfo_t as *mut u8;
        let union = (3 * 4usize).next_multiple_of(std::mem::align_of::<libc::c_long>());
        *(base as *mut i32) = p.sig;
        let me = libc::syscall(libc::SYS_gettid) as i32;
        if p.tid == me {
            *(base.add(8) as *mut i32) = p.code;
            let band = if p.code == POLL_HUP {
                libc::POLLHUP
            } else {
                libc::POLLIN | libc::POLLRDNORM
            };
            *(base.add(union) as *mut libc::c_long) = band as libc::c_long;
        } else {
            // Only the calling thread may be sent a kernel-style siginfo: SI_QUEUE, with the
            // descriptor where si_fd would be (si_value).
            *(base.add(8) as *mut i32) = libc::SI_QUEUE;
            *(base.add(union) as *mut i32) = libc::getpid();
        }
        *(base.add(union + std::mem::size_of::<libc::c_long>()) as *mut i32) = p.fd;
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            libc::getpid(),
            p.tid,
            p.sig,
            &info as *const libc::siginfo_t,
        );
    }
}

impl Kernel for Model {
    fn perf_event_open(
        &self,
        attr: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
        _flags: u64,
    ) -> Result<OwnedFd, i32> {
        let mut st = self.lock();
        self.purge(&mut st);
        self.check_open(&st, attr, pid, cpu, group_fd)?;
        // SAFETY: memfd_create with a static name.
        let raw = unsafe { libc::memfd_create(c"perf-model-event".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(last_errno());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let code = PerfCode {
            type_: attr.type_,
            config: attr.config,
            // SAFETY: plain integers in unions.
            config1: unsafe { attr.__bindgen_anon_3.config1 },
            // SAFETY: as above.
            config2: unsafe { attr.__bindgen_anon_4.config2 },
        };
        // SAFETY: a plain integer in a union (attr.freq is not modelled: periods only).
        let period = unsafe { attr.__bindgen_anon_1.sample_period };
        let id = st.next_id;
        st.next_id += 1;
        let leader = if group_fd == -1 { raw } else { group_fd };
        st.events.push(Event {
            fd: raw,
            ino: inode(raw).unwrap_or(0),
            code,
            attr: *attr,
            leader,
            id,
            hardware: is_hardware(code),
            enabled: attr.disabled() == 0,
            count: 0,
            enabled_ns: 0,
            running_ns: 0,
            period,
            left: period,
            overflows: 0,
            limit: None,
            async_: false,
            sig: 0,
            owner: 0,
            counter: None,
            hw: 0,
            page: ptr::null_mut(),
            map_len: 0,
            output: None,
        });
        self.schedule(&mut st);
        Ok(fd)
    }

    fn read(&self, fd: i32, buf: &mut [MaybeUninit<u64>]) -> Result<usize, i32> {
        let mut st = self.lock();
        st.reads += 1;
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let mut w = Vec::with_capacity(8);
        self.read_words(&st, i, &mut w);
        if w.len() > buf.len() {
            return Err(libc::ENOSPC);
        }
        for (o, v) in buf.iter_mut().zip(&w) {
            o.write(*v);
        }
        Ok(w.len() * 8)
    }

    fn ioctl(&self, fd: i32, request: u64, arg: usize) -> Result<i32, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let group = arg as u64 & b::PERF_IOC_FLAG_GROUP as u64 != 0;
        let targets: Vec<usize> = if group {
            let l = st.events[i].leader;
            (0..st.events.len())
                .filter(|&k| st.events[k].leader == l)
                .collect()
        } else {
            vec![i]
        };
        match request as u32 {
            b::ENABLE | b::DISABLE => {
                for k in targets {
                    st.events[k].enabled = request as u32 == b::ENABLE;
                }
                self.schedule(&mut st);
                if self.cfg.ioctl_ns != 0 {
                    self.pass(&mut st, self.cfg.ioctl_ns);
                }
            }
            b::RESET => {
                for k in targets {
                    let e = &mut st.events[k];
                    e.count = 0;
                    if e.counter.is_some() {
                        self.program(e);
                    }
                    self.sync_page(&st, k);
                }
            }
            b::REFRESH => {
                if arg == 0 || st.events[i].period == 0 {
                    return Err(libc::EINVAL);
                }
                let e = &mut st.events[i];
                e.limit = Some(e.limit.unwrap_or(0) + arg as u64);
                e.enabled = true;
                self.schedule(&mut st);
            }
            b::PERIOD => {
                let mut p = 0u64;
                copy_user(arg, &mut p, false)?;
                let e = &mut st.events[i];
                if p == 0 || e.period == 0 || p >> 63 != 0 {
                    return Err(libc::EINVAL);
                }
                e.period = p;
                e.left = p;
                if e.counter.is_some() {
                    self.program(e);
                }
                self.sync_page(&st, i);
            }
            b::ID => {
                let mut id = st.events[i].id;
                copy_user(arg, &mut id, true)?;
            }
            b::SET_OUTPUT => {
                let target = arg as i32;
                if target == -1 {
                    st.events[i].output = None;
                } else {
                    self.index(&st, target).ok_or(libc::EBADF)?;
                    st.events[i].output = Some(target);
                }
            }
            _ => return Err(libc::ENOTTY),
        }
        Ok(0)
    }

    fn fcntl(&self, fd: i32, cmd: i32, arg: usize) -> Result<i32, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let e = &mut st.events[i];
        match cmd {
            libc::F_SETFL => e.async_ = arg as i32 & libc::O_ASYNC != 0,
            F_SETSIG => {
                if arg as i32 > libc::SIGRTMAX() {
                    return Err(libc::EINVAL);
                }
                e.sig = arg as i32;
            }
            F_SETOWN_EX => {
                let mut owner = [0i32; 2];
                copy_user(arg, &mut owner, false)?;
                let [kind, pid] = owner;
                match kind {
                    F_OWNER_TID | F_OWNER_PID => e.owner = pid,
                    _ => return Err(libc::EINVAL),
                }
            }
            libc::F_SETOWN => e.owner = arg as i32,
            _ => return Err(libc::EINVAL),
        }
        Ok(0)
    }

    fn mmap(&self, fd: i32, len: usize, prot: i32, flags: i32) -> Result<*mut c_void, i32> {
        let mut st = self.lock();
        let i = self.index(&st, fd).ok_or(libc::EBADF)?;
        let pages = len / PAGE;
        if len % PAGE != 0 || pages == 0 || !(pages - 1).is_power_of_two() && pages != 1 {
            return Err(libc::EINVAL);
        }
        if flags & libc::MAP_SHARED == 0 || prot & libc::PROT_EXEC != 0 {
            return Err(libc::EINVAL);
        }
        if !st.events[i].page.is_null() {
            return Err(libc::EINVAL);
        }
        if st.mapped_pages + pages > self.cfg.max_mapped_pages {
            return Err(libc::EPERM);
        }
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        let page = p as *mut perf_event_mmap_page;
        // SAFETY: the fresh mapping holds at least one page.
        unsafe {
            (*page).data_offset = if pages > 1 { PAGE as u64 } else { 0 };
            (*page).data_size = ((pages - 1) * PAGE) as u64;
        }
        st.mapped_pages += pages;
        let e = &mut st.events[i];
        e.page = page;
        e.map_len = len;
        self.sync_page(&st, i);
        Ok(p)
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> Result<(), i32> {
        let mut st = self.lock();
        let Some(i) = st.events.iter().position(|e| e.page as *mut c_void == addr) else {
            return Err(libc::EINVAL);
        };
        if st.events[i].map_len != len {
            return Err(libc::EINVAL);
        }
        st.events[i].page = ptr::null_mut();
        st.events[i].map_len = 0;
        st.mapped_pages -= len / PAGE;
        // SAFETY: the model's own mapping, forgotten above.
        unsafe { libc::munmap(addr, len) };
        Ok(())
    }

    fn rdpmc(&self, counter: u32) -> u64 {
        let mut st = self.lock();
        st.rdpmc_reads += 1;
        let Some(i) = st
            .events
            .iter()
            .position(|e| e.counter == Some(counter as usize))
        else {
            // A counter nobody uses reads as whatever it last held: 0 here.
            return 0;
        };
        if st.interfere > 0 {
            st.interfere -= 1;
            // An interrupt between the reader's reads of `lock`: the register is reprogrammed
            // and the offset moves with it.
            let e = &mut st.events[i];
            e.hw = if e.hw == self.mask() {
                self.mask() - 1
            } else {
                self.mask()
            };
            self.sync_page(&st, i);
        }
        st.events[i].hw
    }

    fn perf_event_paranoid(&self) -> i32 {
        self.cfg.paranoid
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for e in &st.events {
            if !e.page.is_null() {
                // SAFETY: the model's own mapping.
                unsafe { libc::munmap(e.page.cast(), e.map_len) };
            }
        }
    }
}

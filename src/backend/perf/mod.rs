//! The Linux `perf_event_open` backend.
//!
//! One kernel group per bound set (per thread of the target, for process binds), so that all
//! requests count over the same interval; read in one `read()` with
//! `PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID`. On a thread bound to
//! itself with a hardware PMU that allows it (`cap_user_rdpmc`), counts are read from the mmap
//! page instead, with no system call: `rdpmc` on x86-64, an `mrs` of the counter's register on
//! arm64 (where `kernel::LINUX` asks for the user access with `config1` bit 1).
//!
//! Overflow: a request that notifies is opened as a sampling event whose period is the distance
//! from its virtual value to the wrap; the kernel sends [`crate::base::sys::overflow_signal`] to the
//! owning thread (`F_SETSIG`, `F_SETOWN_EX` with `F_OWNER_TID`), the engine's handler freezes
//! the group (disabling the leader stops every member) and restart re-arms with
//! `PERF_EVENT_IOC_PERIOD` while the group is disabled, which makes the next overflow come
//! exactly that many events after re-enabling (measured on software events).
//!
//! Counters: on a host with a hardware PMU the backend measures the PMU's counters once, when
//! first asked (`host::probe_counters`: the largest group of one event the kernel accepts and
//! schedules, for a general event, `cycles` and `instructions`), and describes them as they
//! are: `cpc_npic` is their number, each request may be placed on the counters its event can
//! use (`cycles`: all, the dedicated ones too; `instructions`: the general ones and its own
//! fixed counter where there is one; every other hardware, cache, raw or sysfs event: the
//! general ones), so the scheduler refuses at bind a set the PMU cannot hold, naming the
//! counters, instead of binding a group that never runs (arm64 accepts one group member too
//! many at open and never schedules the group). Software events need no counter: they may take
//! any counter, or one of the slots numbered from [`NO_COUNTER`] up, which stand for no
//! hardware, so they do not count against `cpc_npic` (see `sched`). An event the PMU lacks is
//! refused when it is checked (`cpc_set_add_request`): hardware, cache, raw and sysfs events
//! are opened once for the check (the answer kept per event code), and `ENOENT` or
//! `EOPNOTSUPP` says the PMU does not have it. Without a PMU, or when the measurement could
//! not tell, the backend offers [`VIRTUAL_COUNTERS`] counters any event can use, as before.
//!
//! The measurement is about 20 `perf_event_open`s and their closes, most of a first use
//! (issue 48: 0.4 M of its 0.7 M instructions in the arm64 guest), so it waits until a question
//! needs it: `cpc_npic`, a request pinned to a counter from [`FIT_UNMEASURED`] up (`picnum`),
//! the description, or a set of more than [`FIT_UNMEASURED`] requests. A set of at most that
//! many, pinned (if at all) below it, is placed on the provisional virtual counters
//! ([`Backend::fits_unmeasured`]): every PMU the kernel drives has at least two counters any
//! event can use (x86: two general ones and more, arm64's PMUv3 cores six event counters and
//! the cycle counter), numbered first, so such a set always fits as asked, and the measurement
//! would only have confirmed it (libperfex's pair on counters 0 and 1, cputrack's
//! `cycles,instructions`). A busy PMU is as below. The measurement runs on a thread of the
//! library's own made for it, so counters the calling thread's own bound groups hold are
//! counted as the PMU's: a `cpc_npic` first asked while the thread counts `cycles` and
//! `instructions` says 7 on QEMU's PMU, as before any bind (a `perfex` parent's inherited
//! events and the NMI watchdog's are not counted, as before).
//!
//! Why a group that does not run right after its bind is not refused: the only one that never
//! runs is one the PMU cannot hold, which the measured counters already refuse; on a busy PMU
//! (other users' events, a `perfex` parent's inherited ones, the NMI watchdog) a group that
//! does not fit at the enable runs at the kernel's next rotation, and refusing it would be
//! wrong.
//!
//! Without a hardware PMU (virtual machines) only software events open. `cycles` then falls back
//! to CPU time multiplied by the nominal clock, said once on stderr and in the backend's notes;
//! `PERFCOMPAT_CYCLES_FALLBACK=0` turns that off. Every other hardware event is an error naming
//! the event and the reason.

use std::any::Any;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use perf_event_open_sys as sys;
use sys::bindings::{self as b, perf_event_attr};

use crate::backend::{
    Backend, BackendInfo, BackendKind, CounterInfo, EventInfo, Group, Shape, Substitute,
};
use crate::base::error::{Error, Result};
use crate::base::eventmap::EventMap;
use crate::base::sched::{Candidate, Slot};
use crate::base::set::{Request, Target, MAX_REQUESTS};

mod group;
mod host;
mod kept;
pub mod kernel;
#[cfg(any(test, feature = "kernel-model"))]
pub mod model;
pub mod names;
mod rdpmc;
mod ring;

use group::{period, Unit};
pub use group::{DirectRead, PerfGroup};
pub(crate) use host::nominal_mhz;
use host::{cpu_model, thread_countable};
pub use host::{probe, probe_with, HostCaps, PmuCounters};
pub use rdpmc::UserPage;

use kept::Kept;
use kernel::Kernel;

use names::{Class, PerfCode, PerfEvent};

/// Virtual counters the perf backend reports without a hardware PMU (or when measuring the
/// PMU's could not tell): any event can use any of them, so this is only the largest set the
/// backend accepts.
pub const VIRTUAL_COUNTERS: usize = 16;

/// [`host::probe_counters`] on a thread of the library's own, created for it: the counters
/// measured are then those a thread of this process can have, whatever the calling thread
/// holds. Measured in the calling thread, a measurement first made while that thread counts
/// `cycles` and `instructions` in a bound group found 2 counters fewer (5 of QEMU's 7): the
/// thread's own group holds them. The new thread inherits no libcpc set and no libperfex
/// counters ([`crate::base::sys::create_internal_thread`]); where no thread can be created the
/// calling thread measures.
fn measure_counters(kernel: &'static dyn Kernel) -> Option<PmuCounters> {
    let spawned = crate::base::sys::create_internal_thread(|| {
        std::thread::Builder::new()
            .name("perfcompat-probe".into())
            .stack_size(64 * 1024)
            .spawn(move || host::probe_counters(kernel).ok())
    });
    match spawned.map(|h| h.join()) {
        Ok(Ok(counters)) => counters,
        _ => host::probe_counters(kernel).ok(),
    }
}

/// The most requests a set may hold to be placed without the PMU's counters measured, and the
/// counters they may be pinned to (`0..FIT_UNMEASURED`; see the [module documentation](self)):
/// two, the fewest counters any event can use on a PMU the kernel drives.
pub const FIT_UNMEASURED: usize = 2;

/// The first of the slots that stand for no hardware counter, which software events take on a
/// host with a PMU (one per request: as many as a set may hold). Above every real counter: the
/// walkers' masks are 64 bits.
pub const NO_COUNTER: u32 = 64;

/// The perf backend.
///
/// Making one costs two `perf_event_open`s (can this thread count; is there a PMU). What
/// binding a set does not need is looked up on first use: the rest of [`HostCaps`]
/// (`perf_event_paranoid`, the clock from the calibration cache, cpufreq or `/proc/cpuinfo`),
/// the [`BackendInfo`] (the CPU's name, the notes) and `PERFCOMPAT_CYCLES_FALLBACK`. A
/// program's first counting (`cpc_open` and its first bind, libperfex's first
/// `start_counters`) is what `bash benches/run` times as first use.
pub struct PerfBackend {
    kernel: &'static dyn Kernel,
    /// A hardware PMU answers (probed when made).
    pmu: bool,
    caps: OnceLock<HostCaps>,
    info: OnceLock<BackendInfo>,
    cycles_fallback: OnceLock<bool>,
    /// `PERFCOMPAT_STANDIN=1` (read on first use).
    standin: OnceLock<bool>,
    /// The PMU's counters, measured when first asked (`None`: no PMU, or the measurement
    /// could not tell; [`VIRTUAL_COUNTERS`] then).
    counters: OnceLock<Option<PmuCounters>>,
    /// Whether each hardware, cache, raw or sysfs event opens here: its errno, 0 when it does
    /// (PMU hosts only; filled as events are checked). A list, looked through: a program
    /// checks a handful of events, and a `HashMap`'s random keys cost a first use a
    /// `getrandom` system call and the hash table's code pages (issue 48).
    opens: Mutex<Vec<(PerfCode, i32)>>,
    /// The counters the probe and the checks opened, kept for the bind that follows (see
    /// `kept`).
    kept: Mutex<Kept>,
    // The kernel is the host's (`new`), not a model: groups make their reads inline
    // ([`DirectRead`]).
    host: bool,
}

pub(super) fn open_attr(
    kernel: &dyn Kernel,
    attr: &mut perf_event_attr,
    pid: i32,
    cpu: i32,
    group: i32,
) -> std::result::Result<OwnedFd, i32> {
    kernel.perf_event_open(attr, pid, cpu, group, b::PERF_FLAG_FD_CLOEXEC as u64)
}

/// The attributes of a member of a set's group before what overflow adds: event `code`,
/// counting in the modes of `flags`, `leader` (opened disabled: the group starts at its
/// enable), with `read_format`, inherited by new threads if `inherit`. The bind's members and
/// the counters the checks keep for it (`kept::check_attr`) are both made here, so that a
/// kept counter is the bind's exactly.
pub(super) fn member_attr(
    code: PerfCode,
    flags: crate::base::set::RequestFlags,
    leader: bool,
    read_format: u64,
    inherit: bool,
) -> perf_event_attr {
    let mut a = attr_for(code);
    a.read_format = read_format;
    a.set_disabled(u64::from(leader));
    a.set_inherit(u64::from(inherit));
    a.set_exclude_user(u64::from(!flags.user));
    a.set_exclude_kernel(u64::from(!flags.system));
    a.set_exclude_hv(u64::from(!flags.hypervisor));
    a
}

/// How [`PerfBackend::open_or_check`] opens a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// For counting: the group programmed and returned.
    Count,
    /// Only to know whether it opens ([`Backend::check_open`]): each member opened as for
    /// counting, with the same attributes and the same errors, and closed again (not moved up,
    /// see [`Kernel::perf_event_probe`]); no signal routing, pages, ids or start.
    Check,
}

pub(super) fn attr_for(code: PerfCode) -> perf_event_attr {
    let mut a = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        type_: code.type_,
        config: code.config,
        ..Default::default()
    };
    a.__bindgen_anon_3.config1 = code.config1;
    a.__bindgen_anon_4.config2 = code.config2;
    a
}

impl PerfBackend {
    /// Probe the host and describe it.
    pub fn new() -> Result<PerfBackend> {
        let mut b = PerfBackend::with_kernel(&kernel::LINUX)?;
        b.host = true;
        Ok(b)
    }

    /// The backend over a given kernel interface (the kernel model, `model::Model`, in the
    /// tests), probed through it as [`PerfBackend::new`] probes the host.
    pub fn with_kernel(kernel: &'static dyn Kernel) -> Result<PerfBackend> {
        // The probe opens `cycles` as the check of an event opens it: its answer is kept, and
        // the counter for a bind (see `kept`).
        let mut kept = Kept::default();
        let cycles = kept.check(kernel, crate::base::sys::gettid(), host::pmu_probe_code());
        let pmu = host::probe_counting(kernel, cycles)?;
        let opens = if pmu {
            vec![(host::pmu_probe_code(), 0)]
        } else {
            Vec::new()
        };
        Ok(PerfBackend {
            kernel,
            pmu,
            caps: OnceLock::new(),
            info: OnceLock::new(),
            cycles_fallback: OnceLock::new(),
            standin: OnceLock::new(),
            counters: OnceLock::new(),
            opens: Mutex::new(opens),
            kept: Mutex::new(kept),
            host: false,
        })
    }

    /// The backend over a given kernel interface with given host capabilities, not probed
    /// (`PERFCOMPAT_CYCLES_FALLBACK` is honoured as in [`PerfBackend::new`]).
    pub fn with_caps(kernel: &'static dyn Kernel, caps: HostCaps) -> Result<PerfBackend> {
        Ok(PerfBackend {
            kernel,
            pmu: caps.pmu,
            caps: OnceLock::from(caps),
            info: OnceLock::new(),
            cycles_fallback: OnceLock::new(),
            standin: OnceLock::new(),
            counters: OnceLock::new(),
            opens: Mutex::new(Vec::new()),
            kept: Mutex::new(Kept::default()),
            host: false,
        })
    }

    /// What the probe found (the paranoid level and the clock are looked up on the first call).
    pub fn caps(&self) -> &HostCaps {
        self.caps
            .get_or_init(|| host::rest_of_caps(self.kernel, self.pmu))
    }

    /// The PMU's counters, measured on the first call (`host::probe_counters`: once per
    /// backend, about 40-50 system calls); `None` without a PMU or when the measurement could
    /// not tell, where the backend offers [`VIRTUAL_COUNTERS`].
    pub fn pmu_counters(&self) -> Option<PmuCounters> {
        if !self.pmu {
            return None;
        }
        *self.counters.get_or_init(|| measure_counters(self.kernel))
    }

    /// The PMU's counters if they are known without measuring them: `Some(None)` without a
    /// PMU, `None` while a PMU's are not measured yet.
    fn counters_known(&self) -> Option<Option<PmuCounters>> {
        if !self.pmu {
            return Some(None);
        }
        self.counters.get().copied()
    }

    /// The counters an event of `class` and `code` may be placed on (see the [module
    /// documentation](self)).
    fn slots_for(&self, class: Class, code: PerfCode) -> Vec<u32> {
        self.slots_on(self.pmu_counters(), class, code)
    }

    /// [`PerfBackend::slots_for`] on `counters` (`None`: the virtual ones).
    fn slots_on(&self, counters: Option<PmuCounters>, class: Class, code: PerfCode) -> Vec<u32> {
        let Some(c) = counters else {
            return (0..VIRTUAL_COUNTERS as u32).collect();
        };
        let general = 0..c.general as u32;
        let cycles = general.end..general.end + c.cycles_only as u32;
        let instructions = cycles.end..c.total() as u32;
        let hardware = |config: u32| class == Class::Hardware && code.config == u64::from(config);
        if class == Class::Software {
            // The slots that stand for no counter first: the real ones are there for `picnum`.
            (NO_COUNTER..NO_COUNTER + MAX_REQUESTS as u32)
                .chain(0..c.total() as u32)
                .collect()
        } else if hardware(b::PERF_COUNT_HW_CPU_CYCLES) {
            general.chain(cycles).collect()
        } else if hardware(b::PERF_COUNT_HW_INSTRUCTIONS) {
            general.chain(instructions).collect()
        } else {
            general.collect()
        }
    }

    /// [`Backend::candidate`], its places on the PMU's counters measured if `measure` (else
    /// as far as they are known: [`Backend::candidate_unmeasured`]).
    fn candidate_on(&self, req: &Request, measure: bool) -> Result<Candidate> {
        let (ev, fallback) = self.resolve(&req.event)?;
        // The kernel's clocks count the thread's whole CPU time whatever the exclude bits say
        // (measured: task-clock with exclude_user reads what it reads without), so a request
        // for system time alone would count user time too (issue 45 item 2): refused.
        if is_clock(ev.code) && req.flags.system && !req.flags.user {
            let what = if fallback.is_some() {
                format!(
                    "'{}' is estimated from task-clock here (no PMU), and ",
                    ev.name
                )
            } else {
                String::new()
            };
            return Err(Error::ModeNotCountable {
                event: req.event.clone(),
                reason: format!(
                    "{what}the kernel's clocks count user and system time together, whatever \
                     the mode asked; count user and system mode together \
                     (CPC_COUNT_USER | CPC_COUNT_SYSTEM)"
                ),
            });
        }
        if let Some(a) = req.attrs.first() {
            return Err(Error::InvalidAttribute {
                name: a.name.clone(),
                backend: BackendKind::Perf.to_string(),
            });
        }
        if let Some(reason) = self.lacks(ev.class, ev.code, &ev.name, true) {
            return Err(Error::EventUnavailable {
                event: req.event.clone(),
                reason,
            });
        }
        let counters = if measure {
            self.pmu_counters()
        } else {
            self.counters_known().flatten()
        };
        let places = self.slots_on(counters, ev.class, ev.code);
        // Sized once: a filtered iterator's collect grew the vector three times (issue 48).
        let mut slots = Vec::with_capacity(places.len());
        slots.extend(
            places
                .into_iter()
                .filter(|c| req.counter.is_none_or(|p| p == *c))
                .map(|counter| Slot {
                    counter,
                    resource: None,
                    tag: 0,
                }),
        );
        Ok(Candidate {
            name: req.event.clone(),
            slots,
        })
    }

    /// The walkers' mask of [`PerfBackend::slots_for`]: the real counters only.
    fn mask_for(&self, class: Class, code: PerfCode) -> u64 {
        self.slots_for(class, code)
            .into_iter()
            .filter(|&c| c < 64)
            .fold(0, |m, c| m | 1 << c)
    }

    /// Why the PMU does not have an event of `class` and `code`: on a host with a PMU a
    /// hardware, cache, raw or sysfs event is opened once (user mode, disabled, the calling
    /// thread; the answer kept per code), and `ENOENT` or `EOPNOTSUPP` say the PMU lacks it.
    /// Other refusals (permissions, say) are left to the bind, which explains them. The check
    /// of a request (`keep`) keeps the counter it opened for the bind that follows (see
    /// `kept`); other questions (the lists of events) close it at once.
    fn lacks(&self, class: Class, code: PerfCode, name: &str, keep: bool) -> Option<String> {
        if !self.pmu || class == Class::Software {
            return None;
        }
        let errno = {
            let mut opens = self.opens.lock().unwrap_or_else(|p| p.into_inner());
            match opens.iter().find(|(c, _)| *c == code) {
                Some(&(_, e)) => e,
                None => {
                    let e = if keep {
                        let tid = crate::base::sys::gettid();
                        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
                        kept.check(self.kernel, tid, code)
                    } else {
                        host::open_errno(self.kernel, code)
                    };
                    opens.push((code, e));
                    e
                }
            }
        };
        let errno_name = match errno {
            libc::ENOENT => "ENOENT",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            _ => return None,
        };
        Some(format!(
            "the kernel does not support this event on this PMU (perf_event_open of {name} \
             answers {errno_name})"
        ))
    }

    /// Whether `cycles` is estimated from CPU time: no PMU, and `PERFCOMPAT_CYCLES_FALLBACK`
    /// is not `0` (read on the first call).
    fn cycles_fallback(&self) -> bool {
        !self.pmu
            && *self.cycles_fallback.get_or_init(|| {
                crate::base::sys::env_var(CYCLES_FALLBACK_VAR).is_none_or(|v| v.trim() != "0")
            })
    }

    /// The description: the CPU's name, the notes.
    fn describe(&self) -> BackendInfo {
        let caps = self.caps();
        let mut notes = Vec::new();
        let description = if caps.pmu {
            format!("Linux perf_event on {}", cpu_model())
        } else {
            notes.push(
                "no hardware PMU (the kernel answers ENOENT for hardware events, as in a VM \
                 without PMU passthrough): only software events can be counted"
                    .to_string(),
            );
            format!(
                "Linux perf_event, software events only (no PMU) on {}",
                cpu_model()
            )
        };
        if let Some(c) = self.pmu_counters() {
            notes.push(format!(
                "the PMU's counters, as measured: {} that every hardware event can use, {} only \
                 'cycles' can use, {} only 'instructions' can use",
                c.general, c.cycles_only, c.instructions_only
            ));
        }
        if self.cycles_fallback() {
            notes.push(format!(
                "'cycles' is estimated as CPU time x {:.0} MHz ({}); the CPU time is user and \
                 system time, whatever the mode asked",
                caps.mhz, caps.clock_source
            ));
        }
        if self.standin() {
            notes.push(format!(
                "{STANDIN_VAR}=1: hardware events are counted as software stand-ins \
                 (page-faults for misses, task-clock for work), flagged in the reports"
            ));
        }
        if !caps.root && caps.paranoid >= 2 {
            notes.push(format!(
                "perf_event_paranoid is {}: only user-mode counting of your own threads is \
                 allowed; context-switches and cpu-migrations read 0 in user mode",
                caps.paranoid
            ));
        }
        let shape = self.shape();
        BackendInfo {
            kind: shape.kind,
            description,
            reference: "See perf_event_open(2) and perf-list(1): events are perf's generic names \
                        (cycles, instructions, L1-dcache-load-misses, task-clock, page-faults, \
                        ...), raw codes r<hex>, and the PMU aliases under \
                        /sys/bus/event_source/devices/*/events"
                .into(),
            counters: vec![CounterInfo { width: 64 }; shape.counters],
            overflow_interrupt: shape.overflow_interrupt,
            overflow_precise: shape.overflow_precise,
            attributes: Vec::new(),
            notes,
        }
    }

    /// Resolve an event spec (alias, R10000 number, perf name) to a perf event, with the scale
    /// to apply to its counts (the `cycles` fallback).
    pub fn resolve(&self, spec: &str) -> Result<(PerfEvent, Option<f64>)> {
        self.resolve_telling(spec, true)
            .map(|(ev, scale, _)| (ev, scale))
    }

    /// Whether software stand-ins replace the hardware events a host without a PMU cannot
    /// count: `PERFCOMPAT_STANDIN=1` (read on the first call).
    fn standin(&self) -> bool {
        !self.pmu
            && *self.standin.get_or_init(|| {
                crate::base::sys::env_var(STANDIN_VAR).is_some_and(|v| v.trim() == "1")
            })
    }

    /// [`PerfBackend::resolve`], with what the count is when it is not the event itself;
    /// `notice`: say once that `cycles` is estimated, or that stand-ins are counted.
    fn resolve_telling(
        &self,
        spec: &str,
        notice: bool,
    ) -> Result<(PerfEvent, Option<f64>, Option<Substitute>)> {
        let map = EventMap::global();
        let mut s = spec;
        for _ in 0..8 {
            match map.alias(s) {
                Some(x) => s = x,
                None => break,
            }
        }
        if let Ok(n) = s.parse::<u32>() {
            s = map.host_spec(n)?;
        }
        if let Some(g) = names::generic(s) {
            s = g;
        }
        let ev = names::parse(s, Path::new(names::SYSFS))?;
        let needs_pmu = matches!(ev.class, Class::Hardware | Class::Cache | Class::Raw);
        if needs_pmu && !self.pmu {
            if self.cycles_fallback()
                && ev.class == Class::Hardware
                && ev.code.config == b::PERF_COUNT_HW_CPU_CYCLES as u64
            {
                let caps = self.caps();
                if notice {
                    fallback_notice(caps.mhz, caps.clock_source);
                }
                let tc = PerfEvent {
                    name: "cycles".into(),
                    code: PerfCode::new(b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64),
                    class: Class::Software,
                    scale: None,
                    unit: None,
                };
                let estimate = Substitute::Estimate {
                    from: "task-clock".into(),
                };
                return Ok((tc, Some(caps.mhz / 1000.0), Some(estimate)));
            }
            let standin = standin_for(&ev);
            if let (Some(sw), true) = (standin, self.standin()) {
                if notice {
                    standin_notice();
                }
                let stood = names::parse(sw, Path::new(names::SYSFS))?;
                let sub = Substitute::StandIn {
                    event: stood.name.clone(),
                    stands_for: ev.name,
                };
                return Ok((stood, None, Some(sub)));
            }
            return Err(Error::EventUnavailable {
                event: spec.to_string(),
                reason: no_pmu_fix(spec, &ev.name, standin),
            });
        }
        Ok((ev, None, None))
    }

    /// The counters `name` (a perf event name) can be counted on here (`None`: it cannot),
    /// without the one-time notice that resolving `cycles` through its fallback prints.
    fn countable(&self, name: &str) -> Option<u64> {
        let ev = names::parse(name, Path::new(names::SYSFS)).ok()?;
        let ok = match ev.class {
            Class::Hardware | Class::Cache | Class::Raw if !self.pmu => {
                (self.cycles_fallback()
                    && ev.class == Class::Hardware
                    && ev.code.config == b::PERF_COUNT_HW_CPU_CYCLES as u64)
                    || (self.standin() && standin_for(&ev).is_some())
            }
            _ => self.lacks(ev.class, ev.code, &ev.name, false).is_none(),
        };
        ok.then(|| self.mask_for(ev.class, ev.code))
    }

    fn explain_open(&self, errno: i32, event: &str, req: &Request, target: Target) -> Error {
        match errno {
            libc::ENOENT | libc::EOPNOTSUPP if !self.pmu => Error::EventUnavailable {
                event: event.into(),
                reason: "this host has no hardware PMU".into(),
            },
            libc::ENOENT | libc::EOPNOTSUPP => Error::EventUnavailable {
                event: event.into(),
                reason: "the kernel does not support this event (or its overflow sampling) on \
                         this PMU"
                    .into(),
            },
            libc::EACCES | libc::EPERM => {
                let what = match target {
                    Target::Cpu(c) => format!("counting everything on CPU {c}"),
                    Target::Process(pid) => format!("counting process {pid}"),
                    Target::Thread(tid) => format!("counting thread {tid}"),
                    _ if req.flags.system => format!("counting '{event}' in kernel mode"),
                    _ => format!("counting '{event}'"),
                };
                let p = self.caps().paranoid;
                Error::PermissionDenied {
                    what,
                    fix: format!(
                        "perf_event_paranoid is {p}: kernel-mode counting needs it at 1 or \
                         below, CPU-wide counting at 0 or below, other users' processes need \
                         CAP_PERFMON or root (or lower /proc/sys/kernel/perf_event_paranoid)"
                    ),
                }
            }
            libc::ESRCH => Error::NoSuchProcess(match target {
                Target::Process(p) | Target::Thread(p) => p,
                _ => 0,
            }),
            libc::ENODEV | libc::EINVAL if matches!(target, Target::Cpu(_)) => {
                Error::NoSuchCpu(match target {
                    Target::Cpu(c) => c,
                    _ => 0,
                })
            }
            libc::EMFILE | libc::ENFILE => Error::Os {
                op: "perf_event_open (out of file descriptors: raise ulimit -n)",
                errno,
            },
            libc::EINVAL => Error::EventUnavailable {
                event: event.into(),
                reason: "the kernel rejected it (EINVAL): invalid encoding, or more hardware \
                         events than the PMU has counters"
                    .into(),
            },
            _ => Error::Os {
                op: "perf_event_open",
                errno,
            },
        }
    }
}

/// The variable that turns the software stand-ins on (see [`standin_for`]).
pub const STANDIN_VAR: &str = "PERFCOMPAT_STANDIN";
crate::base::sys::env_name! { const CYCLES_FALLBACK_VAR = "PERFCOMPAT_CYCLES_FALLBACK"; }

/// The software event that stands for hardware event `ev` on a host without a PMU when
/// `PERFCOMPAT_STANDIN=1` (issue 46 item 1), `None` for an event of unknown nature (raw codes,
/// PMU aliases).
///
/// The decision: a stand-in is a software event of a similar nature, never the event itself,
/// and every report flags it. A miss of any kind (a cache, a TLB, a branch prediction) stands
/// as `page-faults`, the misses the kernel itself serves for the program; an amount of work
/// (instructions, branches, loads, stores, cache references, cycles of any kind) as
/// `task-clock`, the CPU time the work took in nanoseconds. `cycles` is not here: the
/// estimate (`PERFCOMPAT_CYCLES_FALLBACK`) covers it, and with the estimate off it is work.
pub fn standin_for(ev: &PerfEvent) -> Option<&'static str> {
    const WORK: &str = "task-clock";
    const MISS: &str = "page-faults";
    match ev.class {
        Class::Hardware => {
            let c = ev.code.config;
            let miss = c == u64::from(b::PERF_COUNT_HW_CACHE_MISSES)
                || c == u64::from(b::PERF_COUNT_HW_BRANCH_MISSES);
            Some(if miss { MISS } else { WORK })
        }
        Class::Cache => {
            let result = (ev.code.config >> 16) & 0xff;
            Some(if result == u64::from(b::PERF_COUNT_HW_CACHE_RESULT_MISS) {
                MISS
            } else {
                WORK
            })
        }
        _ => None,
    }
}

/// Why `spec` (perf event `name`) cannot be counted on a host without a PMU, with the fixes in
/// the same line (issue 46 item 1): the map line that counts a stand-in for it, the built-in
/// stand-ins, and where the events that count are listed.
fn no_pmu_fix(spec: &str, name: &str, standin: Option<&str>) -> String {
    let is = if name == spec {
        format!("'{name}' is a hardware event and ")
    } else {
        format!("'{spec}' is {name}, a hardware event, and ")
    };
    let line = match standin {
        Some(sw) if crate::base::eventmap::valid_key(spec) => format!(
            "to count a software stand-in, put the line '{spec} = {sw}' in a PERFCOMPAT_EVENTS \
             file, or set {STANDIN_VAR}=1 for the built-in stand-ins (reports flag them)"
        ),
        Some(_) => {
            format!("to count a software stand-in, set {STANDIN_VAR}=1 (reports flag stand-ins)")
        }
        None => "to count something else, map it to a software event in a PERFCOMPAT_EVENTS \
                 file"
            .to_string(),
    };
    format!(
        "{is}this host has no hardware PMU (the kernel answers ENOENT for hardware events, as \
         in a VM without PMU passthrough); {line}; `perfex -l` lists what counts here"
    )
}

fn standin_notice() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        crate::stderr_line!(
            "perfcompat: no hardware PMU on this host; {STANDIN_VAR}=1: hardware events are \
             counted as software stand-ins (page-faults for misses, task-clock for work), not \
             as themselves (`perfex -l` shows each)"
        );
    }
}

fn fallback_notice(mhz: f64, source: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        crate::stderr_line!(
            "perfcompat: no hardware PMU on this host; 'cycles' is estimated as CPU time (user \
             and system) x {mhz:.0} MHz, {source} (set PERFCOMPAT_CYCLES_FALLBACK=0 to refuse it \
             instead)"
        );
    }
}

fn task_ids(pid: i32) -> Result<Vec<i32>> {
    let d =
        std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|_| Error::NoSuchProcess(pid))?;
    let mut v: Vec<i32> = d
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    if v.is_empty() {
        return Err(Error::NoSuchProcess(pid));
    }
    Ok(v)
}

impl Backend for PerfBackend {
    fn info(&self) -> &BackendInfo {
        self.info.get_or_init(|| self.describe())
    }

    /// The perf event `spec` resolves to (`cycles` estimated from the task clock, a stand-in,
    /// named so), unless `spec` is that event's own name.
    fn counted_name(&self, spec: &str) -> Option<String> {
        let (ev, _, sub) = self.resolve_telling(spec, false).ok()?;
        let name = match sub {
            // The task clock cannot leave the kernel out (issue 46 item 4).
            Some(Substitute::Estimate { from }) => {
                format!("{} est. from {from}, user+sys", ev.name)
            }
            Some(Substitute::StandIn { event, stands_for }) => {
                format!("{event} STAND-IN for {stands_for}")
            }
            None => ev.name,
        };
        (name != spec).then_some(name)
    }

    fn substitute(&self, spec: &str) -> Option<Substitute> {
        self.resolve_telling(spec, false).ok()?.2
    }

    /// A spec the perf backend cannot parse, or whose name it does not know, is refused; one
    /// it knows but cannot count here (a PMU alias of another machine) is kept, and counting
    /// it says why.
    fn check_map_spec(&self, spec: &str) -> Result<()> {
        if let Ok(n) = spec.parse::<u32>() {
            return match crate::base::eventmap::r10k_event(n) {
                Some(_) => Ok(()),
                None => Err(Error::UnknownEvent {
                    event: spec.into(),
                    backend: "R10000 event table (events are 0-31)".into(),
                }),
            };
        }
        if names::generic(spec).is_some() {
            return Ok(());
        }
        match names::parse(spec, Path::new(names::SYSFS)) {
            Ok(_) | Err(Error::EventUnavailable { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn shape(&self) -> Shape<'_> {
        Shape {
            kind: BackendKind::Perf,
            counters: self.pmu_counters().map_or(VIRTUAL_COUNTERS, |c| c.total()),
            overflow_interrupt: true,
            overflow_precise: true,
            attributes: &[],
        }
    }

    fn shape_unmeasured(&self) -> Shape<'_> {
        Shape {
            counters: self
                .counters_known()
                .flatten()
                .map_or(VIRTUAL_COUNTERS, |c| c.total()),
            kind: BackendKind::Perf,
            overflow_interrupt: true,
            overflow_precise: true,
            attributes: &[],
        }
    }

    fn release_kept(&self) {
        self.kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(self.kernel);
    }

    fn fits_unmeasured(&self, requests: &[Request]) -> bool {
        self.counters_known().is_none()
            && requests.len() <= FIT_UNMEASURED
            && requests
                .iter()
                .all(|r| r.counter.is_none_or(|c| (c as usize) < FIT_UNMEASURED))
    }

    fn events(&self) -> Vec<EventInfo> {
        let mut v = Vec::new();
        for bi in names::builtins() {
            // `dummy` always counts 0 (it exists for side-band records): not worth listing.
            if bi.class == Class::Software && bi.code.config == b::PERF_COUNT_SW_DUMMY as u64 {
                continue;
            }
            let hw = matches!(bi.class, Class::Hardware);
            let usable = if self.pmu {
                self.lacks(bi.class, bi.code, &bi.name, false).is_none()
            } else {
                !hw || self.standin()
                    || (self.cycles_fallback()
                        && bi.code.config == b::PERF_COUNT_HW_CPU_CYCLES as u64)
            };
            if usable {
                v.push(EventInfo {
                    name: bi.name.to_string(),
                    counters: self.mask_for(bi.class, bi.code),
                    generic: false,
                    description: bi.description.to_string(),
                });
            }
        }
        if self.pmu {
            for (name, code) in names::cache_events() {
                if self.lacks(Class::Cache, code, &name, false).is_some() {
                    continue;
                }
                v.push(EventInfo {
                    name,
                    counters: self.mask_for(Class::Cache, code),
                    generic: false,
                    description: "hardware cache event".into(),
                });
            }
        }
        for e in names::sysfs_events(Path::new(names::SYSFS)) {
            // Only what a thread can count in user mode: CPU-wide-only PMUs (power, uncore)
            // and msr (no mode filtering) cannot be bound the way libcpc binds by default.
            if matches!(e.class, Class::Pmu) && thread_countable(self.kernel, e.code) {
                v.push(EventInfo {
                    counters: self.mask_for(e.class, e.code),
                    name: e.name,
                    generic: false,
                    description: "PMU event alias from sysfs".into(),
                });
            }
        }
        for (name, perf, description) in &names::GENERICS {
            if let Some(counters) = self.countable(perf) {
                v.push(EventInfo {
                    name: name.to_string(),
                    counters,
                    generic: true,
                    description: format!("{description} ({perf})"),
                });
            }
        }
        for (name, spec) in EventMap::global().aliases() {
            let Ok((ev, _)) = self.resolve(spec) else {
                continue;
            };
            if self.lacks(ev.class, ev.code, &ev.name, false).is_none() {
                v.push(EventInfo {
                    name: name.to_string(),
                    counters: self.mask_for(ev.class, ev.code),
                    generic: false,
                    description: format!("alias for {spec} (PERFCOMPAT_EVENTS)"),
                });
            }
        }
        v
    }

    fn candidate(&self, req: &Request) -> Result<Candidate> {
        self.candidate_on(req, true)
    }

    fn candidate_unmeasured(&self, req: &Request) -> Result<Candidate> {
        self.candidate_on(req, false)
    }

    fn open(&self, reqs: &[Request], slots: &[Slot], target: Target) -> Result<Box<dyn Group>> {
        // `Opening::Count` always gives the group.
        self.open_or_check(reqs, slots, target, Opening::Count)?
            .ok_or_else(|| Error::Unsupported("perf: no group opened for counting".into()))
    }

    fn check_open(&self, reqs: &[Request], slots: &[Slot], target: Target) -> Result<()> {
        self.open_or_check(reqs, slots, target, Opening::Check)
            .map(drop)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PerfBackend {
    /// [`Backend::open`] (`Opening::Count`: the group, `Some`), or only the opens that tell
    /// whether it would succeed and with which error (`Opening::Check`: `None`).
    fn open_or_check(
        &self,
        reqs: &[Request],
        _slots: &[Slot],
        target: Target,
        how: Opening,
    ) -> Result<Option<Box<dyn Group>>> {
        let mut resolved = Vec::with_capacity(reqs.len());
        let mut scale = [1.0f64; MAX_REQUESTS];
        for (i, r) in reqs.iter().enumerate() {
            let (ev, s) = self.resolve(&r.event)?;
            if let Some(s) = s {
                scale[i] = s;
            }
            resolved.push(ev);
        }
        // The clocks' shortest period on the host's kernel (see `group::STORM_FLOOR_NS`); the
        // `cycles` fallback is the task clock.
        let floor: [u64; MAX_REQUESTS] = std::array::from_fn(|i| match resolved.get(i) {
            Some(ev) if self.host && is_clock(ev.code) => group::STORM_FLOOR_NS,
            _ => 0,
        });
        let owner = crate::base::sys::gettid();
        let (places, inherit): (Vec<(i32, i32)>, bool) = match target {
            Target::CurrentThread => (vec![(0, -1)], false),
            Target::CurrentThreadInherit => (vec![(0, -1)], true),
            Target::Process(pid) => (task_ids(pid)?.into_iter().map(|t| (t, -1)).collect(), true),
            Target::Thread(tid) => (vec![(tid, -1)], false),
            Target::Cpu(c) => (vec![(-1, c as i32)], false),
        };
        let notify = reqs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.flags.notify_overflow)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        // A lone request is read without the group format (cheaper), unless it notifies: its
        // overflow record must hold the group.
        let single = reqs.len() == 1 && notify == 0;
        let group_format = kept::GROUP_FORMAT;
        let mut units = Vec::with_capacity(places.len());
        // Overflow records (ring.rs) where the kernel allows mapping: not for inherited
        // events. A kernel that refuses them (before 4.1, no use_clockid) opens the group
        // without: its freezes are then read after the signal.
        let want_records = notify != 0 && !inherit;
        // A bind of the calling thread takes the counters the checks kept, where they are its
        // members (see `kept`); the rest are closed before its group is used.
        // A bind of another target takes none, and closes them (they would be kept for
        // nothing).
        let mut kept = match how {
            Opening::Count => {
                let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
                let mut k = (!k.is_empty()).then(|| std::mem::take(&mut *k));
                if target != Target::CurrentThread {
                    if let Some(k) = k.as_mut() {
                        k.release(self.kernel);
                    }
                }
                k
            }
            Opening::Check => None,
        };
        for (pid, cpu) in places {
            // The event ids of the members taken from the kept counters (0: opened here).
            let mut kept_ids = [0u64; kept::KEPT];
            let mut open_members =
                |records: bool| -> std::result::Result<Vec<OwnedFd>, (i32, usize)> {
                    let mut fds: Vec<OwnedFd> = Vec::with_capacity(reqs.len());
                    for (i, (r, ev)) in reqs.iter().zip(&resolved).enumerate() {
                        let read_format = if single {
                            (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING)
                                as u64
                        } else {
                            group_format
                        };
                        let mut a = member_attr(ev.code, r.flags, i == 0, read_format, inherit);
                        if r.flags.notify_overflow {
                            a.__bindgen_anon_1.sample_period =
                                period(crate::base::virt::distance_to_wrap(r.preset), scale[i])
                                    .max(floor[i]);
                            a.__bindgen_anon_2.wakeup_events = 1;
                            if records {
                                // The kernel records the group at the overflow instant.
                                a.sample_type = ring::SAMPLE_TYPE;
                            }
                        }
                        if records {
                            // The record's time is CLOCK_MONOTONIC, like the engine's; the kernel
                            // wants one clock for every member of a group.
                            a.set_use_clockid(1);
                            a.clockid = libc::CLOCK_MONOTONIC;
                        }
                        let group = fds.first().map_or(-1, |f| f.as_raw_fd());
                        if let Some(k) = kept.as_mut() {
                            match k.take(self.kernel, owner, i, &a) {
                                Some((fd, id)) => {
                                    if let Some(k) = kept_ids.get_mut(i) {
                                        *k = id;
                                    }
                                    fds.push(self.kernel.bound(fd, group));
                                    continue;
                                }
                                // The first member not kept: the counters kept after it leave the
                                // group before this one joins it.
                                None => k.release(self.kernel),
                            }
                        }
                        let fd = match how {
                            Opening::Count => open_attr(self.kernel, &mut a, pid, cpu, group),
                            Opening::Check => self.kernel.perf_event_probe(
                                &mut a,
                                pid,
                                cpu,
                                group,
                                b::PERF_FLAG_FD_CLOEXEC as u64,
                            ),
                        };
                        fds.push(fd.map_err(|e| (e, i))?);
                    }
                    Ok(fds)
                };
            let mut records = want_records;
            let opened = match open_members(records) {
                Err((libc::EINVAL, _)) if records => {
                    records = false;
                    open_members(false)
                }
                other => other,
            };
            if let Some(k) = kept.as_mut() {
                k.release(self.kernel);
            }
            let fds =
                opened.map_err(|(e, i)| self.explain_open(e, &reqs[i].event, &reqs[i], target))?;
            if how == Opening::Check {
                // The opens said yes: closed again (dropped) at once.
                continue;
            }
            for (fd, r) in fds.iter().zip(reqs) {
                if r.flags.notify_overflow {
                    // The signal's number is looked up only for a set that notifies.
                    let sig = crate::base::sys::overflow_signal();
                    setup_signal(self.kernel, fd, sig, owner)?;
                }
            }
            // A refused ring (mlock limits) leaves that request's freeze to a read after the
            // signal.
            let rings: Vec<(usize, ring::Ring)> = if !records {
                Vec::new()
            } else {
                reqs.iter()
                    .enumerate()
                    .filter(|(_, r)| r.flags.notify_overflow)
                    .filter_map(|(i, _)| Some((i, ring::Ring::map(self.kernel, &fds[i])?)))
                    .collect()
            };
            let mmaps = if target == Target::CurrentThread && self.pmu {
                // A declined fast path (see rdpmc::Declined) leaves the group to read(). A
                // member with a ring is read through the ring's first page (a perf fd maps
                // once per size).
                let premapped =
                    |i: usize| rings.iter().find(|(k, _)| *k == i).map(|(_, r)| r.page());
                rdpmc::Pages::map(self.kernel, &fds, reqs.len(), premapped).ok()
            } else {
                None
            };
            let ids = fds
                .iter()
                .enumerate()
                .map(|(i, f)| match kept_ids.get(i) {
                    Some(&id) if id != 0 => id,
                    _ => group::event_id(self.kernel, f.as_raw_fd()).unwrap_or(0),
                })
                .collect();
            units.push(Unit {
                fds,
                ids,
                mmaps,
                rings,
            });
        }
        if how == Opening::Check {
            return Ok(None);
        }
        let inline_read = self.host && units.len() == 1;
        let armed: [AtomicU64; MAX_REQUESTS] = std::array::from_fn(|i| {
            AtomicU64::new(match reqs.get(i) {
                Some(r) if notify & (1 << i) != 0 => {
                    period(crate::base::virt::distance_to_wrap(r.preset), scale[i]).max(floor[i])
                }
                _ => 0,
            })
        });
        // See `PerfGroup::reloads_whole`: the host's kernel, one unit, counting software events.
        let reloads_whole = if self.host && units.len() == 1 {
            resolved.iter().enumerate().fold(0u64, |m, (i, ev)| {
                let counting = ev.code.type_ == b::PERF_TYPE_SOFTWARE
                    && ev.code.config != u64::from(b::PERF_COUNT_SW_CPU_CLOCK)
                    && ev.code.config != u64::from(b::PERF_COUNT_SW_TASK_CLOCK)
                    && scale[i] == 1.0;
                if counting && notify & (1 << i) != 0 {
                    m | 1 << i
                } else {
                    m
                }
            })
        } else {
            0
        };
        // See `PerfGroup::runs_on` and `PerfGroup::self_stop`.
        let leader_records = reloads_whole & 1 != 0 && units[0].leader_ring().is_some();
        let runs_on = leader_records && target == Target::CurrentThread && reqs.len() == 1;
        let self_stop = leader_records
            && !runs_on
            && matches!(target, Target::CurrentThread | Target::Thread(_));
        // The storm guard (see `group::STORM_FLOOR_NS`): every other notifying request gets an
        // overflow limit of one at each start, and clocks a shortest period.
        let limited = if inherit || self_stop || runs_on {
            0
        } else {
            notify
        };
        // See `PerfGroup::reloads_at_wrap`: the host's hardware events, one unit.
        let hardware = |ev: &&PerfEvent| {
            matches!(
                ev.code.type_,
                b::PERF_TYPE_HARDWARE | b::PERF_TYPE_HW_CACHE | b::PERF_TYPE_RAW
            )
        };
        let reloads_at_wrap = if self.host && units.len() == 1 {
            resolved
                .iter()
                .enumerate()
                .filter(|(i, ev)| hardware(ev) && scale[*i] == 1.0)
                .fold(0u64, |m, (i, _)| m | 1 << i)
                & notify
        } else {
            0
        };
        // See `PerfGroup::stops_at_record`.
        let stops_at_record = reqs.len() == 1
            && limited & 1 != 0
            && reloads_at_wrap & 1 != 0
            && !reqs[0].flags.system
            && !reqs[0].flags.hypervisor
            && units[0].leader_ring().is_some()
            && matches!(target, Target::CurrentThread | Target::Thread(_));
        Ok(Some(Box::new(PerfGroup {
            kernel: self.kernel,
            inline_read,
            pollable: self.host,
            armed,
            reloads_whole,
            reloads_at_wrap,
            stops_at_record,
            untouched: AtomicU64::new(0),
            self_stop: AtomicBool::new(self_stop),
            runs_on,
            limit_spent: AtomicBool::new(true),
            limited: AtomicU64::new(limited),
            limit_armed: AtomicU64::new(0),
            floor,
            lost: std::sync::atomic::AtomicI32::new(-1),
            single,
            units,
            n: reqs.len(),
            scaled: scale.iter().any(|s| *s != 1.0),
            scale,
            notify,
        })))
    }
}

/// Whether `code` is one of the kernel's clocks (`cpu-clock`, `task-clock`), whose overflows
/// come from a timer rather than from something the program did.
fn is_clock(code: PerfCode) -> bool {
    code.type_ == b::PERF_TYPE_SOFTWARE
        && (code.config == u64::from(b::PERF_COUNT_SW_CPU_CLOCK)
            || code.config == u64::from(b::PERF_COUNT_SW_TASK_CLOCK))
}

fn setup_signal(kernel: &dyn Kernel, fd: &OwnedFd, sig: i32, owner: i32) -> Result<()> {
    let fd = fd.as_raw_fd();
    #[repr(C)]
    struct FOwnerEx {
        type_: libc::c_int,
        pid: libc::pid_t,
    }
    // fcntl.h values (asm-generic; the same on x86-64 and arm64), not all in the libc crate.
    const F_OWNER_TID: libc::c_int = 0;
    const F_SETSIG: libc::c_int = 10;
    const F_SETOWN_EX: libc::c_int = 15;
    let owner = FOwnerEx {
        type_: F_OWNER_TID,
        pid: owner,
    };
    let flags = (libc::O_ASYNC | libc::O_NONBLOCK) as usize;
    kernel
        .fcntl(fd, libc::F_SETFL, flags)
        .and_then(|_| kernel.fcntl(fd, F_SETSIG, sig as usize))
        // The argument is a pointer to a local that outlives the call.
        .and_then(|_| kernel.fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx as usize))
        .map(|_| ())
        .map_err(|errno| Error::Os {
            op: "fcntl to route overflow signals",
            errno,
        })
}

//! Backends: where counts come from.
//!
//! A [`Backend`] describes a PMU (its counters, their width, which events each can count and
//! which shared resources they need) and programs [`Group`]s: the running counters of one bound
//! set. Two families exist, chosen at run time by `PERFCOMPAT_BACKEND`:
//!
//! - `perf`: Linux `perf_event_open`, hardware events where the host has a PMU, software events
//!   always (see [`perf`]);
//! - `sim:<model>`: emulated historical PMUs (`r10000`, `r12000`, `ultrasparc`, `ultrasparc2`,
//!   `pentium4`, `ev4`, `ev5`, `ppc750`, `ppc7450`, `pentium3`) whose counts advance only when the program
//!   calls the test hook (see [`sim`]).
//!
//! `auto` (the default) is `perf`: emulated counts are never chosen silently.

use std::any::Any;
use std::fmt;
use std::sync::{OnceLock, Weak};

use crate::base::error::{Error, Result};
use crate::base::sched::{Candidate, Slot};
use crate::base::set::{Request, Target};

pub mod perf;
pub mod sim;

/// One hardware counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterInfo {
    /// Register width in bits.
    pub width: u32,
}

/// Which backend a process counts with: its identity as a value. [`Display`](fmt::Display)
/// gives the name users see and give in `PERFCOMPAT_BACKEND` (`perf`, `sim:<model>`).
#[derive(Debug, Clone, Copy)]
pub enum BackendKind {
    /// Linux `perf_event_open` ([`perf`]).
    Perf,
    /// An emulated PMU ([`sim`]): one of [`sim::MODELS`].
    Sim(&'static sim::model::Model),
    /// Another implementation of [`Backend`] (a test double), by its name.
    Other(&'static str),
}

impl BackendKind {
    /// The backend `PERFCOMPAT_BACKEND` names: `""`, `auto` and `perf` are the perf backend,
    /// `sim:<model>` an emulated PMU; anything else is an error that lists the choices.
    pub fn parse(name: &str) -> Result<BackendKind> {
        match name {
            "" | "auto" | "perf" => Ok(BackendKind::Perf),
            _ => match name.strip_prefix("sim:") {
                Some(model) => sim::model_named(model).map(BackendKind::Sim),
                None => Err(Error::InvalidArgument(format!(
                    "unknown backend '{name}': use auto, perf, or sim:<model> with model one of {}",
                    sim::MODEL_NAMES.join(", ")
                ))),
            },
        }
    }

    /// Whether this is an emulated PMU, which counts only what its own process injects.
    pub fn is_emulated(self) -> bool {
        matches!(self, BackendKind::Sim(_))
    }
}

/// Emulated models are statics: the same model is the same address.
impl PartialEq for BackendKind {
    fn eq(&self, other: &BackendKind) -> bool {
        match (self, other) {
            (BackendKind::Perf, BackendKind::Perf) => true,
            (BackendKind::Sim(a), BackendKind::Sim(b)) => std::ptr::eq(*a, *b),
            (BackendKind::Other(a), BackendKind::Other(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for BackendKind {}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendKind::Perf => f.write_str("perf"),
            BackendKind::Sim(m) => write!(f, "sim:{}", m.name),
            BackendKind::Other(name) => f.write_str(name),
        }
    }
}

/// What a backend is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// Which backend (its name is this value's `Display`: `perf`, `sim:<model>`).
    pub kind: BackendKind,
    /// The implementation name (libcpc's `cpc_cciname`).
    pub description: String,
    /// Where the events are documented (libcpc's `cpc_cpuref`).
    pub reference: String,
    /// The counters (libcpc's `cpc_npic` is their number).
    pub counters: Vec<CounterInfo>,
    /// Whether a counter overflow can interrupt (and so notify).
    pub overflow_interrupt: bool,
    /// Whether the interrupt says which counter overflowed.
    pub overflow_precise: bool,
    /// Attributes requests may carry (besides `picnum`).
    pub attributes: Vec<String>,
    /// Plain-language notes: no PMU, approximated events, permissions.
    pub notes: Vec<String>,
}

/// What requests are checked against: [`BackendInfo`]'s kind, number of counters, overflow
/// interrupt and attribute names, without its description and notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape<'a> {
    /// Which backend.
    pub kind: BackendKind,
    /// How many counters (libcpc's `cpc_npic`).
    pub counters: usize,
    /// Whether a counter overflow can interrupt (and so notify).
    pub overflow_interrupt: bool,
    /// Whether the interrupt says which counter overflowed.
    pub overflow_precise: bool,
    /// Attributes requests may carry (besides `picnum`).
    pub attributes: &'a [String],
}

impl Shape<'_> {
    /// The shape `info` describes.
    pub fn of(info: &BackendInfo) -> Shape<'_> {
        Shape {
            kind: info.kind,
            counters: info.counters.len(),
            overflow_interrupt: info.overflow_interrupt,
            overflow_precise: info.overflow_precise,
            attributes: &info.attributes,
        }
    }
}

/// An event a backend can count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventInfo {
    /// Its name.
    pub name: String,
    /// Counters that can count it (bit n = counter n).
    pub counters: u64,
    /// Whether it is a generic (`PAPI_*`) name.
    pub generic: bool,
    /// One-line description.
    pub description: String,
}

/// Time a group was enabled and actually running, in nanoseconds. They differ when the kernel
/// multiplexed the group off the hardware for part of the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Times {
    /// Time enabled.
    pub enabled: u64,
    /// Time running on the counters.
    pub running: u64,
}

/// How the kernel left a group at the overflow that a signal reports
/// ([`Group::overflow_signalled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelStop {
    /// Not known to be stopped: the engine stops the group.
    No,
    /// The kernel stopped the whole group at that overflow and it has not been started since:
    /// the engine need not stop it, and the counts it reads are the counts at the stop.
    Stopped,
    /// As [`KernelStop::Stopped`], and the overflow record holds the counts at the stop as
    /// well: nothing counted between the record and the stop, so no read is needed either.
    AtRecord,
    /// The kernel did not stop the group and it counts on; the overflow record holds the counts
    /// at the overflow. The engine freezes at the record without stopping the group, and the
    /// restart reads where counting resumes: when nothing counted since the overflow and the
    /// period stays the same ([`Group::keeps_period`]), the group goes on as it is, with no
    /// system call besides that read. Re-enabling a stopped event costs the kernel a
    /// reschedule of the thread's counters (about 2 µs here), and the stop at the overflow
    /// its own; a read costs a fraction of that (issue 19).
    Running,
}

/// The programmed counters of one bound set.
///
/// Every method is async-signal-safe: no allocation, no locks that a signal handler could find
/// held by the thread it interrupted, no stdio. They are called from the overflow signal
/// handler and from user signal handlers.
pub trait Group: Send + Sync {
    /// Write each request's count since the group was opened (64 bits, never wrapping in
    /// practice) into `out[..n]`; returns the times, or an errno.
    fn read(&self, out: &mut [u64]) -> std::result::Result<Times, i32>;
    /// Stop counting (freeze every request).
    fn stop(&self);
    /// Resume counting.
    fn start(&self);
    /// Whether the group counts nothing until its first [`Group::start`]: opened stopped, its
    /// counts and times are zero until then, and a [`Group::stop`] has nothing to stop. The
    /// engine's first start then neither stops nor reads it (issue 48, first use: the perf
    /// backend's `PERF_EVENT_IOC_DISABLE` and `read` at every bind). Default: false.
    fn opens_stopped(&self) -> bool {
        false
    }
    /// Ask for an overflow interrupt for request `index` after `distance` more events
    /// (`None`: never). Called while the group is stopped.
    fn arm(&self, index: usize, distance: Option<u64>);
    /// A read of the counts the caller can make itself, inlined into its own frame (the perf
    /// backend's [`perf::DirectRead`]: one `read` system call on the host's kernel), where the
    /// backend has one; it gives what [`Group::read`] gives and stays valid while the group
    /// does. Default: none.
    fn direct_read(&self) -> Option<perf::DirectRead> {
        None
    }
    /// The group was stopped after request `index`'s overflow with nothing counted since (its
    /// count at the stop is the one the overflow record holds), and that record found it
    /// exactly at the wrap (no skid past it). A backend whose kernel has then
    /// reloaded a whole period may skip re-arming the same distance at the next
    /// [`Group::arm`]; any [`Group::start`] forgets it. Default: nothing.
    fn stopped_at_overflow(&self, index: usize) {
        let _ = index;
    }
    /// Whether request `index`, still counting after its overflow with nothing counted since,
    /// has its kernel period left at the whole of `distance` (in the request's virtual events):
    /// then a restart to that distance needs neither a stop nor a re-arm
    /// ([`KernelStop::Running`]). Default: false.
    fn keeps_period(&self, index: usize, distance: Option<u64>) -> bool {
        let _ = (index, distance);
        false
    }
    /// Whether request `index`, stopped since its overflow with nothing counted since
    /// ([`Group::stopped_at_overflow`]), has its kernel period left at the whole of `distance`:
    /// then a restart to that distance needs no re-arm, only a [`Group::start`]. Default:
    /// false.
    fn keeps_stopped_period(&self, index: usize, distance: Option<u64>) -> bool {
        let _ = (index, distance);
        false
    }
    /// A descriptor of the group that is no longer the counter it was (the program closed
    /// it, and perhaps opened something else at its number), checked now without reading,
    /// writing or waiting on it; `None` while every one is the group's. Once one is found, the
    /// group makes no system call on its descriptors again, and closes only those still its
    /// own. Async-signal-safe. Default: none (the emulated backends hold no descriptor).
    fn lost_descriptor(&self) -> Option<i32> {
        None
    }
    /// The group is dropped in a child of `fork()` of the process that opened it: its
    /// mappings (the perf backend's counter pages and overflow rings) were not copied into
    /// this process, and what lies at their addresses now is another mapping of its (a group
    /// opened in the child since): leave them, unmapped by nobody. Default: nothing.
    fn forget_mappings(&mut self) {}
    /// Whether the overflow signal that carried `fd` belongs to this group.
    fn owns_fd(&self, fd: i32) -> bool {
        let _ = fd;
        false
    }
    /// The raw counts of every request (as [`Group::read`] gives them) at the instant of the
    /// overflow that the signal carrying `fd` reports, as the kernel recorded them then, into
    /// `out[..n]`; returns that instant (`CLOCK_MONOTONIC` nanoseconds) and the group's times
    /// then. Consumes the record. `None` where there is no such record: the engine then freezes
    /// at a read taken after stopping the group, which also counts what happened between the
    /// overflow and the stop. Called with the group stopped.
    fn overflow_snapshot(&self, fd: i32, out: &mut [u64]) -> Option<(u64, Times)> {
        let _ = (fd, out);
        None
    }
    /// The overflow signal carrying `fd` has arrived; `hup` says that its code is the one the
    /// kernel gives when it stopped the event there itself (`POLL_HUP`: the event's overflow
    /// limit was reached). Says how the kernel left the group ([`KernelStop`]); called before
    /// anything else is done for the signal. Default: [`KernelStop::No`].
    fn overflow_signalled(&self, fd: i32, hup: bool) -> KernelStop {
        let _ = (fd, hup);
        KernelStop::No
    }

    /// Whether an overflow record for the signal carrying `fd` is waiting: `Some(false)` says
    /// the signal is stale (the overflow it reports was handled, or discarded by a restart,
    /// already) and must not touch the group; `None`, that the backend keeps no records for
    /// `fd`. Async-signal-safe.
    fn overflow_record_pending(&self, fd: i32) -> Option<bool> {
        let _ = fd;
        None
    }
    /// The descriptors of the notifying requests that another thread can wait on with
    /// `poll(2)`: each overflow record makes one readable (`POLLIN`). Empty where there are none
    /// (emulated PMUs, a model kernel, inherited events). Default: none.
    fn overflow_fds(&self, out: &mut Vec<i32>) {
        let _ = out;
    }
    /// Where the oldest overflow record of `fd` not yet consumed starts; `None` where the
    /// backend keeps no records for `fd`. The same mark with a record waiting at two looks
    /// means that record has waited all along. Default: none.
    fn overflow_record_mark(&self, fd: i32) -> Option<u64> {
        let _ = fd;
        None
    }
    /// [`Group::read`] made from a thread other than the one the group counts (no user-space
    /// counter reads, whose values mean something on the counted thread only). Default:
    /// [`Group::read`].
    fn read_from_elsewhere(&self, out: &mut [u64]) -> std::result::Result<Times, i32> {
        self.read(out)
    }
    /// Turn the overflow signals of the notifying requests off (`on` false: their overflows
    /// still write their records) or back on. Async-signal-safe. Default: nothing.
    fn set_signalled(&self, on: bool) {
        let _ = on;
    }
    /// A notifying request's descriptor with an overflow record waiting, if any: an overflow
    /// whose signal has not been handled (yet). Async-signal-safe. Default: none.
    fn pending_overflow_fd(&self) -> Option<i32> {
        None
    }
    /// For downcasting by the backend that made it.
    fn as_any(&self) -> &dyn Any;
}

/// What a count is when it is not the event asked for (see [`Backend::substitute`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Substitute {
    /// An estimate of the event from another one: `cycles` from the task clock times the
    /// nominal clock, on a host without a PMU. It covers user and system time whatever the
    /// mode asked (the kernel's clocks cannot exclude the kernel).
    Estimate {
        /// The event it is estimated from (`task-clock`).
        from: String,
    },
    /// A software event of a similar nature counted instead of a hardware event this host
    /// cannot count (`PERFCOMPAT_STANDIN=1`): not the event asked for.
    StandIn {
        /// The software event counted (`page-faults`, `task-clock`).
        event: String,
        /// The hardware event it stands for (`L1-dcache-load-misses`).
        stands_for: String,
    },
}

/// A source of counters.
pub trait Backend: Send + Sync + 'static {
    /// What it is.
    fn info(&self) -> &BackendInfo;
    /// What requests are checked against and bound with: [`Shape::of`] its [`info`]
    /// (the default). The perf backend answers without building its `info`, whose description
    /// and notes read the CPU's name, its clock and `perf_event_paranoid`: checking and binding
    /// a set need none of them (`cpc_open` and the first bind cost less).
    ///
    /// [`info`]: Backend::info
    fn shape(&self) -> Shape<'_> {
        Shape::of(self.info())
    }
    /// [`Backend::shape`] as far as it is known without measuring the host (the default: the
    /// shape itself). The perf backend measures its PMU's counters once per process, with
    /// about 20 `perf_event_open`s and their closes (`perf::host::probe_counters`), which a
    /// first use does not need (issue 48): until then its `counters` here are the 16 virtual
    /// ones. For what needs no count of counters: the kind, the overflow interrupt, the
    /// attributes.
    fn shape_unmeasured(&self) -> Shape<'_> {
        self.shape()
    }
    /// Whether `requests` fit the host's counters without measuring them (see
    /// [`Backend::shape_unmeasured`]): [`crate::engine::plan`] then places them on the
    /// provisional counters of [`Backend::candidate_unmeasured`]. `false` by default.
    fn fits_unmeasured(&self, requests: &[Request]) -> bool {
        let _ = requests;
        false
    }
    /// Close what the backend keeps open between calls for a bind to come (the perf
    /// backend's counters opened by its checks of events, see `perf::kept`); a bind takes or
    /// closes them too. libcpc's `cpc_close` calls it. Default: nothing is kept.
    fn release_kept(&self) {}
    /// Every event it can count (platform names, generic names, user aliases).
    fn events(&self) -> Vec<EventInfo>;
    /// Check one request (event, attributes, pinned counter) and say where it may be placed.
    fn candidate(&self, request: &Request) -> Result<Candidate>;
    /// [`Backend::candidate`] without measuring the host: the same checks and errors, the
    /// places on the counters of [`Backend::shape_unmeasured`] (the default: the candidate).
    fn candidate_unmeasured(&self, request: &Request) -> Result<Candidate> {
        self.candidate(request)
    }
    /// The name of the event `spec` counts here when it stands for another one (an R10000
    /// event number mapped to a host event, an alias): what a report should call the count.
    /// `None` when the spec is the event's own name or number here, or it cannot be counted.
    fn counted_name(&self, spec: &str) -> Option<String> {
        let _ = spec;
        None
    }
    /// Whether the count of `spec` here is not the event itself but an estimate or a stand-in
    /// for it (issue 46 item 4): what every report flags. `None` for a true count.
    fn substitute(&self, spec: &str) -> Option<Substitute> {
        let _ = spec;
        None
    }
    /// Check the perf event spec of one line of a `PERFCOMPAT_EVENTS` file when the map is
    /// loaded (issue 46 item 9): an error when this backend does not know the event.
    fn check_map_spec(&self, spec: &str) -> Result<()> {
        let _ = spec;
        Ok(())
    }
    /// Check rules that concern the set as a whole (UltraSPARC: one mode for all requests).
    fn check_set(&self, requests: &[Request]) -> Result<()> {
        let _ = requests;
        Ok(())
    }
    /// Program and start the counters. `slots` holds the placement of each request. The
    /// requests that notify on overflow are armed with the distance from their preset.
    fn open(&self, requests: &[Request], slots: &[Slot], target: Target) -> Result<Box<dyn Group>>;
    /// Whether [`Backend::open`] of the same requests would succeed, with the same error when
    /// not, programming nothing that lasts: `cputrack` checks its sets on its own thread
    /// before the command runs. By default the group is opened and dropped; the perf backend
    /// opens each member as `open` would and closes it (no pages mapped, no descriptor moved,
    /// nothing started: issue 48, most of `cputrack`'s fixed cost over its floor).
    fn check_open(&self, requests: &[Request], slots: &[Slot], target: Target) -> Result<()> {
        self.open(requests, slots, target).map(drop)
    }
    /// The name of shared resource `r` in conflict messages (a Pentium 4 ESCR).
    fn resource_name(&self, r: u16) -> String {
        format!("resource {r}")
    }
    /// A binding of a group this backend opened is ready. Backends that detect overflows
    /// themselves (the emulated PMUs) keep the handle to interrupt it; others ignore it.
    fn attach(&self, bound: Weak<dyn Bound>) {
        let _ = bound;
    }
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// What a backend holds of a binding (the engine's bound set) to deliver the overflows it
/// detects itself, without importing the engine.
pub trait Bound: Send + Sync {
    /// The counters the backend opened for it.
    fn group(&self) -> &dyn Group;
    /// An overflow interrupt at program counter `pc`: the engine finds the requests that
    /// wrapped, freezes and notifies.
    fn interrupt(&self, pc: usize);
}

/// This machine's nominal core clock in MHz (cpufreq base or maximum frequency, else
/// `/proc/cpuinfo`, else 1000).
pub fn nominal_mhz() -> f64 {
    perf::nominal_mhz()
}

/// Build the backend named `name` (`auto`, `perf`, `sim:<model>`).
pub fn from_name(name: &str) -> Result<Box<dyn Backend>> {
    from_kind(BackendKind::parse(name)?)
}

/// Build a backend of kind `kind`.
pub fn from_kind(kind: BackendKind) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Perf => Ok(Box::new(perf::PerfBackend::new()?)),
        BackendKind::Sim(model) => Ok(Box::new(sim::SimBackend::of(model))),
        BackendKind::Other(name) => Err(Error::InvalidArgument(format!(
            "backend '{name}' is not one perfcompat builds"
        ))),
    }
}

static GLOBAL: OnceLock<std::result::Result<Box<dyn Backend>, Error>> = OnceLock::new();

crate::base::sys::env_name! { const BACKEND_VAR = "PERFCOMPAT_BACKEND"; }

/// The process's backend, chosen once from `PERFCOMPAT_BACKEND` (default `auto`).
pub fn global() -> Result<&'static dyn Backend> {
    let r = GLOBAL.get_or_init(|| {
        let b = from_name(&env_name(crate::base::sys::env_os(BACKEND_VAR)))?;
        // The process's event map is checked against the backend before anything resolves
        // an event through it (issue 46 item 9): a line naming an event the backend does not
        // know is reported with its file and line, and the file is not used.
        crate::base::eventmap::EventMap::init_global(&|spec| b.check_map_spec(spec));
        Ok(b)
    });
    match r {
        Ok(b) => Ok(b.as_ref()),
        Err(e) => Err(e.clone()),
    }
}

/// The backend name a `PERFCOMPAT_BACKEND` value gives (trimmed; unset is `""`, `auto`). A value
/// that is not UTF-8 keeps its bad bytes as U+FFFD, so it names no backend and is refused like
/// any unknown name (it once read as unset, so as perf).
fn env_name(v: Option<std::ffi::OsString>) -> String {
    v.map(|v| v.to_string_lossy().trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_utf8_value_names_no_backend() {
        use std::os::unix::ffi::OsStringExt;
        for bytes in [&b"perf\xff"[..], b"\xff", b"sim:r10000\xfe", b"\xc3"] {
            let name = env_name(Some(std::ffi::OsString::from_vec(bytes.to_vec())));
            let e = from_name(&name).err().map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains("unknown")), "{bytes:?}");
        }
        assert_eq!(env_name(None), "");
        assert_eq!(env_name(Some(" perf ".into())), "perf");
    }

    /// The perf backend answers `shape` without building its `info`: the two must agree, and
    /// say what cpc_npic(3CPC) and cpc_caps(3CPC) document for perf.
    #[test]
    fn shape_is_what_info_says() {
        let perf = from_name("perf").unwrap();
        let shape = perf.shape();
        assert_eq!(
            (shape.kind, shape.counters, shape.attributes.len()),
            (BackendKind::Perf, 16, 0)
        );
        assert!(shape.overflow_interrupt && shape.overflow_precise);
        assert_eq!(shape, Shape::of(perf.info()));
        for m in sim::MODELS {
            let b = from_kind(BackendKind::Sim(m)).unwrap();
            assert_eq!(b.shape(), Shape::of(b.info()), "{}", m.name);
        }
    }

    #[test]
    fn auto_is_perf_never_an_emulation() {
        for n in ["", "auto", "perf"] {
            assert_eq!(
                from_name(n).unwrap().info().kind,
                BackendKind::Perf,
                "{n:?}"
            );
            assert_eq!(from_name(n).unwrap().info().kind.to_string(), "perf");
        }
        let p4 = from_name("sim:pentium4").unwrap();
        assert_eq!(p4.info().kind, BackendKind::Sim(&sim::p4::PENTIUM4));
        assert_eq!(p4.info().kind.to_string(), "sim:pentium4");
        for m in sim::MODELS {
            let kind = BackendKind::parse(&format!("sim:{}", m.name)).unwrap();
            assert_eq!(kind, BackendKind::Sim(m));
            assert_eq!(BackendKind::parse(&kind.to_string()).unwrap(), kind);
        }
        assert_ne!(
            BackendKind::Sim(&sim::mips::R10000),
            BackendKind::Sim(&sim::mips::R12000)
        );
        let e = from_name("sim:z80").err().unwrap().to_string();
        assert!(e.contains("z80") && e.contains("r10000"), "{e}");
        let e = from_kind(BackendKind::Other("time-shared"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("'time-shared' is not one perfcompat builds"),
            "{e}"
        );
        let e = from_name("papi").err().unwrap().to_string();
        assert!(e.contains("unknown backend 'papi'"), "{e}");
    }
}

//! Emulated PMUs, for deterministic tests and for developing counter code without a PMU.
//!
//! Each model ([`model::Model`]) is emulated at the register level: a counter is a `width`-bit
//! register that raises its overflow interrupt when bit 31 becomes set (R10000/R12000, PowerPC)
//! or when it wraps (UltraSPARC, Pentium 4, Alpha; an Alpha counter's width is its interrupt
//! period, chosen per request with `int_every`: see [`alpha`]). At every interrupt the emulated kernel folds the register
//! into a 64-bit sum, the perfctr way ([`crate::base::virt::Accumulator`]). A request that notifies on
//! overflow is an "i-mode" counter: its register is loaded so that the interrupt comes exactly
//! when the 64-bit virtual value wraps (after several silent interrupts when the distance is
//! larger than the register).
//!
//! Counts advance only when the program calls [`advance`] (exported to C as
//! `perfcompat_sim_advance`): `n` occurrences of an event, seen by the calling thread. All the
//! thread's bound sets that count that event advance in lock step; an overflow notification
//! fires synchronously, inside the call, at the exact event. If the notified program restarts
//! the set from its handler, the rest of the `n` events are counted after the restart;
//! otherwise the frozen set drops them, as frozen hardware would.
//!
//! Which bindings see an advance from thread T: bindings to T itself; inheriting bindings made
//! by T, and inheriting bindings of the process whose binder is another thread when T did not
//! exist yet at bind time (the emulation's stand-in for "threads created after the bind");
//! bindings to this process; bindings to the CPU T is running on. The emulation has no kernel
//! mode: requests that do not count user mode never advance. Event masks (`emask`) are checked
//! but do not filter advances.
//!
//! Here the backend ([`SimBackend`]: resolving names, placing, binding, advancing) and the
//! registry of models ([`MODELS`]); `group.rs` the counters of one bound set at work; each
//! family's models in a file of its own ([`mips`], [`sparc`], [`p4`], [`p6`], [`ppc`], [`alpha`]), the
//! model description in [`model`](mod@model), the PAPI presets they map in [`papi`].

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, Weak};

use crate::backend::{Backend, BackendInfo, BackendKind, Bound, CounterInfo, EventInfo, Group};
use crate::base::error::{Conflict, ConflictReason, Error, Result};
use crate::base::eventmap::EventMap;
use crate::base::sched::{Candidate, Slot};
use crate::base::set::{Request, Target};
use crate::base::sigsafe::SeqCount;

pub mod alpha;
mod group;
pub mod mips;
pub mod model;
pub mod p4;
pub mod p6;
pub mod papi;
pub mod ppc;
pub mod sparc;

use model::{IrqRule, Model};

/// Every emulated PMU: the one table that [`MODEL_NAMES`] and [`model()`] are derived from.
pub static MODELS: [&Model; 10] = [
    &mips::R10000,
    &mips::R12000,
    &sparc::ULTRASPARC,
    &sparc::ULTRASPARC2,
    &p4::PENTIUM4,
    &alpha::EV4,
    &alpha::EV5,
    &ppc::PPC750,
    &ppc::PPC7450,
    &p6::PENTIUM3,
];

/// Names accepted after `sim:`, in [`MODELS`] order.
pub const MODEL_NAMES: &[&str] = &{
    let mut names = [""; MODELS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = MODELS[i].name;
        i += 1;
    }
    names
};

/// The model called `name`.
pub fn model(name: &str) -> Option<&'static Model> {
    MODELS.iter().copied().find(|m| m.name == name)
}

/// The model called `name`, or an error that lists the models.
pub fn model_named(name: &str) -> Result<&'static Model> {
    model(name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "unknown emulated PMU '{name}': models are {}",
            MODEL_NAMES.join(", ")
        ))
    })
}

/// An emulated PMU.
pub struct SimBackend {
    model: &'static Model,
    info: BackendInfo,
    live: Mutex<Vec<Weak<dyn Bound>>>,
}

/// The attribute that sets a counter's interrupt period (see [`alpha`]).
const INT_EVERY: &str = "int_every";

/// An event name resolved against a model: the event and, for R10000-style numbers and raw
/// codes, the only routes allowed.
struct Resolved {
    event: usize,
    emask: u32,
    route_filter: Option<(u64, u32)>,
}

impl SimBackend {
    /// The emulation of model `name` (one of [`MODEL_NAMES`]).
    pub fn new(name: &str) -> Result<SimBackend> {
        model_named(name).map(SimBackend::of)
    }

    /// The emulation of model `m`.
    pub fn of(m: &'static Model) -> SimBackend {
        let info = BackendInfo {
            kind: BackendKind::Sim(m),
            description: m.cciname.to_string(),
            reference: m.cpuref.to_string(),
            counters: (0..m.ncounters)
                .map(|c| CounterInfo {
                    width: m.default_width(c),
                })
                .collect(),
            overflow_interrupt: m.overflow_interrupt,
            overflow_precise: m.overflow_precise,
            attributes: m.attributes.iter().map(|a| a.name.to_string()).collect(),
            notes: vec![format!(
                "emulated {} PMU: counts advance only when the program calls \
                 perfcompat_sim_advance()",
                m.cciname
            )],
        };
        SimBackend {
            model: m,
            info,
            live: Mutex::new(Vec::new()),
        }
    }

    /// The emulated model.
    pub fn model(&self) -> &'static Model {
        self.model
    }

    /// Name of shared resource `r`.
    pub fn resource_name(&self, r: u16) -> String {
        self.model
            .resources
            .get(r as usize)
            .map_or_else(|| format!("resource {r}"), |x| x.name.to_string())
    }

    fn resolve(&self, name: &str) -> Option<Resolved> {
        let m = self.model;
        let find = |n: &str| {
            m.events
                .iter()
                .position(|e| e.name == n)
                .or_else(|| m.events.iter().position(|e| e.name.eq_ignore_ascii_case(n)))
        };
        if let Some(event) = find(name) {
            return Some(Resolved {
                event,
                emask: 0,
                route_filter: None,
            });
        }
        if let Some(g) = m
            .generics
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
        {
            return find(&g.event).map(|event| Resolved {
                event,
                emask: g.emask,
                route_filter: None,
            });
        }
        if m.numbered {
            if let Ok(n) = name.parse::<u32>() {
                if n < 16 * m.ncounters {
                    let (counter, code) = (n / 16, n % 16);
                    return m
                        .events
                        .iter()
                        .position(|e| {
                            e.routes
                                .iter()
                                .any(|r| r.counters & (1 << counter) != 0 && r.code == code)
                        })
                        .map(|event| Resolved {
                            event,
                            emask: 0,
                            route_filter: Some((1 << counter, code)),
                        });
                }
                return None;
            }
        }
        // A raw event-select code, as strtol(base 0) would read it.
        let code = parse_c_integer(name)?;
        let code = u32::try_from(code).ok()?;
        m.events
            .iter()
            .position(|e| e.routes.iter().any(|r| r.code == code))
            .map(|event| Resolved {
                event,
                emask: 0,
                route_filter: Some((u64::MAX, code)),
            })
    }

    /// Resolve through the `PERFCOMPAT_EVENTS` aliases, then the model.
    fn resolve_alias(&self, name: &str) -> Option<Resolved> {
        let map = EventMap::global();
        let mut n = name;
        // An R10000 event number (libperfex's events) the user mapped: on a model without
        // R10000 numbering, the map's event. (On r10000/r12000 the number is native.)
        if !self.model.numbered {
            if let Some(spec) = name.parse::<u32>().ok().and_then(|k| map.number(k)) {
                n = spec;
            }
        }
        for _ in 0..8 {
            match map.alias(n) {
                Some(s) => n = s,
                None => break,
            }
        }
        self.resolve(n)
    }

    fn slots(&self, r: &Resolved, pin: Option<u32>) -> Vec<Slot> {
        let e = &self.model.events[r.event];
        let mut out = Vec::new();
        for (ri, route) in e.routes.iter().enumerate() {
            let mut counters = route.counters;
            if let Some((mask, code)) = r.route_filter {
                if route.code != code {
                    continue;
                }
                counters &= mask;
            }
            for c in 0..self.model.ncounters {
                if counters & (1 << c) != 0 && pin.is_none_or(|p| p == c) {
                    out.push(Slot {
                        counter: c,
                        resource: route.resource.map(u16::from),
                        tag: ri as u32,
                    });
                }
            }
        }
        out
    }

    /// Whether event `e` is the model's processor cycles (its `PAPI_tot_cyc`): the event the
    /// emulated time-stamp counter ([`thread_tsc`]) ticks with.
    fn is_cycles(&self, e: usize) -> bool {
        let m = self.model;
        m.generics
            .iter()
            .find(|g| g.name == papi::TOT_CYC)
            .is_some_and(|g| m.events.get(e).is_some_and(|ev| ev.name == g.event))
    }

    /// Advance `event` by `n` for the calling thread: see the module documentation.
    /// Returns the number of bound sets that counted it.
    pub fn advance(&self, event: &str, n: u64) -> Result<usize> {
        let r = self
            .resolve_alias(event)
            .ok_or_else(|| Error::UnknownEvent {
                event: event.to_string(),
                backend: self.info.kind.to_string(),
            })?;
        if self.is_cycles(r.event) {
            let _ = TSC.try_with(|t| t.set(t.get().wrapping_add(n)));
        }
        let tid = crate::base::sys::gettid();
        // SAFETY: plain libc calls.
        let (pid, cpu) = unsafe { (libc::getpid(), libc::sched_getcpu()) };
        let targets: Vec<Arc<dyn Bound>> = {
            let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            live.iter().filter_map(|w| w.upgrade()).collect()
        };
        let mut hit = 0;
        for b in targets {
            let Some(g) = b.group().as_any().downcast_ref::<SimGroup>() else {
                continue;
            };
            if !g.sees(tid, pid, cpu) {
                continue;
            }
            let mut left = n;
            let mut counted = false;
            loop {
                let (rest, fired, any) = g.count(r.event, left);
                counted |= any;
                if !fired {
                    break;
                }
                b.interrupt(advance as *const () as usize);
                left = rest;
                if left == 0 {
                    break;
                }
            }
            if counted {
                hit += 1;
            }
        }
        Ok(hit)
    }
}

thread_local! {
    /// The calling thread's emulated time-stamp counter: see [`thread_tsc`].
    static TSC: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's emulated time-stamp counter (perfctr's TSC on an emulated PMU, issue
/// 47): the processor cycles (the model's `PAPI_tot_cyc` event) the thread has advanced with
/// [`SimBackend::advance`] since it started, counted or not by a bound set, as the Pentium III
/// and Pentium 4 TSC ticks with the core clock. The PowerPC's time base ticks at a fraction of
/// it; here it ticks with the cycles too. Async-signal-safe.
pub fn thread_tsc() -> u64 {
    TSC.try_with(|t| t.get()).unwrap_or(0)
}

/// Parse an integer the way C's `strtol(s, &end, 0)` does when it must consume all of `s`:
/// decimal, `0x` hexadecimal, or leading-`0` octal.
pub fn parse_c_integer(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    // from_str_radix takes a leading '+', which strtoull does not after a 0 or 0x prefix
    // ("0+1" was read as 1; found by fuzz/event_spec).
    let digits = |d: &str| !d.starts_with('+');
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok().filter(|_| digits(h))
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8)
            .ok()
            .filter(|_| digits(&s[1..]))
    } else {
        s.parse::<u64>().ok()
    }
}

impl Backend for SimBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// The model's event `spec` resolves to, unless `spec` is its own name or, on a model
    /// numbered as the R10000's, its number.
    fn counted_name(&self, spec: &str) -> Option<String> {
        if self.model.numbered && spec.parse::<u32>().is_ok() {
            return None;
        }
        let name = self.model.events[self.resolve_alias(spec)?.event].name;
        (name != spec).then(|| name.to_string())
    }

    fn events(&self) -> Vec<EventInfo> {
        let m = self.model;
        let mask = |e: &model::SimEvent| e.routes.iter().fold(0u64, |a, r| a | r.counters);
        let mut v: Vec<EventInfo> = m
            .events
            .iter()
            .map(|e| EventInfo {
                name: e.name.to_string(),
                counters: mask(e),
                generic: false,
                description: e.description.to_string(),
            })
            .collect();
        for g in m.generics {
            if let Some(e) = m.events.iter().find(|e| e.name == g.event) {
                v.push(EventInfo {
                    name: g.name.to_string(),
                    counters: mask(e),
                    generic: true,
                    description: format!("generic name for {}", e.name),
                });
            }
        }
        for (name, spec) in EventMap::global().aliases() {
            if let Some(r) = self.resolve_alias(spec) {
                v.push(EventInfo {
                    name: name.to_string(),
                    counters: mask(&m.events[r.event]),
                    generic: false,
                    description: format!("alias for {spec} (PERFCOMPAT_EVENTS)"),
                });
            }
        }
        v
    }

    fn candidate(&self, req: &Request) -> Result<Candidate> {
        let r = self
            .resolve_alias(&req.event)
            .ok_or_else(|| Error::UnknownEvent {
                event: req.event.clone(),
                backend: self.info.kind.to_string(),
            })?;
        let e = &self.model.events[r.event];
        for a in &req.attrs {
            let spec = self
                .model
                .attributes
                .iter()
                .find(|s| s.name == a.name.as_str())
                .ok_or_else(|| Error::InvalidAttribute {
                    name: a.name.clone(),
                    backend: self.info.kind.to_string(),
                })?;
            if a.value > spec.max {
                return Err(Error::AttributeOutOfRange {
                    name: a.name.clone(),
                    value: a.value,
                    max: spec.max,
                });
            }
            if a.name == "emask" && a.value & !u64::from(e.emask) != 0 {
                return Err(Error::AttributeOutOfRange {
                    name: a.name.clone(),
                    value: a.value,
                    max: u64::from(e.emask),
                });
            }
        }
        let mut slots = self.slots(&r, req.counter);
        if slots.is_empty() {
            return Err(Error::PicNotCapable {
                event: req.event.clone(),
                picnum: req.counter.unwrap_or(0),
            });
        }
        if let Some(v) = req
            .attrs
            .iter()
            .find(|a| a.name == INT_EVERY)
            .map(|a| a.value)
        {
            let supported = |c: u32| v.is_power_of_two() && self.model.has_width(c, v.ilog2());
            let counters: Vec<u32> = slots.iter().map(|s| s.counter).collect();
            slots.retain(|s| supported(s.counter));
            if slots.is_empty() {
                let periods: Vec<String> = counters
                    .iter()
                    .map(|&c| {
                        let p: Vec<String> = self
                            .model
                            .widths
                            .get(c as usize)
                            .map_or(&[][..], |w| w)
                            .iter()
                            .map(|w| (1u64 << w).to_string())
                            .collect();
                        format!("counter {c}: {}", p.join(" or "))
                    })
                    .collect();
                return Err(Error::InvalidArgument(format!(
                    "{INT_EVERY}={v} is not an interrupt period of the counters that can \
                     count {} ({})",
                    req.event,
                    periods.join("; ")
                )));
            }
        }
        let _ = r.emask;
        Ok(Candidate {
            name: req.event.clone(),
            slots,
        })
    }

    fn check_set(&self, reqs: &[Request]) -> Result<()> {
        if self.model.same_flags {
            let first = (reqs[0].flags.user, reqs[0].flags.system);
            if let Some(i) = reqs
                .iter()
                .position(|r| (r.flags.user, r.flags.system) != first)
            {
                return Err(Error::Conflict(Conflict {
                    requests: vec![(0, reqs[0].event.clone()), (i, reqs[i].event.clone())],
                    reason: ConflictReason::DifferentFlags,
                }));
            }
        }
        Ok(())
    }

    fn open(&self, reqs: &[Request], slots: &[Slot], target: Target) -> Result<Box<dyn Group>> {
        // SAFETY: plain libc calls.
        let (pid, ncpu) = unsafe { (libc::getpid(), libc::sysconf(libc::_SC_NPROCESSORS_CONF)) };
        match target {
            Target::Process(p) if p != pid => {
                return Err(Error::Unsupported(format!(
                    "the emulated PMU counts only the calling process; binding to process {p} \
                     needs the perf backend"
                )))
            }
            Target::Thread(t) if !thread_ids().contains(&t) => {
                return Err(Error::Unsupported(format!(
                    "the emulated PMU counts only the calling process; thread {t} is not one \
                     of its threads (binding another process's thread needs the perf backend)"
                )))
            }
            Target::Cpu(c) if i64::from(c) >= ncpu => return Err(Error::NoSuchCpu(c)),
            _ => {}
        }
        let preexisting = if target == Target::CurrentThreadInherit {
            thread_ids()
        } else {
            Vec::new()
        };
        let counters = reqs
            .iter()
            .zip(slots)
            .map(|(r, s)| {
                let ev = self.resolve_alias(&r.event).map_or(usize::MAX, |x| x.event);
                // The register's width: the chosen interrupt period's (checked by
                // `candidate`), else the counter's default.
                let width = r
                    .attrs
                    .iter()
                    .find(|a| a.name == INT_EVERY && a.value.is_power_of_two())
                    .map_or(self.model.default_width(s.counter), |a| a.value.ilog2());
                let irq_at = match self.model.irq {
                    IrqRule::BitSet(b) => 1u64 << b,
                    IrqRule::Wrap => 1u64 << width,
                };
                SimCounter {
                    event: ev,
                    width,
                    irq_at,
                    counter: s.counter,
                    counts: r.flags.user,
                    reg: AtomicU64::new(0),
                    sum: AtomicU64::new(0),
                    start: AtomicU64::new(0),
                    remaining: AtomicU64::new(0),
                    armed: AtomicBool::new(false),
                }
            })
            .collect();
        Ok(Box::new(SimGroup {
            target,
            owner: crate::base::sys::gettid(),
            preexisting,
            counters,
            running: AtomicBool::new(false),
            seq: SeqCount::new(),
        }))
    }

    fn resource_name(&self, r: u16) -> String {
        SimBackend::resource_name(self, r)
    }

    /// Register a new binding so that advances reach it.
    fn attach(&self, b: Weak<dyn Bound>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(b);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn thread_ids() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

struct SimCounter {
    event: usize,
    /// Register width in bits.
    width: u32,
    /// Register position at which the interrupt fires, as a count from 0.
    irq_at: u64,
    counter: u32,
    counts: bool,
    reg: AtomicU64,
    sum: AtomicU64,
    start: AtomicU64,
    remaining: AtomicU64,
    armed: AtomicBool,
}

/// The emulated counters of one bound set.
pub struct SimGroup {
    target: Target,
    owner: i32,
    preexisting: Vec<i32>,
    counters: Box<[SimCounter]>,
    running: AtomicBool,
    seq: SeqCount,
}

/// Advance `event` by `n` on the process's backend, which must be emulated.
pub fn advance(event: &str, n: u64) -> Result<usize> {
    let b = crate::backend::global()?;
    let sim = b.as_any().downcast_ref::<SimBackend>().ok_or_else(|| {
        Error::Unsupported(format!(
            "perfcompat_sim_advance needs an emulated backend (PERFCOMPAT_BACKEND=sim:<model>), \
             this process uses {}",
            b.info().kind
        ))
    })?;
    sim.advance(event, n)
}

#[cfg(test)]
mod tests {
    use super::model::SimEvent;
    use super::*;

    /// The events more than one model is built from.
    const SHARED: &[&[SimEvent]] = &[
        &mips::COMMON,
        &sparc::COMMON_HEAD,
        &sparc::COMMON_PIC1,
        &ppc::REFERENCE,
    ];

    /// An event two models count the same way (name, description, routes, event masks) is one
    /// of the shared ones, stated once and listed by both, not a copy in each.
    #[test]
    fn no_model_copies_another_models_event() {
        let mut copies = Vec::new();
        for (i, a) in MODELS.iter().enumerate() {
            for b in &MODELS[i + 1..] {
                for e in a.events.iter().filter(|e| b.events.contains(e)) {
                    if !SHARED.iter().any(|s| s.contains(e)) {
                        copies.push(format!("{} in {} and {}", e.name, a.name, b.name));
                    }
                }
            }
        }
        assert!(copies.is_empty(), "copied events: {copies:#?}");
    }
}

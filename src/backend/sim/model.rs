//! Static descriptions of the emulated PMUs.
//!
//! A [`Model`] is pure data: the counters, how wide they are, when they raise their overflow
//! interrupt, which events exist and through which counters (and shared resources such as
//! Pentium 4 ESCRs) each event can be counted. The emulation in the parent module turns a model
//! into running counters; the scheduler in [`crate::base::sched`] turns the routes into a placement.

use crate::base::text::{Inline, Text};

/// When an emulated hardware counter raises its overflow interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqRule {
    /// The interrupt fires when bit `n` of the register becomes set (MIPS R10000/R12000: bit 31).
    /// The kernel then folds the register into the 64-bit virtual counter and reloads it.
    BitSet(u32),
    /// The interrupt fires when the register wraps past its width (UltraSPARC, Pentium 4).
    Wrap,
}

/// One way of counting an event: a set of counters, the event-select code the control register
/// gets on them, and the shared resource (an ESCR on the Pentium 4) that this way needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Bit mask of the counters (bit n = counter n) this route can use.
    pub counters: u64,
    /// Event-select code programmed for this route.
    pub code: u32,
    /// Index into [`Model::resources`] of the shared resource this route occupies, if any.
    pub resource: Option<u8>,
}

/// The longest event name of the emulated PMUs, in bytes.
pub const NAME_MAX: usize = 72;
/// The longest event description of the emulated PMUs, in bytes.
pub const DESCRIPTION_MAX: usize = 80;
/// The most routes an event of the emulated PMUs has.
pub const ROUTES_MAX: usize = 2;

/// An event of an emulated PMU.
///
/// Its strings and routes are held in place ([`Text`], [`Inline`]), not behind pointers: the
/// event tables are then free of relocations and stay in the library's read-only pages, which
/// a process that loads the library without using the emulated PMUs never touches (issue 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimEvent {
    /// The name, spelled as in the vendor documentation (`Cycle_cnt`, `branch_retired`).
    pub name: Text<NAME_MAX>,
    /// One-line description.
    pub description: Text<DESCRIPTION_MAX>,
    /// The ways this event can be counted.
    pub routes: Inline<Route, ROUTES_MAX>,
    /// Bits of the `emask` attribute this event accepts (Pentium 4); 0 when the model has no
    /// event masks.
    pub emask: u32,
}

/// The longest generic event name of the emulated PMUs, in bytes.
pub const GENERIC_MAX: usize = 16;

/// A generic (PAPI-style) event name and the platform event it stands for, held in place as
/// [`SimEvent`] is (no relocations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generic {
    /// Generic name, e.g. `PAPI_tot_cyc`.
    pub name: Text<GENERIC_MAX>,
    /// Name of the platform event in [`Model::events`].
    pub event: Text<NAME_MAX>,
    /// Event mask implied by the generic name (Pentium 4), else 0.
    pub emask: u32,
}

/// A shared resource that routes may need exclusively (Pentium 4 ESCRs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// Name as in the vendor manual, e.g. `CRU_ESCR2` (held in place: no relocation at load).
    pub name: Text<12>,
    /// Bit mask of the counters this resource can drive.
    pub counters: u64,
}

/// A numeric attribute a model accepts on requests, with its inclusive maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrSpec {
    /// Attribute name (`emask`, `tag`, ...), held in place (no relocation at load).
    pub name: Text<12>,
    /// Largest accepted value (booleans: 1).
    pub max: u64,
}

/// A complete emulated PMU.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    /// Short name used in `PERFCOMPAT_BACKEND=sim:<name>`.
    pub name: &'static str,
    /// Implementation name, as `cpc_cciname` reports it.
    pub cciname: &'static str,
    /// Reference to the documentation of the events, as `cpc_cpuref` reports it.
    pub cpuref: &'static str,
    /// Number of counters.
    pub ncounters: u32,
    /// Width of each counter register in bits (the default width when `widths` is not empty).
    pub width: u32,
    /// Per-counter register widths, when they differ between counters or can be chosen (Alpha:
    /// the interrupt frequency): entry `c` lists the widths counter `c` can be set to, its
    /// default first. The `int_every` attribute (2^width events per interrupt) picks another
    /// one. Empty: every counter is `width` bits wide.
    pub widths: &'static [&'static [u32]],
    /// When the overflow interrupt fires.
    pub irq: IrqRule,
    /// Whether the model can raise an overflow interrupt at all.
    pub overflow_interrupt: bool,
    /// Whether the interrupt identifies the counter that overflowed.
    pub overflow_precise: bool,
    /// Whether all requests of a set must use the same user/system flags (one shared control
    /// register, as on UltraSPARC).
    pub same_flags: bool,
    /// Whether a bare decimal number names an event (R10000/R12000 numbering: number `n` is the
    /// route with code `n % 16` on counter `n / 16`, so 0-15 live on counter 0 and 16-31 on
    /// counter 1).
    pub numbered: bool,
    /// All events.
    pub events: &'static [SimEvent],
    /// Generic names.
    pub generics: &'static [Generic],
    /// Shared resources referenced by routes.
    pub resources: &'static [Resource],
    /// Attributes accepted on requests (besides the engine's own `picnum`).
    pub attributes: &'static [AttrSpec],
}

impl Model {
    /// The register width counter `c` has unless a request chooses another.
    pub fn default_width(&self, c: u32) -> u32 {
        self.widths
            .get(c as usize)
            .and_then(|w| w.first().copied())
            .unwrap_or(self.width)
    }

    /// Whether counter `c` can be set to `w` bits.
    pub fn has_width(&self, c: u32, w: u32) -> bool {
        match self.widths.get(c as usize) {
            Some(ws) => ws.contains(&w),
            None => w == self.width,
        }
    }
}

impl SimEvent {
    /// An event from its table entry's parts, copied in place at compile time (a name, a
    /// description or a route list longer than the table types allow fails the build).
    pub const fn new(name: &str, description: &str, routes: &[Route], emask: u32) -> SimEvent {
        SimEvent {
            name: Text::new(name),
            description: Text::new(description),
            routes: Inline::new(routes, route(0, 0)),
            emask,
        }
    }
}

/// A route through the counters in the mask `counters` with select code `code`, needing no
/// shared resource.
pub const fn route(counters: u64, code: u32) -> Route {
    Route {
        counters,
        code,
        resource: None,
    }
}

/// An event without event masks.
pub const fn plain_event(
    name: &'static str,
    description: &'static str,
    routes: &'static [Route],
) -> SimEvent {
    SimEvent::new(name, description, routes, 0)
}

/// A generic name for `event`, without an event mask.
pub const fn plain_generic(name: &str, event: &str) -> Generic {
    Generic::new(name, event, 0)
}

impl Generic {
    /// A generic name for `event` with the event mask `emask`, copied in place at compile time.
    pub const fn new(name: &str, event: &str, emask: u32) -> Generic {
        Generic {
            name: Text::new(name),
            event: Text::new(event),
            emask,
        }
    }
}

/// The tables `parts` one after the other, in a constant: for models that share parts of their
/// event tables with another model, so that each shared part is written once. `N` must be the
/// total length (checked at compile time).
pub const fn join<T: Copy, const N: usize>(parts: &[&[T]]) -> [T; N] {
    let mut total = 0;
    let mut p = 0;
    while p < parts.len() {
        total += parts[p].len();
        p += 1;
    }
    assert!(total == N && N > 0, "join: wrong length");
    let mut first = 0;
    while parts[first].is_empty() {
        first += 1;
    }
    let mut out = [parts[first][0]; N];
    let mut i = 0;
    p = 0;
    while p < parts.len() {
        let mut k = 0;
        while k < parts[p].len() {
            out[i] = parts[p][k];
            i += 1;
            k += 1;
        }
        p += 1;
    }
    out
}

/// Bit mask with the counters `lo..=hi` set.
pub const fn span(lo: u32, hi: u32) -> u64 {
    let mut m = 0u64;
    let mut i = lo;
    while i <= hi {
        m |= 1u64 << i;
        i += 1;
    }
    m
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The routes of `m`'s event `name`.
    pub(crate) fn routes(m: &Model, name: &str) -> &'static [Route] {
        m.events
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{}: no event {name}", m.name))
            .routes
            .as_slice()
    }

    /// The consistency every model's tables must have: unique event and generic names, every
    /// event counted somewhere and only on counters that exist, one event per (counter, code),
    /// generics naming events, per-counter widths for every counter.
    pub(crate) fn check_tables(m: &Model) {
        let all = if m.ncounters >= 64 {
            u64::MAX
        } else {
            (1u64 << m.ncounters) - 1
        };
        let mut names = HashSet::new();
        let mut codes = HashSet::new();
        for e in m.events {
            assert!(names.insert(e.name), "{}: duplicate {}", m.name, e.name);
            assert!(!e.routes.is_empty(), "{}: {} has no route", m.name, e.name);
            for r in e.routes {
                assert_ne!(r.counters, 0, "{}: {}", m.name, e.name);
                assert_eq!(r.counters & !all, 0, "{}: {} off the PMU", m.name, e.name);
                for c in 0..m.ncounters {
                    if r.counters & (1 << c) != 0 && r.resource.is_none() {
                        assert!(
                            codes.insert((c, r.code)),
                            "{}: {} reuses code {} on counter {c}",
                            m.name,
                            e.name,
                            r.code
                        );
                    }
                }
            }
        }
        let mut generics = HashSet::new();
        for g in m.generics {
            assert!(generics.insert(g.name), "{}: duplicate {}", m.name, g.name);
            assert!(
                m.events.iter().any(|e| e.name == g.event),
                "{}: {} names no event",
                m.name,
                g.name
            );
        }
        if !m.widths.is_empty() {
            assert_eq!(m.widths.len(), m.ncounters as usize, "{}", m.name);
            for w in m.widths {
                assert!(!w.is_empty() && w.iter().all(|&w| (1..=m.width).contains(&w)));
            }
        }
    }
}

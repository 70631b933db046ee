//! IRIX `libperfex` semantics on the engine: two R10000 events per thread, counted between a
//! start and a read. The C and Fortran entry points (in `perfcompat-capi`) only check pointers
//! and call these functions.
//!
//! Contract: libperfex(3C) and the decisions in the project's perfex reference.
//! - Events are R10000 event numbers 0..31, resolved by the backend (natively on `sim:r10000`
//!   and `sim:r12000`; through the event map, `PERFCOMPAT_EVENTS` included, on perf). Each is
//!   pinned to its R10000 hardware counter (0..15 on counter 0, 16..31 on counter 1), so two
//!   events of one counter are a "conflicting counters" error on every backend, as on IRIX.
//! - `T5_EVENT0`/`T5_EVENT1` (or `T5EVENT0`/`T5EVENT1`) override the events; a value that is not
//!   an integer in 0..31 is reported once on stderr and ignored.
//! - State is per thread. The counter group stays open between pairs: [`start`] takes one
//!   sample as the origin and [`read`] one sample for the counts, so each costs one counter read.
//!   "Stopping" after the read is logical: the next start takes a new origin.
//! - Generations: [`start`] returns a fresh one; [`read`] returns the same unless the kernel did
//!   not run the group for the whole interval (multiplexing), in which case it returns a fresh
//!   one, so the program's comparison fails as the man page intends.

use std::cell::RefCell;
use std::sync::Once;

use crate::costs::{self, EventCount};
use crate::engine::next_generation;
use crate::error::{Error, Result};
use crate::{backend, bind, Binding, CounterSet, Request, RequestFlags, Target};

pub mod command;
pub mod mpi;

struct ThreadCounters {
    events: (i32, i32),
    binding: Binding,
    origin: [u64; 2],
    enabled0: u64,
    running0: u64,
    generation: u32,
    started: bool,
}

thread_local! {
    static STATE: RefCell<Option<ThreadCounters>> = const { RefCell::new(None) };
}

/// The counts [`read`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Count of the first event.
    pub c0: i64,
    /// Count of the second event.
    pub c1: i64,
    /// Generation number (see the module documentation).
    pub generation: u32,
}

/// `T5_EVENT0`/`T5EVENT0` (index 0) or `T5_EVENT1`/`T5EVENT1` (index 1), if set and valid.
fn env_override(index: usize) -> Option<i32> {
    static WARNED: [Once; 2] = [Once::new(), Once::new()];
    let names = [["T5_EVENT0", "T5EVENT0"], ["T5_EVENT1", "T5EVENT1"]][index];
    let (name, value) = names
        .iter()
        .find_map(|n| std::env::var(n).ok().map(|v| (*n, v)))?;
    match value.trim().parse::<i32>() {
        Ok(n) if (0..32).contains(&n) => Some(n),
        _ => {
            WARNED[index].call_once(|| {
                eprintln!("libperfex: ignoring {name}={value:?}: not an event number in 0..31")
            });
            None
        }
    }
}

/// The events actually counted for arguments `e0`, `e1`: the environment overrides them.
///
/// The environment is read once, at the first call: a start/read pair must cost one counter
/// read each, and looking up four variables twice per pair cost more than the reads (the
/// benchmarks showed it). A program that changes `T5_EVENT0`/`T5_EVENT1` after its first
/// `start_counters` is not seen, as with a variable read when the program started.
pub fn events(e0: i32, e1: i32) -> (i32, i32) {
    static OVERRIDES: std::sync::OnceLock<(Option<i32>, Option<i32>)> = std::sync::OnceLock::new();
    let (o0, o1) = *OVERRIDES.get_or_init(|| (env_override(0), env_override(1)));
    (o0.unwrap_or(e0), o1.unwrap_or(e1))
}

/// An R10000 event number written as text (`"26"`, surrounding blanks allowed), or an error
/// naming it: what `perfex -e` and `PERFCOMPAT_PRELOAD_EVENTS` take.
pub fn parse_event(text: &str) -> Result<u32> {
    let n = text.trim().parse::<i32>().map_err(|_| {
        Error::InvalidArgument(format!(
            "{text:?} is not an R10000 event number (events are 0-31)"
        ))
    })?;
    check_range(n)
}

/// `e` as an R10000 event number, or an error naming it when it is not in 0..31.
pub fn check_range(e: i32) -> Result<u32> {
    u32::try_from(e).ok().filter(|&n| n < 32).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "event {e} is out of range (R10000 events are 0-31)"
        ))
    })
}

/// A set counting R10000 `events` with `flags`, each pinned to its R10000 hardware counter
/// (0..15 on counter 0, 16..31 on counter 1), so that two events of one counter are a
/// "conflicting counters" error on every backend.
pub fn pinned_set(events: &[u32], flags: RequestFlags) -> Result<CounterSet> {
    let mut set = CounterSet::new();
    for &e in events {
        set.add(Request::new(e.to_string()).on_counter(e / 16).flags(flags))?;
    }
    Ok(set)
}

fn bind_pair(e0: u32, e1: u32) -> Result<Binding> {
    bind(
        &pinned_set(&[e0, e1], RequestFlags::USER)?,
        Target::CurrentThread,
    )
}

/// Start counting events `e0` and `e1` (after the environment overrides) on the calling
/// thread from zero; returns the generation number.
pub fn start(e0: i32, e1: i32) -> Result<u32> {
    let (e0, e1) = events(e0, e1);
    let (n0, n1) = (check_range(e0)?, check_range(e1)?);
    STATE.with(|st| {
        let mut st = st.borrow_mut();
        // After fork() the pair open in the parent still counts the parent: open a new one.
        if !matches!(&*st, Some(t) if t.events == (e0, e1) && !t.binding.inherited_from_parent()) {
            *st = None; // unbind the old pair first
            *st = Some(ThreadCounters {
                events: (e0, e1),
                binding: bind_pair(n0, n1)?,
                origin: [0; 2],
                enabled0: 0,
                running0: 0,
                generation: 0,
                started: false,
            });
        }
        let t = st.as_mut().expect("state was just set");
        let mut v = [0u64; 2];
        let info = t.binding.sample(&mut v)?;
        t.origin = v;
        t.enabled0 = info.enabled_ns;
        t.running0 = info.running_ns;
        t.generation = next_generation();
        t.started = true;
        Ok(t.generation)
    })
}

/// Read the counts since the matching [`start`] on this thread, and stop counting.
pub fn read(e0: i32, e1: i32) -> Result<Counts> {
    let (e0, e1) = events(e0, e1);
    STATE.with(|st| {
        let mut st = st.borrow_mut();
        let t = st
            .as_mut()
            .filter(|t| t.started && !t.binding.inherited_from_parent())
            .ok_or(Error::WrongState(
                "the counters were not started on this thread (call start_counters first)",
            ))?;
        if t.events != (e0, e1) {
            return Err(Error::InvalidArgument(format!(
                "events ({e0}, {e1}) differ from the events started on this thread ({}, {})",
                t.events.0, t.events.1
            )));
        }
        let mut v = [0u64; 2];
        let info = t.binding.sample(&mut v)?;
        let enabled = info.enabled_ns.wrapping_sub(t.enabled0);
        let running = info.running_ns.wrapping_sub(t.running0);
        if running < enabled {
            // The kernel took the counters away for part of the interval.
            t.generation = next_generation();
        }
        t.started = false;
        Ok(Counts {
            c0: v[0].wrapping_sub(t.origin[0]) as i64,
            c1: v[1].wrapping_sub(t.origin[1]) as i64,
            generation: t.generation,
        })
    })
}

/// The calling thread's generation number: that of its last start or read, or a fresh one if
/// it never started counters.
pub fn generation() -> u32 {
    STATE.with(|st| {
        st.borrow()
            .as_ref()
            .map_or_else(next_generation, |t| t.generation)
    })
}

/// The count table `print_counters` writes (our layout, pinned by a golden test).
pub fn format_counters(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<String> {
    let backend = backend::global().map_or_else(|_| "none".to_string(), |b| b.info().name.clone());
    let flavor = costs::Flavor::for_backend(&backend);
    let mut out = format!("Event counts (libperfex on the {backend} backend):\n");
    for (e, c) in [(e0, c0), (e1, c1)] {
        out.push_str(&count_line(flavor, check_range(e)?, &c.to_string()));
        out.push('\n');
    }
    Ok(out)
}

/// One line of a count table: event number and name with a dotted leader, then `count`
/// right-aligned (shared by `print_counters` and the `perfex` command).
pub fn count_line(flavor: costs::Flavor, event: u32, count: &str) -> String {
    let label = format!("{event:>2} {} ", flavor.event_name(event as usize));
    format!("{label:.<60} {count:>20}")
}

/// The cost report `print_costs` writes: the two counts with their time estimates under the
/// cost table in force (see [`crate::costs`]), then the derived statistics they allow.
pub fn format_costs(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<String> {
    let counts = [
        EventCount {
            event: check_range(e0)? as usize,
            count: c0 as f64,
        },
        EventCount {
            event: check_range(e1)? as usize,
            count: c1 as f64,
        },
    ];
    Ok(costs::format_costs(&costs::current(), &counts, None))
}

/// Load the cost table file at `path` over the default table, for every thread: what
/// `load_costs` does. All or nothing (see [`crate::costs::load`]).
pub fn load_costs(path: &std::path::Path) -> Result<()> {
    costs::load(path)
}

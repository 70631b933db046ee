//! IRIX `libperfex`: `start_counters`, `read_counters`, `print_counters` (C and Fortran).
//!
//! Contract: libperfex(3C) and the decisions in the project's perfex reference.
//! - Events are R10000 event numbers 0..31, resolved by the engine (natively on `sim:r10000` and
//!   `sim:r12000`; through the event map, `PERFCOMPAT_EVENTS` included, on the perf backend).
//! - Two events of the same R10000 hardware counter (both in 0..15 or both in 16..31) are a
//!   "conflicting counters" error on every backend, as on IRIX.
//! - `T5_EVENT0`/`T5_EVENT1` (or `T5EVENT0`/`T5EVENT1`) override `e0`/`e1`; a value that is not
//!   an integer in 0..31 is reported once on stderr and ignored.
//! - State is per thread. The counter group stays open between pairs: `start_counters` takes
//!   one sample as the origin and `read_counters` one sample for the counts, so each costs one
//!   counter read. "Stopping" after the read is logical: the next start takes a new origin.
//! - Generation numbers: `start_counters` returns a fresh one; `read_counters` returns the same
//!   unless the kernel did not run the group for the whole interval (multiplexing), in which
//!   case it returns a fresh one, so the program's comparison fails as the man page intends.
//! - Every error returns -1, sets `errno` and prints a message naming the cause on stderr.

use std::cell::RefCell;
use std::ffi::{c_int, c_longlong};
use std::sync::Once;

use perfcompat::backend;
use perfcompat::engine::next_generation;
use perfcompat::error::{Conflict, ConflictReason};
use perfcompat::eventmap::r10k_event;
use perfcompat::{bind, Binding, CounterSet, Error, Request, Target};

use crate::{ffi_boundary, set_errno};

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

fn events(e0: c_int, e1: c_int) -> (i32, i32) {
    (env_override(0).unwrap_or(e0), env_override(1).unwrap_or(e1))
}

fn fail(func: &str, errno: c_int, msg: impl std::fmt::Display) -> c_int {
    eprintln!("{func}: {msg}");
    set_errno(errno);
    -1
}

/// Check the events the way IRIX does: in range, and not both on one hardware counter.
fn check_events(e0: i32, e1: i32) -> Result<(), Error> {
    for e in [e0, e1] {
        if !(0..32).contains(&e) {
            return Err(Error::InvalidArgument(format!(
                "event {e} is out of range (R10000 events are 0-31)"
            )));
        }
    }
    if e0 / 16 == e1 / 16 {
        return Err(Error::Conflict(Conflict {
            requests: vec![(0, e0.to_string()), (1, e1.to_string())],
            reason: ConflictReason::SameCounter {
                counters: vec![(e0 / 16) as u32],
            },
        }));
    }
    Ok(())
}

fn sample(b: &Binding) -> Result<([u64; 2], perfcompat::SampleInfo), Error> {
    let mut v = [0u64; 2];
    let info = b.sample(&mut v)?;
    Ok((v, info))
}

fn start_impl(e0: c_int, e1: c_int) -> c_int {
    const F: &str = "start_counters";
    let (e0, e1) = events(e0, e1);
    if let Err(e) = check_events(e0, e1) {
        return fail(F, libc::EINVAL, e);
    }
    STATE.with(|st| {
        let mut st = st.borrow_mut();
        let reuse = matches!(&*st, Some(t) if t.events == (e0, e1));
        if !reuse {
            *st = None; // unbind the old pair first
            let set = CounterSet::new()
                .with(Request::new(e0.to_string()))
                .and_then(|s| s.with(Request::new(e1.to_string())));
            let binding = match set.and_then(|s| bind(&s, Target::CurrentThread)) {
                Ok(b) => b,
                Err(e) => return fail(F, e.errno(), e),
            };
            *st = Some(ThreadCounters {
                events: (e0, e1),
                binding,
                origin: [0; 2],
                enabled0: 0,
                running0: 0,
                generation: 0,
                started: false,
            });
        }
        let t = st.as_mut().expect("state was just set");
        match sample(&t.binding) {
            Ok((v, info)) => {
                t.origin = v;
                t.enabled0 = info.enabled_ns;
                t.running0 = info.running_ns;
                t.generation = next_generation();
                t.started = true;
                t.generation as c_int
            }
            Err(e) => fail(F, e.errno(), e),
        }
    })
}

fn read_impl(e0: c_int, c0: Option<&mut i64>, e1: c_int, c1: Option<&mut i64>) -> c_int {
    const F: &str = "read_counters";
    let (e0, e1) = events(e0, e1);
    let (Some(c0), Some(c1)) = (c0, c1) else {
        return fail(F, libc::EFAULT, "NULL count pointer");
    };
    STATE.with(|st| {
        let mut st = st.borrow_mut();
        let Some(t) = st.as_mut().filter(|t| t.started) else {
            return fail(
                F,
                libc::EINVAL,
                "the counters were not started on this thread (call start_counters first)",
            );
        };
        if t.events != (e0, e1) {
            return fail(
                F,
                libc::EINVAL,
                format_args!(
                    "events ({e0}, {e1}) differ from the events started on this thread ({}, {})",
                    t.events.0, t.events.1
                ),
            );
        }
        let (v, info) = match sample(&t.binding) {
            Ok(x) => x,
            Err(e) => return fail(F, e.errno(), e),
        };
        *c0 = v[0].wrapping_sub(t.origin[0]) as i64;
        *c1 = v[1].wrapping_sub(t.origin[1]) as i64;
        let enabled = info.enabled_ns.wrapping_sub(t.enabled0);
        let running = info.running_ns.wrapping_sub(t.running0);
        if running < enabled {
            // The kernel took the counters away for part of the interval.
            t.generation = next_generation();
        }
        t.started = false;
        t.generation as c_int
    })
}

/// Name of R10000/R12000 event `e` for reports.
fn event_name(e: i32) -> Option<&'static str> {
    let ev = r10k_event(u32::try_from(e).ok()?)?;
    let r12k = backend::global().is_ok_and(|b| b.info().name == "sim:r12000");
    Some(if r12k { ev.r12000 } else { ev.r10000 })
}

/// Format the count table that `print_counters` writes (our layout; pinned by a golden test).
pub fn format_counters(e0: i32, c0: i64, e1: i32, c1: i64) -> Result<String, Error> {
    let mut out = String::new();
    let backend = backend::global().map_or_else(|_| "none".to_string(), |b| b.info().name.clone());
    out.push_str(&format!(
        "Event counts (libperfex on the {backend} backend):\n"
    ));
    for (e, c) in [(e0, c0), (e1, c1)] {
        let name = event_name(e).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "event {e} is out of range (R10000 events are 0-31)"
            ))
        })?;
        let label = format!("{e:>2} {name} ");
        out.push_str(&format!("{label:.<60} {c:>20}\n"));
    }
    Ok(out)
}

fn print_impl(e0: c_int, c0: i64, e1: c_int, c1: i64) -> c_int {
    match format_counters(e0, c0, e1, c1) {
        Ok(s) => {
            eprint!("{s}");
            STATE.with(|st| {
                st.borrow()
                    .as_ref()
                    .map_or_else(next_generation, |t| t.generation) as c_int
            })
        }
        Err(e) => fail("print_counters", libc::EINVAL, e),
    }
}

/// Start counting events `e0` and `e1` (R10000 event numbers) on the calling thread, with
/// zeroed counts. See libperfex(3C).
///
/// # Returns
/// A positive generation number, or -1 with `errno` set and a message on stderr: event out of
/// range or conflicting counters (`EINVAL`), event not available on this host (`EINVAL`),
/// permission denied (`EACCES`).
#[no_mangle]
pub extern "C" fn start_counters(e0: c_int, e1: c_int) -> c_int {
    ffi_boundary("start_counters", || start_impl(e0, e1))
}

/// Read the counts of `e0` and `e1` since the matching `start_counters` on this thread into
/// `*c0` and `*c1`, and stop counting. See libperfex(3C).
///
/// # Returns
/// The generation number: equal to the one `start_counters` returned when the counts cover the
/// whole interval. -1 with `errno` set and a message on stderr when the counters were not
/// started on this thread, the events differ from the started ones (`EINVAL`), or a pointer is
/// NULL (`EFAULT`). The counts are written only on success.
///
/// # Safety
/// `c0` and `c1` are NULL or point to writable `long long`s.
#[no_mangle]
pub unsafe extern "C" fn read_counters(
    e0: c_int,
    c0: *mut c_longlong,
    e1: c_int,
    c1: *mut c_longlong,
) -> c_int {
    ffi_boundary("read_counters", || {
        // SAFETY: the caller promises NULL or valid pointers.
        let (c0, c1) = unsafe { (c0.as_mut(), c1.as_mut()) };
        read_impl(e0, c0, e1, c1)
    })
}

/// Print the counts `c0` and `c1` of events `e0` and `e1` to standard error. Has no effect on
/// the counters.
///
/// # Returns
/// The calling thread's current generation number (a fresh one if it never started counters),
/// or -1 with `errno` `EINVAL` when an event number is out of range.
#[no_mangle]
pub extern "C" fn print_counters(e0: c_int, c0: c_longlong, e1: c_int, c1: c_longlong) -> c_int {
    ffi_boundary("print_counters", || print_impl(e0, c0, e1, c1))
}

// Fortran (libperfex(3F)): every argument by reference; gfortran appends one underscore, some
// compilers two.

/// Fortran entry points.
pub mod fortran {
    use super::*;

    macro_rules! entry {
        ($start:ident, $read:ident, $print:ident, $s:literal, $r:literal, $p:literal) => {
            /// Fortran `INTEGER*4 FUNCTION START_COUNTERS(E0, E1)`: see [`start_counters`].
            ///
            /// # Safety
            /// Both arguments are NULL or point to `INTEGER`s.
            #[export_name = $s]
            pub unsafe extern "C" fn $start(e0: *const c_int, e1: *const c_int) -> c_int {
                ffi_boundary($s, || {
                    // SAFETY: Fortran passes valid references.
                    match unsafe { (e0.as_ref(), e1.as_ref()) } {
                        (Some(e0), Some(e1)) => start_impl(*e0, *e1),
                        _ => fail("start_counters", libc::EFAULT, "NULL argument"),
                    }
                })
            }

            /// Fortran `INTEGER*4 FUNCTION READ_COUNTERS(E0, C0, E1, C1)` with `INTEGER*8`
            /// counts: see [`read_counters`].
            ///
            /// # Safety
            /// Every argument is NULL or points to its Fortran variable.
            #[export_name = $r]
            pub unsafe extern "C" fn $read(
                e0: *const c_int,
                c0: *mut i64,
                e1: *const c_int,
                c1: *mut i64,
            ) -> c_int {
                ffi_boundary($r, || {
                    // SAFETY: Fortran passes valid references.
                    match unsafe { (e0.as_ref(), e1.as_ref()) } {
                        // SAFETY: as above.
                        (Some(e0), Some(e1)) => unsafe {
                            read_impl(*e0, c0.as_mut(), *e1, c1.as_mut())
                        },
                        _ => fail("read_counters", libc::EFAULT, "NULL argument"),
                    }
                })
            }

            /// Fortran `INTEGER*4 FUNCTION PRINT_COUNTERS(E0, C0, E1, C1)`: see
            /// [`print_counters`].
            ///
            /// # Safety
            /// Every argument is NULL or points to its Fortran variable.
            #[export_name = $p]
            pub unsafe extern "C" fn $print(
                e0: *const c_int,
                c0: *const i64,
                e1: *const c_int,
                c1: *const i64,
            ) -> c_int {
                ffi_boundary($p, || {
                    // SAFETY: Fortran passes valid references.
                    match unsafe { (e0.as_ref(), c0.as_ref(), e1.as_ref(), c1.as_ref()) } {
                        (Some(e0), Some(c0), Some(e1), Some(c1)) => print_impl(*e0, *c0, *e1, *c1),
                        _ => fail("print_counters", libc::EFAULT, "NULL argument"),
                    }
                })
            }
        };
    }

    entry!(
        start_counters_,
        read_counters_,
        print_counters_,
        "start_counters_",
        "read_counters_",
        "print_counters_"
    );
    entry!(
        start_counters__,
        read_counters__,
        print_counters__,
        "start_counters__",
        "read_counters__",
        "print_counters__"
    );
}

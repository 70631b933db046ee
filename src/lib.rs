//! # perfcompat: the counter-virtualisation engine
//!
//! One engine behind two classic hardware-counter C ABIs, IRIX `libperfex` and Solaris
//! `libcpc` v1 and v2, with libpctx and Tru64's pfm device (the ABI layers live in the
//! `perfcompat-capi` crate). The engine is safe Rust with no C types. Its folders are its
//! layers; each uses only the ones above it in this list (`tests/module_graph.rs` checks it):
//!
//! - [`base`]: the leaves (the [`Error`] type, system facts, signal-safe state, the 64-bit
//!   virtualisation arithmetic) and what a set is before it is bound: a [`CounterSet`] of
//!   [`Request`]s and the [`Target`]s it can be bound to, placing requests on counters, the
//!   R10000 event map, the overflow signal's handler and watcher, the cost-file format;
//! - [`backend`]: the Linux `perf_event_open` backend and the emulated PMUs (R10000, R12000,
//!   UltraSPARC, Pentium 4, ...), chosen at run time by `PERFCOMPAT_BACKEND`;
//! - [`engine`]: [`bind`] places and programs a set and returns a [`Binding`]; sampling gives
//!   64-bit virtual values, presets, overflow notification with freezing, restart, generation
//!   numbers, each thread's table of bindings (see the module documentation for the
//!   signal-safety rules);
//! - [`api`]: the semantics of the interfaces: libcpc ([`api::cpc`]), libperfex
//!   ([`api::perfex`]), libpctx ([`api::pctx`]), Tru64's pfm device ([`api::pfm`]), the cost
//!   tables libperfex prints ([`api::costs`]) and what a new thread does before its start
//!   routine ([`api::threads`]);
//! - [`commands`]: the engines of the commands `perfex`, `cpustat` and `cputrack` (and their
//!   event specifications), and the host calibration behind `perfex --calibrate`.
//!
//! ```no_run
//! use perfcompat::{bind, CounterSet, Request, Target};
//! let set = CounterSet::new().with(Request::new("page-faults"))?;
//! let b = bind(&set, Target::CurrentThread)?;
//! let mut v = [0u64; 1];
//! b.sample(&mut v)?;
//! println!("{} page faults", v[0]);
//! # Ok::<(), perfcompat::Error>(())
//! ```

/// `eprintln!` for a library: a standard error that cannot be written (closed, a closed pipe,
/// a full disk) loses the line instead of panicking, as C's `fprintf(stderr, ...)` would. The
/// library's warnings never end the program that prints them (`eprintln!` panics, and a panic
/// aborts a release build: `perfex -e 0 true 2>&1 | true` died with SIGABRT). The line is
/// formatted first and written with one `write(2)` ([`base::notice`]), so that lines of
/// processes sharing a standard error (MPI ranks) never interleave mid-line.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        $crate::base::notice::write(&line);
    }};
}

/// `eprint!` as [`stderr_line!`] is `eprintln!`: text without a newline, never a panic, written
/// with one `write(2)`; a report (`print_counters`), never kept by [`base::notice::capture`].
#[macro_export]
macro_rules! stderr_text {
    ($($arg:tt)*) => {{
        $crate::base::notice::write_stderr(&::std::format!($($arg)*));
    }};
}

pub mod api;
pub mod backend;
pub mod base;
pub mod commands;
pub mod engine;

pub use base::error::{Error, Result};
pub use base::set::{Attr, CounterSet, Request, RequestFlags, Target};
pub use engine::{bind, bind_with, Binding, BoundSet, OverflowEvent, SampleInfo, Sampled};

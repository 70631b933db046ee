//! # perfcompat: the counter-virtualisation engine
//!
//! One engine behind two classic hardware-counter C ABIs, IRIX `libperfex` and Solaris
//! `libcpc` v2 (the ABI layers live in the `perfcompat-capi` crate). The engine is safe Rust
//! with no C types:
//!
//! - [`set`]: a [`CounterSet`] of [`Request`]s (event, 64-bit preset, flags, pinned counter,
//!   attributes) and the [`Target`]s a set can be bound to;
//! - [`engine`]: [`bind`] places and programs a set and returns a [`Binding`]; sampling gives
//!   64-bit virtual values, presets, overflow notification with freezing, restart, generation
//!   numbers (see the module documentation for the signal-safety rules);
//! - [`virt`]: the 64-bit virtualisation arithmetic over narrow counters;
//! - [`sched`]: placing requests on counters and explaining conflicts;
//! - [`backend`]: the Linux `perf_event_open` backend and the emulated PMUs (R10000, R12000,
//!   UltraSPARC, Pentium 4), chosen at run time by `PERFCOMPAT_BACKEND`;
//! - [`perfex`]: IRIX libperfex semantics (per-thread start/read pairs, generations, report);
//! - [`cpustat`], [`cputrack`]: the engines of the Solaris commands `cpustat` and `cputrack`;
//! - [`cpc`]: Solaris libcpc semantics that are not C: a set's requests as added, binding to a CPU,
//!   each thread's bound set and inherited copies;
//! - [`threads`]: what a new thread does before its start routine (the `pthread_create` hook);
//! - [`pctx`]: process control under ptrace (thread create/exit callbacks) for `perfex -mp`
//!   and libpctx;
//! - [`held`]: threads of traced processes whose program stopped their counting from inside
//!   (`cpc_disable` under cputrack);
//! - [`costs`]: perfex cost tables (built-in, system, loaded), time estimates and statistics;
//! - [`calibrate`]: the host calibration microbenchmarks (`perfex --calibrate`): clock, cache,
//!   memory and TLB-miss latencies, branch mispredict penalty, written to the host cost cache;
//! - [`eventmap`]: the R10000 event numbers and their closest Linux events, overridable by a
//!   `PERFCOMPAT_EVENTS` file.
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
/// aborts a release build: `perfex -e 0 true 2>&1 | true` died with SIGABRT).
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` as [`stderr_line!`] is `eprintln!`: text without a newline, never a panic.
#[macro_export]
macro_rules! stderr_text {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::write!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod backend;
pub mod calibrate;
pub mod costfile;
pub mod costs;
pub mod cpc;
pub mod cpustat;
pub mod cputrack;
pub mod engine;
pub mod error;
pub mod eventmap;
pub mod eventspec;
pub mod held;
pub mod pctx;
pub mod perfex;
pub mod pfm;
pub mod sched;
pub mod set;
pub mod signal;
pub mod sigsafe;
pub mod sys;
pub mod threads;
pub mod virt;
pub mod watch;

pub use engine::{bind, bind_with, Binding, BoundSet, OverflowEvent, SampleInfo};
pub use error::{Error, Result};
pub use set::{Attr, CounterSet, Request, RequestFlags, Target};

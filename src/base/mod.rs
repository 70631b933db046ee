//! The bottom layer: the leaves every other layer uses, and what a set is before it is bound.
//!
//! - Leaves (they import nothing above them): [`error`] (the one `Error` type, each variant
//!   with its errno and libcpc subcode), [`sys`] (thread id, monotonic clock, the overflow
//!   signal's number), [`sigsafe`] (blocking every signal around a state change; the sequence
//!   counter lock-free readers retry on), [`virt`] (the 64-bit virtualisation arithmetic),
//!   [`held`] (threads of traced processes whose program stopped their counting), [`notice`]
//!   (lines on standard error, one `write(2)` each, or kept for a report), [`text`] (strings and
//!   short lists held in place, for static tables without relocations), [`tpslot`] (a table of
//!   per-thread pointers found by the thread pointer, without a thread-local's call).
//! - Sets and placement: [`set`] (requests, flags, attributes, targets), [`sched`] (placing
//!   requests on counters and explaining conflicts), [`eventmap`] (R10000 event numbers to
//!   Linux events), [`signal`] (the perf overflow signal's handler, which reaches the engine
//!   only through function pointers the engine registers) and [`watch`] (the thread that takes
//!   an overflow its own thread could not), [`costfile`] (the cost-file format and the host
//!   calibration cache, which holds the calibrated clock the perf backend needs).

pub mod costfile;
pub mod error;
pub mod eventmap;
pub mod held;
pub mod notice;
pub mod sched;
pub mod set;
pub mod signal;
pub mod sigsafe;
pub mod sys;
pub mod text;
pub mod tpslot;
pub mod virt;
pub mod watch;

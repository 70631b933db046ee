//! The engines of the commands (their `main`s are in `tools/`): what `perfex`, `cpustat` and
//! `cputrack` do, the Solaris commands' event specifications, and the host calibration behind
//! `perfex --calibrate`.
//!
//! - [`perfex`]: counting a whole program (perfex(1)), and the self-count an `LD_PRELOAD`ed
//!   library reports;
//! - [`cpustat`], [`cputrack`]: counting every CPU, and each thread of a process (the Solaris
//!   commands);
//! - [`eventspec`]: the `-c` event specifications of cpustat and cputrack;
//! - [`calibrate`]: the microbenchmarks that write the host cost cache.

pub mod calibrate;
pub mod cpustat;
pub mod cputrack;
pub mod eventspec;
pub mod perfex;

use crate::base::error::Error;

/// The exit status of a usage error: a command line the command cannot use (an unknown option,
/// options that exclude each other, a malformed event specification, events that conflict on
/// the counters). The same for every conflict, in every command (issue 46 item 11:
/// `perfex -a -e 0` exited 2 and `perfex -e 0 -e 1` 1).
pub const USAGE_STATUS: u8 = 2;

/// The exit status of perfex, cputrack and cpustat when counting failed with `e`: 127 when the
/// command was not found, 126 when it could not be run, [`USAGE_STATUS`] for requests that
/// conflict (the command line asks for what no counter assignment gives), else 1.
pub fn failure_status(e: &Error) -> u8 {
    match e {
        Error::CannotRun { errno, .. } if *errno == libc::ENOENT => 127,
        Error::CannotRun { .. } => 126,
        Error::Conflict(_) => USAGE_STATUS,
        _ => 1,
    }
}

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

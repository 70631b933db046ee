//! The interfaces' semantics: what each legacy library means, in Rust, over the engine. The C
//! side (`perfcompat-capi`) only checks pointers and handles, converts and calls these.
//!
//! - [`cpc`]: Solaris libcpc versions 1 and 2 (a set's requests as added, binding to a CPU,
//!   each thread's bound set and inherited copies, SIGEMT);
//! - [`perfex`]: IRIX libperfex (per-thread start/read pairs, generations, the report) and its
//!   MPI layer;
//! - [`pctx`]: libpctx's process control under `ptrace` (thread create/exit callbacks), which
//!   libcpc's `cpc_bind_pctx`, cputrack and `perfex -mp` use;
//! - [`perfctr`]: perfctr's virtual per-thread counters (`vperfctr_*`): control data per CPU
//!   family, a-mode and i-mode counters, the virtual TSC, the overflow signal;
//! - [`pfm`]: Tru64's `/dev/pfcntr` device;
//! - [`costs`]: libperfex's cost tables, time estimates and statistics (`print_costs`,
//!   `perfex -y`);
//! - [`threads`]: what a new thread does before its start routine (libperfex's hand-over and
//!   libcpc inheritance);
//! - [`preload`]: counting a program from the outside (`PERFCOMPAT_PRELOAD_EVENTS`): the
//!   variables, what an `exec` does with the counts, the report's descriptor.

pub mod costs;
pub mod cpc;
pub mod pctx;
pub mod perfctr;
pub mod perfex;
pub mod pfm;
pub mod preload;
pub mod threads;

//! libcpc's tick clock (`cpc_buf_tick`, v1's `ce_tsc`): the nominal clock as cycles per
//! nanosecond in 32.32 fixed point, looked up once by the first call that needs it, and the
//! conversion of running time into ticks. Async-signal-safe.

use std::sync::atomic::{AtomicU64, Ordering};

/// The nominal clock, for `cpc_buf_tick`, as cycles per nanosecond in 32.32 fixed point:
/// `cpc_set_sample` turns nanoseconds into ticks with one integer multiply (the float
/// conversions showed in its profile).
///
/// Looked up by the first call that needs it (a sample), not by `cpc_open` (issue 48, first
/// use: a sysfs path lookup of cpufreq, about 11k instructions in the arm64 guest, that a
/// program which never samples, or samples later, does not pay at its first bind). A sample
/// may be in a signal handler: the lookup ([`crate::backend::nominal_mhz`]) is
/// async-signal-safe, and the answer is kept in an atomic (all ones: not looked up yet).
#[inline(always)]
pub fn clock_mult() -> u64 {
    let m = CLOCK_MULT.load(Ordering::Relaxed);
    if m != u64::MAX {
        return m;
    }
    look_up_clock_mult()
}

/// [`clock_mult`]'s answer where it was looked up, all ones where not (no lookup here):
/// for `cpc_set_sample`'s common case, which sends the first sample to the general one rather
/// than call the lookup (a call there gave it a frame).
#[inline(always)]
pub fn known_clock_mult() -> u64 {
    CLOCK_MULT.load(Ordering::Relaxed)
}

/// [`clock_mult`]'s answer, all ones while not looked up (a clock of 4 x 10^12 MHz).
static CLOCK_MULT: AtomicU64 = AtomicU64::new(u64::MAX);

/// [`clock_mult`]'s first call. Not `#[cold]`: a cold function is linked in `.text.unlikely`,
/// away from the functions of the first use listed in `capi/link/first-use-order.txt`
/// (issue 48: one text window more, `install::first_use_functions_lie_together`).
#[inline(never)]
fn look_up_clock_mult() -> u64 {
    let m = tick_mult(crate::backend::nominal_mhz()).min(u64::MAX - 1);
    CLOCK_MULT.store(m, Ordering::Relaxed);
    m
}

/// `mhz` as cycles per nanosecond in 32.32 fixed point (see [`clock_mult`]).
pub fn tick_mult(mhz: f64) -> u64 {
    let m = mhz / 1000.0 * (1u64 << 32) as f64;
    if m.is_finite() && m > 0.0 {
        m.round() as u64
    } else {
        0
    }
}

/// `ns` nanoseconds as ticks of the clock `mult` describes ([`clock_mult`]), modulo 2^64
/// as a 64-bit cycle counter wraps (at 5 GHz after 117 years of counting: issue 48, the
/// saturation was 3 instructions of every `cpc_set_sample`).
#[inline]
pub fn ticks(ns: u64, mult: u64) -> u64 {
    ((u128::from(ns) * u128::from(mult)) >> 32) as u64
}

//! 64-bit virtual counters over narrow hardware counters.
//!
//! This is the perfctr model: per counter a 64-bit `sum` of the periods already finished and
//! the hardware value `start` at the beginning of the current period. The count so far is
//! `sum + ((hw - start) mod 2^width)`; at the end of a period (an overflow interrupt, a context
//! switch) the difference is folded into `sum`. As long as a period never spans more than one
//! full wrap of the register, the 64-bit count is exact, however narrow the hardware.
//!
//! On top of that, each request's *virtual value* is `preset + count` modulo 2^64: libcpc
//! programs preset a request to `UINT64_MAX - k` and are notified when it wraps past 2^64,
//! exactly `k + 1` events later. [`distance_to_wrap`] gives that distance.

/// The mask of a `width`-bit register (`width` in 1..=64).
#[inline]
pub const fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Events counted by a `width`-bit register that went from `start` to `now`, taking at most
/// one wrap into account.
#[inline]
pub const fn delta(start: u64, now: u64, width: u32) -> u64 {
    now.wrapping_sub(start) & mask(width)
}

/// A 64-bit accumulation of a narrow counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accumulator {
    /// Events of the finished periods.
    pub sum: u64,
    /// Hardware value when the current period started.
    pub start: u64,
}

impl Accumulator {
    /// Start accumulating with the register at `hw`.
    pub const fn new(hw: u64) -> Accumulator {
        Accumulator { sum: 0, start: hw }
    }

    /// The 64-bit count if the register now reads `hw`; does not change the state.
    #[inline]
    pub const fn peek(&self, hw: u64, width: u32) -> u64 {
        self.sum.wrapping_add(delta(self.start, hw, width))
    }

    /// End the current period with the register at `hw` and start a new one at `reload`.
    #[inline]
    pub fn fold(&mut self, hw: u64, width: u32, reload: u64) {
        self.sum = self.peek(hw, width);
        self.start = reload;
    }
}

/// Number of events after which a virtual counter that now holds `value` wraps past 2^64
/// (`2^64 - value`), or `None` when that is 2^64 itself (value 0: it would take 2^64 events).
#[inline]
pub const fn distance_to_wrap(value: u64) -> Option<u64> {
    if value == 0 {
        None
    } else {
        Some(value.wrapping_neg())
    }
}

/// Run `f` on each index below `n`, in order: straight-line code for up to 4 (most sets have a
/// few requests; a loop there costs more to set up than its body, and a `match` on the count
/// becomes a jump table), a loop beyond. For the sampling paths, which run it on slices cut to
/// `n` so that `f`'s indexing needs no bounds check.
#[inline(always)]
pub fn each_index(n: usize, mut f: impl FnMut(usize)) {
    if n <= 4 {
        if n > 0 {
            f(0);
        }
        if n > 1 {
            f(1);
        }
        if n > 2 {
            f(2);
        }
        if n > 3 {
            f(3);
        }
    } else {
        for i in 0..n {
            f(i);
        }
    }
}

/// The virtual value of a request: `preset` plus the events counted since, modulo 2^64.
#[inline]
pub const fn virtual_value(preset: u64, events: u64) -> u64 {
    preset.wrapping_add(events)
}

/// The shift of a request whose virtual value is `preset` at raw count `origin`: what
/// [`shifted`] adds to a later raw count to give its virtual value, so that a read converts
/// with one addition where [`virtual_value`] of `count - origin` takes a subtraction and two
/// loads (the engine keeps it beside base and origin; libperfex's user-space pair keeps it).
#[inline]
pub const fn shift(preset: u64, origin: u64) -> u64 {
    preset.wrapping_sub(origin)
}

/// The virtual value at raw count `count` of a request of shift `shift` ([`shift`]): equal to
/// [`virtual_value`]`(preset, count - origin)`, modulo 2^64.
#[inline]
pub const fn shifted(count: u64, shift: u64) -> u64 {
    count.wrapping_add(shift)
}

/// The raw count whose virtual value is `v` for a request of shift `shift`: [`shifted`]'s
/// inverse.
#[inline]
pub const fn unshifted(v: u64, shift: u64) -> u64 {
    v.wrapping_sub(shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_count_is_the_virtual_value() {
        let values = [
            0,
            1,
            9,
            1 << 31,
            1 << 32,
            u64::MAX - 9,
            u64::MAX - 1,
            u64::MAX,
        ];
        for preset in values {
            for origin in values {
                for events in values {
                    let count = origin.wrapping_add(events);
                    let d = shift(preset, origin);
                    assert_eq!(shifted(count, d), virtual_value(preset, events));
                    assert_eq!(unshifted(shifted(count, d), d), count);
                }
            }
        }
        // The wrap a preset near 2^64 is notified at: ten events after UINT64_MAX - 9.
        let d = shift(u64::MAX - 9, 1000);
        assert_eq!(shifted(1009, d), u64::MAX);
        assert_eq!(shifted(1010, d), 0);
    }

    #[test]
    fn each_index_visits_every_index_once_in_order() {
        for n in 0..12 {
            let mut seen = Vec::new();
            each_index(n, |i| seen.push(i));
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn delta_handles_one_wrap() {
        assert_eq!(delta(0xffff_fff0, 0x10, 32), 0x20);
        assert_eq!(delta(5, 5, 32), 0);
        assert_eq!(delta(u64::MAX, 1, 64), 2);
        assert_eq!(delta(0xff_ffff_ffff, 0, 40), 1);
    }

    #[test]
    fn accumulates_many_wraps_exactly() {
        // A 32-bit register folded at every wrap counts 5 * 2^32 + 7 events exactly.
        let mut acc = Accumulator::new(0);
        let mut hw: u64 = 0;
        let mut total: u64 = 0;
        let chunk = 0x7fff_ffffu64; // less than a full wrap per period
        while total + chunk <= 5 * (1u64 << 32) + 7 {
            hw = (hw + chunk) & mask(32);
            total += chunk;
            acc.fold(hw, 32, hw);
        }
        let rest = 5 * (1u64 << 32) + 7 - total;
        hw = (hw + rest) & mask(32);
        assert_eq!(acc.peek(hw, 32), 5 * (1u64 << 32) + 7);
    }

    #[test]
    fn preset_distance() {
        assert_eq!(distance_to_wrap(u64::MAX - 999), Some(1000));
        assert_eq!(distance_to_wrap(u64::MAX), Some(1));
        assert_eq!(distance_to_wrap(0), None);
        assert_eq!(virtual_value(u64::MAX - 999, 1000), 0);
        assert_eq!(virtual_value(u64::MAX - 999, 999), u64::MAX);
    }
}

//! Restart and presets: setting a request's preset, restarting the set from its presets (with
//! signals blocked, or without when nothing but the state word changes), and a lone
//! page-fault-style leader that counts on through a freeze.

use std::sync::atomic::Ordering;

use super::overflow::DROPPED;
use super::{BoundSet, EPOCH, FROZEN, READY, RUNS_ON};
use crate::backend::Times;
use crate::base::error::{Error, Result};
use crate::base::set::MAX_REQUESTS;
use crate::base::virt;

impl BoundSet {
    /// For a restart without blocking signals of a lone notifying request frozen with `kind`
    /// (RUNS_ON or READY) set, on the thread that bound the set, to the preset it had: the
    /// state word, the sequence snapshot and the preset. `None` otherwise.
    #[inline]
    fn unblocked_restart_of(&self, kind: u64) -> Option<(u64, u64, u64)> {
        let st = self.state.load(Ordering::Acquire);
        if st & (FROZEN | RUNS_ON | READY) != FROZEN | kind
            || self.n != 1
            || self.notify != 1
            || self.owner_key == 0
            || self.owner_key != crate::base::sigsafe::thread_key()
        {
            return None;
        }
        let snapshot = self.seq.snapshot()?;
        let preset = self.preset[0].load(Ordering::Relaxed);
        (preset == self.base[0].load(Ordering::Relaxed)).then_some((st, snapshot, preset))
    }

    /// The restart's writes without blocking signals, from state word `st` at `snapshot`,
    /// counting on from `times`: true when its compare-and-swap of the state word took effect.
    fn commit_unblocked_restart(&self, st: u64, snapshot: u64, times: Times) -> bool {
        self.seq
            .write_unblocked(snapshot, || {
                // Plain stores that the restart with signals blocked makes again should the
                // compare-and-swap fail, as it does when any write came in between (every
                // write changes the state word).
                self.enabled0.store(times.enabled, Ordering::Relaxed);
                self.running0.store(times.running, Ordering::Relaxed);
                self.overflowed.store(0, Ordering::Relaxed);
                self.new_generation(false);
                self.state
                    .compare_exchange(
                        st,
                        (st & !(FROZEN | RUNS_ON | READY)).wrapping_add(EPOCH),
                        Ordering::Release,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            })
            .unwrap_or(false)
    }

    /// Stop a frozen set's group that counts on, and count on from where it stopped: what it
    /// counted since the freeze is dropped at the freeze. Must run inside `write`.
    fn stop_where_frozen(&self) {
        self.group.stop();
        let mut raw = [0u64; MAX_REQUESTS];
        if self.read_raw(&mut raw).is_ok() {
            self.drop_since_freeze(&raw);
            for (f, r) in self.frozen_raw.iter().zip(raw.iter()) {
                f.store(*r, Ordering::Relaxed);
            }
        }
    }

    /// Restart a set made ready at its freeze ([`BoundSet::ready_restart_at`]) without blocking
    /// signals (two system calls fewer on the overflow path), when that restart changes
    /// nothing but the state word and the group's start: its preset unchanged and its kernel
    /// period whole ([`Group::keeps_stopped_period`]), on the thread that bound the set. The
    /// group starts after the compare-and-swap: a sample in between reads the stopped group
    /// at the preset, and a handler that froze the set again before the start (its
    /// `cpc_disable`) has the group stopped again after it, where it then stands. False when
    /// it could not (the caller then restarts with signals blocked); a handler that wrote to
    /// the set meanwhile, on this thread or another, makes it fail. Async-signal-safe.
    fn restart_ready(&self) -> bool {
        let Some((st, snapshot, preset)) = self.unblocked_restart_of(READY) else {
            return false;
        };
        if !self
            .group
            .keeps_stopped_period(0, virt::distance_to_wrap(preset))
        {
            return false;
        }
        let times = Times {
            enabled: self.frozen_enabled.load(Ordering::Relaxed),
            running: self.frozen_running.load(Ordering::Relaxed),
        };
        if !self.commit_unblocked_restart(st, snapshot, times) {
            return false;
        }
        let next = (st & !(FROZEN | READY)).wrapping_add(EPOCH);
        self.group.start();
        if self.state.load(Ordering::Acquire) != next {
            // A handler wrote to the set between the compare-and-swap and the start. If it
            // froze it, the group it found stopped runs now: stop it where the freeze stands.
            self.write(|b| {
                if b.is_frozen() {
                    b.stop_where_frozen();
                }
            });
        }
        true
    }

    /// For notifying request `i` of a set frozen while its group counts on: the times of a read
    /// (into `raw`) that shows nothing counted since the overflow, when its kernel period is
    /// also whole at `distance` (then the group can go on as it is); `None` otherwise, without
    /// a read when the period is not whole.
    pub(super) fn counted_nothing_since(
        &self,
        i: usize,
        distance: Option<u64>,
        raw: &mut [u64],
    ) -> Result<Option<Times>> {
        if !self.group.keeps_period(i, distance) {
            return Ok(None);
        }
        let times = self.read_raw(raw)?;
        Ok((raw[i] == self.frozen_raw[i].load(Ordering::Relaxed)).then_some(times))
    }

    /// The set was just frozen at raw counts `at` while its group counts on: mark it so, and
    /// make ready now what a restart that finds nothing counted since needs
    /// ([`BoundSet::restart_counting_on`], which then writes only the state word and fields
    /// that the restart made with signals blocked sets again should it fail): the
    /// period's events go into the totals (the frozen set reports the same totals, its period
    /// adding nothing more), and counting goes on from `at`. A restart or resume that finds
    /// otherwise sets the origin again. Must run inside `write`.
    pub(super) fn count_on_from(&self, at: &[u64]) {
        self.fold_frozen_period(at);
        self.set_state(RUNS_ON, 0);
    }

    /// Restart a set frozen at an overflow while its group counts on, without blocking
    /// signals (two system calls fewer on the overflow path), when that restart changes
    /// nothing but the state word: one request, its preset unchanged and its kernel period
    /// whole (nothing counted since the overflow: one `read` shows it), on the thread that
    /// bound the set. False when it could not (the caller then restarts with signals blocked);
    /// a handler that wrote to the set meanwhile, on this thread or another, makes it fail.
    /// Async-signal-safe.
    fn restart_counting_on(&self) -> bool {
        let Some((st, snapshot, preset)) = self.unblocked_restart_of(RUNS_ON) else {
            return false;
        };
        let mut raw = [0u64; 1];
        let Ok(Some(times)) =
            self.counted_nothing_since(0, virt::distance_to_wrap(preset), &mut raw)
        else {
            return false;
        };
        self.commit_unblocked_restart(st, snapshot, times)
    }

    /// Count what a group that ran on after its freeze counted since (up to `raw`) as dropped
    /// at that freeze ([`dropped_at_freezes`]).
    pub(super) fn drop_since_freeze(&self, raw: &[u64]) {
        let mut from = [0u64; MAX_REQUESTS];
        for (f, r) in from.iter_mut().zip(self.frozen_raw.iter()) {
            *f = r.load(Ordering::Relaxed);
        }
        self.add_dropped(&from, raw);
    }

    /// Add what each request counted from raw counts `from` to `to` to the events dropped at
    /// freezes on this thread ([`dropped_at_freezes`]).
    pub(super) fn add_dropped(&self, from: &[u64], to: &[u64]) {
        let _ = DROPPED.try_with(|d| {
            for (i, c) in d.iter().enumerate().take(self.n) {
                c.set(c.get().wrapping_add(to[i].wrapping_sub(from[i])));
            }
        });
    }

    /// A set frozen while its group counts on is signalled again (the kernel's next overflow
    /// came before the restart): stop the group there, so that a set left frozen does not take
    /// a signal every period, and resume from the count at that stop. Must run inside `write`.
    pub(super) fn stop_counting_on(&self) {
        if self.take_runs_on() {
            self.stop_where_frozen();
        }
    }

    /// (Re)start counting from the current presets: the state at the start of a binding and
    /// after [`BoundSet::restart`]. Must run inside `write`.
    pub(super) fn start_from_presets(&self) -> Result<()> {
        let mut raw = [0u64; MAX_REQUESTS];
        // The first start of a group that opens stopped: its counts and times are zero, there
        // is nothing to stop or read (issue 48, first use).
        let (times, running) =
            if self.gen.load(Ordering::Relaxed) >> 1 == 0 && self.group.opens_stopped() {
                (Times::default(), false)
            } else {
                self.resume_raw(&mut raw, |i| {
                    virt::distance_to_wrap(self.preset[i].load(Ordering::Relaxed))
                })?
            };
        self.end_period(&raw);
        for i in 0..self.n {
            let p = self.preset[i].load(Ordering::Relaxed);
            self.set_base_origin(i, p, raw[i]);
            if self.notify & (1 << i) != 0 && !running {
                self.group.arm(i, virt::distance_to_wrap(p));
            }
        }
        self.enabled0.store(times.enabled, Ordering::Relaxed);
        self.running0.store(times.running, Ordering::Relaxed);
        if self.gen.load(Ordering::Relaxed) >> 1 == 0 {
            // The first start, at the bind: what the running time since the bind counts from
            // (a restart leaves it, issue 45 item 1).
            self.bound_running0.store(times.running, Ordering::Relaxed);
        }
        self.overflowed.store(0, Ordering::Relaxed);
        self.set_state(0, FROZEN | READY);
        self.new_generation(false);
        if !running {
            self.group.start();
        }
        Ok(())
    }

    /// Fold the events of the period that ends now into the totals: up to the freeze when
    /// frozen, else up to `raw` (read after the stop). Nothing before the first start.
    pub(super) fn end_period(&self, raw: &[u64]) {
        if self.gen.load(Ordering::Relaxed) >> 1 == 0 {
            return;
        }
        let frozen = self.is_frozen();
        for i in 0..self.n {
            let events = if frozen {
                self.frozen_events[i].load(Ordering::Relaxed)
            } else {
                raw[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed))
            };
            let sum = self.sums[i].load(Ordering::Relaxed);
            self.sums[i].store(sum.wrapping_add(events), Ordering::Relaxed);
        }
    }

    /// Set every request back to its preset and count again; clears a freeze.
    ///
    /// Async-signal-safe: meant to be called from the overflow signal handler.
    pub fn restart(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        // The overflow's own restarts first: the one that takes effect where the group counts
        // on reads the counter once (as the sample does, it trusts the descriptor's number,
        // kept out of the program's reach: see `Group::lost_descriptor`), the one made ready at
        // the freeze makes no system call.
        if self.restart_counting_on() || self.restart_ready() {
            return Ok(());
        }
        // Every other restart checks first that the descriptors are still the counters, so it
        // never stops, reads or re-arms a program's pipe or file (issue 44 item 1).
        self.check_descriptors()?;
        self.write(|b| b.start_from_presets())
    }

    /// Change request `index`'s preset; it takes effect at the next [`BoundSet::restart`].
    ///
    /// Async-signal-safe. Inline: the SIGEMT handler's `cpc_request_preset` is this one
    /// store (issue 48).
    #[inline]
    pub fn set_preset(&self, index: usize, preset: u64) -> Result<()> {
        if index >= self.n {
            return Err(Error::IndexOutOfRange {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                len: self.n,
            });
        }
        self.preset[index].store(preset, Ordering::Release);
        Ok(())
    }
}

//! Overflow and freeze: the process's overflow hooks, a notifying request's wrap handled
//! (the set frozen at the kernel's record, the hooks run, the next period armed), and the
//! engine's side of held threads and of the backends' signal.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{BoundSet, OverflowEvent, OverflowHook, FROZEN, READY};
use crate::backend::{self, Group, KernelStop, Times};
use crate::base::error::{Error, Result};
use crate::base::set::{Target, MAX_REQUESTS};
use crate::base::sys::now_ns;
use crate::base::virt;

static HOOK: AtomicUsize = AtomicUsize::new(0);

/// Install (or with `None` remove) the per-process overflow hook.
pub fn set_overflow_hook(hook: Option<OverflowHook>) {
    HOOK.store(hook.map_or(0, |h| h as usize), Ordering::Release);
}

/// Hooks added beside the one [`set_overflow_hook`] installs: one per ABI layer that needs its
/// own (the pfm device, `crate::api::pfm`), each recognising its bindings by their user data.
static EXTRA_HOOKS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// Add a hook that runs after the per-process one on every overflow notification (idempotent:
/// adding a hook twice keeps one). Hooks cannot be removed; each must ignore the bindings that
/// are not its own ([`OverflowEvent::user_data`]) and be async-signal-safe.
pub fn add_overflow_hook(hook: OverflowHook) -> Result<()> {
    let h = hook as usize;
    for slot in &EXTRA_HOOKS {
        match slot.compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(()),
            Err(old) if old == h => return Ok(()),
            Err(_) => {}
        }
    }
    Err(Error::InvalidArgument(
        "no room for another overflow hook".into(),
    ))
}

fn run_hook(ev: &OverflowEvent) {
    let h = HOOK.load(Ordering::Acquire);
    if h != 0 {
        // SAFETY: only ever stored from an `OverflowHook`.
        let f: OverflowHook = unsafe { std::mem::transmute::<usize, OverflowHook>(h) };
        f(ev);
    }
    // The slots fill from the first and are never emptied: the first empty one ends them.
    for slot in &EXTRA_HOOKS {
        let h = slot.load(Ordering::Acquire);
        if h == 0 {
            break;
        }
        // SAFETY: only ever stored from an `OverflowHook`.
        let f: OverflowHook = unsafe { std::mem::transmute::<usize, OverflowHook>(h) };
        f(ev);
    }
}

thread_local! {
    /// Per request index: events that happened between an overflow and the stop that froze
    /// the set at the overflow's record, summed over the freezes handled on this thread. They
    /// are counted nowhere by design; this is for tests that account for every event.
    pub(super) static DROPPED: [Cell<u64>; MAX_REQUESTS] = const { [const { Cell::new(0) }; MAX_REQUESTS] };
}

/// Events of request `index` dropped at the freezes handled on the calling thread so far:
/// those that came between an overflow (the kernel's record of it) and the handler's stop of
/// the group (see the README, "The freeze is taken at the overflow instant"). A test that
/// counts every event independently adds them to what the set reported. Async-signal-safe.
pub fn dropped_at_freezes(index: usize) -> u64 {
    DROPPED
        .try_with(|d| d.get(index).map_or(0, Cell::get))
        .unwrap_or(0)
}

impl crate::base::held::Stoppable for BoundSet {
    fn stop_counting(&self) -> bool {
        self.stop().is_ok()
    }
    fn resume_counting(&self) -> bool {
        self.resume().is_ok()
    }
}

impl backend::Bound for BoundSet {
    fn group(&self) -> &dyn Group {
        BoundSet::group(self)
    }
    fn interrupt(&self, pc: usize) {
        BoundSet::interrupt(self, -1, false, pc);
    }
}

impl BoundSet {
    /// Move the events of the period a freeze just ended into the totals (the frozen set
    /// reports the same totals: its period then adds nothing more) and count on from raw
    /// counts `at`: what a restart from the freeze needs, made before it. Must run inside
    /// `write`.
    pub(super) fn fold_frozen_period(&self, at: &[u64]) {
        for i in 0..self.n {
            // A load and a store, not a swap: only the writer inside `write` changes it (an
            // atomic read-modify-write is a call to an outline atomic on arm64 without LSE).
            let events = self.frozen_events[i].load(Ordering::Relaxed);
            self.frozen_events[i].store(0, Ordering::Relaxed);
            let sum = self.sums[i].load(Ordering::Relaxed);
            self.sums[i].store(sum.wrapping_add(events), Ordering::Relaxed);
            self.set_origin(i, at[i]);
        }
    }

    /// The set was just frozen at raw counts `at`, where the kernel stopped its group right
    /// at the wrap of its one notifying request with nothing counted since: make ready what
    /// the restart to the same preset needs ([`BoundSet::restart_ready`], which then only
    /// writes the state word and fields that the restart with signals blocked writes again
    /// should it fail, and starts the group). Must run inside `write`.
    fn ready_restart_at(&self, at: &[u64]) {
        self.fold_frozen_period(at);
        self.set_state(READY, 0);
    }

    /// Whether request `i`'s raw count `at` is exactly where its virtual value wraps (an
    /// overflow with no skid). Must run inside `write`.
    fn at_the_wrap(&self, i: usize, at: u64) -> bool {
        let base = self.base[i].load(Ordering::Relaxed);
        let origin = self.origin[i].load(Ordering::Relaxed);
        virt::virtual_value(base, at.wrapping_sub(origin)) == 0
    }

    /// Freeze the values as they are now (`out`, if given, receives them).
    pub(super) fn freeze(&self, overflowed: u64) -> Result<()> {
        self.group.stop();
        let mut raw = [0u64; MAX_REQUESTS];
        let times = self.read_raw(&mut raw)?;
        self.freeze_at(&raw, &raw, times, overflowed, None);
        Ok(())
    }

    /// Freeze: the values are those of raw counts `at` (at the overflow instant, or as read
    /// after the stop), counting resumes from raw counts `raw` read after the group was
    /// stopped (so what was counted between `at` and the stop counts nowhere), and `when` is
    /// the time of `at` if the backend knows it.
    fn freeze_at(&self, at: &[u64], raw: &[u64], times: Times, overflowed: u64, when: Option<u64>) {
        for i in 0..self.n {
            self.frozen_raw[i].store(raw[i], Ordering::Relaxed);
            self.frozen_events[i].store(
                at[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
            let base = self.base[i].load(Ordering::Relaxed);
            let origin = self.origin[i].load(Ordering::Relaxed);
            self.frozen_vals[i].store(
                virt::virtual_value(base, at[i].wrapping_sub(origin)),
                Ordering::Relaxed,
            );
        }
        let when = when.unwrap_or_else(|| now_ns() as u64);
        self.frozen_at.store(when, Ordering::Relaxed);
        self.add_overflowed(overflowed);
        self.frozen_enabled.store(times.enabled, Ordering::Relaxed);
        self.frozen_running.store(times.running, Ordering::Relaxed);
        self.set_state(FROZEN, READY);
        self.new_generation(true);
    }

    /// Add `mask` to the requests that overflowed since the last restart. Must run inside
    /// `write`: there it is the only writer of the word (the unblocked restart's store of 0
    /// holds the claim too), so a load and a store, not an atomic OR (a call to an outline
    /// atomic on arm64 without LSE, issue 48).
    fn add_overflowed(&self, mask: u64) {
        let was = self.overflowed.load(Ordering::Relaxed);
        self.overflowed.store(was | mask, Ordering::Relaxed);
    }

    /// The overflow of a lone notifying request that the kernel stopped at its record
    /// ([`KernelStop::AtRecord`]), taken from that record into one value rather than through
    /// the 64-value buffers of the general path (issue 48: zeroing and copying them, and the
    /// general path's loops, were a fifth of the engine's part of an overflow). The same
    /// state as the general path leaves: frozen at the record, the kernel's stop at the
    /// wrap told to the backend, and on the binding thread with the wrap exact, the restart
    /// made ready ([`BoundSet::ready_restart_at`]), here in the same writes. `None` when the
    /// ring holds no record (the general path then reads the stopped group). Must run inside
    /// `write`, for a set of one request.
    fn freeze_lone_at_record(&self, fd: i32) -> Option<u64> {
        let mut one = [0u64; 1];
        let (when, times) = self.group.overflow_snapshot(fd, &mut one)?;
        let at = one[0];
        if self.wrapped(&one, None) == 0 {
            // Not its wrap (the kernel's period stops short of a far wrap): as the general
            // path does, from the record's count.
            return Some(self.freeze_or_arm_on(&one, times));
        }
        self.freeze_lone_at(at, times, when);
        Some(1)
    }

    /// [`BoundSet::freeze_lone_at_record`]'s writes: the lone request wrapped at raw count
    /// `at`, where the kernel stopped the group, at time `when` with `times`. What
    /// `freeze_at(&[at], &[at], times, 1, Some(when))` followed (at the wrap exactly, on the
    /// binding thread) by `ready_restart_at(&[at])` leave, in one set of writes (the unit test
    /// `the_lone_freeze_leaves_what_the_general_path_leaves` holds them to it). Must run
    /// inside `write`, for a set of one request.
    #[inline(always)]
    fn freeze_lone_at(&self, at: u64, times: Times, when: u64) {
        let base = self.base[0].load(Ordering::Relaxed);
        let origin = self.origin[0].load(Ordering::Relaxed);
        let events = at.wrapping_sub(origin);
        let value = virt::virtual_value(base, events);
        // Nothing counted between the overflow and the kernel's stop (the count at the stop
        // is the record's): at the wrap exactly, the kernel's period is whole at the restart.
        // No events dropped at this freeze (`add_dropped` would add 0).
        let exact = value == 0;
        if exact {
            self.group.stopped_at_overflow(0);
        }
        self.frozen_raw[0].store(at, Ordering::Relaxed);
        self.frozen_vals[0].store(value, Ordering::Relaxed);
        self.frozen_at.store(when, Ordering::Relaxed);
        self.add_overflowed(1);
        self.frozen_enabled.store(times.enabled, Ordering::Relaxed);
        self.frozen_running.store(times.running, Ordering::Relaxed);
        if exact && self.target == Target::CurrentThread {
            // `freeze_at` then `ready_restart_at` in one: the period's events go into the
            // totals now and counting goes on from the record.
            let sum = self.sums[0].load(Ordering::Relaxed);
            self.sums[0].store(sum.wrapping_add(events), Ordering::Relaxed);
            self.frozen_events[0].store(0, Ordering::Relaxed);
            self.set_origin(0, at);
            self.set_state(FROZEN | READY, 0);
        } else {
            self.frozen_events[0].store(events, Ordering::Relaxed);
            self.set_state(FROZEN, READY);
        }
        self.new_generation(true);
    }

    /// The end of an overflow handled from raw counts `raw` (read after the stop, or the
    /// record's): freeze at them when a notifying request wrapped (its mask returned), else
    /// arm each notifying request for the rest of its distance and start the group again (0).
    /// Must run inside `write`. Out of line: its buffer stays out of the lone request's
    /// frame.
    #[inline(never)]
    fn freeze_or_arm_on(&self, raw: &[u64], times: Times) -> u64 {
        let mut rearm = [None::<u64>; MAX_REQUESTS];
        let mask = self.wrapped(raw, Some(&mut rearm));
        if mask == 0 {
            // The backend could not be armed that far (perf periods stop at 2^63): arm again
            // for the rest of the distance.
            for (i, r) in rearm.iter().enumerate().take(self.n) {
                if r.is_some() {
                    self.group.arm(i, *r);
                }
            }
            self.group.start();
            return 0;
        }
        self.freeze_at(raw, raw, times, mask, None);
        mask
    }

    /// Run the process's overflow hooks for this binding's overflowed requests, as if their
    /// overflow had just been signalled at program counter `pc`: what a thread that inherits a
    /// libcpc set is told after [`BoundSet::freeze_as_overflowed`]. Async-signal-safe.
    pub fn notify_overflowed(&self, pc: usize) {
        run_hook(&OverflowEvent {
            binding: self.id,
            user_data: self.user_data(),
            overflowed: self.overflowed(),
            pc,
            tid: self.owner,
        });
    }

    /// Freeze a freshly bound set as if every notifying request had just overflowed: those
    /// read `u64::MAX` and are reported overflowed, the others read their presets. What a
    /// thread inheriting a libcpc set with `CPC_OVF_NOTIFY_EMT` requests sees before its
    /// handler presets and restarts it ([`BoundSet::restart`] counts from the presets). Fails
    /// if the set is already frozen.
    pub fn freeze_as_overflowed(&self) -> Result<()> {
        if self.gone() {
            return Err(Error::NotBound);
        }
        self.check_descriptors()?;
        self.write(|b| {
            if b.is_frozen() {
                return Err(Error::WrongState("the counters are already stopped"));
            }
            b.freeze(b.notify)?;
            for i in 0..b.n {
                let v = if b.notify & (1 << i) != 0 {
                    u64::MAX
                } else {
                    b.preset[i].load(Ordering::Relaxed)
                };
                b.frozen_vals[i].store(v, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    /// The notifying requests that wrapped at raw counts `raw` (bit mask), and for the others
    /// the events left to their wrap.
    pub(super) fn wrapped(
        &self,
        raw: &[u64],
        mut rearm: Option<&mut [Option<u64>; MAX_REQUESTS]>,
    ) -> u64 {
        let mut mask = 0u64;
        for i in 0..self.n {
            let mut left = None;
            if self.notify & (1 << i) != 0 {
                let base = self.base[i].load(Ordering::Relaxed);
                let events = raw[i].wrapping_sub(self.origin[i].load(Ordering::Relaxed));
                match virt::distance_to_wrap(base) {
                    Some(d) if events >= d => mask |= 1 << i,
                    Some(d) => left = Some(d - events),
                    None => {}
                }
            }
            if let Some(r) = rearm.as_deref_mut() {
                r[i] = left;
            }
        }
        mask
    }

    /// [`BoundSet::interrupt`]'s write for anything but a lone request stopped at its record:
    /// the freeze from the record or from a read after the stop, for signal `fd` and how the
    /// kernel left the group (`kstop`). Must run inside `write`, on a set not frozen.
    #[inline(never)]
    fn overflow_general(&self, fd: i32, kstop: KernelStop) -> u64 {
        // A signal whose overflow record is gone reports an overflow already handled (two
        // overflows before the first signal was taken; the restart dropped the second's
        // record). Stopping and restarting the group for it would not be free: on a group
        // counting another running thread, the kernel's disable can fall between two
        // members' increments for one event and lose it in one of them.
        // A signal that finds no record, though, can also be a real overflow whose record
        // the kernel could not write (a full ring while signals were blocked): then a
        // request has wrapped, and the freeze falls back to the read after the stop.
        if kstop == KernelStop::No
            && fd >= 0
            && self.group.overflow_record_pending(fd) == Some(false)
        {
            let mut raw = [0u64; MAX_REQUESTS];
            match self.read_raw(&mut raw) {
                Ok(_) if self.wrapped(&raw, None) != 0 => {}
                _ => return 0,
            }
        }
        // The values freeze at the overflow instant when the backend recorded it (the
        // perf backend's overflow record), else at the read after the stop. Counting
        // resumes after a restart from that read, or from the record itself where the
        // kernel stopped the group right there ([`KernelStop::AtRecord`]: no stop, no read).
        let mut at = [0u64; MAX_REQUESTS];
        // A group that counts on is frozen at its record when the record shows the wrap;
        // otherwise it is handled as one the kernel did not stop.
        let mut kstop = kstop;
        if kstop == KernelStop::Running {
            if let Some((when, times)) = self.group.overflow_snapshot(fd, &mut at) {
                let mask = self.wrapped(&at, None);
                if mask != 0 {
                    self.freeze_at(&at, &at, times, mask, Some(when));
                    self.count_on_from(&at);
                    return mask;
                }
            }
            kstop = KernelStop::No;
        }
        // Declared here, not above: the lone leader's path returns before, and zeroing
        // buffers it does not use cost it time on every overflow.
        let mut raw = [0u64; MAX_REQUESTS];
        let (times, when) = match kstop {
            KernelStop::AtRecord => match self.group.overflow_snapshot(fd, &mut at) {
                Some((when, times)) => {
                    // The requests' counts only: the whole 64-value array copied was
                    // most of this path's copying (issue 48).
                    raw[..self.n].copy_from_slice(&at[..self.n]);
                    (times, Some(when))
                }
                None => match self.read_raw(&mut raw) {
                    Ok(times) => (times, None),
                    Err(_) => return 0,
                },
            },
            _ => {
                // Stop first, unless the kernel did.
                if kstop == KernelStop::No {
                    self.group.stop();
                }
                let Ok(times) = self.read_raw(&mut raw) else {
                    self.group.start();
                    return 0;
                };
                let when = if fd >= 0 {
                    self.group.overflow_snapshot(fd, &mut at).map(|(w, _)| w)
                } else {
                    None
                };
                (times, when)
            }
        };
        if let Some(when) = when {
            let mask = self.wrapped(&at, None);
            if mask != 0 {
                // Nothing counted between the overflow and the stop: the backend may
                // find its kernel's period already whole at the restart.
                let mut whole = 0u64;
                for i in (0..self.n).filter(|i| mask & (1 << i) != 0) {
                    if raw[i] == at[i] && self.at_the_wrap(i, at[i]) {
                        self.group.stopped_at_overflow(i);
                        whole |= 1 << i;
                    }
                }
                self.add_dropped(&at, &raw);
                self.freeze_at(&at, &raw, times, mask, Some(when));
                // A lone notifying request on its own thread, stopped by the kernel right
                // at its wrap: its restart can be made ready now.
                if self.n == 1 && whole == 1 && self.target == Target::CurrentThread {
                    self.ready_restart_at(&raw);
                }
                return mask;
            }
        }
        self.freeze_or_arm_on(&raw[..self.n], times)
    }

    /// Overflow interrupt from the backend, for the signal that carried `fd` (-1 when the
    /// backend detected it itself; `hup`, the signal's code says the kernel stopped the event
    /// there): find the requests that wrapped, freeze, notify. Async-signal-safe.
    pub(crate) fn interrupt(&self, fd: i32, hup: bool, pc: usize) {
        if self.notify == 0 || self.gone() {
            return;
        }
        let fired = self.write(|b| {
            // First: the backend learns from the signal how the kernel left the group, even
            // when the set is frozen already.
            let kstop = if fd >= 0 {
                b.group.overflow_signalled(fd, hup)
            } else {
                KernelStop::No
            };
            if b.is_frozen() {
                // The group counts on after the freeze and overflowed again: stop it now.
                if fd >= 0 {
                    b.stop_counting_on();
                }
                return 0;
            }
            // A lone request stopped by the kernel at its record: the short way, in this small
            // closure (the general path's buffers and frame are out of line, issue 48).
            if kstop == KernelStop::AtRecord && b.n == 1 {
                if let Some(fired) = b.freeze_lone_at_record(fd) {
                    return fired;
                }
            }
            b.overflow_general(fd, kstop)
        });
        if fired != 0 {
            run_hook(&OverflowEvent {
                binding: self.id,
                user_data: self.user_data(),
                overflowed: fired,
                pc,
                tid: self.owner,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimBackend;
    use crate::base::set::{CounterSet, Request};

    fn bind_lone(preset: u64, target: Target) -> super::super::Binding {
        let backend: &'static SimBackend = Box::leak(Box::new(SimBackend::new("r10000").unwrap()));
        let set = CounterSet::new()
            .with(Request::new("cycles").preset(preset).notify())
            .unwrap();
        crate::engine::bind_with(backend, &set, target).unwrap()
    }

    /// Everything a freeze writes, the generation's number aside (each draws a new one).
    fn state(b: &BoundSet) -> Vec<u64> {
        let one = |a: &[std::sync::atomic::AtomicU64]| a[0].load(Ordering::Relaxed);
        vec![
            one(&b.frozen_raw),
            one(&b.frozen_vals),
            one(&b.frozen_events),
            one(&b.sums),
            one(&b.origin),
            one(&b.base),
            b.frozen_at.load(Ordering::Relaxed),
            b.overflowed.load(Ordering::Relaxed),
            b.frozen_enabled.load(Ordering::Relaxed),
            b.frozen_running.load(Ordering::Relaxed),
            b.state.load(Ordering::Relaxed) & (FROZEN | super::super::RUNS_ON | READY),
            b.gen.load(Ordering::Relaxed) & 1,
        ]
    }

    // Issue 48: the lone request's freeze at its record is one set of writes of its own, not
    // the general path's `freeze_at` and `ready_restart_at`: it must leave exactly what they
    // leave, at the wrap and past it (skid), on the binding thread and for another thread's
    // counters (no restart made ready there), and so must a restart from it.
    #[test]
    fn the_lone_freeze_leaves_what_the_general_path_leaves() {
        const K: u64 = 1000;
        let preset = u64::MAX - (K - 1);
        let times = Times {
            enabled: 777,
            running: 555,
        };
        for (target, skid) in [
            (Target::CurrentThread, 0),
            (Target::CurrentThread, 3),
            (Target::Thread(crate::base::sys::gettid()), 0),
        ] {
            let fast = bind_lone(preset, target);
            let general = bind_lone(preset, target);
            let origin = fast.origin[0].load(Ordering::Relaxed);
            for b in [&fast, &general] {
                b.set_origin(0, origin);
                b.sums[0].store(12345, Ordering::Relaxed);
            }
            let at = origin.wrapping_add(K + skid);
            fast.write(|b| b.freeze_lone_at(at, times, 42));
            general.write(|b| {
                b.freeze_at(&[at], &[at], times, 1, Some(42));
                if skid == 0 && b.target == Target::CurrentThread {
                    b.ready_restart_at(&[at]);
                }
            });
            let what = format!("{target:?}, skid {skid}");
            assert_eq!(state(&fast), state(&general), "{what}");
            assert!(fast.is_frozen(), "{what}");
            let ready = fast.state.load(Ordering::Relaxed) & READY != 0;
            assert_eq!(
                ready,
                skid == 0 && target == Target::CurrentThread,
                "{what}"
            );
            let (mut a, mut g) = ([0u64; 1], [0u64; 1]);
            fast.sample(&mut a).unwrap();
            general.sample(&mut g).unwrap();
            assert_eq!(a, g, "{what}");
            assert_eq!(a[0], skid, "frozen at the record: {what}");
        }
    }
}

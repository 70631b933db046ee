//! The programmed counters of one set on the perf backend ([`PerfGroup`]): one kernel group per
//! thread or CPU, read in one `read()` or with `rdpmc`, stopped, restarted and re-armed, and
//! frozen at an overflow from the kernel's overflow record.

use std::any::Any;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use perf_event_open_sys::bindings as b;

use super::kernel::Kernel;
use super::{rdpmc, ring};
use crate::backend::{Group, KernelStop, Times};
use crate::base::set::MAX_REQUESTS;

/// One kernel group: the members of a set opened on one thread (or one CPU).
pub(super) struct Unit {
    pub(super) fds: Vec<OwnedFd>,
    /// Each member's event id (`PERF_EVENT_IOC_ID` at the open; 0 when the kernel gave none):
    /// what proves a descriptor is still the counter ([`PerfGroup::lost_descriptor`]).
    pub(super) ids: Vec<u64>,
    pub(super) mmaps: Option<rdpmc::Pages>,
    /// The overflow record rings of the notifying members (request index, ring); empty for
    /// inherited events, which the kernel does not let map.
    pub(super) rings: Vec<(usize, ring::Ring)>,
}

impl Unit {
    /// The overflow ring of the group's leader, if it has one.
    pub(super) fn leader_ring(&self) -> Option<&ring::Ring> {
        self.rings.iter().find(|(i, _)| *i == 0).map(|(_, r)| r)
    }
}

/// The programmed counters of one set on the perf backend.
pub struct PerfGroup {
    pub(super) kernel: &'static dyn Kernel,
    pub(super) units: Vec<Unit>,
    pub(super) n: usize,
    // One request: read without PERF_FORMAT_GROUP. The kernel allocates and frees a buffer on
    // every group read; a lone event's plain read cost about 440 ns here against 620.
    pub(super) single: bool,
    pub(super) scale: [f64; MAX_REQUESTS],
    pub(super) scaled: bool,
    pub(super) notify: u64,
    // Read with a `read` system call made inline by the caller ([`DirectRead`]): the kernel is
    // the host's (not a model), one unit, no `rdpmc` pages.
    pub(super) inline_read: bool,
    // The descriptors are the host kernel's (not a model's): another thread can poll them
    // ([`Group::overflow_fds`]).
    pub(super) pollable: bool,
    // The kernel sampling period each notifying request was last given (at open or by
    // `PERF_EVENT_IOC_PERIOD`).
    pub(super) armed: [AtomicU64; MAX_REQUESTS],
    // Requests whose kernel period is reloaded whole at an overflow and then untouched until
    // something counts: the host kernel's counting software events (page faults, context
    // switches, migrations; not the clocks, whose timers keep running), in a one-unit group.
    pub(super) reloads_whole: u64,
    // Notifying hardware requests (the host's kernel, one unit): at an overflow the kernel
    // reloads the period from where the counter wrapped, so when the overflow came exactly at
    // the wrap (no skid: `Group::stopped_at_overflow` is told only then) and nothing counted
    // after it, the period left is whole, as for `reloads_whole`.
    pub(super) reloads_at_wrap: u64,
    // A lone notifying leader counting a hardware event in user mode only, on one thread, with
    // its overflow ring and the storm guard's limit of one (`limited`): at its overflow the
    // kernel disables it (from an interrupt work item run before the thread is back in user
    // mode, where alone it counts), so its count at the record is its count at the stop. The
    // engine freezes it at the record with no `PERF_EVENT_IOC_DISABLE` and no read
    // ([`KernelStop::AtRecord`]): two system calls fewer per overflow (issue 32).
    pub(super) stops_at_record: bool,
    // Requests stopped right at their overflow since the last start ([`Group::stopped_at_overflow`]).
    pub(super) untouched: AtomicU64,
    // The kernel stops the group at the leader's overflow itself: the leader notifies and
    // counts a software event of the host's kernel, one thread, one unit, with its overflow
    // ring. Every start leaves the leader with an overflow limit of exactly one, so at its
    // next overflow the kernel disables it (the group with it: the leader is off) and signals
    // with `POLL_HUP`; the engine's handler then needs no `PERF_EVENT_IOC_DISABLE`.
    //
    // The limit is 1 after a start, and drops to 0 at the leader's first overflow after it,
    // which stops the group: so at the next start it is 0 exactly when the leader overflowed
    // since the last start, which its record says (waiting in its ring, or consumed by the
    // engine's handler, which then sets `limit_spent`). `PERF_EVENT_IOC_REFRESH` adds one to
    // the limit (and enables): a start uses it then, and `PERF_EVENT_IOC_ENABLE` otherwise.
    // Cleared for good if a refresh ever fails (the engine stops the group from then on).
    // Used for groups that `runs_on` does not take.
    pub(super) self_stop: AtomicBool,
    // A lone notifying leader counting a software event of the host's kernel on the calling
    // thread, with its overflow ring: nothing stops it at its overflow
    // ([`KernelStop::Running`]). The record gives the engine the count at the overflow, the
    // kernel reloads the whole period there, and the restart reads the count once: when it has
    // not moved, the event goes on counting as it is. Measured against the kernel's stop and
    // `PERF_EVENT_IOC_REFRESH` at every overflow, about 2 µs less per overflow here (the
    // disable at the overflow and the re-enable's reschedule of the thread's counters).
    pub(super) runs_on: bool,
    // The leader's limit is 0 and its record is gone: the handler consumed it, or the group
    // was never started.
    pub(super) limit_spent: AtomicBool,
    // The storm guard (see [`STORM_FLOOR_NS`]): notifying requests that the kernel stops at
    // their overflow, each start giving them an overflow limit of one
    // (`PERF_EVENT_IOC_REFRESH`), so that a request has at most one overflow signal queued
    // whatever the thread does meanwhile (blocks the signal, spends its time in a handler):
    // every notifying request of a group that neither stops itself (`self_stop`) nor counts on
    // at its overflow (`runs_on`), and is not inherited (the kernel refuses a limit on an
    // inherited event). A request whose refresh the kernel refuses leaves the mask.
    pub(super) limited: AtomicU64,
    // Requests of `limited` whose limit of one is in place and not yet used (no `POLL_HUP`
    // seen since their last refresh): a start does not add another.
    pub(super) limit_armed: AtomicU64,
    // Per request: the shortest kernel sampling period it is armed with (see
    // [`STORM_FLOOR_NS`]); 0 for none.
    pub(super) floor: [u64; MAX_REQUESTS],
    // A descriptor of the group found no longer the counter it was (the program closed it,
    // and perhaps opened something else at its number): that number, or -1. Once set, the
    // group makes no system call on any of its descriptors again (issue 44 item 1).
    pub(super) lost: AtomicI32,
}

/// `PERF_EVENT_IOC_ID` of `fd` through `kernel`: the event id, or `None` when `fd` is not a
/// counter (a pipe, a file: `ENOTTY`; closed: `EBADF`). Never blocks, reads or writes the
/// descriptor.
pub(super) fn event_id(kernel: &dyn Kernel, fd: i32) -> Option<u64> {
    let mut id = 0u64;
    kernel
        .ioctl(fd, b::ID as u64, &mut id as *mut u64 as usize)
        .ok()
        .map(|_| id)
}

/// The shortest time between two overflow interrupts of a clock request (`cpu-clock`,
/// `task-clock`, and `cycles` when it falls back to CPU time), in nanoseconds of the clock:
/// a shorter distance to the wrap is armed at this one, so the overflow (and its signal) comes
/// later than the preset asked, past the wrap, and the frozen value says by how much. The
/// kernel's own floor for these timers is 10 µs, which is shorter than an overflow's handling
/// in a debug build (about 20-27 µs measured here): a program restarting at that distance
/// spent all its time in the handler. At 100 µs the overflow path takes at most a fifth of
/// the thread's time in a debug build, a few percent in a release one. Counting events
/// (page faults, context switches) need no floor: each of their overflows needs the program
/// to do more work; hardware events are throttled by the kernel
/// (`perf_event_max_sample_rate`).
pub const STORM_FLOOR_NS: u64 = 100_000;

pub(super) const MAX_PERIOD: u64 = (1u64 << 63) - 1;

/// The kernel sampling period for an overflow `distance` in virtual events: converted through
/// the request's scale (the `cycles` fallback counts nanoseconds) and clamped to what the kernel
/// accepts (1 ..= 2^63 - 1; longer distances are re-armed by the engine).
pub(super) fn period(distance: Option<u64>, scale: f64) -> u64 {
    let d = distance.unwrap_or(MAX_PERIOD);
    let d = if scale != 1.0 {
        (d as f64 / scale).ceil() as u64
    } else {
        d
    };
    d.clamp(1, MAX_PERIOD)
}

impl PerfGroup {
    /// The kernel sampling period of request `index` for an overflow `distance` away: see
    /// [`period`], and no shorter than the request's floor ([`STORM_FLOOR_NS`]).
    #[inline]
    fn kperiod(&self, index: usize, distance: Option<u64>) -> u64 {
        period(distance, self.scale[index]).max(self.floor[index])
    }

    /// Give every request of `limited` in unit `u` whose limit is used up a new overflow limit
    /// of one (`PERF_EVENT_IOC_REFRESH`, which also enables it: the kernel disabled it at its
    /// overflow). Members first, the leader last, since enabling it starts the group. True when
    /// the leader was refreshed (and so enabled).
    fn refresh_limits(&self, u: &Unit) -> bool {
        let todo = self.limited.load(Ordering::Relaxed) & !self.limit_armed.load(Ordering::Relaxed);
        if todo == 0 {
            return false;
        }
        let n = u.fds.len().min(self.n);
        // Members first, then the leader: two plain loops where a chained iterator's state
        // machine cost the overflow's restart about 20 instructions (issue 48).
        for i in 1..n {
            if todo & (1 << i) != 0 {
                self.refresh_limit(u, i);
            }
        }
        n > 0 && todo & 1 != 0 && self.refresh_limit(u, 0)
    }

    /// Give member `i` of unit `u` a new overflow limit of one ([`PerfGroup::refresh_limits`]):
    /// false, and the request guarded by the floor only from now on, if the kernel refused.
    fn refresh_limit(&self, u: &Unit, i: usize) -> bool {
        // Marked before the refresh: a start made with signals unblocked (the engine's
        // restart of a set stopped at its wrap) can take the request's next overflow, whose
        // handler clears the mark, as soon as the refresh enables it.
        self.limit_armed.fetch_or(1 << i, Ordering::Relaxed);
        if self
            .kernel
            .ioctl(u.fds[i].as_raw_fd(), b::REFRESH as u64, 1)
            .is_ok()
        {
            return true;
        }
        // Guarded by the floor only from now on.
        self.limit_armed.fetch_and(!(1 << i), Ordering::Relaxed);
        self.limited.fetch_and(!(1 << i), Ordering::Relaxed);
        false
    }

    /// Whether unit `u`'s leader stops itself and its overflow limit is used up (see
    /// `self_stop`); looked at before a start discards the records.
    fn limit_spent(&self, u: &Unit) -> bool {
        self.self_stop.load(Ordering::Relaxed)
            && (self.limit_spent.load(Ordering::Relaxed)
                || u.leader_ring().is_some_and(ring::Ring::pending))
    }

    /// Give unit `u`'s leader an overflow limit of one and enable it
    /// (`PERF_EVENT_IOC_REFRESH`); false if the kernel refused.
    fn refresh(&self, u: &Unit) -> bool {
        if self
            .kernel
            .ioctl(u.fds[0].as_raw_fd(), b::REFRESH as u64, 1)
            .is_ok()
        {
            self.limit_spent.store(false, Ordering::Relaxed);
            true
        } else {
            // Stopped by the engine from now on.
            self.self_stop.store(false, Ordering::Relaxed);
            false
        }
    }

    /// Whether a descriptor of the group was found lost ([`Group::lost_descriptor`]): then
    /// nothing is done on any of them.
    #[inline(always)]
    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed) >= 0
    }

    /// Whether member `i`'s descriptor of unit `u` is still the counter opened there: its
    /// event id is the one recorded at the open (a model kernel without ids: whether the
    /// descriptor answers at all).
    fn still_ours(&self, u: &Unit, i: usize) -> bool {
        event_id(self.kernel, u.fds[i].as_raw_fd()) == Some(u.ids[i])
    }

    /// The overflow ring of the member whose descriptor is `fd`.
    fn ring_of(&self, fd: i32) -> Option<&ring::Ring> {
        self.units.iter().find_map(|u| {
            u.rings
                .iter()
                .find(|(i, _)| u.fds[*i].as_raw_fd() == fd)
                .map(|(_, r)| r)
        })
    }

    fn read_unit(&self, u: &Unit, out: &mut [u64]) -> std::result::Result<Times, i32> {
        self.read_unit_with(u, out, true)
    }

    /// [`PerfGroup::read_unit`], with the user-space read only when `user_read`.
    fn read_unit_with(
        &self,
        u: &Unit,
        out: &mut [u64],
        user_read: bool,
    ) -> std::result::Result<Times, i32> {
        if let (Some(p), true) = (&u.mmaps, user_read) {
            if let Some(t) = p.read(out) {
                return Ok(t);
            }
        }
        if self.is_lost() {
            return Err(libc::EBADF);
        }
        // Not zeroed: only what the kernel wrote is read (zeroing 1 KiB on every sample showed
        // in the profile).
        let mut buf = [MaybeUninit::<u64>::uninit(); 3 + 2 * MAX_REQUESTS];
        let len = 3 + 2 * self.n;
        let r = self.kernel.read(u.fds[0].as_raw_fd(), &mut buf[..len])?;
        self.layout().parse(&buf, r, out)
    }

    /// How this group's reads are laid out.
    #[inline(always)]
    fn layout(&self) -> Layout {
        Layout {
            n: self.n,
            single: self.single,
        }
    }

    /// Convert counts of requests whose events count in other units (the `cycles` fallback
    /// counts nanoseconds).
    #[inline(always)]
    fn scale(&self, out: &mut [u64]) {
        if self.scaled {
            scale_counts(out, &self.scale);
        }
    }
}

/// The shape of a group's `read()`: how many requests, and whether without the group format.
#[derive(Debug, Clone, Copy)]
struct Layout {
    n: usize,
    single: bool,
}

impl Layout {
    /// The counts and times of a `read` of `r` bytes into `buf` (not scaled: see `scale_counts`).
    #[inline(always)]
    fn parse(
        &self,
        buf: &[MaybeUninit<u64>; 3 + 2 * MAX_REQUESTS],
        r: usize,
        out: &mut [u64],
    ) -> std::result::Result<Times, i32> {
        if r < 24 {
            return Err(libc::EIO);
        }
        let len = 3 + 2 * self.n;
        let words = r.min(len * 8) / 8;
        // SAFETY: the kernel wrote the first `words` words.
        let buf = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u64>(), words) };
        let times = Times {
            enabled: buf[1],
            running: buf[2],
        };
        if self.single {
            // value, time enabled, time running
            out[0] = buf[0];
        } else {
            // {value, id} pairs after nr, time enabled, time running; both slices cut to `nr`
            // once, so the loop has no bounds check.
            let nr = (buf[0] as usize).min(self.n).min((words - 3) / 2);
            let (out, missing) = out.split_at_mut(nr);
            let pairs = &buf[3..3 + 2 * nr];
            // The closure inlined by force (issue 48: LLVM called it out of line, +45
            // instructions per host interval, once libperfex's general calls grew).
            crate::base::virt::each_index(
                nr,
                #[inline(always)]
                |i| out[i] = pairs[2 * i],
            );
            // Requests the kernel did not report (it reports every member of the group) read
            // 0, as they would into a zeroed buffer. Out of line: an empty fill is a `memset`
            // call.
            if !missing.is_empty() {
                zero(missing);
            }
        }
        Ok(times)
    }
}

/// Zero `v` (requests a read did not report).
#[cold]
fn zero(v: &mut [u64]) {
    v.fill(0);
}

/// Convert counts of requests whose events count in other units by their `scale`.
#[cold]
fn scale_counts(out: &mut [u64], scale: &[f64]) {
    for (o, s) in out.iter_mut().zip(scale) {
        if *s != 1.0 {
            *o = (*o as f64 * s) as u64;
        }
    }
}

/// A perf group's counter read made by its caller, inline ([`Group::direct_read`]): the
/// group's descriptor and read layout, valid while the group is.
///
/// # Why
/// On this kernel (and any with return-stack mitigations on kernel entry) every `ret` after a
/// system call to a frame that was live before it is mispredicted: about 8 ns each, measured
/// with a `read` of a counter made 0 to 16 calls deep (+120 ns at 16). A sample used to return
/// through 8 frames (libc's `read`, the library's own `read` interposer, `Kernel::read`,
/// `read_unit`, `Group::read`, the engine's sample, the C export), about 60 ns of a 770 ns
/// `cpc_set_sample`. Made by [`DirectRead::read`], inlined up to the C export, the system call
/// leaves one return to mispredict, the same as a program calling `read` itself. Only for the
/// host's kernel with one unit: the kernel model of the tests goes through [`Group::read`].
/// With `rdpmc` pages the counters are read from them first, inline as well (on the arm64
/// guest a sample of one event took 474 instructions through `Group::read`, `read_unit` and
/// `Kernel::rdpmc`, issue 32), and with `read()` when they cannot answer.
///
/// Small: the sample reads it right after its system call, beside the engine's own state of
/// the set, so the scales (of the `cycles` fallback only) are behind a pointer.
#[derive(Debug, Clone)]
pub struct DirectRead {
    fd: i32,
    layout: Layout,
    scale: Option<Box<[f64]>>,
    /// The members' `rdpmc` pages, read first when the group has them.
    pages: Option<rdpmc::HostPages>,
}

impl DirectRead {
    /// Whether [`DirectRead::read_user`] can answer at all: the group has `rdpmc` pages and no
    /// scaled request. Checked before anything else by the engine's lean sample, so that a
    /// group read with `read()` (software events) loses only this test to it.
    #[inline(always)]
    pub fn reads_user(&self) -> bool {
        self.pages.is_some() && self.scale.is_none()
    }

    /// The counts from the members' `rdpmc` pages only (no system call), or `None` when they
    /// cannot answer exactly (no pages, a scaled request, a member not on a counter, the group
    /// multiplexed): the caller then reads with [`DirectRead::read`]. Async-signal-safe.
    #[inline(always)]
    pub fn read_user(&self, out: &mut [u64]) -> Option<Times> {
        if self.scale.is_some() {
            return None;
        }
        rdpmc::read_host(self.pages.as_ref()?, &mut out[..self.layout.n])
    }

    /// The members' pages, to be read one by one ([`UserPage::read`]), when
    /// [`DirectRead::reads_user`] is true (`None` without pages). Valid while `self` is.
    ///
    /// [`UserPage::read`]: super::UserPage::read
    #[inline(always)]
    pub fn user_pages(&self) -> Option<&[super::UserPage]> {
        self.pages.as_ref().map(rdpmc::HostPages::members)
    }

    /// [`Group::read`] with its `read` system call made right here; the counter pages, where
    /// the group has them, are read first only when `user()` says so (the caller runs on the
    /// thread the group counts: on another, a user-space read would read its own CPU's
    /// counter). `user` is asked only then: a group without pages pays nothing for it.
    /// Async-signal-safe; on x86-64 and arm64 it does not change `errno`.
    #[inline(always)]
    pub fn read(
        &self,
        out: &mut [u64],
        user: impl FnOnce() -> bool,
    ) -> std::result::Result<Times, i32> {
        let out = &mut out[..self.layout.n];
        if let Some(p) = self.pages.as_ref().filter(|_| user()) {
            if let Some(t) = rdpmc::read_host(p, out) {
                if let Some(scale) = &self.scale {
                    scale_counts(out, scale);
                }
                return Ok(t);
            }
        }
        let mut buf = [MaybeUninit::<u64>::uninit(); 3 + 2 * MAX_REQUESTS];
        let len = (3 + 2 * self.layout.n) * 8;
        // SAFETY: writes at most `len` bytes into `buf`, which holds more.
        let r = unsafe { crate::base::sys::read(self.fd, buf.as_mut_ptr().cast(), len) };
        let r = usize::try_from(r).map_err(|_| -(r as i32))?;
        let t = self.layout.parse(&buf, r, out)?;
        if let Some(scale) = &self.scale {
            scale_counts(out, scale);
        }
        Ok(t)
    }
}

impl Group for PerfGroup {
    fn forget_mappings(&mut self) {
        // The kernel maps a perf event's pages not to be copied by fork(): in the child the
        // addresses are free, and a group the child opened may have its pages there.
        for u in &mut self.units {
            std::mem::forget(u.mmaps.take());
            std::mem::forget(std::mem::take(&mut u.rings));
        }
    }

    fn read(&self, out: &mut [u64]) -> std::result::Result<Times, i32> {
        let out = &mut out[..self.n];
        let mut t = Times::default();
        if self.units.len() == 1 {
            t = self.read_unit(&self.units[0], out)?;
        } else {
            out.fill(0);
            let mut tmp = [0u64; MAX_REQUESTS];
            for u in &self.units {
                match self.read_unit(u, &mut tmp[..self.n]) {
                    Ok(x) => {
                        for (o, v) in out.iter_mut().zip(&tmp) {
                            *o = o.wrapping_add(*v);
                        }
                        t.enabled += x.enabled;
                        t.running += x.running;
                    }
                    // A thread of the target that has exited still reads its final counts,
                    // so an error here is real.
                    Err(e) => return Err(e),
                }
            }
        }
        self.scale(out);
        Ok(t)
    }

    fn stop(&self) {
        if self.is_lost() {
            return;
        }
        for u in &self.units {
            let _ = self
                .kernel
                .ioctl(u.fds[0].as_raw_fd(), b::DISABLE as u64, 0);
        }
    }

    fn start(&self) {
        self.untouched.store(0, Ordering::Relaxed);
        if self.is_lost() {
            return;
        }
        for u in &self.units {
            // Looked at before the leader's record is discarded.
            let refresh = self.limit_spent(u);
            // The group is stopped: a record still in a ring is from an overflow the engine
            // has handled, or from one before a stop whose signal comes late.
            for (_, r) in &u.rings {
                r.discard();
            }
            // A guarded leader's refresh enables it (and the group).
            if self.refresh_limits(u) {
                continue;
            }
            if !(refresh && self.refresh(u)) {
                let _ = self.kernel.ioctl(u.fds[0].as_raw_fd(), b::ENABLE as u64, 0);
            }
        }
    }

    fn arm(&self, index: usize, distance: Option<u64>) {
        if self.notify & (1 << index) == 0 || self.is_lost() {
            return;
        }
        let d: u64 = self.kperiod(index, distance);
        // The kernel set a counting software event's period left back to the whole period
        // when it overflowed (and nothing has counted since: the group was stopped right
        // there), so re-arming the same period would change nothing: save the system call.
        let bit = 1u64 << index;
        if self.untouched.fetch_and(!bit, Ordering::Relaxed) & bit != 0
            && (self.reloads_whole | self.reloads_at_wrap) & bit != 0
            && self.armed[index].load(Ordering::Relaxed) == d
        {
            return;
        }
        for u in &self.units {
            // The kernel reads the new period through a pointer. perf-event-open-sys's
            // `ioctls::PERIOD` passes it by value, which fails with EFAULT and leaves the
            // period the event was opened with (tests/perf.rs
            // restart_rearms_the_overflow_at_a_new_preset catches that).
            // The argument is a pointer to a local that outlives the call.
            let r = self.kernel.ioctl(
                u.fds[index].as_raw_fd(),
                b::PERIOD as u64,
                &d as *const u64 as usize,
            );
            // Unknown after a failure: never skip on it.
            let now = if r.is_ok() { d } else { 0 };
            self.armed[index].store(now, Ordering::Relaxed);
        }
    }

    /// Each unit's leader is opened disabled (`open_or_check`), which keeps its group from
    /// counting until the first `PERF_EVENT_IOC_ENABLE` (or `_REFRESH`).
    fn opens_stopped(&self) -> bool {
        true
    }

    fn direct_read(&self) -> Option<DirectRead> {
        self.inline_read.then(|| DirectRead {
            fd: self.units[0].fds[0].as_raw_fd(),
            layout: self.layout(),
            scale: self.scaled.then(|| self.scale[..self.n].into()),
            pages: self.units[0].mmaps.as_ref().map(rdpmc::Pages::host_pages),
        })
    }

    fn keeps_stopped_period(&self, index: usize, distance: Option<u64>) -> bool {
        let bit = 1u64 << index;
        self.untouched.load(Ordering::Relaxed) & bit != 0
            && (self.reloads_whole | self.reloads_at_wrap) & bit != 0
            && self.armed[index].load(Ordering::Relaxed) == self.kperiod(index, distance)
    }

    fn keeps_period(&self, index: usize, distance: Option<u64>) -> bool {
        self.reloads_whole & (1 << index) != 0
            && self.armed[index].load(Ordering::Relaxed) == self.kperiod(index, distance)
    }

    fn stopped_at_overflow(&self, index: usize) {
        self.untouched.fetch_or(1 << index, Ordering::Relaxed);
    }

    fn owns_fd(&self, fd: i32) -> bool {
        self.units.iter().any(|u| {
            u.fds
                .iter()
                .enumerate()
                .any(|(i, f)| self.notify & (1 << i) != 0 && f.as_raw_fd() == fd)
        })
    }

    fn overflow_snapshot(&self, fd: i32, out: &mut [u64]) -> Option<(u64, Times)> {
        let out = &mut out[..self.n];
        let s = self.ring_of(fd)?.first_sample(out, self.n)?;
        self.scale(out);
        Some((s.time_ns, s.times))
    }

    fn overflow_signalled(&self, fd: i32, hup: bool) -> KernelStop {
        if hup {
            // A guarded request used its limit: the kernel disabled it at this overflow, and
            // the next start gives it another.
            let limited = self.limited.load(Ordering::Relaxed);
            if limited != 0 {
                for u in &self.units {
                    if let Some(i) = u.fds.iter().position(|f| f.as_raw_fd() == fd) {
                        if limited & (1 << i) != 0 {
                            self.limit_armed.fetch_and(!(1 << i), Ordering::Relaxed);
                            // See `stops_at_record`: a record in the ring is this overflow's
                            // (a start discards them).
                            return match u.leader_ring() {
                                Some(r) if self.stops_at_record && r.pending() => {
                                    KernelStop::AtRecord
                                }
                                _ => KernelStop::No,
                            };
                        }
                    }
                }
            }
        }
        if self.runs_on {
            let u = &self.units[0];
            return match u.leader_ring() {
                Some(r) if u.fds[0].as_raw_fd() == fd && r.pending() => KernelStop::Running,
                _ => KernelStop::No,
            };
        }
        if !hup || !self.self_stop.load(Ordering::Relaxed) {
            return KernelStop::No;
        }
        let u = &self.units[0];
        if u.fds[0].as_raw_fd() != fd {
            return KernelStop::No;
        }
        // POLL_HUP: the leader reached its limit at an overflow and the kernel disabled it.
        // A record waiting in its ring says no start came after the overflow that used the
        // limit (a start discards the records), so the group is stopped there (see
        // `self_stop`). The kernel disables the leader from an interrupt work item raised at
        // the overflow, which runs before the thread can take another page fault (or switch)
        // on this CPU: a lone leader counted nothing after its record. Members besides the
        // leader may have counted the overflowing event after the record (the kernel counts
        // them one after the other): those are read.
        match u.leader_ring() {
            Some(r) if r.pending() => {
                // The engine consumes the record: remember what it said for the next start.
                self.limit_spent.store(true, Ordering::Relaxed);
                if self.n == 1 {
                    KernelStop::AtRecord
                } else {
                    KernelStop::Stopped
                }
            }
            // Stale: a start came after that overflow and gave the limit back (it saw the
            // record), and no overflow has used it since.
            _ => KernelStop::No,
        }
    }

    fn overflow_record_pending(&self, fd: i32) -> Option<bool> {
        Some(self.ring_of(fd)?.pending())
    }

    fn overflow_fds(&self, out: &mut Vec<i32>) {
        if !self.pollable {
            return;
        }
        for u in &self.units {
            out.extend(u.rings.iter().map(|(i, _)| u.fds[*i].as_raw_fd()));
        }
    }

    fn overflow_record_mark(&self, fd: i32) -> Option<u64> {
        Some(self.ring_of(fd)?.mark())
    }

    fn read_from_elsewhere(&self, out: &mut [u64]) -> std::result::Result<Times, i32> {
        let out = &mut out[..self.n];
        out.fill(0);
        let mut t = Times::default();
        let mut tmp = [0u64; MAX_REQUESTS];
        for u in &self.units {
            let x = self.read_unit_with(u, &mut tmp[..self.n], false)?;
            for (o, v) in out.iter_mut().zip(&tmp) {
                *o = o.wrapping_add(*v);
            }
            t.enabled += x.enabled;
            t.running += x.running;
        }
        self.scale(out);
        Ok(t)
    }

    fn set_signalled(&self, on: bool) {
        if self.is_lost() {
            return;
        }
        let flags = if on {
            libc::O_ASYNC | libc::O_NONBLOCK
        } else {
            libc::O_NONBLOCK
        };
        for u in &self.units {
            for (i, _) in &u.rings {
                let _ = self
                    .kernel
                    .fcntl(u.fds[*i].as_raw_fd(), libc::F_SETFL, flags as usize);
            }
        }
    }

    fn pending_overflow_fd(&self) -> Option<i32> {
        self.units.iter().find_map(|u| {
            u.rings
                .iter()
                .find(|(_, r)| r.pending())
                .map(|(i, _)| u.fds[*i].as_raw_fd())
        })
    }

    fn lost_descriptor(&self) -> Option<i32> {
        let lost = self.lost.load(Ordering::Relaxed);
        if lost >= 0 {
            return Some(lost);
        }
        // The descriptors the group makes system calls on: the leader (read, stopped and
        // started for the group) and the notifying members (re-armed, refreshed, their signal
        // routed). The others are only closed, which checks each one (`Drop`).
        for u in &self.units {
            for i in 0..u.fds.len() {
                if (i == 0 || self.notify & (1 << i) != 0) && !self.still_ours(u, i) {
                    let fd = u.fds[i].as_raw_fd();
                    self.lost.store(fd, Ordering::Relaxed);
                    return Some(fd);
                }
            }
        }
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for PerfGroup {
    /// Close only the descriptors that are still the group's counters: a number the program
    /// closed may be its own pipe or file by now, and closing that would lose its data
    /// (issue 44 item 1). One `PERF_EVENT_IOC_ID` per descriptor.
    fn drop(&mut self) {
        let kernel = self.kernel;
        for u in &mut self.units {
            for (fd, id) in std::mem::take(&mut u.fds).into_iter().zip(&u.ids) {
                if event_id(kernel, fd.as_raw_fd()) == Some(*id) {
                    drop(fd);
                } else {
                    // Not ours any more: the number is left as it is.
                    let _ = fd.into_raw_fd();
                }
            }
        }
    }
}

//! The overflows a signal cannot bring: a thread that keeps the overflow signal blocked has
//! its binding's signals turned off (one queued signal per overflow would fill the user's
//! queue), and its overflows are found from their records, by the sample or by the watcher
//! thread (`crate::base::watch`), whose side of a binding this is.

use std::sync::atomic::Ordering;

use super::BoundSet;
use crate::base::set::MAX_REQUESTS;
use crate::base::sys::gettid;

impl BoundSet {
    /// Whether the binding's overflow signals are off (see `unsignalled`).
    fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// Turn the binding's overflow signals on again (`crate::base::watch` found its owner no longer
    /// blocking them).
    fn speak_again(&self) {
        if self.quiet.swap(false, Ordering::AcqRel) {
            self.group.set_signalled(true);
        }
    }

    /// Handle the overflow whose record waits on `fd` for an owner that could not take its
    /// signal. With `quiet` (the owner blocks the signal), also turn the binding's overflow
    /// signals off until `crate::base::watch` finds the owner no longer blocking them:
    /// a thread that keeps the signal blocked would otherwise collect one queued signal per
    /// overflow, which the user's whole queue of real-time signals pays for. Overflows are
    /// then found from their records only (by the sample and by `crate::base::watch`).
    /// Async-signal-safe.
    fn unsignalled(&self, fd: i32, quiet: bool) {
        if quiet && !self.quiet.swap(true, Ordering::AcqRel) {
            self.group.set_signalled(false);
        }
        self.interrupt(fd, true, 0);
    }

    /// Turn the binding's overflow signals off, as [`BoundSet::unsignalled`] does with
    /// `quiet`. Async-signal-safe.
    pub(super) fn quieten(&self) {
        if !self.quiet.swap(true, Ordering::AcqRel) {
            self.group.set_signalled(false);
        }
    }

    /// An overflow record waits while the set is not frozen: the overflow's signal has not
    /// been handled. Handle it here, as the signal's handler would have, whatever the
    /// signal's state (issue 44 item 2): blocked, ignored, taken over by a handler of the
    /// program's, or on its way. So a sample never shows a count past an overflow that it
    /// has not frozen. A signal that comes for it later finds its record taken and changes
    /// nothing. When the signal's action could end the process, the binding's signals are
    /// turned off first (`crate::base::watch` turns them on again once it cannot): a program
    /// that restarts after this notification must not get a signal that ends it (item 3).
    /// When the thread blocks the signal, the signals already queued on it are taken off its
    /// queue, and a group that counts on at its overflow is stopped where the set froze, so
    /// that no more pile up while the set stays frozen (item 4); the binding's signals stay
    /// on, as at the bind: a thread that blocks the signal for a moment around its sample gets
    /// its next overflow's signal where it unblocks it. Turned off here, a group that the
    /// kernel stops at each overflow would stand stopped from the next one until a sample or
    /// the watcher found its record, and its events meanwhile would be counted nowhere (the
    /// signal stress test lost page faults so). The watcher turns them off once it finds the
    /// thread keeping the signal blocked. Returns whether it froze the set. Async-signal-safe.
    ///
    /// Costs nothing more than the look at the rings' heads when no record waits; a record
    /// that waits costs a read of the counts (a record can outlive its overflow) and the
    /// looks at the signal's action and mask.
    #[cold]
    #[inline(never)]
    pub(super) fn take_unsignalled(&self) -> bool {
        let Some(fd) = self.group.pending_overflow_fd() else {
            return false;
        };
        // Inside the library's own blocked scopes (or its overflow handler) the overflow
        // handler runs when they end.
        if crate::base::sigsafe::blocked_by_library() || gettid() != self.owner {
            return false;
        }
        // A record can outlive the overflow it reports (handled, or discarded by a restart
        // that kept the group counting): only a request past its wrap now has one to handle.
        let mut raw = [0u64; MAX_REQUESTS];
        if self
            .read_raw(&mut raw)
            .map_or(true, |_| self.wrapped(&raw, None) == 0)
        {
            return false;
        }
        let disposition = crate::base::signal::disposition();
        if disposition != crate::base::signal::Disposition::Ours {
            crate::base::watch::tell_taken_over();
        }
        if crate::base::signal::signal_would_kill() {
            self.quieten();
        }
        self.unsignalled(fd, false);
        if crate::base::signal::blocked_here() {
            // A group that counts on at its overflow would signal again at each period while
            // the set stays frozen: stop it where it froze (what it counted since is dropped
            // at the freeze, as when such a signal comes).
            self.write(|b| b.stop_counting_on());
            // The kernel's signals for this overflow (and any counted on after it) wait on
            // this thread, which blocks them: nothing is left for them to do (item 4).
            crate::base::signal::discard_pending_here();
        }
        self.is_frozen()
    }
}

impl crate::base::watch::Watched for BoundSet {
    fn id(&self) -> u64 {
        self.id
    }
    fn owner(&self) -> i32 {
        self.owner
    }
    fn gone(&self) -> bool {
        BoundSet::gone(self) || self.lost()
    }
    fn descriptor_lost(&self) -> bool {
        self.check_descriptors().is_err()
    }
    fn overflow_fds(&self, out: &mut Vec<i32>) {
        self.group.overflow_fds(out);
    }
    fn record_pending(&self, fd: i32) -> bool {
        if self.is_frozen() || self.group.overflow_record_pending(fd) != Some(true) {
            return false;
        }
        // The counts are read through the descriptors below: one the program closed and
        // reused (issue 44 item 1) must not be read (a pipe's data would be taken). One
        // `PERF_EVENT_IOC_ID` per descriptor, only while a record waits.
        if self.check_descriptors().is_err() {
            return false;
        }
        // A record can outlive the overflow it reports (see `take_unsignalled`): only a
        // request past its wrap now has one to handle.
        let mut raw = [0u64; MAX_REQUESTS];
        self.group
            .read_from_elsewhere(&mut raw[..self.n])
            .is_ok_and(|_| self.wrapped(&raw, None) != 0)
    }
    fn handle(&self, fd: i32, owner_blocks: bool) {
        self.unsignalled(fd, owner_blocks);
    }
    fn record_mark(&self, fd: i32) -> Option<u64> {
        self.group.overflow_record_mark(fd)
    }
    fn quiet(&self) -> bool {
        self.is_quiet()
    }
    fn speak(&self) {
        self.speak_again();
    }
    fn quieten(&self) {
        BoundSet::quieten(self);
    }
}

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

    /// An overflow record waits while the set is not frozen: the overflow's signal has not
    /// been handled. Handle it here, as the signal's handler would have, when no signal will
    /// come for it: the binding's signals are off (`crate::base::watch` found the owner blocking
    /// them), or the program ignores the signal. So a sample after such an overflow returns the
    /// frozen values. A thread that blocks the signal for now (in a handler of its own, say)
    /// or a handler of the program's that may pass it on are left to the signal and to
    /// `crate::base::watch`, which acts once the record has waited. Async-signal-safe.
    #[cold]
    #[inline(never)]
    pub(super) fn take_unsignalled(&self) {
        let Some(fd) = self.group.pending_overflow_fd() else {
            return;
        };
        // Inside the library's own blocked scopes (or its overflow handler) the overflow
        // handler runs when they end.
        if crate::base::sigsafe::blocked_by_library() || gettid() != self.owner {
            return;
        }
        let dropped = !self.is_quiet()
            && crate::base::signal::disposition() == crate::base::signal::Disposition::Dropped;
        if !self.is_quiet() && !dropped {
            return;
        }
        // A record can outlive the overflow it reports (handled, or discarded by a restart
        // that kept the group counting): only a request past its wrap now has one to handle.
        let mut raw = [0u64; MAX_REQUESTS];
        if self
            .read_raw(&mut raw)
            .map_or(true, |_| self.wrapped(&raw, None) == 0)
        {
            return;
        }
        if dropped {
            crate::base::watch::tell_taken_over();
        }
        self.unsignalled(fd, false);
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
}

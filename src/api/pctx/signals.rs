//! The signals a controller waits on: SIGCHLD (and the interrupts it passes on) blocked and
//! taken with `sigtimedwait`, with a poll where another thread may have taken SIGCHLD.

use std::time::Duration;

use super::errno;
use crate::base::error::{Error, Result};

/// The longest wait for SIGCHLD before children are checked again anyway.
const POLL: Duration = Duration::from_millis(10);

/// [`POLL`] for a controller that no other thread can take SIGCHLD from
/// ([`Signals::sole_taker`]): only a bound on a delay that should not happen.
pub(crate) const LONG_POLL: Duration = Duration::from_secs(1);

/// The calling thread's signal state while a command runs: SIGCHLD (and optionally SIGUSR1
/// and SIGUSR2) blocked and taken with `sigwaitinfo`; SIGINT and SIGQUIT optionally ignored.
/// Restored on drop.
pub(crate) struct Signals {
    pub(crate) old_mask: libc::sigset_t,
    wait: libc::sigset_t,
    old_int: libc::sighandler_t,
    old_quit: libc::sighandler_t,
    ignoring: bool,
    /// The longest wait before children are checked again without a SIGCHLD.
    poll: Duration,
}

impl Signals {
    /// Block SIGCHLD, and SIGUSR1/SIGUSR2 when `usr`.
    pub(crate) fn block(usr: bool) -> Result<Signals> {
        // SAFETY: sigset manipulation on local values.
        unsafe {
            let mut wait: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut wait);
            libc::sigaddset(&mut wait, libc::SIGCHLD);
            if usr {
                libc::sigaddset(&mut wait, libc::SIGUSR1);
                libc::sigaddset(&mut wait, libc::SIGUSR2);
            }
            let mut old_mask: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &wait, &mut old_mask);
            if rc != 0 {
                return Err(Error::Os {
                    op: "blocking signals",
                    errno: rc,
                });
            }
            Ok(Signals {
                old_mask,
                wait,
                old_int: libc::SIG_DFL,
                old_quit: libc::SIG_DFL,
                ignoring: false,
                poll: POLL,
            })
        }
    }

    /// Ignore SIGINT and SIGQUIT (after the fork: the child keeps its own dispositions), as a
    /// shell's `time` does: the terminal sends them to the command too.
    pub(crate) fn ignore_interrupts(&mut self) {
        // SAFETY: setting dispositions to SIG_IGN.
        unsafe {
            self.old_int = libc::signal(libc::SIGINT, libc::SIG_IGN);
            self.old_quit = libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        }
        self.ignoring = true;
    }

    /// No thread but the caller can take SIGCHLD (the process has no other, or they all block
    /// it): the children are checked without a SIGCHLD every [`LONG_POLL`], not every
    /// [`POLL`].
    pub(crate) fn sole_taker(&mut self) {
        self.poll = LONG_POLL;
    }

    /// The next of the blocked signals, or `None` when `timeout` (at most [`POLL`], or
    /// [`LONG_POLL`] after [`Signals::sole_taker`]) passed first. In a multithreaded process
    /// SIGCHLD may go to (and be dropped by) a thread that does not block it, so callers check
    /// their children again after every `None`.
    pub(crate) fn next(&self, timeout: Option<Duration>) -> Result<Option<i32>> {
        let d = timeout.map_or(self.poll, |t| t.min(self.poll));
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: waits on a valid set with a valid timeout.
        let s = unsafe { libc::sigtimedwait(&self.wait, std::ptr::null_mut(), &ts) };
        if s >= 0 {
            return Ok(Some(s));
        }
        match errno() {
            // A handler ran (pctx_terminate may have been called from it): let the caller
            // look at its state again.
            libc::EINTR | libc::EAGAIN => Ok(None),
            _ => Err(Error::last_os("sigtimedwait")),
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        // SAFETY: restores what `block` and `ignore_interrupts` changed.
        unsafe {
            if self.ignoring {
                libc::signal(libc::SIGINT, self.old_int);
                libc::signal(libc::SIGQUIT, self.old_quit);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old_mask, std::ptr::null_mut());
        }
    }
}

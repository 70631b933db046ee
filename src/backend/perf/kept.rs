//! The counters the checks of events opened, kept for the bind that follows (issue 48, first
//! use).
//!
//! On a host with a PMU, the backend learns whether it can count a hardware event by opening
//! it: the probe of the PMU opens `cycles` when the backend is made (`cpc_open`), and the check
//! of each request opens its event (`cpc_set_add_request`), so that a missing event is refused
//! there, as libcpc refuses it. A program then binds the set it built, and the bind opened
//! the same events again. Each check's open and close cost about as much as the bind's open
//! (about 7,000 and 8,000 guest instructions: the close removes a hardware event from its
//! context), so a program's first use opened every event twice.
//!
//! Now the checks open their events as the bind of a set of them on the calling thread would
//! (the first as a group leader, disabled; the next ones as its members; user mode only, the
//! group read format) and keep them. A bind of the calling thread whose members are opened
//! exactly so, in that order, takes the kept counters instead of opening new ones; what a
//! bind does not take is closed then. A set whose events are checked in another order, in
//! another mode, with overflow, or alone (a lone event is read without the group format)
//! opens its own, as before: the kept counters only ever save opens.
//!
//! The kept descriptors stay at the numbers the kernel gave them until a bind takes them
//! (then they are moved up as every bound counter is, see `kernel::relocate`). A program may
//! close them meanwhile and reuse the numbers (issue 44): each one's event id is taken when it
//! is kept, and a descriptor is taken or closed only while it still answers that id.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use perf_event_open_sys::bindings::{self as b, perf_event_attr};

use super::group::event_id;
use super::kernel::Kernel;
use super::names::PerfCode;
use crate::base::set::RequestFlags;

/// Most counters kept: a check beyond them is opened and closed as before.
pub(super) const KEPT: usize = 4;

/// The read format of a group of more than one member (see `PerfBackend::open_or_check`).
pub(super) const GROUP_FORMAT: u64 = (b::PERF_FORMAT_GROUP
    | b::PERF_FORMAT_TOTAL_TIME_ENABLED
    | b::PERF_FORMAT_TOTAL_TIME_RUNNING
    | b::PERF_FORMAT_ID) as u64;

/// One kept counter: the attributes it was opened with (as given to the kernel interface),
/// its descriptor (the kernel's number), its event id.
struct Counter {
    attr: perf_event_attr,
    fd: i32,
    id: u64,
}

/// The kept counters of one thread: a group, leader first.
#[derive(Default)]
pub(super) struct Kept {
    tid: i32,
    counters: Vec<Counter>,
}

/// The attributes the check of `code` opens it with: as the bind of a user-mode request on
/// the calling thread opens it as a member of a group (`leader`: the first, disabled).
pub(super) fn check_attr(code: PerfCode, leader: bool) -> perf_event_attr {
    super::member_attr(code, RequestFlags::USER, leader, GROUP_FORMAT, false)
}

/// Whether two attribute blocks are the same bytes.
fn same(x: &perf_event_attr, y: &perf_event_attr) -> bool {
    let n = std::mem::size_of::<perf_event_attr>();
    // SAFETY: both are whole, initialised `perf_event_attr`s (plain integers, no padding:
    // the kernel's layout has explicit reserved fields), read as bytes.
    unsafe {
        std::slice::from_raw_parts(x as *const perf_event_attr as *const u8, n)
            == std::slice::from_raw_parts(y as *const perf_event_attr as *const u8, n)
    }
}

impl Kept {
    /// Check `code` for thread `tid` by opening it, keeping the counter where it can be kept:
    /// 0 when it opens, else the errno of the open. The first check of a thread opens a group
    /// leader; the next ones join its group, and one the group refuses is checked alone (and
    /// closed), as every check was before.
    pub(super) fn check(&mut self, kernel: &dyn Kernel, tid: i32, code: PerfCode) -> i32 {
        if self.tid != tid {
            self.release(kernel);
            self.tid = tid;
        }
        if self.counters.len() < KEPT {
            let leader = self.counters.is_empty();
            let attr = check_attr(code, leader);
            // The kernel interface may change what it is given (arm64's user-read request in
            // `config1`): what is kept is what a bind would give it.
            let mut a = attr;
            let group = self.counters.first().map_or(-1, |c| c.fd);
            match kernel.perf_event_probe(&mut a, 0, -1, group, b::PERF_FLAG_FD_CLOEXEC as u64) {
                Ok(fd) => {
                    if let Some(id) = event_id(kernel, fd.as_raw_fd()) {
                        self.counters.push(Counter {
                            attr,
                            fd: fd.into_raw_fd(),
                            id,
                        });
                    }
                    return 0;
                }
                Err(e) if leader => return e,
                // Refused as a member (a group the PMU cannot hold, another PMU's event):
                // checked alone below.
                Err(_) => {}
            }
        }
        super::host::open_errno(kernel, code)
    }

    /// Member `i` of a bind of the calling thread `tid`, opened with `attr`, when the kept
    /// counter `i` is that counter: its descriptor (still the kernel's number) and event id.
    /// Members are taken in order, from the leader on; the caller takes member `i` only after
    /// members `0..i`.
    pub(super) fn take(
        &mut self,
        kernel: &dyn Kernel,
        tid: i32,
        i: usize,
        attr: &perf_event_attr,
    ) -> Option<(OwnedFd, u64)> {
        if self.tid != tid {
            return None;
        }
        let c = self.counters.get_mut(i)?;
        if c.fd < 0 || !same(&c.attr, attr) || event_id(kernel, c.fd) != Some(c.id) {
            return None;
        }
        let fd = std::mem::replace(&mut c.fd, -1);
        // SAFETY: the descriptor is the kept counter (its id answered), owned by this list
        // until now, and taken out of it.
        Some((unsafe { OwnedFd::from_raw_fd(fd) }, c.id))
    }

    /// Close every kept counter not taken, each only if its descriptor still answers its id
    /// (a number the program closed and reused is left alone).
    pub(super) fn release(&mut self, kernel: &dyn Kernel) {
        for c in self.counters.drain(..).rev() {
            if c.fd >= 0 && event_id(kernel, c.fd) == Some(c.id) {
                // SAFETY: ours (its id answered); closed once, here.
                drop(unsafe { OwnedFd::from_raw_fd(c.fd) });
            }
        }
    }

    /// Whether any counter is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }
}

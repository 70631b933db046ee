//! What libpctx says of a process's threads: the small ids it gives them ([`LwpIds`]), a
//! process's arguments ([`psargs`]), whether a thread belongs to a process
//! ([`check_thread`]).

use std::collections::BTreeMap;

use crate::base::error::{Error, Result};

/// The size of Solaris's `pr_psargs` (`PRARGSZ`): the argument string holds at most one byte
/// less, then its NUL.
pub const PRARGSZ: usize = 80;

/// libpctx's LWP ids: small numbers per process, as Solaris's (1 for the initial thread, then
/// 2, 3, ... in the order the threads are created, or, for a captured process, found), mapped
/// to the Linux thread ids the counters bind to. An exec starts again at 1 (the process's one
/// thread), as Solaris's exec does.
#[derive(Debug, Default)]
pub struct LwpIds {
    by_tid: BTreeMap<i32, u32>,
    next: u32,
    one_used: bool,
}

impl LwpIds {
    /// The id of thread `tid` of process `pid`, given now if it has none.
    pub fn id(&mut self, pid: i32, tid: i32) -> u32 {
        if let Some(&id) = self.by_tid.get(&tid) {
            return id;
        }
        let id = if tid == pid && !self.one_used {
            self.one_used = true;
            1
        } else {
            let n = self.next.max(2);
            self.next = n + 1;
            n
        };
        self.by_tid.insert(tid, id);
        id
    }

    /// The thread of id `id`.
    pub fn tid(&self, id: u32) -> Option<i32> {
        self.by_tid
            .iter()
            .find_map(|(&tid, &i)| (i == id).then_some(tid))
    }

    /// Thread `tid` is gone (or let go): its id names nothing any more.
    pub fn forget(&mut self, tid: i32) {
        self.by_tid.remove(&tid);
    }

    /// The process executed a program: its one thread will be 1 again.
    pub fn exec(&mut self) {
        *self = LwpIds::default();
    }
}

/// Process `pid`'s arguments as Solaris's `pr_psargs` holds them, what libpctx's exec
/// callback and cputrack's `exec` line show: `/proc/<pid>/cmdline`'s arguments joined by
/// spaces, cut to `PRARGSZ - 1` bytes (empty when it cannot be read).
pub fn psargs(pid: i32) -> Vec<u8> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: Vec<u8> = raw
        .strip_suffix(&[0])
        .unwrap_or(&raw)
        .iter()
        .map(|&b| if b == 0 { b' ' } else { b })
        .collect();
    s.truncate(PRARGSZ - 1);
    s
}

/// Whether `tid` is a thread of process `pid` (what a libcpc bind to another process's thread
/// needs): [`Error::NotAThreadOf`] when it is not, or is not a thread id at all.
pub fn check_thread(pid: i32, tid: i32) -> Result<()> {
    if crate::base::sys::is_thread_of(pid, tid) {
        Ok(())
    } else {
        Err(Error::NotAThreadOf { tid, pid })
    }
}

#[cfg(test)]
mod tests {
    use super::LwpIds;

    #[test]
    fn lwp_ids_are_small_numbers_in_creation_order_and_start_over_at_exec() {
        let mut ids = LwpIds::default();
        assert_eq!(ids.id(100, 100), 1, "the process's first thread");
        assert_eq!(ids.id(100, 107), 2);
        assert_eq!(ids.id(100, 103), 3, "creation order, not thread id order");
        assert_eq!(ids.id(100, 107), 2, "an id is kept");
        assert_eq!(ids.tid(3), Some(103));
        ids.forget(103);
        assert_eq!(ids.tid(3), None);
        ids.exec();
        assert_eq!(ids.id(100, 100), 1, "one thread again after an exec");
        assert_eq!(ids.tid(2), None);
    }
}

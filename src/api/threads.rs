//! The engine's thread-creation hook: what a thread created in this process does before its
//! start routine runs. The C layer's `pthread_create` interposer asks [`on_create`] in the
//! creating thread and calls [`NewThread::start`] first thing in the new one; nothing else
//! about thread creation is the C layer's.
//!
//! Two things can be asked of a new thread: under a `perfex` hand-over, start libperfex's
//! counters of the events `perfex` counts ([`crate::api::perfex::thread_started`]); when the
//! creating thread holds a libcpc set bound with inheritance and overflow notification, take
//! its own copy of the set and be notified ([`crate::api::cpc::thread`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::api::cpc::thread::{self, Spec};

/// What a new thread does before its start routine.
pub struct NewThread {
    /// The libcpc set it inherits.
    spec: Option<Arc<Spec>>,
    /// Under a `perfex` hand-over: start libperfex's counters first.
    perfex: bool,
}

/// Called in the creating thread: what the new thread must do first, if anything. Two relaxed
/// atomic loads when there is nothing to do.
pub fn on_create() -> Option<NewThread> {
    if crate::base::sys::creating_internal_thread() {
        return None;
    }
    let perfex = crate::api::perfex::handed_over();
    let active = thread::ACTIVE.load(Ordering::Relaxed) != 0;
    if !active && !perfex {
        return None;
    }
    let spec = if active { thread::snapshot() } else { None };
    (perfex || spec.is_some()).then_some(NewThread { spec, perfex })
}

impl NewThread {
    /// Called in the new thread before its start routine, whose address `start` is (reported
    /// as the program counter of an inherited set's first overflow).
    pub fn start(self, start: usize) {
        if self.perfex {
            crate::api::perfex::thread_started();
        }
        if let Some(spec) = self.spec {
            thread::adopt(spec, start);
        }
    }
}

impl std::fmt::Debug for NewThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NewThread {{ inherits a libcpc set: {}, perfex: {} }}",
            self.spec.is_some(),
            self.perfex
        )
    }
}

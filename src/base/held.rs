//! Threads of other processes whose counting was stopped from inside: a program run under a
//! libpctx controller (cputrack, or a tool built on `pctx_create` and `cpc_bind_pctx`) calls
//! libcpc's `cpc_disable` on a thread that has no set of its own, and the counters the
//! controller bound to that thread stop until the thread's `cpc_enable` (cpc_enable(3CPC):
//! the LWP's counting context is the LWP's, whoever bound it).
//!
//! The request travels as a system call the traced thread makes ([`crate::api::pctx::tell_controller`])
//! and its controller hears ([`crate::api::pctx`]); this module is the controller's side: which
//! threads are held, and the bindings to them it made. A binding made to a held thread (a
//! controller that moves a thread to its next set, as cputrack does with several `-c` sets)
//! starts stopped: the hold belongs to the thread, not to one binding.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A binding that can be stopped and resumed (the engine's bound sets): `true` when it
/// changed, `false` when it was already so or is gone.
pub trait Stoppable: Send + Sync {
    /// Stop counting (libcpc's `cpc_disable`).
    fn stop_counting(&self) -> bool;
    /// Go on counting (libcpc's `cpc_enable`).
    fn resume_counting(&self) -> bool;
}

struct Held {
    /// Bindings this process made to single threads ([`crate::Target::Thread`]), by thread id.
    bound: Vec<(i32, Weak<dyn Stoppable>)>,
    /// Threads whose program asked for their counting to stop.
    held: Vec<i32>,
}

static HELD: Mutex<Held> = Mutex::new(Held {
    bound: Vec::new(),
    held: Vec::new(),
});

fn lock() -> MutexGuard<'static, Held> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// A binding to thread `tid` was made: remember it, and stop it at once if the thread is held.
pub fn bound(tid: i32, b: Arc<dyn Stoppable>) {
    let mut h = lock();
    h.bound.retain(|(_, w)| w.strong_count() > 0);
    h.bound.push((tid, Arc::downgrade(&b)));
    if h.held.contains(&tid) {
        b.stop_counting();
    }
}

/// Thread `tid`'s program asked its counting to stop (`counting` false: `cpc_disable`) or to
/// go on (`cpc_enable`): every binding this process holds to it is stopped or resumed, and
/// later ones start that way. Returns how many bindings changed (one already in the asked
/// state is left alone, as libcpc leaves it with `EINVAL`).
pub fn hold_thread(tid: i32, counting: bool) -> usize {
    let mut h = lock();
    h.held.retain(|&t| t != tid);
    if !counting {
        h.held.push(tid);
    }
    h.bound
        .iter()
        .filter(|(t, _)| *t == tid)
        .filter_map(|(_, w)| w.upgrade())
        .filter(|b| {
            if counting {
                b.resume_counting()
            } else {
                b.stop_counting()
            }
        })
        .count()
}

/// Whether this process holds a live binding to thread `tid`: its counting context is here.
pub fn counts(tid: i32) -> bool {
    lock()
        .bound
        .iter()
        .any(|(t, w)| *t == tid && w.strong_count() > 0)
}

/// Whether thread `tid` is held ([`hold_thread`]).
pub fn is_held(tid: i32) -> bool {
    lock().held.contains(&tid)
}

/// Thread `tid` ended (or executed a new program): its hold ends with it, so that a thread
/// that later gets the same id starts counting.
pub fn forget_thread(tid: i32) {
    lock().held.retain(|&t| t != tid);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Fake(AtomicBool);

    impl Stoppable for Fake {
        fn stop_counting(&self) -> bool {
            self.0.swap(false, Ordering::SeqCst)
        }
        fn resume_counting(&self) -> bool {
            !self.0.swap(true, Ordering::SeqCst)
        }
    }

    fn running(b: &Arc<Fake>) -> bool {
        b.0.load(Ordering::SeqCst)
    }

    #[test]
    fn a_hold_stops_the_threads_bindings_and_the_ones_made_while_it_lasts() {
        // Thread ids no real thread of this test process has.
        let (tid, other) = (-7, -8);
        let a = Arc::new(Fake(AtomicBool::new(true)));
        let b = Arc::new(Fake(AtomicBool::new(true)));
        bound(tid, a.clone());
        bound(other, b.clone());
        assert_eq!(hold_thread(tid, false), 1);
        assert!(!running(&a) && running(&b) && is_held(tid) && !is_held(other));
        // A second disable changes nothing (libcpc: EINVAL in the thread, nothing stopped).
        assert_eq!(hold_thread(tid, false), 0);
        let c = Arc::new(Fake(AtomicBool::new(true)));
        bound(tid, c.clone());
        assert!(
            !running(&c),
            "a binding made to a held thread starts stopped"
        );
        assert_eq!(hold_thread(tid, true), 2);
        assert!(running(&a) && running(&c) && !is_held(tid));
        // A thread that ends takes its hold with it: its id's next thread counts.
        hold_thread(tid, false);
        forget_thread(tid);
        let d = Arc::new(Fake(AtomicBool::new(true)));
        bound(tid, d.clone());
        assert!(running(&d));
        // Dropped bindings are not kept.
        drop((a, c, d));
        assert_eq!(hold_thread(tid, true), 0);
    }
}

//! The watcher's care of the overflow signal itself (issue 44 items 3 and 4): bindings' signals
//! turned off while the signal's action could end the process or their owner blocks it, and
//! the signals left pending on threads that block them discarded, so that none survives an
//! `execve` (the decisions and their limits are in the parent module's documentation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::{bit, blocked_on, entered, look_at, task_signals, tell_taken_over, Watched};

/// Send the overflow signal again for every record of `set` that waits for an overflow not
/// yet handled (the owner can take the signal): its signal was discarded by a flush, or was
/// never sent while the binding's signals were off.
fn send_again(set: &Arc<dyn Watched>) {
    let mut fds = Vec::new();
    set.overflow_fds(&mut fds);
    for fd in fds {
        if set.record_pending(fd) {
            crate::base::signal::queue_overflow_signal(set.owner(), fd);
        }
    }
}

/// The watcher's look at the bindings' overflow signals (issue 44 items 3 and 4):
/// - while the signal's action could end the process (`would_kill`: `SIG_DFL`, or a handler
///   of the program's with `SA_RESETHAND`), every binding's signals are off;
/// - a binding whose signals are off gets them back once its owner does not block the
///   signal and its action cannot end the process, and a record that waited meanwhile gets
///   its signal then;
/// - an owner with signals off that blocks the signal and has one pending (sent before they
///   were turned off) has it discarded, so that it cannot outlive an `execve` and end the next
///   program; every other binding's record that waits, whose owner can take the signal, gets
///   its signal again (the discard may have taken it).
pub(super) fn tend_signals(
    sets: &[Weak<dyn Watched>],
    would_kill: bool,
    owed: &mut Vec<Weak<dyn Watched>>,
) {
    let sig = crate::base::sys::overflow_signal();
    let mut blocking: Vec<i32> = Vec::new();
    for set in sets.iter().filter_map(Weak::upgrade) {
        if set.gone() {
            continue;
        }
        if would_kill && !set.quiet() {
            set.quieten();
            tell_taken_over();
        }
        if !set.quiet() {
            continue;
        }
        let Some(t) = task_signals(set.owner()) else {
            continue;
        };
        if t.blocked & bit(sig) == 0 {
            // Seen from here: not inside a handler of the thread's own that blocks it, which
            // would say nothing of the thread's mask.
            if !would_kill {
                set.speak();
                send_again(&set);
            }
        } else if t.pending & bit(sig) != 0 && !blocking.contains(&set.owner()) {
            blocking.push(set.owner());
        }
    }
    if !blocking.is_empty() {
        flush_and_resend(&blocking, owed);
    }
}

/// Discard the overflow signals pending on threads that block them
/// ([`crate::base::signal::flush_pending_overflow_signal`]: on every thread), then give back
/// what the discard may have taken from the other bindings. `blocking` are the threads found
/// blocking the signal for good: their bindings get theirs once they no longer block it
/// ([`tend_owed`]). Every other binding's waiting record gets its signal again at once, in
/// the same breath as the discard (no `/proc` read in between): where the owner can take it,
/// it comes as if never taken, unless the owner ran on in the few microseconds between; where
/// the owner blocks it for a moment (inside a call of the library's or of the program's), it
/// waits for the unblock as the one taken did. Before, such an owner got it back only at the
/// watcher's next look after its unblock, up to [`super::GRACE_MS`] late, and one that could
/// take it only after a `/proc` read per binding: the release repeat of `kernel_stop` under
/// load saw those late signals as lost overflows (23 runs in 1,000).
fn flush_and_resend(blocking: &[i32], owed: &mut Vec<Weak<dyn Watched>>) {
    if !crate::base::signal::flush_pending_overflow_signal() {
        return;
    }
    // Read after the discard: a binding made since the watcher's look began (entered before
    // it starts counting) had its signal taken too.
    let live = entered();
    for (set, fds) in &live {
        if set.quiet() || blocking.contains(&set.owner()) {
            continue;
        }
        for &fd in fds {
            if set.record_pending(fd) {
                crate::base::signal::queue_overflow_signal(set.owner(), fd);
            }
        }
    }
    FLUSHES.fetch_add(1, Ordering::Relaxed);
    for (set, _) in live {
        if !set.quiet() && blocking.contains(&set.owner()) {
            let weak = Arc::downgrade(&set);
            if !owed.iter().any(|o| Weak::ptr_eq(o, &weak)) {
                owed.push(weak);
            }
        }
    }
}

/// The bindings whose signal a discard may have taken while their owner blocked it: once the
/// owner no longer blocks it, the records still waiting get their signal again; a binding
/// whose signals were turned off meanwhile gets it when they are turned on ([`tend_signals`]).
pub(super) fn tend_owed(owed: &mut Vec<Weak<dyn Watched>>) {
    let sig = crate::base::sys::overflow_signal();
    owed.retain(|o| {
        let Some(set) = o.upgrade() else {
            return false;
        };
        if set.gone() || set.quiet() {
            return false;
        }
        match blocked_on(set.owner(), sig) {
            Some(true) => true,
            Some(false) => {
                send_again(&set);
                false
            }
            None => false,
        }
    });
}

/// How often the watcher looks for an overflow signal pending on a thread that blocks it
/// while such a thread has an overflow record waiting, in milliseconds (issue 44 item 4).
pub const DISCARD_MS: u64 = 4;

/// How much a thread that blocks the overflow signal with one pending must run between two
/// looks of [`discard_early`] for the discard, in nanoseconds: half the time between them
/// (on a loaded machine a running thread gets less than all of it). None of the library's
/// calls runs that long with every signal blocked.
const RUN_NS: u64 = DISCARD_MS * 500_000;

/// A look of [`discard_early`] that found a binding's owner blocking the overflow signal with
/// one pending, its record waiting.
pub(super) struct Blocking {
    set: Weak<dyn Watched>,
    mark: Option<u64>,
    /// What the owner showed then; `None` at the look that first found the record waiting,
    /// where the owner is not looked at: a record its own handler takes at once (every
    /// overflow of a program that takes its signals) costs no reading of `/proc`, which is
    /// a few hundred thousand instructions (issue 48: the guest's overflow row varied by
    /// 1,600 instructions per overflow between boots with one such look in the run).
    owner: Option<OwnerLook>,
}

/// What a look at a binding's owner found (see [`Blocking`]).
#[derive(Clone, Copy)]
struct OwnerLook {
    /// How long the owner had run then.
    ran_ns: u64,
    /// It was asleep in a system call other than a lock's.
    asleep: bool,
}

impl Blocking {
    /// Whether `self`, the next look at the same binding after `first`, shows a thread that
    /// blocks the signal for good: the same record waiting, and it slept through both without
    /// running, or (`ours`: the engine's handler is the signal's, whose record a discard
    /// leaves to be sent again) it ran [`RUN_NS`] between them.
    fn for_good(&self, first: &Blocking, ours: bool) -> bool {
        let (Some(a), Some(b)) = (first.owner, self.owner) else {
            return false;
        };
        Weak::ptr_eq(&first.set, &self.set)
            && first.mark == self.mark
            && if a.asleep && b.asleep {
                a.ran_ns == b.ran_ns
            } else {
                ours && b.ran_ns.saturating_sub(a.ran_ns) >= RUN_NS
            }
    }
}

/// Whether thread `tid` of this process is asleep in a system call other than `futex` (a lock,
/// which the library's own calls may wait for with every signal blocked), as
/// `/proc/self/task/<tid>/syscall` shows it.
fn asleep_outside_locks(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<i64>().ok())
        .is_some_and(|n| n >= 0 && n != libc::SYS_futex)
}

/// Discard, without waiting for the judgement of [`judge`], the overflow signal pending on a
/// thread that blocks it while an overflow record of its waits (issue 44 item 4): a signal
/// left there survives `execve` and ends the next program. Found at two looks in a row
/// [`DISCARD_MS`] apart that show the same record waiting and the owner blocking the signal
/// with one pending ([`Blocking::for_good`]), after a first look that found the record
/// waiting and did not look at the owner (so three looks from the record): asleep in a system call that is not a lock's
/// (`futex`) at both without having run between them, or, while the signal's handler is the
/// engine's, having run most of the time between them. The library blocks every signal for a
/// moment in its own calls (a thread can wait for a lock there), and an overflow that comes
/// then is taken when they end. A handler of the program's that passes the signal on leaves a
/// running thread to [`judge`]: the discard (the signal's action set to `SIG_IGN` and back)
/// also takes the signals of other threads sent meanwhile, and there the watcher handles their
/// records itself (tried: `signal_stress` lost page faults). What the discard takes from
/// the other bindings is given back at once ([`flush_and_resend`]). `seen` holds the last looks; returns whether any owner was found blocking
/// the signal with one pending and a record waiting (look again soon).
pub(super) fn discard_early(
    sets: &[Weak<dyn Watched>],
    seen: &mut Vec<Blocking>,
    owed: &mut Vec<Weak<dyn Watched>>,
) -> bool {
    let sig = crate::base::sys::overflow_signal();
    let mut now: Vec<Blocking> = Vec::new();
    let mut found = false;
    let mut fds = Vec::new();
    for set in sets.iter().filter_map(Weak::upgrade) {
        if set.gone() || set.quiet() {
            continue;
        }
        fds.clear();
        set.overflow_fds(&mut fds);
        let Some(&fd) = fds.iter().find(|&&fd| set.record_pending(fd)) else {
            continue;
        };
        let weak = Arc::downgrade(&set) as Weak<dyn Watched>;
        let mark = set.record_mark(fd);
        if !seen
            .iter()
            .any(|s| Weak::ptr_eq(&s.set, &weak) && s.mark == mark)
        {
            // First seen waiting: look again soon, at the owner only if it still waits.
            found = true;
            now.push(Blocking {
                set: weak,
                mark,
                owner: None,
            });
            continue;
        }
        let Some(t) = task_signals(set.owner()) else {
            continue;
        };
        if t.blocked & bit(sig) == 0 || t.pending & bit(sig) == 0 {
            continue;
        }
        found = true;
        let Some(look) = look_at(set.owner()) else {
            continue;
        };
        now.push(Blocking {
            set: weak,
            mark,
            owner: Some(OwnerLook {
                ran_ns: look.ran_ns,
                asleep: look.asleep && asleep_outside_locks(set.owner()),
            }),
        });
    }
    let ours = now.iter().any(|n| n.owner.is_some())
        && crate::base::signal::disposition() == crate::base::signal::Disposition::Ours;
    let mut for_good: Vec<i32> = Vec::new();
    for n in now
        .iter()
        .filter(|n| seen.iter().any(|s| n.for_good(s, ours)))
    {
        if let Some(set) = n.set.upgrade() {
            if !for_good.contains(&set.owner()) {
                for_good.push(set.owner());
            }
        }
    }
    if !for_good.is_empty() {
        flush_and_resend(&for_good, owed);
    }
    *seen = now;
    found
}

/// Times the watcher discarded pending overflow signals (for tests and the curious).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// Times the watcher discarded the overflow signals pending on threads that block them
/// ([`crate::base::signal::flush_pending_overflow_signal`]).
pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}

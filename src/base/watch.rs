//! The overflow watcher: a thread of the library's that handles an overflow its thread could
//! not take (issue 29).
//!
//! On the perf backend the kernel reports a notifying request's overflow twice: it writes a
//! record into the request's ring buffer (the counts at that instant) and sends the engine's
//! overflow signal to the binding's thread, whose handler freezes the set at the record and
//! notifies (libcpc's SIGEMT). A program can stop the second half from happening: it blocks
//! every signal and waits for SIGEMT with `sigtimedwait` (the usual signal-thread pattern), it
//! blocks the engine's signal, ignores it, or installs a handler of its own on it. The record
//! is written all the same. So the watcher, started at the first notifying binding of a thread
//! on the host's kernel, waits in `poll(2)` on the rings' descriptors (each record makes one
//! readable) and judges each record that is still waiting a grace period later ([`GRACE_MS`]):
//! while the thread can take the signal (the engine's handler, not blocked) it waits, however
//! long the thread takes to be scheduled; otherwise it looks again every grace period, and
//! when the same record has waited through enough looks that found the thread in the same
//! state, asleep or having run meanwhile (see `judge`), it handles the overflow on the
//! thread's behalf: the set freezes at the record, exactly where the handler would have frozen
//! it, and the notification is sent (SIGEMT queued to the thread, with `si_code` `SI_QUEUE`
//! and `si_addr` 0, the only code Linux lets one thread queue to another). The repeated looks
//! keep a thread that was only descheduled or asleep inside one of the library's blocked
//! sections, or a handler of the program's that passes the signal on, from being taken for
//! one that cannot take the signal. A thread that does not block the signal, whose handler on
//! it is the program's, gets the signal queued once more before its record is handled (issue
//! 48, `judge`): a handler that passes it on then has the overflow taken on its own thread,
//! with SIGEMT's `si_code` `EMT_CPCOVF`. A thread found blocking the signal has its
//! binding's signals turned off (they would pile up in its queue) until the watcher sees it unblocked; the sample takes a
//! waiting record itself whatever the signal's state (the engine's `take_unsignalled`).
//!
//! Issue 44 (hostile programs), decided here:
//! - **Nothing of the library's stays pending on a thread that blocks it** (item 4): a pending
//!   signal survives `execve` and ends the next program at its default action, and the
//!   library has no hook at `execve`. Each look, a binding whose signals are off (its owner
//!   found blocking the signal) whose owner has the overflow signal pending has it discarded:
//!   the signal's action is set to `SIG_IGN` and back (the kernel then drops it from every
//!   thread's queue), and every other binding's record that waits, whose owner can take the
//!   signal, gets its signal again (`SI_QUEUE`, the descriptor in `si_value`: the engine's
//!   handler takes it as the kernel's). SIGEMT for a thread that blocks it and does not wait
//!   for it (`rt_sigtimedwait` with SIGEMT in its set, seen in `/proc/self/task/<tid>/syscall`,
//!   or a signalfd for SIGEMT in `/proc/self/fdinfo`) is held ([`hold_signal`]) and queued, in
//!   order, when the thread unblocks it or waits for it. A thread in the library takes its
//!   own pending overflow signals off its queue itself when the program blocks them
//!   (`crate::base::signal::discard_pending_here`: its sample that took the record, its
//!   unbind). A thread that blocks the signal with one pending while its record waits has it
//!   discarded without the judgement, at two looks [`DISCARD_MS`] apart after a first that found
//!   its record waiting (`discard_early`: the owner's `/proc` files are read from the second
//!   look only, so a record its handler takes at once costs no such read):
//!   asleep at both (in any system call but `futex`, a lock's) without running between, or,
//!   while the handler is the engine's, having run half the time between them; what the
//!   discard (process-wide) takes from any other binding is sent again in the same breath,
//!   queued to an owner that blocks the signal for a moment (`register_for_resend` enters
//!   the bindings that count another thread for this only), and to a thread found blocking
//!   it for good once it unblocks it (`tend_owed`). Limits (decided: docs/differences.md): the discard
//!   comes some 5-16 ms after the overflow (two looks and the watcher's wake-up; measured
//!   before the first look without `/proc` was added: 4 ms more now), 100-150 ms
//!   for a running thread whose handler on the signal is the program's (there the watcher
//!   handles records left waiting itself: discarding for those at two looks failed
//!   `signal_stress` 4 times in 4, with page faults lost), so an `execve` sooner, still
//!   bound, still carries its signal; an action the program sets during the discard's two
//!   `sigaction` calls is overwritten; the SIGEMT the engine's handler queues because SIGEMT was blocked
//!   where the overflow interrupted (the `sigtimedwait` user's case) is not held; at most 32
//!   signals are held at once (more are queued).
//! - **An action of the signal that could end the process** (item 3): `SIG_DFL`, or a handler
//!   of the program's with `SA_RESETHAND` (reset to `SIG_DFL` when the signal is delivered):
//!   every binding's signals are turned off at each look, when a record wakes the watcher, and
//!   before it handles a record (so before the program hears of the overflow and restarts),
//!   and at the bind; they come back once the action is safe. Limit (decided:
//!   docs/differences.md): a lone software-event leader counts on at its overflow (the
//!   engine's fast path), so its second overflow's signal comes with no call of the library's
//!   in between: if that is sooner than the watcher's next look after the program put such a
//!   handler on, the process still ends. No kernel interface stops a counting event's next
//!   signal without stopping the event (the overflow limit of `PERF_EVENT_IOC_REFRESH`
//!   disables it, which costs the 2 µs per overflow that counting on saves), and the library
//!   may not interpose `sigaction`. A handler of the program's that passes the signal on to
//!   the engine's is seen the same way.
//!
//! The watcher blocks every signal, so no signal meant for the program lands on it, and it is
//! created past the thread-creation hook, so it inherits no set. It holds no descriptor of its
//! own: while bindings exist it looks every [`LOOK_MS`], and with none it sleeps. When the
//! engine's signal is found ignored or taken over, the library says so once on stderr.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use crate::base::sigsafe::Blocked;

/// How long a record may wait for the owning thread's handler before the watcher looks at
/// whether that thread can take the signal at all, in milliseconds. Also the watcher's
/// shortest time between two looks, so it wakes at most this often however often the
/// program's counters overflow.
pub const GRACE_MS: i32 = 20;

/// How often the watcher looks at the bindings while there are any (a binding made meanwhile
/// is polled from the next look; its records wait for it), in milliseconds. With none it
/// sleeps until the next bind. It holds no descriptor of its own.
pub const LOOK_MS: i32 = 100;

/// A binding the watcher looks after.
pub trait Watched: Send + Sync {
    /// The binding's id (unique in the process).
    fn id(&self) -> u64;
    /// The thread whose overflows these are.
    fn owner(&self) -> i32;
    /// Unbound, or the parent's after a fork: nothing to do any more.
    fn gone(&self) -> bool;
    /// The descriptors to poll.
    fn overflow_fds(&self, out: &mut Vec<i32>);
    /// Whether a descriptor of the binding is no longer its own (the program closed it, and
    /// perhaps opened a pipe or a file at its number, which `poll` then reports): checked
    /// without reading it, before anything else is done for a descriptor `poll` reported.
    fn descriptor_lost(&self) -> bool;
    /// Whether an overflow record of `fd` waits for an overflow not yet handled.
    fn record_pending(&self, fd: i32) -> bool;
    /// Where the oldest record of `fd` not yet consumed starts (see the backends'
    /// `Group::overflow_record_mark`).
    fn record_mark(&self, fd: i32) -> Option<u64>;
    /// Handle the overflow whose record waits on `fd`, for an owner that cannot take its
    /// signal (`owner_blocks`: because it blocks it).
    fn handle(&self, fd: i32, owner_blocks: bool);
    /// Whether its overflow signals were turned off (its owner blocked them, or the signal's
    /// action could end the process).
    fn quiet(&self) -> bool;
    /// Turn its overflow signals on again.
    fn speak(&self);
    /// Turn its overflow signals off (the signal's action could end the process:
    /// [`crate::base::signal::signal_would_kill`]); its overflows are then found from their
    /// records.
    fn quieten(&self);
}

struct Entry {
    id: u64,
    fds: Vec<i32>,
    set: Arc<dyn Watched>,
    /// Polled and judged (a binding of its owner's own thread); otherwise only given its
    /// signal back after a discard ([`register_for_resend`]).
    judged: bool,
}

/// A value behind a spin lock: taken with every signal blocked (never by a handler on the
/// same thread), held briefly, and reset in a fork's child (where the thread that held it may
/// not exist; a `Mutex` held there would stay locked for ever).
struct Spin<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only touched while `locked` is held.
unsafe impl<T: Send> Sync for Spin<T> {}

impl<T> Spin<T> {
    const fn new(value: T) -> Spin<T> {
        Spin {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _b = Blocked::all();
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held.
        let r = f(unsafe { &mut *self.value.get() });
        self.locked.store(false, Ordering::Release);
        r
    }

    /// In a fork's child: unlock, and take the value out without dropping it (it is the
    /// parent's: threads and bindings this process does not have).
    fn forget_in_child(&self, empty: T) {
        self.locked.store(false, Ordering::Release);
        // SAFETY: the only thread of the child; nothing else can hold the lock now.
        let old = std::mem::replace(unsafe { &mut *self.value.get() }, empty);
        std::mem::forget(old);
    }
}

mod signals;

use signals::{discard_early, tend_owed, tend_signals, Blocking};
pub use signals::{flushes, DISCARD_MS};

/// The bindings watched.
static REGISTRY: Spin<Vec<Entry>> = Spin::new(Vec::new());

/// The watcher thread (to unpark when the first binding comes). Its handle is kept, never
/// joined nor detached: a program built with AddressSanitizer and linked statically does not
/// see threads made through the library's pthread_create (its interposer comes first), and
/// its pthread_detach aborts on one (the fuzz targets); a forgotten handle would be a leak to
/// LeakSanitizer. The thread lives as long as the process.
static WATCHER: Spin<Option<std::thread::JoinHandle<()>>> = Spin::new(None);
/// The process the watcher runs in (0: none yet): a fork's child starts its own.
static WATCHER_PID: AtomicI32 = AtomicI32::new(0);
/// Overflows the watcher handled (for tests and the curious).
static HANDLED: AtomicU64 = AtomicU64::new(0);
/// The message about a taken-over signal was written.
static TOLD: AtomicBool = AtomicBool::new(false);

/// Overflows the watcher has handled for threads that could not take their signal.
pub fn handled() -> u64 {
    HANDLED.load(Ordering::Relaxed)
}

/// Watch `set` (a notifying binding of the calling thread on the host's kernel); starts the
/// watcher on first use in the process. Nothing happens when the set has no descriptors to
/// poll. A failure to start the watcher is reported once and costs only the watching.
/// Returns whether the set is watched.
pub fn register(set: Arc<dyn Watched>) -> bool {
    enter(set, true)
}

/// Have the watcher give `set` (a notifying binding on the host's kernel that counts another
/// thread or a CPU, whose overflow signal goes to its owner) its overflow signal back when a
/// discard of the signals pending on threads that block it for good takes it (issue 44 item
/// 4: the discard is process-wide), without polling or judging it otherwise. Before, such a
/// binding's overflow was lost for good when the discard fell while its signal waited.
/// Returns whether the set is entered.
pub fn register_for_resend(set: Arc<dyn Watched>) -> bool {
    enter(set, false)
}

/// [`register`] (`judged`) or [`register_for_resend`].
fn enter(set: Arc<dyn Watched>, judged: bool) -> bool {
    let mut fds = Vec::new();
    set.overflow_fds(&mut fds);
    if fds.is_empty() {
        return false;
    }
    if !start() {
        return false;
    }
    let id = set.id();
    REGISTRY.with(|e| {
        e.push(Entry {
            id,
            fds,
            set,
            judged,
        })
    });
    wake();
    true
}

/// Every binding entered and not gone, with its overflow descriptors, as the registry holds
/// them now (for the give-back after a discard, which must not miss one bound since the
/// watcher's look began).
fn entered() -> Vec<(Arc<dyn Watched>, Vec<i32>)> {
    REGISTRY.with(|e| {
        e.iter()
            .filter(|x| !x.set.gone())
            .map(|x| (x.set.clone(), x.fds.clone()))
            .collect()
    })
}

/// Stop watching the binding `id` (at its unbind).
pub fn unregister(id: u64) {
    if WATCHER_PID.load(Ordering::Relaxed) == 0 {
        return;
    }
    // Dropped outside the lock: the last reference closes the binding's descriptors.
    let gone = REGISTRY.with(|e| e.iter().position(|x| x.id == id).map(|i| e.swap_remove(i)));
    drop(gone);
    wake();
}

/// Wake the watcher if it is parked (nothing to watch); one in `poll` sees a change at its
/// next look ([`LOOK_MS`]).
fn wake() {
    WATCHER.with(|w| {
        if let Some(h) = w.as_ref() {
            h.thread().unpark();
        }
    });
}

extern "C" fn in_child() {
    // The watcher did not come through the fork: start over with nothing watched (the
    // parent's bindings are gone here; their descriptors are the child's to close or reuse).
    REGISTRY.forget_in_child(Vec::new());
    WATCHER.forget_in_child(None);
    HELD.forget_in_child([const { None }; 32]);
    ANY_HELD.store(false, Ordering::Release);
    WATCHER_PID.store(0, Ordering::Release);
}

/// Start the watcher in this process if it is not running; false if it could not be.
fn start() -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    if WATCHER_PID.load(Ordering::Acquire) == pid {
        return true;
    }
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        // The child handler only resets this module's state.
        crate::base::sys::on_fork_in_child(in_child);
    });
    // One starter at a time: under the lock of the handle it stores.
    let started = WATCHER.with(|w| {
        if WATCHER_PID.load(Ordering::Acquire) == pid {
            return Some(false);
        }
        let starter = std::thread::current();
        let spawned = crate::base::sys::create_internal_thread(|| {
            std::thread::Builder::new()
                .name("perfcompat-ovf".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    // SAFETY: getpid has no preconditions.
                    RUNNING_IN.store(unsafe { libc::getpid() }, Ordering::Release);
                    starter.unpark();
                    run()
                })
        });
        match spawned {
            Ok(h) => {
                // A handle from before a fork names a thread this process does not have.
                std::mem::forget(w.replace(h));
                WATCHER_PID.store(pid, Ordering::Release);
                Some(true)
            }
            Err(e) => {
                tell_failure(&e);
                None
            }
        }
    });
    if started == Some(true) {
        await_start(pid);
    }
    started.is_some()
}

/// The process whose watcher has begun to run (its first instruction of the library's, past
/// the thread's start): [`await_start`] waits for it.
static RUNNING_IN: AtomicI32 = AtomicI32::new(0);

/// Wait, at most [`START_WAIT_MS`], until the watcher just created in process `pid` runs
/// (issue 48). A new thread first runs when the scheduler picks it, which on a busy or single
/// CPU is the next timer tick: its start (its stack's and thread block's first pages, the C
/// library's thread set-up, some 75k instructions in the arm64 guest) and its first look then
/// fell inside whatever the binding thread did next, at a moment no one chose: in the guest's
/// overflow row that was the measured loop, some 770 instructions of each of its 100
/// overflows (a traced run showed the watcher's first 77 µs there), and in about one run in
/// ten 2,000 an overflow (never seen in 20 runs since; not traced: tracing hid it). Waiting
/// here makes the first notifying bind
/// pay for the watcher it starts, once, and leaves the counting that follows alone. Not
/// forever: a thread that cannot be scheduled (a real-time starter on its only CPU) is
/// waited for at most the bound, and then the watcher starts when it can, as before.
fn await_start(pid: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(START_WAIT_MS);
    while RUNNING_IN.load(Ordering::Acquire) != pid {
        let now = std::time::Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// The longest [`await_start`] waits for the watcher, in milliseconds.
const START_WAIT_MS: u64 = 500;

fn tell_failure(e: &std::io::Error) {
    static ONCE: AtomicBool = AtomicBool::new(false);
    if !ONCE.swap(true, Ordering::Relaxed) {
        crate::stderr_line!(
            "perfcompat: the overflow watcher thread could not be started ({}): an overflow \
             whose signal the program blocks or takes over is found at the next sample only",
            crate::base::error::io_text(e)
        );
    }
}

/// Say once that the engine's overflow signal was taken over by the program. Async-signal-safe
/// (the sample calls it): the line is made on the stack and written with one `write(2)`.
pub fn tell_taken_over() {
    if TOLD.swap(true, Ordering::Relaxed) {
        return;
    }
    struct Line {
        buf: [u8; 512],
        len: usize,
    }
    impl std::fmt::Write for Line {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = self.buf.len() - self.len;
            let n = s.len().min(room);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }
    let mut line = Line {
        buf: [0; 512],
        len: 0,
    };
    let sig = crate::base::sys::overflow_signal();
    let _ = std::fmt::Write::write_fmt(
        &mut line,
        format_args!(
            "perfcompat: the program changed the action of signal {sig} (SIGRTMAX-{}), the \
             library's overflow signal: overflows are now found by the library's watcher \
             thread, later and with si_code SI_QUEUE; set PERFCOMPAT_OVERFLOW_SIGNAL to a \
             real-time signal the program leaves alone\n",
            libc::SIGRTMAX() - sig
        ),
    );
    // SAFETY: a write of the bytes made above.
    unsafe { libc::write(2, line.buf.as_ptr().cast(), line.len) };
}

/// Whether thread `tid` of this process blocks signal `sig` (`SigBlk` of its status file);
/// `None` when that cannot be read.
pub fn blocked_on(tid: i32, sig: i32) -> Option<bool> {
    task_signals(tid).map(|t| t.blocked & bit(sig) != 0)
}

use crate::base::sys::sig_bit as bit;

/// A mask as `/proc` shows it (`SigBlk:\t0000000000000000`): the hexadecimal after `key`.
fn mask_line(text: &str, key: &str) -> Option<u64> {
    let hex = text.lines().find_map(|l| l.strip_prefix(key))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// The signals a thread blocks and those pending on it (its own queue, not the process's).
struct TaskSignals {
    blocked: u64,
    pending: u64,
}

/// [`TaskSignals`] of thread `tid` of this process; `None` when gone or unreadable.
fn task_signals(tid: i32) -> Option<TaskSignals> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    Some(TaskSignals {
        blocked: mask_line(&status, "SigBlk:")?,
        pending: mask_line(&status, "SigPnd:")?,
    })
}

/// Whether thread `tid` of this process waits for signal `sig` now, though it blocks it: in
/// `sigtimedwait`, `sigwaitinfo` or `sigwait` (`rt_sigtimedwait`, seen in
/// `/proc/self/task/<tid>/syscall`) for a set that holds `sig`, or because a signalfd of the
/// process takes `sig` (any thread may read it; it is seen in `/proc/self/fdinfo`).
fn waits_for(tid: i32, sig: i32) -> bool {
    let in_sigwait = || -> Option<bool> {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
        let mut f = text.split_whitespace();
        if f.next()?.parse::<i64>().ok()? != libc::SYS_rt_sigtimedwait {
            return Some(false);
        }
        let at = usize::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
        // The waited set, read where the waiting thread keeps it (it may return meanwhile:
        // the read then fails or reads its stack, never faults).
        let mut set = 0u64;
        let local = libc::iovec {
            iov_base: (&mut set as *mut u64).cast(),
            iov_len: 8,
        };
        let remote = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: 8,
        };
        // SAFETY: reads 8 bytes of this process into a local; a bad address fails (EFAULT).
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        Some(n == 8 && set & bit(sig) != 0)
    };
    if in_sigwait().unwrap_or(false) {
        return true;
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| mask_line(&t, "sigmask:"))
            .is_some_and(|m| m & bit(sig) != 0)
    })
}

/// A signal held for a thread that blocks it and does not wait for it (issue 44 item 4).
struct Held {
    seq: u64,
    tid: i32,
    sig: i32,
    info: [u8; 128],
}

/// Signals held by [`hold_signal`]: few at a time (one per overflow not yet told), in a fixed
/// table so that holding allocates nothing.
static HELD: Spin<[Option<Held>; 32]> = Spin::new([const { None }; 32]);
/// Whether [`HELD`] may hold anything (a hint for the watcher's timeout).
static ANY_HELD: AtomicBool = AtomicBool::new(false);
static HELD_SEQ: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread is the watcher.
    static IS_WATCHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is the watcher (where reading `/proc` and allocating is fine).
pub fn on_watcher_thread() -> bool {
    IS_WATCHER.try_with(|w| w.get()).unwrap_or(false)
}

/// Whether signal `sig` sent to thread `tid` now would only wait in its queue: the thread
/// blocks it and does not wait for it (`waits_for`). Reads `/proc`: for the watcher's
/// thread only (false elsewhere: not known).
pub fn would_only_wait(tid: i32, sig: i32) -> bool {
    on_watcher_thread() && blocked_on(tid, sig) == Some(true) && !waits_for(tid, sig)
}

/// Hold signal `sig` with siginfo `info` (its `si_code` one any thread may queue, `SI_QUEUE`)
/// for thread `tid`, which blocks it and does not wait for it, instead of queueing it: a
/// signal left pending on a thread that blocks it survives `execve` and ends the program the
/// thread runs next, which never heard of the library (issue 44 item 4). The watcher queues
/// it, in order, once the thread unblocks it or waits for it (`sigtimedwait`, a signalfd); it
/// is dropped when the thread ends. False, and nothing held, when there is no watcher in this
/// process or the table is full: the caller queues it. Async-signal-safe (allocates nothing;
/// blocks every signal while it writes the table).
pub fn hold_signal(tid: i32, sig: i32, info: &[u8; 128]) -> bool {
    // SAFETY: getpid has no preconditions.
    if WATCHER_PID.load(Ordering::Acquire) != unsafe { libc::getpid() } {
        return false;
    }
    let seq = HELD_SEQ.fetch_add(1, Ordering::Relaxed);
    let held = HELD.with(|t| match t.iter_mut().find(|h| h.is_none()) {
        Some(slot) => {
            *slot = Some(Held {
                seq,
                tid,
                sig,
                info: *info,
            });
            true
        }
        None => false,
    });
    if held {
        ANY_HELD.store(true, Ordering::Release);
    }
    held
}

/// The watcher's look at the held signals: queue those whose thread now unblocks or waits for
/// them (oldest first), drop those whose thread is gone.
fn tend_held() {
    if !ANY_HELD.load(Ordering::Acquire) {
        return;
    }
    let mut tids: Vec<(i32, i32)> = Vec::new();
    HELD.with(|t| tids.extend(t.iter().flatten().map(|h| (h.tid, h.sig))));
    tids.sort_unstable();
    tids.dedup();
    for (tid, sig) in tids {
        // None: the thread is gone.
        let ready = blocked_on(tid, sig).map(|blocked| !blocked || waits_for(tid, sig));
        if ready == Some(false) {
            continue;
        }
        loop {
            // The oldest held for this thread and signal, taken out of the table.
            let next = HELD.with(|t| {
                let i = t
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| {
                        h.as_ref()
                            .filter(|h| h.tid == tid && h.sig == sig)
                            .map(|h| (i, h.seq))
                    })
                    .min_by_key(|&(_, seq)| seq)?
                    .0;
                t[i].take()
            });
            let Some(h) = next else { break };
            if ready == Some(true) {
                // SAFETY: a plain system call with a whole siginfo.
                unsafe {
                    libc::syscall(
                        libc::SYS_rt_tgsigqueueinfo,
                        libc::getpid(),
                        h.tid,
                        h.sig,
                        h.info.as_ptr(),
                    )
                };
            }
        }
    }
    HELD.with(|t| {
        if t.iter().all(Option::is_none) {
            ANY_HELD.store(false, Ordering::Release);
        }
    });
}

/// What the watcher sees of a thread from `/proc`.
struct Seen {
    /// It blocks the overflow signal.
    blocked: bool,
    /// The overflow signal is pending on it (its own queue).
    pending: bool,
    /// It is asleep or stopped (state `S`, `T` or `t`), not running or waiting for a CPU.
    asleep: bool,
    /// Nanoseconds it has run (`schedstat`; clock ticks from `stat` where that is missing).
    ran_ns: u64,
}

/// A look at thread `tid` of this process; `None` when it is gone or `/proc` cannot be read.
fn look_at(tid: i32) -> Option<Seen> {
    let signals = task_signals(tid)?;
    let sig = bit(crate::base::sys::overflow_signal());
    let (blocked, pending) = (signals.blocked & sig != 0, signals.pending & sig != 0);
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // After the command name in parentheses: the state, then the numbers.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let asleep = matches!(state, "S" | "T" | "t");
    let ran_ns = crate::base::sys::thread_cpu_ns(std::process::id() as i32, tid).or_else(|| {
        // utime and stime are the 12th and 13th fields after the state.
        let mut f = fields.skip(10);
        let t: u64 = f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Some(t * 1_000_000_000 / hz)
    })?;
    Some(Seen {
        blocked,
        pending,
        asleep,
        ran_ns,
    })
}

/// What to do about a record that waits.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Nothing yet: the owner's handler may still take it.
    Wait,
    /// Queue the overflow signal to the owner again (`SI_QUEUE`, the descriptor in
    /// `si_value`, which the engine's handler takes as the kernel's) and look again: the
    /// owner does not block it and a handler of the program's is on it, which may pass it on
    /// (issue 48, see [`judge`]).
    Resend,
    /// The owner cannot take the signal: handle the overflow for it (`quiet`: it blocks the
    /// signal, so turn the binding's signals off).
    Handle { quiet: bool },
}

/// Judge suspect `s` (its record still waits) at a look. The owner's handler takes the signal
/// when the disposition is the engine's and the thread does not block it: then wait, however
/// long the thread takes to be scheduled. Otherwise the looks add up, for as long as the same
/// record waits (its mark unchanged):
/// - the engine's handler, the thread blocking the signal at three looks in a row (40 ms at
///   least) and asleep at the last or having run a millisecond since the first: it blocks the
///   signal for good (the `sigtimedwait` user, a thread that blocked it), so handle it and
///   turn the binding's signals off;
/// - another disposition (ignored, or a handler of the program's), the thread not blocking the
///   signal at two looks in a row and asleep at the last or having run a millisecond since
///   the first: the signal was delivered (it interrupts a sleep) and nothing passed it on to
///   the engine, so handle it. A thread that blocks it meanwhile is left alone: a handler of
///   its own may pass the signal on once it is delivered. Before that, once per record, a
///   handler of the program's gets the signal queued again ([`Verdict::Resend`]) and the looks
///   start over: the kernel's signal can be lost on the way to a thread that takes it, and a
///   record handled from here is told with a SIGEMT queued from another thread, whose
///   `si_code` can only be `SI_QUEUE`, which a program checking for `EMT_CPCOVF` ignores
///   (`signal_stress` under load, about 1 run in 15: its handler passes the signal on).
///
/// The library blocks every signal for a moment in its own calls, and a thread can sleep
/// there (a lock) or be descheduled there for long on a loaded machine: looks that all find
/// the same state, with the same record waiting, keep such a thread from being taken for one
/// that cannot take the signal.
fn judge(s: &mut Suspect, owner: i32, mark: Option<u64>, now_ms: i64) -> Verdict {
    let disposition = crate::base::signal::disposition();
    let ours = disposition == crate::base::signal::Disposition::Ours;
    let Some(seen) = look_at(owner) else {
        // Gone, or no /proc: after fifty grace periods the record is taken as stuck.
        return if now_ms - s.since_ms >= 50 * i64::from(GRACE_MS) {
            Verdict::Handle { quiet: false }
        } else {
            Verdict::Wait
        };
    };
    // Not blocked with one pending: it is delivered at the thread's next entry into the
    // kernel, whatever the disposition, and a handler that passes it on has not run yet
    // (issue 48: `signal_stress`'s failing run showed the signal pending, unblocked, on a
    // running thread at the look that handled its record).
    if !seen.blocked && (ours || seen.pending) {
        s.looks = None;
        return Verdict::Wait;
    }
    let first = match &mut s.looks {
        Some(l) if l.mark == mark && l.ours == ours && l.blocked == seen.blocked => {
            l.count += 1;
            l
        }
        // Another record than at the first look (that one was read), or another state:
        // start over.
        other => {
            *other = Some(Looks {
                mark,
                ours,
                blocked: seen.blocked,
                ran_ns: seen.ran_ns,
                count: 1,
            });
            return Verdict::Wait;
        }
    };
    let progressed = seen.asleep || seen.ran_ns.saturating_sub(first.ran_ns) >= 1_000_000;
    let enough = if ours { 3 } else { 2 };
    if !progressed || first.count < enough || (!ours && seen.blocked) {
        return Verdict::Wait;
    }
    if !ours {
        tell_taken_over();
    }
    if disposition == crate::base::signal::Disposition::Foreign
        && !seen.blocked
        && s.resent != Some(mark)
    {
        // A handler of the program's, the thread not blocking the signal: its signal for
        // this record was lost on the way (`signal_stress` under load, issue 48; how is not
        // known), or the handler does not pass it on.
        // Once per record, the signal again before the watcher handles it: passed on, the
        // engine's handler takes the overflow on the owner's thread and the program's SIGEMT
        // handler is called there with `EMT_CPCOVF`, not the `SI_QUEUE` of a SIGEMT queued
        // from here, which a program that checks `si_code` ignores. Not passed on, the same
        // looks find the record waiting again and it is handled then.
        s.resent = Some(mark);
        s.looks = None;
        return Verdict::Resend;
    }
    Verdict::Handle {
        quiet: seen.blocked,
    }
}

/// The looks at a suspect's owner that found it in one state, with one record waiting.
struct Looks {
    mark: Option<u64>,
    ours: bool,
    blocked: bool,
    /// How long the owner had run at the first of them.
    ran_ns: u64,
    count: u32,
}

/// One overflow record the watcher saw arrive and waits on.
struct Suspect {
    set: Weak<dyn Watched>,
    fd: i32,
    since_ms: i64,
    looks: Option<Looks>,
    /// The record (its mark) whose signal was queued again ([`Verdict::Resend`]).
    resent: Option<Option<u64>>,
}

fn now_ms() -> i64 {
    crate::base::sys::now_ns() / 1_000_000
}

/// The watcher thread. It holds no strong reference to a binding while it waits, so an
/// unbind closes the binding's descriptors at once.
fn run() {
    IS_WATCHER.with(|w| w.set(true));
    // No signal of the program's lands here.
    // SAFETY: plain libc calls on a local set.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    let mut suspects: Vec<Suspect> = Vec::new();
    let mut polled: Vec<libc::pollfd> = Vec::new();
    let mut owners: Vec<Weak<dyn Watched>> = Vec::new();
    // Bindings whose signal a discard may have taken from an owner blocking it (`tend_owed`),
    // and the first looks of `discard_early`.
    let mut owed: Vec<Weak<dyn Watched>> = Vec::new();
    let mut blocking: Vec<Blocking> = Vec::new();
    loop {
        polled.clear();
        owners.clear();
        let mut sets: Vec<Weak<dyn Watched>> = Vec::new();
        REGISTRY.with(|e| {
            e.retain(|x| !x.set.gone());
            sets.extend(
                e.iter()
                    .filter(|x| x.judged)
                    .map(|x| Arc::downgrade(&x.set)),
            );
            for x in e.iter().filter(|x| x.judged) {
                for &fd in &x.fds {
                    polled.push(libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    owners.push(Arc::downgrade(&x.set));
                }
            }
        });
        let mut watching = false;
        if !sets.is_empty() {
            tend_signals(&sets, crate::base::signal::signal_would_kill(), &mut owed);
            watching = discard_early(&sets, &mut blocking, &mut owed);
        }
        tend_owed(&mut owed);
        tend_held();
        let held = ANY_HELD.load(Ordering::Acquire);
        if polled.is_empty() && suspects.is_empty() && !held && owed.is_empty() {
            std::thread::park_timeout(std::time::Duration::from_secs(1));
            continue;
        }
        // Held signals are looked at every look, not every grace period: a thread that blocks
        // SIGEMT for good would cost a look at `/proc` (its fdinfo) that often.
        let timeout = if watching {
            DISCARD_MS as i32
        } else if suspects.is_empty() && owed.is_empty() {
            LOOK_MS
        } else {
            GRACE_MS
        };
        // SAFETY: `polled` is a live array of pollfds.
        let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
        if n < 0 {
            continue;
        }
        if n > 0 && crate::base::signal::signal_would_kill() {
            // A record came: at once, before the grace period, for a lone counting leader
            // whose next overflow comes without any call of the library's (issue 44 item 3).
            for set in sets.iter().filter_map(Weak::upgrade) {
                if !set.gone() && !set.quiet() {
                    set.quieten();
                    tell_taken_over();
                }
            }
        }
        let now = now_ms();
        let mut dead = Vec::new();
        for (p, set) in polled.iter().zip(&owners) {
            if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // The event's thread is gone, or the descriptor is: poll it no more.
                dead.push(p.fd);
            } else if p.revents & libc::POLLIN != 0
                && set.upgrade().is_some_and(|s| s.descriptor_lost())
            {
                // The program closed it and this is its own pipe or file now (issue 44 item
                // 1): never read, and poll it no more (it would wake the watcher for ever).
                dead.push(p.fd);
            } else if p.revents & libc::POLLIN != 0
                && !suspects
                    .iter()
                    .any(|s| s.fd == p.fd && Weak::ptr_eq(&s.set, set))
            {
                suspects.push(Suspect {
                    set: set.clone(),
                    fd: p.fd,
                    since_ms: now,
                    looks: None,
                    resent: None,
                });
            }
        }
        if !dead.is_empty() {
            REGISTRY.with(|e| {
                for x in e.iter_mut() {
                    x.fds.retain(|fd| !dead.contains(fd));
                }
            });
        }
        owners.clear();
        if suspects.is_empty() {
            continue;
        }
        // Give the owners their chance (and take the records of many overflows at once),
        // looking meanwhile for a signal pending on an owner that blocks it (item 4).
        let mut slept = 0;
        let mut watching = discard_early(&sets, &mut blocking, &mut owed);
        while slept < GRACE_MS as u64 {
            let step = if watching {
                DISCARD_MS
            } else {
                GRACE_MS as u64 - slept
            };
            std::thread::sleep(std::time::Duration::from_millis(step));
            slept += step;
            if watching {
                watching = discard_early(&sets, &mut blocking, &mut owed);
                tend_owed(&mut owed);
            }
        }
        tend_owed(&mut owed);
        let now = now_ms();
        // Read once for this look: a record handled here is told (SIGEMT), and the program
        // may restart at once; its next overflow must not be signalled while the signal's
        // action could end the process (issue 44 item 3).
        let would_kill = crate::base::signal::signal_would_kill();
        let mut quietened = false;
        suspects.retain_mut(|s| {
            let Some(set) = s.set.upgrade() else {
                return false;
            };
            if set.gone() || !set.record_pending(s.fd) {
                return false;
            }
            match judge(s, set.owner(), set.record_mark(s.fd), now) {
                Verdict::Wait => return true,
                Verdict::Resend => {
                    crate::base::signal::queue_overflow_signal(set.owner(), s.fd);
                    return true;
                }
                Verdict::Handle { quiet } => {
                    if would_kill {
                        set.quieten();
                    }
                    quietened |= quiet || would_kill;
                    set.handle(s.fd, quiet);
                }
            }
            HANDLED.fetch_add(1, Ordering::Relaxed);
            false
        });
        if quietened {
            // At once: the owner that blocks the signal has it pending (issue 44 item 4).
            tend_signals(&sets, would_kill, &mut owed);
        }
    }
}

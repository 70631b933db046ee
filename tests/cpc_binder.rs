//! Issue 48: a libcpc set keeps the binding its own `cpc_bind_curlwp` made, with the binder's
//! thread pointer (`perfcompat::base::sys::thread_pointer`), so that `cpc_set_sample` on the
//! binder finds its counters without a thread-local. Only the binder finds them there, only
//! while they are bound, and never a thread created after the binder exited, though it gets
//! the binder's thread pointer again (glibc gives it the exited thread's stack and block),
//! nor any thread in a child of `fork`.

use std::sync::{mpsc, OnceLock};

use perfcompat::api::cpc::set::{Set, Sets};
use perfcompat::api::cpc::{thread as lwp, COUNT_USER};
use perfcompat::backend::sim::SimBackend;
use perfcompat::base::sys::thread_pointer;

/// The key the set is known by (the C layer's `cpc_set_t` address).
const KEY: usize = 0x5e70;

fn backend() -> &'static SimBackend {
    static B: OnceLock<SimBackend> = OnceLock::new();
    B.get_or_init(|| SimBackend::new("r10000").unwrap())
}

/// The one set of these tests, found by its key (as the C layer's registry finds a live set).
struct OneSet;

impl Sets for OneSet {
    fn by_key(key: usize) -> Option<&'static Set> {
        (key == KEY).then(set)
    }

    fn each(f: &mut dyn FnMut(&Set)) {
        f(set())
    }
}

fn set() -> &'static Set {
    static S: OnceLock<Set> = OnceLock::new();
    S.get_or_init(|| {
        let s = Set::new();
        s.reqs
            .add(backend(), b"cycles", 0, COUNT_USER, Vec::new())
            .unwrap();
        s
    })
}

/// The binding the calling thread's table holds for the set ([`lwp::mine`]), as an address.
fn mine_in_table() -> Option<usize> {
    lwp::mine(KEY).map(|p| p.as_ptr() as usize)
}

/// What the set gives the calling thread as its own binding, as an address.
fn mine_in_set() -> Option<usize> {
    set().mine_here().map(|p| p.as_ptr() as usize)
}

// One test: the set is shared, and each step binds or unbinds it.
#[test]
fn only_the_live_binder_finds_its_binding_in_the_set() {
    assert_eq!(mine_in_set(), None, "never bound");

    // Bound here: the set gives this thread the binding its table holds.
    set()
        .bind_curlwp::<OneSet>(backend(), KEY, false, 0)
        .unwrap();
    let here = mine_in_set().expect("the binder finds its binding in the set");
    assert_eq!(Some(here), mine_in_table());
    let other = std::thread::spawn(|| (mine_in_set(), thread_pointer()))
        .join()
        .unwrap();
    assert_eq!(other.0, None, "another thread is not the binder");
    assert_ne!(
        other.1,
        thread_pointer(),
        "two live threads, two thread pointers"
    );
    set().unbind(KEY).unwrap();
    assert_eq!(mine_in_set(), None, "unbound");

    // Bound here, unbound by another thread: forgotten before the binding leaves this
    // thread's table (its next bind sweeps it).
    set()
        .bind_curlwp::<OneSet>(backend(), KEY, false, 0)
        .unwrap();
    std::thread::spawn(|| set().unbind(KEY).unwrap())
        .join()
        .unwrap();
    assert_eq!(mine_in_set(), None, "unbound elsewhere");

    // Bound by a thread that exits still holding it: a thread made later with the same thread
    // pointer does not take that binding for its own.
    let dead = std::thread::spawn(|| {
        set()
            .bind_curlwp::<OneSet>(backend(), KEY, false, 0)
            .unwrap();
        assert!(mine_in_set().is_some(), "the binder");
        thread_pointer()
    })
    .join()
    .unwrap();
    assert!(
        set().is_bound(),
        "the set stays bound after its binder's exit"
    );
    let mut reused = false;
    for _ in 0..20 {
        let (tp, mine) = std::thread::spawn(|| (thread_pointer(), mine_in_set()))
            .join()
            .unwrap();
        assert_eq!(mine, None, "a thread made after the binder's exit");
        reused |= tp == dead;
    }
    assert!(
        reused,
        "no thread got the exited binder's thread pointer {dead:#x} again: the check above \
         did not meet the case it is for"
    );
    set().unbind(KEY).unwrap();
}

// Issue 48: in a child of `fork`, no set gives a thread its binder's binding
// (`Set::mine_here`): those are the parent's counters, and `cpc_set_sample`'s common case
// samples what `mine_here` gives without testing the fork again. The forking thread keeps
// its thread pointer in the child, and threads the child creates may get those of the
// parent's other threads (glibc gives the child their stacks and blocks again).

/// The keys the fork test's two sets are known by (the C layer's `cpc_set_t` addresses).
const KEYS: [usize; 2] = [0xf0a, 0xf0b];

/// The fork test's two sets, found by their keys (as the C layer's registry finds them).
struct TwoSets;

impl Sets for TwoSets {
    fn by_key(key: usize) -> Option<&'static Set> {
        KEYS.iter().position(|&k| k == key).map(fork_set)
    }

    fn each(f: &mut dyn FnMut(&Set)) {
        f(fork_set(0));
        f(fork_set(1));
    }
}

fn fork_set(i: usize) -> &'static Set {
    static S: [OnceLock<Set>; 2] = [OnceLock::new(), OnceLock::new()];
    S[i].get_or_init(|| {
        let s = Set::new();
        s.reqs
            .add(backend(), b"cycles", 0, COUNT_USER, Vec::new())
            .unwrap();
        s
    })
}

/// What set `i` of the fork test gives the calling thread as its own binding.
fn mine(i: usize) -> bool {
    fork_set(i).mine_here().is_some()
}

/// In the child: 0 when no set gives any thread a binding, else which check failed.
fn child(other: usize) -> i32 {
    if mine(0) {
        return 1;
    }
    // Threads made here: one may get the parent's other thread's pointer (not asserted:
    // reported through the code).
    let mut reused = false;
    for _ in 0..8 {
        let (tp, found) = std::thread::spawn(|| (thread_pointer(), mine(0) || mine(1)))
            .join()
            .unwrap_or((0, true));
        if found {
            return 2;
        }
        reused |= tp == other;
    }
    if reused {
        10
    } else {
        0
    }
}

#[test]
fn a_child_of_fork_finds_no_binders_binding_in_any_set() {
    // Set 0 bound by this thread, set 1 by another thread that stays alive through the fork.
    fork_set(0)
        .bind_curlwp::<TwoSets>(backend(), KEYS[0], false, 0)
        .unwrap();
    assert!(mine(0), "the binder finds its binding");
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        fork_set(1)
            .bind_curlwp::<TwoSets>(backend(), KEYS[1], false, 0)
            .unwrap();
        tx.send((thread_pointer(), mine(1))).unwrap();
        let _ = done_rx.recv();
        fork_set(1).unbind(KEYS[1]).unwrap();
    });
    let (other_tp, other_mine) = rx.recv().unwrap();
    assert!(other_mine, "the other binder finds its binding");

    // SAFETY: the child calls only what the test needs and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let code = child(other_tp);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child exited: {status:#x}");
    let code = libc::WEXITSTATUS(status);
    eprintln!(
        "child: {code} (10: a thread of the child got the other binder's thread pointer, and \
         did not find its binding)"
    );
    assert!(
        code == 0 || code == 10,
        "the child found a binder's binding: {}",
        match code {
            1 => "the forking thread's own, in set 0",
            2 => "a thread made in the child, in set 0 or 1",
            _ => "?",
        }
    );

    // The parent's pairs are untouched.
    assert!(mine(0), "the parent's binder still finds its binding");
    done_tx.send(()).unwrap();
    other.join().unwrap();
    fork_set(0).unbind(KEYS[0]).unwrap();
}

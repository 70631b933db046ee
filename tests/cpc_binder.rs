//! Issue 48: a libcpc set keeps the binding its own `cpc_bind_curlwp` made, with the binder's
//! thread pointer (`perfcompat::base::sys::thread_pointer`), so that `cpc_set_sample` on the
//! binder finds its counters without a thread-local. Only the binder finds them there, only
//! while they are bound, and never a thread created after the binder exited, though it gets
//! the binder's thread pointer again (glibc gives it the exited thread's stack and block).

use std::sync::OnceLock;

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

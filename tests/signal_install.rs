//! The overflow signal handler is in place before any thread is told it is: two threads that
//! install it at the same instant both find it installed when `install_overflow_handler`
//! returns. (CI once died of the overflow signal's default action, in `perfctr_model.rs`: one
//! test's bind returned while another test's bind was still between deciding to install the
//! handler and installing it, and a counter overflowed in that gap.)
//!
//! Each try is a fresh process (the handler is installed once per process): the test runs its
//! own binary again with `SIGNAL_INSTALL_CHILD` set.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

mod common;
use common::Guarded;

use perfcompat::base::signal::{install_overflow_handler, overflow_signal, Dispatch};

const CHILD: &str = "SIGNAL_INSTALL_CHILD";
const TRIES: usize = 400;

fn on_fd(_fd: i32, _hup: bool, _pc: usize) {}
fn on_unknown(_pc: usize) {}

/// In the child: the disposition of the overflow signal right now.
fn handler_is_default() -> bool {
    // SAFETY: a query into a zeroed sigaction.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(
            libc::sigaction(overflow_signal(), std::ptr::null(), &mut old),
            0
        );
        old.sa_sigaction == libc::SIG_DFL
    }
}

/// In the child: two threads spin until released together, install, and look at once.
/// Exits 0 when both saw the handler, 3 when one saw the default action.
fn child() -> ! {
    static GO: AtomicBool = AtomicBool::new(false);
    static READY: AtomicU32 = AtomicU32::new(0);
    static EARLY: AtomicU32 = AtomicU32::new(0);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                READY.fetch_add(1, Ordering::SeqCst);
                while !GO.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                install_overflow_handler(Dispatch { on_fd, on_unknown }).unwrap();
                if handler_is_default() {
                    EARLY.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while READY.load(Ordering::SeqCst) < 2 {
        std::hint::spin_loop();
    }
    GO.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    std::process::exit(if EARLY.load(Ordering::SeqCst) == 0 {
        0
    } else {
        3
    });
}

#[test]
fn a_concurrent_install_returns_only_once_the_handler_is_in_place() {
    if std::env::var_os(CHILD).is_some() {
        child();
    }
    let exe = std::env::current_exe().unwrap();
    let mut early = 0;
    for _ in 0..TRIES {
        let st = std::process::Command::new(&exe)
            .guarded()
            .args([
                "--exact",
                "a_concurrent_install_returns_only_once_the_handler_is_in_place",
                "--test-threads=1",
                "-q",
            ])
            .env(CHILD, "1")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        match st.code() {
            Some(0) => {}
            Some(3) => early += 1,
            other => panic!("child ended with {other:?} ({st})"),
        }
    }
    assert_eq!(
        early, 0,
        "in {early} of {TRIES} processes, install_overflow_handler returned on one thread \
         while the overflow signal was still at its default action"
    );
}

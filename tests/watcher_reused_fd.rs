//! The watcher reads a binding's counts through its descriptors while an overflow record
//! waits (`Watched::record_pending`, every 4 ms while the owner blocks the signal with one
//! pending). A program that closed the counter's descriptor and put a pipe of its own at that
//! number (issue 44 item 1) must keep its pipe's bytes: the watcher checks the descriptor is
//! still the counter's before it reads.

use std::sync::atomic::{AtomicU64, Ordering};

use perfcompat::backend::perf::PerfBackend;
use perfcompat::engine::{self, bind_tagged, OverflowEvent};
use perfcompat::Target;

mod common;
use common::{block_overflow_signal, notifying_page_faults, prefault_stack, Faults};

static OVERFLOWS: AtomicU64 = AtomicU64::new(0);

fn hook(_: &OverflowEvent) {
    OVERFLOWS.fetch_add(1, Ordering::SeqCst);
}

/// The descriptors of this process that are perf events.
fn perf_fds() -> Vec<i32> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            link.to_string_lossy()
                .contains("perf_event")
                .then(|| e.file_name().to_string_lossy().parse().ok())?
        })
        .collect()
}

#[test]
fn the_watcher_never_reads_a_pipe_put_at_a_counters_number_while_a_record_waits() {
    engine::set_overflow_hook(Some(hook));
    static PERF: std::sync::OnceLock<PerfBackend> = std::sync::OnceLock::new();
    let perf = PERF.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"));
    const PERIOD: usize = 10;
    let mut f = Faults::new();
    prefault_stack();
    let before = perf_fds();
    block_overflow_signal(true);
    let set = notifying_page_faults(u64::MAX - (PERIOD as u64 - 1));
    let b = bind_tagged(perf, &set, Target::CurrentThread, 1).unwrap();
    let ours: Vec<i32> = perf_fds()
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect();
    assert!(!ours.is_empty(), "the binding's counter descriptors");
    // One fault short of the overflow; the program's pipe then goes to the counter's numbers
    // (the event lives on: its ring's mapping holds it), before the record exists, so that
    // the watcher's look cannot come between (a `dup2` made while the watcher reads, between
    // its check and its read, is not closed: docs/reliability.md).
    f.take(PERIOD - 1);
    let mut p = [0i32; 2];
    // SAFETY: plain system calls on this process's descriptors.
    unsafe {
        assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK), 0);
        let data = [0x5au8; 64];
        assert_eq!(libc::write(p[1], data.as_ptr().cast(), data.len()), 64);
        for &fd in &ours {
            assert_eq!(libc::dup2(p[0], fd), fd);
        }
    }
    // The overflow: its record waits, its signal is pending on this thread, which blocks it.
    f.take(1);
    assert_eq!(
        OVERFLOWS.load(Ordering::SeqCst),
        0,
        "the signal waits (blocked)"
    );
    // The watcher's looks at the waiting record (every 4 ms; its judgement after 100-150).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut got = [0u8; 128];
    // SAFETY: a read into a local buffer.
    let n = unsafe { libc::read(p[0], got.as_mut_ptr().cast(), got.len()) };
    assert_eq!(n, 64, "the pipe kept the program's 64 bytes");
    drop(b);
    block_overflow_signal(false);
    // SAFETY: closing this test's own descriptors.
    unsafe {
        for fd in ours.iter().chain(&p) {
            libc::close(*fd);
        }
    }
}

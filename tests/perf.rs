//! The engine on Linux `perf_event_open`, with software events (which work on every host,
//! including VMs without a PMU) and, where a PMU exists, hardware events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use perfcompat::backend::perf::PerfBackend;
use perfcompat::backend::Backend;
use perfcompat::engine::{self, OverflowEvent};
use perfcompat::{bind_with, CounterSet, Error, Request, RequestFlags, Target};

mod common;
use common::{notifying_page_faults, prefault_stack, run_as_child, sample, skip, Pages};

fn perf() -> &'static PerfBackend {
    static B: OnceLock<PerfBackend> = OnceLock::new();
    B.get_or_init(|| PerfBackend::new().expect("perf_event_open works here"))
}

#[test]
fn page_faults_count_exactly() {
    let set = CounterSet::new()
        .with(Request::new("page-faults"))
        .unwrap()
        .with(Request::new("task-clock"))
        .unwrap();
    let pages = Pages::new(3000);
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    let before = sample(&b);
    for i in 0..3000 {
        pages.touch(i);
    }
    let after = sample(&b);
    assert_eq!(after[0] - before[0], 3000, "one fault per fresh page");
    assert!(after[1] > before[1], "task-clock advanced");
}

// Overflow records, written from the signal handler (atomics only).
static SIG_AT: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static SIG_VAL: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static NSIG: AtomicU64 = AtomicU64::new(0);
static TOUCHED: AtomicU64 = AtomicU64::new(0);

fn overflow_hook(ev: &OverflowEvent) {
    if ev.user_data != 0xfa017 {
        return;
    }
    let k = NSIG.fetch_add(1, Ordering::SeqCst) as usize;
    if k < 16 {
        SIG_AT[k].store(TOUCHED.load(Ordering::SeqCst), Ordering::SeqCst);
        let mut v = [0u64; 2];
        engine::with_current(|b| b.sample(&mut v)).unwrap().unwrap();
        SIG_VAL[k].store(v[0], Ordering::SeqCst);
    }
    engine::with_current(|b| b.restart()).unwrap().unwrap();
}

#[test]
fn page_fault_overflow_signals_after_exactly_n_faults() {
    const N: u64 = 100;
    engine::set_overflow_hook(Some(overflow_hook));
    let set = CounterSet::new()
        .with(
            Request::new("page-faults")
                .preset(u64::MAX - (N - 1))
                .notify(),
        )
        .unwrap()
        .with(Request::new("task-clock"))
        .unwrap();
    let pages = Pages::new(1000);
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    b.set_user_data(0xfa017);
    for i in 0..(5 * N as usize + 50) {
        pages.touch(i);
        TOUCHED.store(i as u64 + 1, Ordering::SeqCst);
    }
    assert_eq!(
        NSIG.load(Ordering::SeqCst),
        5,
        "one overflow per {N} faults"
    );
    for k in 0..5 {
        assert_eq!(
            SIG_AT[k].load(Ordering::SeqCst),
            (k as u64 + 1) * N - 1,
            "overflow {k} arrived during fault {} (the touch counter is bumped after it)",
            (k + 1) as u64 * N
        );
        assert_eq!(
            SIG_VAL[k].load(Ordering::SeqCst),
            0,
            "frozen exactly at the wrap"
        );
    }
    // After the last restart: preset + 50 faults.
    assert_eq!(sample(&b)[0], u64::MAX - (N - 1) + 50);
    assert!(!b.is_frozen());
}

#[test]
fn overflow_without_restart_freezes_the_whole_set() {
    let set = CounterSet::new()
        .with(Request::new("minor-faults").preset(u64::MAX - 9).notify())
        .unwrap()
        .with(Request::new("page-faults"))
        .unwrap();
    let pages = Pages::new(100);
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    for i in 0..60 {
        pages.touch(i);
    }
    let mut v = [0u64; 2];
    let s = b.sample(&mut v).unwrap();
    assert!(s.frozen);
    assert_eq!(s.overflowed, 0b01);
    assert_eq!(v[0], 0);
    assert_eq!(v[1], 10, "the other request froze at the same instant");
    b.restart().unwrap();
    for i in 60..65 {
        pages.touch(i);
    }
    assert_eq!(sample(&b), vec![u64::MAX - 4, 5]);
}

/// A new preset takes effect at the restart: the next overflow comes at the new distance, not
/// the one the counters were opened with (the kernel's period must really be re-armed).
#[test]
fn restart_rearms_the_overflow_at_a_new_preset() {
    let set = CounterSet::new()
        .with(Request::new("minor-faults").preset(u64::MAX - 99).notify())
        .unwrap();
    let pages = Pages::new(400);
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    for i in 0..150 {
        pages.touch(i);
    }
    assert!(b.is_frozen(), "overflow after 100 faults");
    b.set_preset(0, u64::MAX - 29).unwrap();
    b.restart().unwrap();
    for i in 150..179 {
        pages.touch(i);
    }
    assert!(!b.is_frozen(), "29 faults: no overflow yet");
    assert_eq!(sample(&b), vec![u64::MAX]);
    pages.touch(179);
    assert!(b.is_frozen(), "the 30th fault after the restart overflows");
    assert_eq!(sample(&b), vec![0]);
    // And a longer distance than the one the counters were opened with.
    b.set_preset(0, u64::MAX - 149).unwrap();
    b.restart().unwrap();
    for i in 180..329 {
        pages.touch(i);
    }
    assert!(!b.is_frozen(), "149 faults: no overflow yet");
    pages.touch(329);
    assert!(b.is_frozen(), "the 150th fault overflows");
}

#[test]
fn inheritance_sums_threads_created_after_the_bind() {
    let set = CounterSet::new().with(Request::new("page-faults")).unwrap();
    let inh = bind_with(perf(), &set, Target::CurrentThreadInherit).unwrap();
    let own = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    let (i0, o0) = (sample(&inh)[0], sample(&own)[0]);
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let p = Pages::new(1000);
            std::thread::spawn(move || {
                for i in 0..1000 {
                    p.touch(i);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let (i1, o1) = (sample(&inh)[0], sample(&own)[0]);
    assert!(i1 - i0 >= 8000, "inherited threads counted: {}", i1 - i0);
    assert!(
        o1 - o0 < 1000,
        "a plain binding does not count other threads: {}",
        o1 - o0
    );
}

#[test]
fn binds_to_another_process() {
    let mut rd = [0i32; 2];
    // SAFETY: pipe/fork/_exit; the child only reads, touches memory and exits.
    unsafe { assert_eq!(libc::pipe(rd.as_mut_ptr()), 0) };
    let pages = Pages::new(2000);
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut c = 0u8;
        // SAFETY: child side: async-signal-safe calls only.
        unsafe {
            libc::read(rd[0], (&mut c as *mut u8).cast(), 1);
            for i in 0..2000 {
                std::ptr::write_volatile(pages.p.add(i * 4096), 1);
            }
            libc::_exit(0);
        }
    }
    let set = CounterSet::new().with(Request::new("page-faults")).unwrap();
    let b = bind_with(perf(), &set, Target::Process(pid)).unwrap();
    // SAFETY: parent side.
    unsafe {
        libc::write(rd[1], b"x".as_ptr().cast(), 1);
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
    }
    let v = sample(&b)[0];
    assert!(v >= 2000, "the child's faults were counted: {v}");
    let e = bind_with(perf(), &set, Target::Process(i32::MAX - 1)).unwrap_err();
    assert!(matches!(e, Error::NoSuchProcess(_)), "{e}");
}

#[test]
fn binds_to_a_cpu_or_says_why_not() {
    let set = CounterSet::new().with(Request::new("cpu-clock")).unwrap();
    match bind_with(perf(), &set, Target::Cpu(0)) {
        Ok(b) => {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(sample(&b)[0] > 0);
        }
        Err(Error::PermissionDenied { fix, .. }) => {
            assert!(!perf().caps().root, "root may count a CPU");
            assert!(fix.contains("perf_event_paranoid"), "{fix}");
            skip(&format!(
                "CPU-wide counting refused without privilege: {fix}"
            ));
        }
        Err(e) => panic!("unexpected: {e}"),
    }
    let e = bind_with(perf(), &set, Target::Cpu(100_000)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NoSuchCpu(100_000) | Error::PermissionDenied { .. }
        ),
        "{e}"
    );
}

#[test]
fn hardware_events_need_a_pmu() {
    let set = CounterSet::new()
        .with(Request::new("instructions"))
        .unwrap();
    if perf().caps().pmu {
        let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(sample(&b)[0] > 1_000_000);
    } else {
        skip(
            "hardware counting (instructions): this host has no PMU (hardware events give \
             ENOENT); only the no-PMU error path was tested",
        );
        let e = bind_with(perf(), &set, Target::CurrentThread).unwrap_err();
        match &e {
            Error::EventUnavailable { event, reason } => {
                assert_eq!(event, "instructions");
                assert!(reason.contains("no hardware PMU"), "{reason}");
            }
            other => panic!("expected EventUnavailable, got {other}"),
        }
        assert!(perf()
            .info()
            .notes
            .iter()
            .any(|n| n.contains("no hardware PMU")));
    }
}

#[test]
fn cycles_fall_back_to_cpu_time_without_a_pmu() {
    if perf().caps().pmu {
        skip("cycles fallback: this host has a PMU, cycles are real");
        return;
    }
    let set = CounterSet::new()
        .with(Request::new("cycles"))
        .unwrap()
        .with(Request::new("task-clock"))
        .unwrap();
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    let mut x = 0u64;
    for i in 0..20_000_000u64 {
        x = std::hint::black_box(x ^ i.wrapping_mul(31));
    }
    let v = sample(&b);
    let expect = v[1] as f64 * perf().caps().mhz / 1000.0;
    assert!(v[0] > 0);
    assert!(
        (v[0] as f64 - expect).abs() / expect < 0.01,
        "{v:?} vs {expect}"
    );
    assert!(perf()
        .info()
        .notes
        .iter()
        .any(|n| n.contains("'cycles' is estimated")));
}

#[test]
fn kernel_mode_and_too_many_requests() {
    let mut set = CounterSet::new();
    for _ in 0..17 {
        set.add(Request::new("page-faults")).unwrap();
    }
    let e = bind_with(perf(), &set, Target::CurrentThread).unwrap_err();
    assert!(e.to_string().contains("too many requests"), "{e}");
    let sys = RequestFlags {
        user: true,
        system: true,
        ..RequestFlags::USER
    };
    let set = CounterSet::new()
        .with(Request::new("task-clock").flags(sys))
        .unwrap();
    let caps = perf().caps();
    match bind_with(perf(), &set, Target::CurrentThread) {
        Ok(_) => assert!(caps.root || caps.paranoid <= 1),
        Err(Error::PermissionDenied { what, .. }) => {
            assert!(!caps.root && caps.paranoid > 1);
            assert!(what.contains("kernel mode"));
        }
        Err(e) => panic!("{e}"),
    }
    let e = bind_with(
        perf(),
        &CounterSet::new()
            .with(Request::new("no-such-event"))
            .unwrap(),
        Target::CurrentThread,
    )
    .unwrap_err();
    assert!(matches!(e, Error::UnknownEvent { .. }), "{e}");
}

#[test]
fn generation_is_stable_across_a_complete_interval() {
    let set = CounterSet::new().with(Request::new("task-clock")).unwrap();
    let b = bind_with(perf(), &set, Target::CurrentThread).unwrap();
    let g = b.generation();
    let mut v = [0u64];
    let s = b.sample(&mut v).unwrap();
    assert!(s.complete);
    assert_eq!(s.generation, g);
    b.restart().unwrap();
    assert_ne!(b.generation(), g);
}

/// With the user's real-time signal queue full (here: `RLIMIT_SIGPENDING` 0 in a child),
/// the kernel sends a plain SIGIO instead of the overflow signal. It must not end the process
/// (SIGIO's default action): the overflow is still noticed and the set frozen, at a read
/// after the stop. (Seen for real when two test suites of one user ran at once.)
///
/// The child is this test binary run again for this one test (`SIGIO_CHILD` set), not a
/// `fork` of the test process: a fork of a process whose other test threads hold a lock (a
/// `OnceLock` being initialised, the engine's tables) hangs the child forever, which is how
/// an earlier version of this test stopped CI.
#[test]
fn a_full_signal_queue_falls_back_to_sigio_and_still_freezes() {
    const CHILD: &str = "PERFCOMPAT_TEST_SIGIO_CHILD";
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(sigio_child());
    }
    let out = run_as_child(
        "a_full_signal_queue_falls_back_to_sigio_and_still_freezes",
        CHILD,
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        None,
        "the child was killed by a signal (SIGIO is {}): {}",
        libc::SIGIO,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "not frozen at the overflow (10: running, 11: frozen late, 2: bind failed, 3: sample \
         failed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A lone page-fault leader counts on after its overflow (`KernelStop::Running`); when its
/// next overflow comes as the kernel's SIGIO fallback (the real-time signal queue full, here
/// `RLIMIT_SIGPENDING` 1 and a blocked signal of ours pending), the still frozen set's event
/// is stopped there as for its own signal, so a set left frozen is not signalled every
/// period: the faults between the freeze and that stop are dropped, none after it.
#[test]
fn a_frozen_set_that_counts_on_is_stopped_by_the_sigio_fallback_too() {
    const CHILD: &str = "PERFCOMPAT_TEST_SIGIO_FROZEN_CHILD";
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(sigio_frozen_child());
    }
    let out = run_as_child(
        "a_frozen_set_that_counts_on_is_stopped_by_the_sigio_fallback_too",
        CHILD,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child of [`a_frozen_set_that_counts_on_is_stopped_by_the_sigio_fallback_too`].
fn sigio_frozen_child() -> i32 {
    const PERIOD: u64 = 50;
    let pages = Pages::new(400);
    // The handlers' frames must not reach a stack page first touched there: that fault comes
    // before the stop and would count as one more dropped (it did once a handler's frame
    // shrank and the first overflow's handler no longer went as deep).
    prefault_stack();
    let set = notifying_page_faults(u64::MAX - (PERIOD - 1));
    let Ok(b) = bind_with(perf(), &set, Target::CurrentThread) else {
        return 2;
    };
    let mut next = 0;
    let mut take = |k: usize| {
        for _ in 0..k {
            pages.touch(next);
            next += 1;
        }
    };
    take(PERIOD as usize); // the overflow, by the overflow signal: frozen, counting on
    if !b.is_frozen() {
        return 3;
    }
    let filler = libc::SIGRTMIN() + 5;
    // SAFETY: plain system calls on this process: the limit, a mask, a queued signal.
    unsafe {
        let one = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        libc::setrlimit(libc::RLIMIT_SIGPENDING, &one);
        let mut m: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut m);
        libc::sigaddset(&mut m, filler);
        libc::pthread_sigmask(libc::SIG_BLOCK, &m, std::ptr::null_mut());
        // To this thread, where it is blocked (a process-directed one could end the test
        // harness's other thread). The limit counts every process of the user: EAGAIN says
        // the queue is full already, as wanted.
        if libc::syscall(libc::SYS_tgkill, libc::getpid(), engine::gettid(), filler) != 0
            && *libc::__errno_location() != libc::EAGAIN
        {
            return 4;
        }
    }
    let dropped0 = engine::dropped_at_freezes(0);
    take(PERIOD as usize); // the next overflow: no room for the signal, SIGIO instead
    take(20); // after the stop: not counted
    let dropped = engine::dropped_at_freezes(0) - dropped0;
    if dropped != PERIOD - 1 && dropped != PERIOD {
        eprintln!("dropped {dropped} faults before the restart, expected {PERIOD}");
        return 5;
    }
    if b.restart().is_err() {
        return 6;
    }
    if engine::dropped_at_freezes(0) - dropped0 != dropped {
        eprintln!("the restart found the event still counting");
        return 7;
    }
    take(3);
    let mut v = [0u64];
    match b.sample(&mut v) {
        Ok(_) if v[0] == u64::MAX - (PERIOD - 1) + 3 => 0,
        _ => {
            eprintln!(
                "after the restart: {}",
                v[0].wrapping_sub(u64::MAX - (PERIOD - 1))
            );
            8
        }
    }
}

/// The child of [`a_full_signal_queue_falls_back_to_sigio_and_still_freezes`]: its exit code.
fn sigio_child() -> i32 {
    let pages = Pages::new(200);
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a plain system call on this process.
    unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &zero) };
    let set = CounterSet::new()
        .with(Request::new("page-faults").preset(u64::MAX - 49).notify())
        .unwrap();
    match bind_with(perf(), &set, Target::CurrentThread) {
        Ok(b) => {
            for i in 0..120 {
                pages.touch(i);
            }
            let mut v = [0u64];
            match b.sample(&mut v) {
                Ok(s) if s.frozen && s.overflowed == 1 && v[0] < 70 => 0,
                Ok(s) => 10 + s.frozen as i32,
                Err(_) => 3,
            }
        }
        Err(_) => 2,
    }
}
